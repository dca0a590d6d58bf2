//! The EventBridge events stacksync reacts to, parsed.
//!
//! Three, each checked against its `source` as well as its `detail-type`
//! (only AWS can put events with an `aws.` source on a bus, so a custom event
//! dressed up as one is refused):
//!
//! - `aws.codecommit` "CodeCommit Repository State Change": a branch or tag
//!   created or moved (`referenceCreated`, `referenceUpdated`) is a push;
//!   `referenceDeleted` and the other repository events are ignored.
//! - `aws.s3` "Object Created": a new version of an S3 source. The key is
//!   form-URL-encoded as in S3's other notifications (`+` for a space), and is
//!   decoded here, as AWS Lambda Powertools does for this very event.
//! - `aws.cloudformation` "CloudFormation Stack Status Change": a managed
//!   stack changed, possibly out of band.
//! - `aws.cloudformation` "CloudFormation Drift Detection Status Change": a
//!   detection ended; the drift function reads its findings at once.
//! - `aws.states` "Step Functions Execution Status Change": a reconcile
//!   execution ended `ABORTED`, `TIMED_OUT` or `FAILED`. The first two skip
//!   the machine's `Catch`, so no step released the stack: the handler does.
//!
//! Shapes: the EventBridge event reference of each service (CodeCommit
//! "Monitoring CodeCommit events", S3 "EventBridge event message structure",
//! CloudFormation "Stack Status Change event detail").

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::RefMoved;
use crate::source::source_key;
use crate::stack_status::StackStatus;

mod detail;
pub mod handler;
pub mod wake;

use detail::{
    codecommit, drift_detection_change, execution_ended, object_created, stack_status_change,
};

/// `source` and `detail-type` of a CodeCommit repository event.
pub const CODECOMMIT: (&str, &str) = ("aws.codecommit", "CodeCommit Repository State Change");
/// `source` and `detail-type` of an S3 object-created event.
pub const S3_OBJECT_CREATED: (&str, &str) = ("aws.s3", "Object Created");
/// `source` and `detail-type` of a CloudFormation stack status event.
pub const STACK_STATUS_CHANGE: (&str, &str) =
    ("aws.cloudformation", "CloudFormation Stack Status Change");
/// `source` and `detail-type` of a CloudFormation drift detection's status
/// event (taken by the drift function, not the events function).
pub const DRIFT_DETECTION_STATUS_CHANGE: (&str, &str) = (
    "aws.cloudformation",
    "CloudFormation Drift Detection Status Change",
);
/// `source` and `detail-type` of a Step Functions execution's status event.
pub const EXECUTION_STATUS_CHANGE: (&str, &str) =
    ("aws.states", "Step Functions Execution Status Change");
/// `source` and `detail-type` of a Git push the webhook relays because it
/// moved a registry source.
pub const REGISTRY_SOURCE_PUSHED: (&str, &str) = ("stacksync", "Registry Source Pushed");

/// One EventBridge event: the envelope's fields and the parsed detail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsEvent {
    /// The event's id: the same when EventBridge delivers it again, so a
    /// good key for [`crate::naming::execution_name`].
    pub id: String,
    /// The account the event happened in.
    pub account: String,
    /// The region the event happened in.
    pub region: String,
    /// When it happened (RFC 3339, as sent).
    pub time: String,
    /// What happened.
    pub detail: Detail,
}

/// What an [`AwsEvent`] reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Detail {
    /// A CodeCommit branch or tag created or moved.
    CodeCommitPush(RefMoved),
    /// An object written to S3.
    ObjectCreated(ObjectCreated),
    /// A CloudFormation stack's status changed.
    StackStatusChange(StackStatusChange),
    /// A reconcile execution ended without succeeding.
    ExecutionEnded(ExecutionEnded),
    /// A drift detection's status changed.
    DriftDetectionChange(DriftDetectionChange),
    /// A Git push that moved a registry source, relayed by the webhook
    /// (its commit only announced: the source's ref is read again).
    RegistrySourcePushed(RefMoved),
    /// A known event with nothing to do (a deleted branch, a pull request).
    Ignored {
        /// Why, for the log.
        reason: String,
    },
}

