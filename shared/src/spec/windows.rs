//! `windows:`: when runs may change the entry's stack (sync windows).

use serde::{Deserialize, Serialize};

use crate::duration::Duration;

/// One sync window, as written: `allow` or `deny` (a cron expression for
/// when it starts), how long it lasts, in which time zone (default UTC).
/// Judged by [`crate::window`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WindowSpec {
    /// Runs may change the stack only inside a window like this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow: Option<String>,
    /// Runs never change the stack inside a window like this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deny: Option<String>,
    pub duration: Duration,
    /// An IANA time zone (`Europe/Berlin`); UTC when left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
}
