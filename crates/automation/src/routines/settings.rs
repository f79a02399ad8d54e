//! `[automation.routines]` in `toolgate.toml`: what an operator tunes of the routine scheduler.

use serde::{Deserialize, Deserializer};

use super::RoutinesConfig;

/// The fewest seconds a scheduler lease may last: the holder renews it at every tick, at most
/// 1 s apart, so a shorter lease could lapse between two renewals of a live leader.
pub const MIN_LEASE_SECS: u64 = 2;

/// The most seconds a scheduler lease may last: when its holder dies, cron routines on every
/// node wait this long for another leader.
pub const MAX_LEASE_SECS: u64 = 3_600;

/// `[automation.routines]`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct RoutinesSettings {
    /// Seconds the scheduler lease (`scheduler_leases`, row `routines`) lasts unless renewed
    /// (default 10): how long cron routines wait for a new leader when the leader dies.
    #[serde(deserialize_with = "lease_secs")]
    pub lease_secs: u64,
}

impl Default for RoutinesSettings {
    fn default() -> Self {
        RoutinesSettings { lease_secs: 10 }
    }
}

impl RoutinesSettings {
    /// The scheduler's limits and timings with these settings.
    pub fn config(&self) -> RoutinesConfig {
        RoutinesConfig {
            lease_ms: i64::try_from(self.lease_secs.saturating_mul(1_000)).unwrap_or(i64::MAX),
            ..RoutinesConfig::default()
        }
    }
}

fn lease_secs<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let secs = i64::deserialize(d)?;
    match u64::try_from(secs) {
        Ok(secs) if (MIN_LEASE_SECS..=MAX_LEASE_SECS).contains(&secs) => Ok(secs),
        _ => Err(serde::de::Error::custom(format!(
            "[automation.routines] lease_secs = {secs} is out of range: the scheduler lease must last \
             {MIN_LEASE_SECS} to {MAX_LEASE_SECS} seconds (its holder renews it every second; when it dies, \
             cron routines wait this long for another node); the default is 10"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(toml_like: &str) -> Result<RoutinesSettings, String> {
        serde_json::from_str(toml_like).map_err(|e| e.to_string())
    }

    #[test]
    fn the_lease_is_two_seconds_to_an_hour_and_becomes_the_scheduler_s() {
        assert_eq!(parse("{}").unwrap().config().lease_ms, 10_000, "the default is the old constant");
        assert_eq!(parse(r#"{"lease_secs": 45}"#).unwrap().config().lease_ms, 45_000);
        assert_eq!(parse(r#"{"lease_secs": 2}"#).unwrap().lease_secs, 2);
        assert_eq!(parse(r#"{"lease_secs": 3600}"#).unwrap().lease_secs, 3_600);
        for bad in ["0", "1", "-5", "3601", "9223372036854775807"] {
            let e = parse(&format!(r#"{{"lease_secs": {bad}}}"#)).unwrap_err();
            assert!(e.contains("lease_secs") && e.contains("2 to 3600 seconds"), "{bad}: {e}");
        }
        let e = parse(r#"{"lease_secs": "ten"}"#).unwrap_err();
        assert!(e.contains("expected i64"), "{e}");
        assert!(parse(r#"{"lease_sec": 10}"#).unwrap_err().contains("unknown field"), "a typo is refused");
    }
}
