//! The keyword pass: every occurrence of every keyword (ASCII case-insensitive, overlapping),
//! found by an Aho-Corasick DFA that walks several parts of the text in lockstep.
//!
//! A DFA step is one table load that depends on the previous one, so a single walk is bound by
//! load latency (about 2 ns per byte here). Independent walks over equal parts of the text
//! keep several loads in flight (four ran about twice as fast as one; eight, see [`WAYS`]);
//! each walk continues past its part by the longest keyword so that matches crossing a
//! boundary are found once.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use aho_corasick::automaton::Automaton;
use aho_corasick::{Anchored, MatchKind, dfa, nfa};

/// Texts shorter than this are walked in one piece.
const SPLIT_MIN: usize = 4096;
/// Eight walks keep eight dependent loads in flight (four did about half as well as the core
/// allows: `cargo bench -p toolgate-guard --bench leak`, keyword pass 4 vs 8 ways).
const WAYS: usize = 8;

/// Texts at least this long are walked with the DFA; shorter ones with the NFA.
const DFA_MIN: usize = 64 * 1024;

/// A compiled keyword set.
///
/// Two automata for one set: a contiguous NFA (about a tenth of the DFA's build time) walks
/// short texts, which is what a command-line call or a tool result mostly is; the DFA, whose
/// step is one table load, is built on the first long text. Until the NFA is needed, short
/// texts are searched pattern by pattern ([`Keywords::find_direct`]): building an automaton
/// was most of what the leak detector cost a short-lived `toolgate call`.
#[derive(Debug)]
pub(crate) struct Keywords {
    patterns: Vec<Vec<u8>>,
    /// Built on the first text longer than [`DIRECT_MAX`], or once [`DIRECT_BUDGET`] bytes
    /// have been searched directly.
    nfa: OnceLock<nfa::contiguous::NFA>,
    /// Bytes searched by [`Keywords::find_direct`] so far.
    direct_bytes: AtomicUsize,
    /// `None` inside when the DFA would be too large (thousands of long secret values).
    dfa: OnceLock<Option<dfa::DFA>>,
    /// The patterns by their first byte (lower-cased), for [`Keywords::find_direct`].
    by_first: Vec<Vec<usize>>,
    /// Some pattern is empty: only the automaton reports its (empty) matches.
    has_empty: bool,
}

/// Texts up to this long are searched pattern by pattern until the NFA is built: a handful
/// of comparisons per byte, and no automaton to build.
const DIRECT_MAX: usize = 256;

/// Bytes searched pattern by pattern before the NFA is built anyway. With the built-in rules
/// dozens of patterns share common first letters, so a direct search costs tens of times the
/// NFA's walk per byte, and building the NFA (about 1 ms) costs about as much as directly
/// searching this many bytes: a one-off `toolgate call` never builds it, and a server pays
/// for the build at most once more than it had to (the ski-rental rule) instead of paying the
/// direct search on every call for good (it was the call path's largest cost in the `gate`
/// benchmark, whose texts are all short).
const DIRECT_BUDGET: usize = 16 * 1024;

impl Clone for Keywords {
    fn clone(&self) -> Self {
        Keywords {
            patterns: self.patterns.clone(),
            nfa: self.nfa.clone(),
            direct_bytes: AtomicUsize::new(self.direct_bytes.load(Ordering::Relaxed)),
            dfa: self.dfa.clone(),
            by_first: self.by_first.clone(),
            has_empty: self.has_empty,
        }
    }
}

impl Keywords {
    /// Keeps lower-cased `patterns`, matched ASCII case-insensitively; the automata are built
    /// on first use.
    pub(crate) fn new(patterns: &[Vec<u8>]) -> Keywords {
        let mut by_first = vec![Vec::new(); 256];
        for (i, p) in patterns.iter().enumerate() {
            if let Some(&b) = p.first() {
                by_first[usize::from(b.to_ascii_lowercase())].push(i);
            }
        }
        Keywords {
            patterns: patterns.to_vec(),
            nfa: OnceLock::new(),
            direct_bytes: AtomicUsize::new(0),
            dfa: OnceLock::new(),
            by_first,
            has_empty: patterns.iter().any(Vec::is_empty),
        }
    }

