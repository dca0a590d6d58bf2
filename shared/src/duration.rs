//! Durations as people write them in `stacks.yaml`: `30s`, `5m`, `1h`, `1h30m`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A whole number of seconds, read from and written as `1h30m`-style text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Duration {
    secs: u64,
}

/// Why a duration could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ParseDurationError(String);

impl Duration {
    pub const fn from_secs(secs: u64) -> Self {
        Self { secs }
    }

    pub const fn from_mins(mins: u64) -> Self {
        Self { secs: mins * 60 }
    }

    pub const fn as_secs(self) -> u64 {
        self.secs
    }

    pub fn as_std(self) -> std::time::Duration {
        std::time::Duration::from_secs(self.secs)
    }
}

impl FromStr for Duration {
    type Err = ParseDurationError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let hint = || {
            ParseDurationError(format!(
                "{text:?} is not a duration: write a whole number with a unit s, m, h or d, \
                 like 30s, 5m, 1h or 1h30m"
            ))
        };
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err(hint());
        }
        let mut total: u64 = 0;
        let mut digits = String::new();
        let mut last_unit_rank = usize::MAX;
        for ch in trimmed.chars() {
            if ch.is_ascii_digit() {
                digits.push(ch);
                continue;
            }
            // Units must appear largest first and at most once: "1h30m", never "30m1h".
            let (rank, factor) = match ch {
                'd' => (3, 86_400),
                'h' => (2, 3_600),
                'm' => (1, 60),
                's' => (0, 1),
                _ => return Err(hint()),
            };
            if digits.is_empty() || rank >= last_unit_rank {
                return Err(hint());
            }
            last_unit_rank = rank;
            let n: u64 = digits.parse().map_err(|_| hint())?;
            digits.clear();
            total = n
                .checked_mul(factor)
                .and_then(|v| total.checked_add(v))
                .ok_or_else(hint)?;
        }
        if !digits.is_empty() {
            // A bare number: ambiguous (seconds? minutes?), so refused.
            return Err(hint());
        }
        Ok(Self { secs: total })
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.secs == 0 {
            return f.write_str("0s");
        }
        let mut rest = self.secs;
        for (unit, size) in [("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)] {
            if rest >= size {
                write!(f, "{}{unit}", rest / size)?;
                rest %= size;
            }
        }
        Ok(())
    }
}

impl Serialize for Duration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Duration;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration like 30s, 5m or 1h")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Duration, E> {
                v.parse().map_err(E::custom)
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Duration, E> {
                Err(E::custom(format!(
                    "{v} has no unit: write a duration like {v}s or {v}m"
                )))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Duration, E> {
                Err(E::custom(format!(
                    "{v} has no unit: write a duration like 30s, 5m or 1h"
                )))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_units_people_write() {
        for (text, secs) in [
            ("30s", 30),
            ("5m", 300),
            ("1h", 3600),
            ("1h30m", 5400),
            ("2d", 172_800),
            ("1d2h3m4s", 93_784),
            (" 10m ", 600),
            ("0s", 0),
        ] {
            assert_eq!(text.parse::<Duration>().unwrap().as_secs(), secs, "{text}");
        }
    }

    #[test]
    fn refuses_bare_numbers_unknown_units_and_disorder() {
        for text in [
            "",
            "10",
            "5 m",
            "1x",
            "m",
            "30m1h",
            "1h1h",
            "-5s",
            "1.5h",
            "99999999999999999999s",
        ] {
            let err = text.parse::<Duration>().unwrap_err();
            assert!(
                err.to_string().contains("is not a duration"),
                "{text}: {err}"
            );
        }
    }

    #[test]
    fn writes_the_shortest_canonical_form() {
        assert_eq!(Duration::from_secs(5400).to_string(), "1h30m");
        assert_eq!(Duration::from_secs(600).to_string(), "10m");
        assert_eq!(Duration::from_secs(0).to_string(), "0s");
        assert_eq!(Duration::from_secs(93_784).to_string(), "1d2h3m4s");
    }

    #[test]
    fn round_trips_through_text() {
        for secs in [0, 1, 59, 60, 61, 3599, 3600, 86_399, 86_400, 1_000_000] {
            let d = Duration::from_secs(secs);
            assert_eq!(d.to_string().parse::<Duration>().unwrap(), d);
        }
    }
}
