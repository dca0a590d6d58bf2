//! `rollout:`: how a fleet's change reaches its targets, wave by wave
//! ([`crate::rollout`]).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::duration::Duration;

/// A fleet's rollout, as written: `{maxConcurrent: 50, failureTolerance:
/// 0, order: [us-east-1, eu-west-1], pauseBetweenWaves: 10m}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RolloutSpec {
    /// How many targets a wave holds: a number, or a share of the fleet's
    /// targets (`25%`, at least one).
    pub max_concurrent: Amount,
    /// How many targets may fail at a revision before the rollout stops
    /// (`Halted`): a number, or a share of the fleet's targets (`10%`,
    /// rounded down). Default 0.
    #[serde(default, skip_serializing_if = "Amount::is_zero")]
    pub failure_tolerance: Amount,
    /// Regions or organizational units, in the order their targets go:
    /// a wave never mixes two of them; targets in none go last.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub order: Vec<String>,
    /// How long after a wave ends the next one starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_between_waves: Option<Duration>,
}

/// A number of targets, or a share of a fleet's (`N%`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Amount {
    Count(u32),
    Percent(u32),
}

impl Default for Amount {
    fn default() -> Self {
        Self::Count(0)
    }
}

impl Amount {
    fn is_zero(&self) -> bool {
        *self == Self::Count(0)
    }

    /// Of `total` targets: a share rounded up (`up`) or down.
    pub fn of(self, total: usize, up: bool) -> usize {
        match self {
            Self::Count(n) => n as usize,
            Self::Percent(p) => {
                let scaled = total.saturating_mul(p as usize);
                if up {
                    scaled.div_ceil(100)
                } else {
                    scaled / 100
                }
            }
        }
    }
}

impl fmt::Display for Amount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Count(n) => write!(f, "{n}"),
            Self::Percent(p) => write!(f, "{p}%"),
        }
    }
}

impl std::str::FromStr for Amount {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let hint = || format!("{text:?} is not a number of targets: write 3, or 25%");
        let text = text.trim();
        match text.strip_suffix('%') {
            Some(share) => {
                let p: u32 = share.trim().parse().map_err(|_| hint())?;
                if p > 100 {
                    return Err(format!("{text:?}: a share is at most 100%"));
                }
                Ok(Self::Percent(p))
            }
            None => text.parse().map(Self::Count).map_err(|_| hint()),
        }
    }
}

impl Serialize for Amount {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Count(n) => s.serialize_u32(*n),
            Self::Percent(_) => s.serialize_str(&self.to_string()),
        }
    }
}

impl<'de> Deserialize<'de> for Amount {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Written {
            Number(u64),
            Text(String),
        }
        match Written::deserialize(d)? {
            Written::Number(n) => u32::try_from(n)
                .map(Self::Count)
                .map_err(|_| serde::de::Error::custom(format!("{n} is too large"))),
            Written::Text(t) => t.parse().map_err(serde::de::Error::custom),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_amount_is_a_number_or_a_share() {
        let read = |t: &str| serde_yaml_ng::from_str::<Amount>(t).map_err(|e| e.to_string());
        assert_eq!(read("3"), Ok(Amount::Count(3)));
        assert_eq!(read("'25%'"), Ok(Amount::Percent(25)));
        assert_eq!(read("'7'"), Ok(Amount::Count(7)));
        assert!(read("'120%'").unwrap_err().contains("at most 100%"));
        assert!(read("lots").unwrap_err().contains("write 3, or 25%"));
        assert_eq!(Amount::Percent(25).of(10, true), 3);
        assert_eq!(Amount::Percent(25).of(10, false), 2);
        assert_eq!(Amount::Count(4).of(10, true), 4);
        let spec: RolloutSpec = serde_yaml_ng::from_str(
            "{maxConcurrent: '10%', order: [us-east-1], pauseBetweenWaves: 10m}",
        )
        .expect("a rollout");
        assert_eq!(spec.failure_tolerance, Amount::Count(0));
        assert_eq!(
            serde_json::to_value(&spec).expect("json"),
            serde_json::json!({"maxConcurrent": "10%", "order": ["us-east-1"], "pauseBetweenWaves": "10m"})
        );
    }
}