    fn nfa(&self) -> &nfa::contiguous::NFA {
        self.nfa.get_or_init(|| {
            nfa::contiguous::Builder::new()
                .ascii_case_insensitive(true)
                .match_kind(MatchKind::Standard)
                .build(&self.patterns)
                .expect("the keyword automaton builds: keywords are literals")
        })
    }

    /// What [`Keywords::find_all`] finds, by comparing each pattern that starts with the byte
    /// at each position: cheaper than building an automaton for a short text.
    fn find_direct(&self, hay: &[u8]) -> Vec<(usize, usize, usize)> {
        let mut hits = Vec::new();
        for (s, &b) in hay.iter().enumerate() {
            for &i in &self.by_first[usize::from(b.to_ascii_lowercase())] {
                let p = &self.patterns[i];
                if hay.get(s..s + p.len()).is_some_and(|w| w.eq_ignore_ascii_case(p)) {
                    hits.push((i, s, s + p.len()));
                }
            }
        }
        hits
    }

    fn dfa(&self) -> Option<&dfa::DFA> {
        self.dfa
            .get_or_init(|| {
                dfa::Builder::new()
                    .ascii_case_insensitive(true)
                    .match_kind(MatchKind::Standard)
                    .build(&self.patterns)
                    .ok()
            })
            .as_ref()
    }

    /// Every keyword occurrence as `(pattern, start, end)`, in no particular order (callers
    /// sort what they derive from the hits).
    pub(crate) fn find_all(&self, hay: &[u8]) -> Vec<(usize, usize, usize)> {
        if hay.len() <= DIRECT_MAX
            && !self.has_empty
            && self.nfa.get().is_none()
            && self.direct_bytes.fetch_add(hay.len(), Ordering::Relaxed) < DIRECT_BUDGET
        {
            return self.find_direct(hay);
        }
        match (hay.len() >= DFA_MIN).then(|| self.dfa()).flatten() {
            Some(a) => walk(a, hay),
            None => walk(self.nfa(), hay),
        }
    }
}

