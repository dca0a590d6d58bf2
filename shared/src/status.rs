//! What stacksync observed and did for one stack: the status record.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::clock::{self, EpochMillis};

/// Longest status message kept; longer ones are cut (DynamoDB items are bounded).
pub const MAX_MESSAGE_CHARS: usize = 2048;

/// Where a stack is in its life, as the reconcile engine last recorded it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub enum Phase {
    /// Registered, not reconciled yet.
    #[default]
    Pending,
    /// A reconcile is running.
    Reconciling,
    /// The stack matches the spec at `lastAppliedRevision`.
    Ready,
    /// The last reconcile failed; see `message`.
    Failed,
    /// The entry was removed; the stack is being deleted (or released).
    Deleting,
    /// The stack was deleted.
    Deleted,
    /// Reconciles are suspended.
    Suspended,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "Pending",
            Self::Reconciling => "Reconciling",
            Self::Ready => "Ready",
            Self::Failed => "Failed",
            Self::Deleting => "Deleting",
            Self::Deleted => "Deleted",
            Self::Suspended => "Suspended",
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An instant, stored and shown as RFC 3339 text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(pub EpochMillis);

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&clock::rfc3339_millis(self.0))
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        clock::parse_rfc3339(&text)
            .map(Timestamp)
            .ok_or_else(|| serde::de::Error::custom(format!("{text:?} is not an RFC 3339 time")))
    }
}

/// The status record of one stack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct Status {
    pub phase: Phase,
    /// The `specVersion` the last reconcile worked from (0: never reconciled).
    pub observed_spec_version: u64,
    /// The revision (commit SHA or S3 version) the last reconcile tried.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_attempted_revision: Option<String>,
    /// The revision the stack was last brought to successfully.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_applied_revision: Option<String>,
    /// Hash of everything that determined the deployed stack at that revision.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub applied_hash: Option<String>,
    /// CloudFormation's stack status, as last described.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stack_status: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stack_status_reason: Option<String>,
    /// The change set the last reconcile made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change_set_name: Option<String>,
    /// What a person should know: the failure reason, or what happened.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When the phase last changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_transition_at: Option<Timestamp>,
    /// When the last reconcile ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_reconcile_at: Option<Timestamp>,
    /// When the scheduler should look at the stack again. Stored as the
    /// registry's indexed `nextReconcileAt` attribute, not inside the record.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_reconcile_at: Option<Timestamp>,
}

impl Status {
    /// The record as it may be stored: messages cut to [`MAX_MESSAGE_CHARS`].
    pub fn bounded(mut self) -> Self {
        for text in [&mut self.message, &mut self.stack_status_reason]
            .into_iter()
            .flatten()
        {
            if text.chars().count() > MAX_MESSAGE_CHARS {
                let cut: String = text.chars().take(MAX_MESSAGE_CHARS - 1).collect();
                *text = format!("{cut}…");
            }
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_messages_are_cut_on_a_character_boundary() {
        let status = Status {
            message: Some("é".repeat(MAX_MESSAGE_CHARS + 10)),
            ..Status::default()
        }
        .bounded();
        let message = status.message.unwrap();
        assert_eq!(message.chars().count(), MAX_MESSAGE_CHARS);
        assert!(message.ends_with('…'));
    }

    #[test]
    fn timestamps_are_rfc3339_text() {
        let json = serde_json::to_string(&Timestamp(1_700_000_000_000)).unwrap();
        assert_eq!(json, "\"2023-11-14T22:13:20.000Z\"");
        let back: Timestamp = serde_json::from_str(&json).unwrap();
        assert_eq!(back, Timestamp(1_700_000_000_000));
        assert!(serde_json::from_str::<Timestamp>("\"soon\"").is_err());
    }
}