/// A new S3 object (or a new version of one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectCreated {
    /// The bucket's name.
    pub bucket: String,
    /// The object's key, URL-decoded: what `GetObject` takes.
    pub key: String,
    /// The key as the event sent it.
    pub raw_key: String,
    /// The new version's id, in a versioned bucket.
    pub version_id: Option<String>,
    /// The object's ETag.
    pub etag: Option<String>,
    /// The object's size in bytes.
    pub size: Option<u64>,
    /// The S3 operation: `PutObject`, `CopyObject`, `CompleteMultipartUpload`.
    pub reason: Option<String>,
}

impl ObjectCreated {
    /// The source URL a stack registers: `s3://bucket/key`.
    pub fn url(&self) -> String {
        format!("s3://{}/{}", self.bucket, self.key)
    }

    /// The registry's source-index key of the stacks that follow the latest
    /// version of this object (a stack pinned to a version does not move).
    pub fn source_key(&self) -> String {
        source_key(&self.url(), None)
    }
}

/// A CloudFormation stack's new status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StackStatusChange {
    /// The stack's ARN.
    pub stack_id: String,
    /// The stack's name, from its ARN.
    pub stack_name: String,
    /// The new status: `UPDATE_COMPLETE`, `ROLLBACK_IN_PROGRESS`, …
    pub status: String,
    /// CloudFormation's reason, when it gives one.
    pub status_reason: Option<String>,
    /// The token of the operation that caused it, when it had one: lets a
    /// handler tell stacksync's own operations from others'.
    pub client_request_token: Option<String>,
}

impl StackStatusChange {
    /// Whether an operation is still running (as the decision table
    /// reads statuses: `REVIEW_IN_PROGRESS` is a stack waiting for its first
    /// change set, not an operation).
    pub fn in_progress(&self) -> bool {
        StackStatus::parse(&self.status).in_progress()
    }
}

/// A drift detection's new status ("Drift Detection Status Change event
/// detail" of the CloudFormation user guide).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriftDetectionChange {
    /// The stack's ARN.
    pub stack_id: String,
    /// The stack's name, from its ARN.
    pub stack_name: String,
    /// The detection's id (`DetectStackDrift`'s answer).
    pub detection_id: String,
    /// `DETECTION_IN_PROGRESS`, `DETECTION_COMPLETE`, `DETECTION_FAILED`.
    pub detection_status: String,
    /// `DRIFTED`, `IN_SYNC`, …, when the detection says.
    pub stack_drift: Option<String>,
}

impl DriftDetectionChange {
    /// Whether the detection has ended (complete or failed).
    pub fn ended(&self) -> bool {
        self.detection_status != "DETECTION_IN_PROGRESS"
    }
}

/// A reconcile execution that ended without succeeding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecutionEnded {
    /// The execution's name: the lease owner of the run.
    pub name: String,
    /// The registry entry it reconciled (its input's `stackId`).
    pub stack: String,
    /// `ABORTED`, `TIMED_OUT` or `FAILED`.
    pub status: String,
}

/// Why an event could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventError {
    /// Not the shape expected; `path` is where (`detail.object.key`).
    #[error("malformed EventBridge event at {path}: {message}")]
    Malformed {
        /// The JSON path of the offending value.
        path: String,
        /// What is wrong with it.
        message: String,
    },
    /// A `source` / `detail-type` pair stacksync does not handle.
    #[error(
        "unexpected EventBridge event: detail-type {detail_type:?} from source {event_source:?}; \
         stacksync handles {:?}, {:?}, {:?}, {:?} and {:?}",
        CODECOMMIT.1, S3_OBJECT_CREATED.1, STACK_STATUS_CHANGE.1, DRIFT_DETECTION_STATUS_CHANGE.1,
        EXECUTION_STATUS_CHANGE.1
    )]
    Unexpected {
        /// The event's `source`.
        event_source: String,
        /// The event's `detail-type`.
        detail_type: String,
    },
}