fn walk<A: Automaton>(a: &A, hay: &[u8]) -> Vec<(usize, usize, usize)> {
    let mut hits = Vec::new();
    let Ok(start) = a.start_state(Anchored::No) else { return hits };
    let n = hay.len();
    let report = |hits: &mut Vec<(usize, usize, usize)>, sid, end: usize, from: usize, to: usize| {
        for i in 0..a.match_len(sid) {
            let pid = a.match_pattern(sid, i);
            let len = a.pattern_len(pid);
            let s = end - len;
            if s >= from && s < to {
                hits.push((pid.as_usize(), s, end));
            }
        }
    };
    if n < SPLIT_MIN {
        let mut sid = start;
        for (p, &b) in hay.iter().enumerate() {
            sid = a.next_state(Anchored::No, sid, b);
            if a.is_match(sid) {
                report(&mut hits, sid, p + 1, 0, n);
            }
        }
        return hits;
    }
    let chunk = n / WAYS;
    let begins: [usize; WAYS] = std::array::from_fn(|i| i * chunk);
    let parts: [&[u8]; WAYS] = std::array::from_fn(|w| &hay[begins[w]..begins[w] + chunk]);
    // WAYS states, each in a register; the match check is one branch for all of them (matches
    // are rare), the slow path sorts out which walk matched.
    let mut sid = [start; WAYS];
    for j in 0..chunk {
        for (s, part) in sid.iter_mut().zip(&parts) {
            *s = a.next_state(Anchored::No, *s, part[j]);
        }
        if sid.iter().fold(false, |any, &s| any | a.is_match(s)) {
            for (w, &s) in sid.iter().enumerate() {
                if a.is_match(s) {
                    report(&mut hits, s, begins[w] + j + 1, begins[w], n);
                }
            }
        }
    }
    // Each walk goes on past its part far enough to finish the keywords that start in it;
    // the last one to the end of the text.
    let longest = a.max_pattern_len();
    for w in 0..WAYS {
        let end = if w + 1 == WAYS { n } else { begins[w + 1] };
        let stop = if w + 1 == WAYS { n } else { n.min(end + longest.saturating_sub(1)) };
        let mut s = sid[w];
        for (p, &b) in hay.iter().enumerate().take(stop).skip(begins[w] + chunk) {
            s = a.next_state(Anchored::No, s, b);
            if a.is_match(s) {
                report(&mut hits, s, p + 1, begins[w], end);
            }
        }
    }
    hits
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleaved_walk_finds_what_one_walk_finds() {
        let patterns: Vec<Vec<u8>> =
            ["key", "token", "ghp_", "ke", "y=", "-----begin"].iter().map(|p| p.as_bytes().to_vec()).collect();
        let k = Keywords::new(&patterns);
        let unit = "a KEY=token; ghp_x -----BEGIN key";
        // Up to 2,500 repetitions (82 KB): past DFA_MIN, so both automata are walked; the
        // first texts (up to DIRECT_MAX) are searched directly, before the NFA exists.
        for reps in [0, 1, 3, 7, 200, 1000, 2500] {
            for extra in ["", "k", "ke", "key"] {
                let text = format!("{}{extra}", unit.repeat(reps));
                let mut got = k.find_all(text.as_bytes());
                got.sort_unstable_by_key(|h| (h.1, h.0));
                let ac =
                    aho_corasick::AhoCorasick::builder().ascii_case_insensitive(true).build(&patterns).expect("builds");
                let mut want: Vec<_> = ac
                    .find_overlapping_iter(text.as_bytes())
                    .map(|m| (m.pattern().as_usize(), m.start(), m.end()))
                    .collect();
                want.sort_unstable_by_key(|h| (h.1, h.0));
                assert_eq!(got, want, "reps {reps} extra {extra:?}");
                let mut direct = k.find_direct(text.as_bytes());
                direct.sort_unstable_by_key(|h| (h.1, h.0));
                assert_eq!(direct, want, "direct search, reps {reps} extra {extra:?}");
            }
        }
    }

    #[test]
    fn short_texts_are_searched_without_building_the_automaton() {
        let patterns: Vec<Vec<u8>> = ["ghp_", "key", "k"].iter().map(|p| p.as_bytes().to_vec()).collect();
        let k = Keywords::new(&patterns);
        let mut got = k.find_all(b"GHP_abc KEY");
        got.sort_unstable_by_key(|h| (h.1, h.0));
        assert_eq!(got, vec![(0, 0, 4), (1, 8, 11), (2, 8, 9)]);
        assert!(k.nfa.get().is_none(), "a short text built the NFA");
        assert!(k.find_all("x".repeat(DIRECT_MAX + 1).as_bytes()).is_empty());
        assert!(k.nfa.get().is_some(), "a long text did not build the NFA");
        assert_eq!(k.find_all(b"key").len(), 2, "a short text after the NFA is built");
    }

    #[test]
    fn many_short_texts_build_the_automaton_once_the_direct_budget_is_spent() {
        let patterns: Vec<Vec<u8>> = ["ghp_", "key", "k"].iter().map(|p| p.as_bytes().to_vec()).collect();
        let k = Keywords::new(&patterns);
        let text = b"a short tool result with a KEY in it";
        let mut searched = 0;
        while searched < DIRECT_BUDGET {
            assert!(k.nfa.get().is_none(), "the NFA was built after only {searched} bytes");
            assert_eq!(k.find_all(text).len(), 2);
            searched += text.len();
        }
        // The budget is spent: the next short text is walked with the NFA, with the same hits.
        assert_eq!(k.find_all(text).len(), 2);
        assert!(k.nfa.get().is_some(), "short texts never built the NFA: each pays the direct search forever");
        assert_eq!(k.clone().find_all(text).len(), 2, "a clone keeps the built automaton");
    }
}
