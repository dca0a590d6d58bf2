//! How a stack's change sets are run, as the spec says it: whether a person
//! approves them first (`approval`), what a failed create leaves
//! (`onFailedCreate`, `onStackFailure`), the deployment mode
//! (`deploymentConfig`) and the rollback triggers (`rollback`).

use serde::{Deserialize, Serialize};

use crate::duration::Duration;

/// What a create that failed leaves behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum OnFailedCreate {
    /// Rolled back, then deleted and created again (once per revision).
    #[default]
    Delete,
    /// Left as it failed (no rollback), for a person to inspect.
    Keep,
}

impl OnFailedCreate {
    pub(super) fn is_default(&self) -> bool {
        *self == Self::Delete
    }
}

/// `OnStackFailure` of a CREATE change set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum OnStackFailure {
    Rollback,
    Delete,
    DoNothing,
}

impl OnStackFailure {
    /// As CloudFormation spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Rollback => "ROLLBACK",
            Self::Delete => "DELETE",
            Self::DoNothing => "DO_NOTHING",
        }
    }
}

/// CloudFormation's `DeploymentConfig`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeploymentConfig {
    pub mode: DeploymentMode,
    /// Rollback on failure off (`true`) or on (`false`); CloudFormation's
    /// default for the mode when absent (express: off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable_rollback: Option<bool>,
}

/// `DeploymentConfig.Mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum DeploymentMode {
    Standard,
    Express,
}

impl DeploymentMode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Standard => "STANDARD",
            Self::Express => "EXPRESS",
        }
    }
}

/// CloudFormation's rollback configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RollbackConfig {
    /// How long CloudFormation watches the triggers after an update (0 to 180 minutes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monitoring_time: Option<Duration>,
    /// The alarms that roll the stack back when they fire (at most 5).
    #[serde(default)]
    pub triggers: Vec<RollbackTrigger>,
}

/// One alarm that rolls a stack back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RollbackTrigger {
    /// CloudWatch alarm ARN.
    pub arn: String,
    /// `AWS::CloudWatch::Alarm` (default) or `AWS::CloudWatch::CompositeAlarm`.
    #[serde(default = "default_trigger_type", rename = "type")]
    pub kind: String,
}

fn default_trigger_type() -> String {
    "AWS::CloudWatch::Alarm".to_owned()
}

/// When a run asks a person before executing its change set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Approval {
    /// Never: change sets run as soon as they are ready.
    #[default]
    Never,
    /// Every change set.
    Always,
    /// A change set that replaces a resource, or may (`Replacement`
    /// `True` or `Conditional`).
    OnReplace,
    /// A change set that removes a resource.
    OnRemove,
    /// The merge of a pull request approves: a change set runs only if it
    /// is what the last preview on the merged pull request showed (the
    /// same desired state, the same resource rows), else it waits as
    /// `always` does, saying what differs.
    PullRequest,
}

impl Approval {
    pub(super) fn is_never(&self) -> bool {
        *self == Self::Never
    }

    /// As `stacks.yaml` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Never => "never",
            Self::Always => "always",
            Self::OnReplace => "onReplace",
            Self::OnRemove => "onRemove",
            Self::PullRequest => "pullRequest",
        }
    }
}
