//! The fault a route applies, and the rules that decide a connection's fate.
//!
//! A route has exactly one [`Mode`] at a time; every control command replaces it. Besides the
//! mode, [`FaultState`] counts the `drop` and `blackhole` commands ever given. A connection
//! remembers those counts when it opens ([`Opened`]), which makes its fate independent of how
//! quickly the commands follow each other (a watch channel may coalesce `blackhole` + `pass`
//! into `pass`): a connection that lived through a `drop` is always reset, and one that lived
//! through (or was opened in) a `blackhole` is always reset once the blackhole ends, so a client
//! never receives data that was held back or half-discarded while it was silent.

use std::fmt;
use std::time::Duration;

/// What a route does to its traffic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Forward everything as it comes.
    Pass,
    /// Reset every connection and refuse new ones (accepted, then reset at once).
    Drop,
    /// Accept connections and forward nothing either way (half-open).
    Blackhole,
    /// Reset each connection part-way through its next broker-to-client chunk.
    Reset,
    /// Delay every chunk by `ms` plus or minus a uniform `jitter_ms`, order kept per direction.
    Latency {
        /// Base delay in milliseconds.
        ms: u64,
        /// Maximum deviation from `ms` in milliseconds (uniform, either way, never below 0).
        jitter_ms: u64,
    },
    /// Cap each direction of each connection at this many bytes per second (token bucket).
    Bandwidth {
        /// Bytes per second, at least 1.
        bytes_per_sec: u64,
    },
}

impl fmt::Display for Mode {
    /// One token without spaces, as `status` prints it: `pass`, `drop`, `blackhole`, `reset`,
    /// `latency:MS:JITTER_MS`, `bandwidth:BYTES_PER_SEC`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mode::Pass => f.write_str("pass"),
            Mode::Drop => f.write_str("drop"),
            Mode::Blackhole => f.write_str("blackhole"),
            Mode::Reset => f.write_str("reset"),
            Mode::Latency { ms, jitter_ms } => write!(f, "latency:{ms}:{jitter_ms}"),
            Mode::Bandwidth { bytes_per_sec } => write!(f, "bandwidth:{bytes_per_sec}"),
        }
    }
}

/// A route's current mode and the history a connection's fate depends on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FaultState {
    /// The mode in force.
    pub mode: Mode,
    /// How many times `drop` was set on this route.
    pub drops: u64,
    /// How many times `blackhole` was set on this route.
    pub blackholes: u64,
}

impl FaultState {
    /// A route that forwards normally and has never had a fault.
    #[must_use]
    pub fn new() -> Self {
        Self {
            mode: Mode::Pass,
            drops: 0,
            blackholes: 0,
        }
    }

    /// The state after setting `mode`.
    #[must_use]
    pub fn with_mode(self, mode: Mode) -> Self {
        Self {
            mode,
            drops: self.drops + u64::from(mode == Mode::Drop),
            blackholes: self.blackholes + u64::from(mode == Mode::Blackhole),
        }
    }

    /// What a connection remembers of the state it opened in.
    #[must_use]
    pub fn opened(&self) -> Opened {
        Opened {
            drops: self.drops,
            blackholes: self.blackholes,
            in_blackhole: self.mode == Mode::Blackhole,
        }
    }

    /// Whether a connection opened in `opened` must be reset now.
    ///
    /// True after any `drop` since it opened, and when no blackhole is in force any more but it
    /// opened in one or lived through one.
    #[must_use]
    pub fn must_reset(&self, opened: &Opened) -> bool {
        if self.drops > opened.drops || self.mode == Mode::Drop {
            return true;
        }
        self.mode != Mode::Blackhole && (opened.in_blackhole || self.blackholes > opened.blackholes)
    }
}

impl Default for FaultState {
    fn default() -> Self {
        Self::new()
    }
}

/// The part of a [`FaultState`] a connection keeps from the moment it opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Opened {
    drops: u64,
    blackholes: u64,
    in_blackhole: bool,
}

