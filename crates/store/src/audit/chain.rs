//! The audit log's hash chain, the same for every backend: each completed row carries its
//! position (`seq`, from 1, no gaps), the hash of the row before it and its own hash, SHA-256
//! over a canonical encoding of its content and that previous hash. Editing a row changes its
//! hash; deleting or reordering rows breaks the link of the row after; deleting the last rows
//! leaves the chain's recorded head behind. Retention prunes from the start and appends a row
//! ([`PRUNE_EVENT`]) naming where the chain now starts, so verification still passes.
//!
//! A chain kept beside the data detects edits made without recomputing it (a slip, a careless
//! script, a tool that rewrites one row); someone who rewrites the whole chain and its head is
//! caught only by comparing the head with a copy kept elsewhere, which `toolgate audit verify`
//! prints for that purpose.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::AuditRecord;

/// The hash a chain starts from before any row: 64 zeros.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The tool name of the row retention appends when it prunes (not a call).
pub const PRUNE_EVENT: &str = "audit_prune";

/// The hash of the row at `seq` with content `r`, after the row whose hash is `prev`:
/// lowercase hex SHA-256 of a versioned, length-prefixed encoding of every field (so no two
/// different rows encode alike). The writer's pid is not part of it (bookkeeping only).
pub fn link_hash(prev: &str, seq: i64, r: &AuditRecord) -> String {
    let mut h = Sha256::new();
    h.update(b"toolgate-audit-chain-v1");
    let mut field = |v: Option<&[u8]>| match v {
        None => h.update([0u8]),
        Some(b) => {
            h.update([1u8]);
            h.update((b.len() as u64).to_le_bytes());
            h.update(b);
        }
    };
    field(Some(prev.as_bytes()));
    field(Some(&seq.to_le_bytes()));
    field(Some(r.id.as_bytes()));
    field(Some(&r.ts_ms.to_le_bytes()));
    field(Some(r.user.as_bytes()));
    field(Some(r.agent.as_bytes()));
    field(Some(r.session.as_bytes()));
    field(r.provider.as_deref().map(str::as_bytes));
    field(Some(r.tool.as_bytes()));
    field(Some(r.params.as_bytes()));
    field(Some(r.decision.as_bytes()));
    field(Some(r.outcome.as_bytes()));
    field(r.error.as_deref().map(str::as_bytes));
    field(Some(&r.duration_us.to_le_bytes()));
    field(Some(&r.output_bytes.to_le_bytes()));
    field(r.subject.as_deref().map(str::as_bytes));
    field(r.detail.as_deref().map(str::as_bytes));
    field(r.called_as.as_deref().map(str::as_bytes));
    let digest = h.finalize();
    let mut out = String::with_capacity(64);
    for b in digest {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// One row of the chain as stored.
#[derive(Debug, Clone)]
pub struct ChainRow {
    /// Its position (`None`: a completed row that was never chained, e.g. inserted by hand).
    pub seq: Option<i64>,
    /// The hash of the row before it, as stored.
    pub prev_hash: Option<String>,
    /// Its hash, as stored.
    pub hash: Option<String>,
    /// Its content.
    pub record: AuditRecord,
}

/// Where the chain starts and ends, as the store recorded it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainEnds {
    /// The position of the first row kept (1 until retention prunes).
    pub start_seq: i64,
    /// The hash the first row kept follows ([`GENESIS`] until retention prunes).
    pub start_hash: String,
    /// The position of the last row (0 when there is none).
    pub head_seq: i64,
    /// The hash of the last row ([`GENESIS`] when there is none).
    pub head_hash: String,
}

/// What [`AuditStore::prune_audit`](super::AuditStore::prune_audit) records in its row's
/// parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pruned {
    /// Rows deleted.
    pub rows: u64,
    /// The last position deleted.
    pub through_seq: i64,
    /// Rows that started before this (ms since the epoch) were due.
    pub older_than_ms: i64,
    /// The position the chain now starts at.
    pub start_seq: i64,
    /// The hash the chain now starts from (the last deleted row's).
    pub start_hash: String,
}

impl Pruned {
    /// The row retention appends to say what it deleted ([`PRUNE_EVENT`], at `now_ms`): the
    /// same on every backend, so a chain verifies wherever it is kept.
    pub fn record(&self, now_ms: i64) -> AuditRecord {
        let Pruned { rows, through_seq: through, start_seq, start_hash, .. } = self;
        AuditRecord {
            id: format!("audit-prune-{now_ms}-{through}"),
            ts_ms: now_ms,
            user: "toolgate".into(),
            agent: "retention".into(),
            tool: PRUNE_EVENT.into(),
            params: serde_json::to_string(self).unwrap_or_default(),
            decision: "retention".into(),
            outcome: "ok".into(),
            detail: Some(format!(
                "deleted {rows} rows (chain positions {}..{through}) older than the retention period; the chain now \
                 starts at {start_seq} after hash {start_hash}",
                through + 1 - *rows as i64,
            )),
            ..AuditRecord::default()
        }
    }
}

