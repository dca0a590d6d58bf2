//! `drift`: how often CloudFormation's drift detection looks at the stack,
//! what stacksync does with what it finds, and which properties it leaves
//! alone.

use serde::{Deserialize, Serialize};

use crate::duration::Duration;

/// Default `drift.interval`: a detection a day.
pub const DEFAULT_DRIFT_INTERVAL: Duration = Duration::from_secs(86_400);
/// Shortest `drift.interval`.
pub const MIN_DRIFT_INTERVAL: Duration = Duration::from_mins(15);
/// Longest `drift.interval`.
pub const MAX_DRIFT_INTERVAL: Duration = Duration::from_secs(30 * 86_400);
/// Most `drift.ignore` rules.
pub const MAX_IGNORE_RULES: usize = 100;

/// What is done with a drift found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum DriftAction {
    /// Recorded and shown (`Drifted`), an event sent; the stack is left as it is.
    #[default]
    Report,
    /// Reported, and put back by a drift-aware change set (`REVERT_DRIFT`).
    Revert,
    /// No detection at all.
    Off,
}

/// The entry's `drift` settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DriftSpec {
    /// How often a detection runs (15m to 30d).
    #[serde(default = "default_drift_interval")]
    pub interval: Duration,
    #[serde(default)]
    pub action: DriftAction,
    /// Properties never reported nor reverted: `LogicalId.Property.Path`,
    /// a segment `*` for any one (`*.Tags`, `Queue.Tags.*.Value`), or a
    /// logical id alone for the whole resource.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignore: Vec<String>,
}

fn default_drift_interval() -> Duration {
    DEFAULT_DRIFT_INTERVAL
}

impl Default for DriftSpec {
    fn default() -> Self {
        Self {
            interval: DEFAULT_DRIFT_INTERVAL,
            action: DriftAction::Report,
            ignore: Vec::new(),
        }
    }
}

impl DriftSpec {
    /// Left out of the stored form at its default, so specs written before
    /// it hash as they did.
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }

    /// Seconds between detections; 0 when detection is off.
    pub fn interval_seconds(&self) -> u64 {
        if self.action == DriftAction::Off {
            0
        } else {
            self.interval.as_secs()
        }
    }

    /// The ignore rules, read (those that do not read are refused when the
    /// spec is validated, and left out here).
    pub fn ignore_rules(&self) -> Vec<crate::drift::ignore::IgnoreRule> {
        self.ignore
            .iter()
            .filter_map(|r| crate::drift::ignore::IgnoreRule::parse(r).ok())
            .collect()
    }
}
