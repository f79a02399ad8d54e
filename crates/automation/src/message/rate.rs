//! Per-channel rate limits over a sliding minute: `rate_per_minute` for what a channel sends,
//! `receive_per_minute` for what it receives.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};

/// The window a limit counts over.
const MINUTE_MS: i64 = 60_000;

/// The times of the last minute's messages, per channel.
#[derive(Debug, Default)]
pub(crate) struct RateWindow {
    times: Mutex<HashMap<String, VecDeque<i64>>>,
}

impl RateWindow {
    /// Takes one of `channel`'s `per_minute` slots at `now_ms`, or returns the seconds (at least
    /// 1) until the oldest one frees. A clock that went back counts as the same instant.
    pub(crate) fn take(&self, channel: &str, per_minute: u32, now_ms: i64) -> Result<(), u64> {
        let mut all = self.times.lock().unwrap_or_else(PoisonError::into_inner);
        let times = all.entry(channel.to_owned()).or_default();
        while times.front().is_some_and(|t| now_ms.saturating_sub(*t) >= MINUTE_MS) {
            times.pop_front();
        }
        if times.len() >= per_minute as usize {
            let oldest = times.front().copied().unwrap_or(now_ms);
            let wait_ms = MINUTE_MS.saturating_sub(now_ms.saturating_sub(oldest)).max(0);
            return Err((wait_ms as u64).div_ceil(1000).max(1));
        }
        times.push_back(now_ms);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_channel_gets_its_slots_a_minute_and_no_more() {
        let w = RateWindow::default();
        for i in 0..3 {
            assert_eq!(w.take("a", 3, 1_000 + i), Ok(()));
        }
        assert_eq!(w.take("a", 3, 1_500), Err(60), "the oldest frees 59.5 s on: rounded up");
        assert_eq!(w.take("b", 3, 1_500), Ok(()), "each channel counts alone");
        assert_eq!(w.take("a", 3, 60_999), Err(1));
        assert_eq!(w.take("a", 3, 61_000), Ok(()), "a minute after the first, its slot is free");
        assert_eq!(w.take("a", 3, 61_000), Err(1));
    }
}