/// The first row that does not check out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Broken {
    /// Its position in the chain (as expected there when the row itself has none).
    pub seq: i64,
    /// The call id of the row (empty when the row is missing).
    pub id: String,
    /// What is wrong, in words.
    pub reason: String,
}

/// The result of checking the chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChainReport {
    /// Rows checked.
    pub rows: u64,
    /// The ends as recorded.
    pub ends: ChainEnds,
    /// The first problem, if any.
    pub broken: Option<Broken>,
}

impl ChainReport {
    /// Whether the chain is intact.
    pub fn ok(&self) -> bool {
        self.broken.is_none()
    }
}

/// Checks `rows` (the chained rows in `seq` order, then any completed row without a position)
/// against `ends`. Rows still running (`started`) are not part of the chain and not given.
pub fn verify(ends: &ChainEnds, rows: impl IntoIterator<Item = ChainRow>) -> ChainReport {
    let mut expected_seq = ends.start_seq;
    let mut prev = ends.start_hash.clone();
    let mut checked = 0u64;
    let mut last_prune: Option<(i64, Pruned)> = None;
    let report = |checked, broken| ChainReport { rows: checked, ends: ends.clone(), broken: Some(broken) };
    for row in rows {
        let id = row.record.id.clone();
        let Some(seq) = row.seq else {
            return report(
                checked,
                Broken {
                    seq: expected_seq,
                    id,
                    reason: "a completed row that is not in the chain: it was added to the table by hand, or its \
                             chain columns were cleared"
                        .into(),
                },
            );
        };
        if seq != expected_seq {
            let reason = if seq > expected_seq {
                format!("rows {expected_seq}..{} are missing (deleted); the row found next is {seq}", seq - 1)
            } else {
                format!("position {seq} appears again after {} (rows reordered or copied)", expected_seq - 1)
            };
            return report(checked, Broken { seq: expected_seq, id, reason });
        }
        if row.prev_hash.as_deref() != Some(prev.as_str()) {
            return report(
                checked,
                Broken {
                    seq,
                    id,
                    reason: "it does not follow the row before it (rows reordered, or the row before it was replaced \
                             or had its hash rewritten)"
                        .into(),
                },
            );
        }
        let hash = link_hash(&prev, seq, &row.record);
        if row.hash.as_deref() != Some(hash.as_str()) {
            return report(
                checked,
                Broken { seq, id, reason: "its content was changed after it was written (hash mismatch)".into() },
            );
        }
        if row.record.tool == PRUNE_EVENT
            && let Ok(p) = serde_json::from_str::<Pruned>(&row.record.params)
        {
            last_prune = Some((seq, p));
        }
        prev = hash;
        expected_seq += 1;
        checked += 1;
    }
    if expected_seq - 1 != ends.head_seq || prev != ends.head_hash {
        let reason = if expected_seq - 1 < ends.head_seq {
            format!(
                "the last rows were deleted: the chain ends at {} but its head is {}",
                expected_seq - 1,
                ends.head_seq
            )
        } else {
            format!("the chain's recorded head (row {}) does not match its last row", ends.head_seq)
        };
        return report(checked, Broken { seq: expected_seq, id: String::new(), reason });
    }
    // The start moves only by pruning, and every prune says where it left the start.
    let start_recorded = match &last_prune {
        Some((_, p)) => p.start_seq == ends.start_seq && p.start_hash == ends.start_hash,
        None => ends.start_seq == 1 && ends.start_hash == GENESIS,
    };
    if !start_recorded {
        return report(
            checked,
            Broken {
                seq: ends.start_seq,
                id: String::new(),
                reason: format!(
                    "the chain starts at row {} but no retention row records that start: rows before it were \
                     deleted by hand",
                    ends.start_seq
                ),
            },
        );
    }
    ChainReport { rows: checked, ends: ends.clone(), broken: None }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_counts_and_none_differs_from_empty() {
        let r = AuditRecord { id: "a".into(), tool: "echo".into(), ..AuditRecord::default() };
        let base = link_hash(GENESIS, 1, &r);
        assert_eq!(base.len(), 64);
        assert_ne!(base, link_hash(GENESIS, 2, &r));
        assert_ne!(base, link_hash(&"1".repeat(64), 1, &r));
        assert_ne!(base, link_hash(GENESIS, 1, &AuditRecord { error: Some(String::new()), ..r.clone() }));
        assert_ne!(base, link_hash(GENESIS, 1, &AuditRecord { duration_us: 1, ..r.clone() }));
        // Field boundaries are not ambiguous.
        let ab = AuditRecord { user: "ab".into(), agent: String::new(), ..r.clone() };
        let a_b = AuditRecord { user: "a".into(), agent: "b".into(), ..r.clone() };
        assert_ne!(link_hash(GENESIS, 1, &ab), link_hash(GENESIS, 1, &a_b));
    }
}