pub(super) fn malformed(path: &str, message: impl Into<String>) -> EventError {
    EventError::Malformed {
        path: path.to_owned(),
        message: message.into(),
    }
}

/// An event from its JSON bytes.
pub fn parse_event(bytes: &[u8]) -> Result<AwsEvent, EventError> {
    let value: Value = serde_json::from_slice(bytes).map_err(|e| malformed(".", e.to_string()))?;
    from_value(value)
}

/// An event from the JSON the Lambda runtime hands over.
pub fn from_value(value: Value) -> Result<AwsEvent, EventError> {
    let envelope: Envelope = deserialize(value, "")?;
    let kind = (envelope.source.as_str(), envelope.detail_type.as_str());
    let detail = if kind == CODECOMMIT {
        codecommit(envelope.detail, &envelope.region)?
    } else if kind == S3_OBJECT_CREATED {
        Detail::ObjectCreated(object_created(envelope.detail)?)
    } else if kind == STACK_STATUS_CHANGE {
        Detail::StackStatusChange(stack_status_change(envelope.detail)?)
    } else if kind == DRIFT_DETECTION_STATUS_CHANGE {
        Detail::DriftDetectionChange(drift_detection_change(envelope.detail)?)
    } else if kind == EXECUTION_STATUS_CHANGE {
        execution_ended(envelope.detail)?
    } else if kind == REGISTRY_SOURCE_PUSHED {
        Detail::RegistrySourcePushed(relayed_push(envelope.detail)?)
    } else {
        return Err(EventError::Unexpected {
            event_source: envelope.source,
            detail_type: envelope.detail_type,
        });
    };
    Ok(AwsEvent {
        id: envelope.id,
        account: envelope.account,
        region: envelope.region,
        time: envelope.time,
        detail,
    })
}

/// The push a `Registry Source Pushed` event relays, checked as a
/// webhook's push is: URLs, a full ref, a commit id.
fn relayed_push(detail: Value) -> Result<RefMoved, EventError> {
    let push: crate::notice::NoticePush = deserialize(
        detail.get("push").cloned().unwrap_or(Value::Null),
        "detail.push",
    )?;
    if push.repository_urls.is_empty() || push.repository_urls.iter().any(|u| u.trim().is_empty()) {
        return Err(malformed(
            "detail.push.repositoryUrls",
            "expected the repository's URLs",
        ));
    }
    if !push.reference.starts_with("refs/heads/") && !push.reference.starts_with("refs/tags/") {
        return Err(malformed(
            "detail.push.reference",
            format!("{:?} is not a full branch or tag ref", push.reference),
        ));
    }
    let commit_ok =
        matches!(push.commit.len(), 40 | 64) && push.commit.bytes().all(|b| b.is_ascii_hexdigit());
    if !commit_ok {
        return Err(malformed(
            "detail.push.commit",
            format!("{:?} is not a commit id", push.commit),
        ));
    }
    Ok(RefMoved {
        repository_urls: push.repository_urls,
        reference: push.reference,
        commit: push.commit.to_ascii_lowercase(),
    })
}

#[derive(Deserialize)]
struct Envelope {
    id: String,
    #[serde(rename = "detail-type")]
    detail_type: String,
    source: String,
    account: String,
    #[serde(default)]
    time: String,
    region: String,
    detail: Value,
}

/// `value` as `T`, or the path (under `prefix`) of the first thing wrong.
pub(super) fn deserialize<T: DeserializeOwned>(
    value: Value,
    prefix: &str,
) -> Result<T, EventError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let inner = e.path().to_string();
        let path = match (prefix, inner.as_str()) {
            ("", inner) => inner.to_owned(),
            (prefix, ".") => prefix.to_owned(),
            (prefix, inner) => format!("{prefix}.{inner}"),
        };
        malformed(&path, e.into_inner().to_string())
    })
}

#[cfg(test)]
mod tests;