/// The delay of one chunk under [`Mode::Latency`]: `ms` plus a uniform deviation in
/// `-jitter_ms..=jitter_ms`, never negative.
#[must_use]
pub fn latency_delay(ms: u64, jitter_ms: u64) -> Duration {
    let base = i128::from(ms);
    let jitter = i128::from(jitter_ms);
    let deviation = if jitter == 0 {
        0
    } else {
        i128::from(fastrand::i64(-(jitter_ms as i64)..=jitter_ms as i64))
    };
    let total = (base + deviation).clamp(0, i128::from(u64::MAX));
    Duration::from_millis(total as u64)
}

/// Longest prefix of a chunk forwarded before a [`Mode::Reset`] cut.
pub const MAX_RESET_PREFIX: usize = 64 * 1024;

/// How many bytes of a broker-to-client chunk of `len` bytes go out before the reset: uniform in
/// `1..=min(len - 1, 64 KiB)`, so the cut always falls inside the chunk (a one-byte chunk is cut
/// before its byte, an empty one does not occur).
#[must_use]
pub fn reset_prefix(len: usize) -> usize {
    if len < 2 {
        return 0;
    }
    fastrand::usize(1..=(len - 1).min(MAX_RESET_PREFIX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drop_dooms_every_older_connection_even_when_healed_at_once() {
        let start = FaultState::new();
        let opened = start.opened();
        let healed = start.with_mode(Mode::Drop).with_mode(Mode::Pass);
        assert!(healed.must_reset(&opened));
        assert!(!healed.must_reset(&healed.opened()));
    }

    #[test]
    fn blackhole_keeps_connections_until_it_ends() {
        let start = FaultState::new();
        let old = start.opened();
        let hole = start.with_mode(Mode::Blackhole);
        let new = hole.opened();
        assert!(!hole.must_reset(&old));
        assert!(!hole.must_reset(&new));
        let healed = hole.with_mode(Mode::Pass);
        assert!(healed.must_reset(&old));
        assert!(healed.must_reset(&new));
        assert!(!healed.must_reset(&healed.opened()));
        // another fault ends the blackhole too
        assert!(hole.with_mode(Mode::Reset).must_reset(&old));
    }

    #[test]
    fn other_modes_keep_connections() {
        let start = FaultState::new();
        let opened = start.opened();
        for mode in [
            Mode::Pass,
            Mode::Reset,
            Mode::Latency {
                ms: 5,
                jitter_ms: 1,
            },
            Mode::Bandwidth { bytes_per_sec: 9 },
        ] {
            assert!(!start.with_mode(mode).must_reset(&opened), "{mode}");
        }
    }

    #[test]
    fn latency_stays_within_jitter() {
        for _ in 0..1000 {
            let d = latency_delay(100, 30);
            assert!(
                d >= Duration::from_millis(70) && d <= Duration::from_millis(130),
                "{d:?}"
            );
        }
        assert_eq!(latency_delay(5, 0), Duration::from_millis(5));
        for _ in 0..100 {
            assert!(latency_delay(1, 50) <= Duration::from_millis(51));
        }
    }

    #[test]
    fn reset_prefix_falls_inside_the_chunk() {
        assert_eq!(reset_prefix(1), 0);
        assert_eq!(reset_prefix(2), 1);
        for len in [3, 100, 70_000, 1 << 20] {
            for _ in 0..200 {
                let p = reset_prefix(len);
                assert!(p >= 1 && p < len && p <= MAX_RESET_PREFIX, "{len} {p}");
            }
        }
    }

    #[test]
    fn modes_print_as_one_token() {
        assert_eq!(
            Mode::Latency {
                ms: 100,
                jitter_ms: 20
            }
            .to_string(),
            "latency:100:20"
        );
        assert_eq!(
            Mode::Bandwidth {
                bytes_per_sec: 4096
            }
            .to_string(),
            "bandwidth:4096"
        );
        assert_eq!(Mode::Blackhole.to_string(), "blackhole");
    }
}
