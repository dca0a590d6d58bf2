//! Time as the registry stores it: milliseconds since the Unix epoch.
//!
//! Registry operations take `now` as an argument instead of reading the clock,
//! so tests can move time (lease expiry) without sleeping.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch.
pub type EpochMillis = i64;

/// The current time in epoch milliseconds.
pub fn now_millis() -> EpochMillis {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO);
    i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
}

/// The time a decision is made at: the system's, or one a test sets and
/// moves (clones share it). Only what judges time against people's
/// calendars (sync windows) reads it; leases and waits read the system's.
#[derive(Debug, Clone, Default)]
pub struct Clock(Option<std::sync::Arc<std::sync::atomic::AtomicI64>>);

impl Clock {
    /// The system's clock.
    pub fn system() -> Self {
        Self(None)
    }

    /// A clock that stands at `at` until [`Clock::set`] moves it.
    pub fn manual(at: EpochMillis) -> Self {
        Self(Some(std::sync::Arc::new(at.into())))
    }

    /// Moves a manual clock (and its clones) to `at`; the system's stays.
    pub fn set(&self, at: EpochMillis) {
        if let Some(now) = &self.0 {
            now.store(at, std::sync::atomic::Ordering::SeqCst);
        }
    }

    pub fn now(&self) -> EpochMillis {
        match &self.0 {
            Some(now) => now.load(std::sync::atomic::Ordering::SeqCst),
            None => now_millis(),
        }
    }
}

/// RFC 3339 text (UTC, seconds) for an epoch-millisecond instant.
pub fn rfc3339(millis: EpochMillis) -> String {
    let t = UNIX_EPOCH + Duration::from_millis(u64::try_from(millis).unwrap_or(0));
    humantime::format_rfc3339_seconds(t).to_string()
}

/// RFC 3339 text with milliseconds, for values that are read back.
pub fn rfc3339_millis(millis: EpochMillis) -> String {
    let t = UNIX_EPOCH + Duration::from_millis(u64::try_from(millis).unwrap_or(0));
    humantime::format_rfc3339_millis(t).to_string()
}

/// Parses RFC 3339 text back into epoch milliseconds.
pub fn parse_rfc3339(text: &str) -> Option<EpochMillis> {
    let t = humantime::parse_rfc3339_weak(text).ok()?;
    let since = t.duration_since(UNIX_EPOCH).ok()?;
    i64::try_from(since.as_millis()).ok()
}

/// "5s", "3m", "2h", "4d": how long ago `then` was, for tables people read.
pub fn age(now: EpochMillis, then: EpochMillis) -> String {
    let secs = (now - then).max(0) / 1000;
    match secs {
        0..=59 => format!("{secs}s"),
        60..=3599 => format!("{}m", secs / 60),
        3600..=86_399 => format!("{}h", secs / 3600),
        _ => format!("{}d", secs / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_and_parses_rfc3339() {
        let t = 1_700_000_000_000;
        assert_eq!(rfc3339(t), "2023-11-14T22:13:20Z");
        assert_eq!(parse_rfc3339("2023-11-14T22:13:20Z"), Some(t));
        assert_eq!(parse_rfc3339("yesterday"), None);
    }

    #[test]
    fn ages_read_at_a_glance() {
        assert_eq!(age(10_000, 5_000), "5s");
        assert_eq!(age(200_000, 0), "3m");
        assert_eq!(age(7_300_000, 0), "2h");
        assert_eq!(age(4 * 86_400_000, 0), "4d");
        assert_eq!(age(0, 10_000), "0s");
    }
}
