//! The three details stacksync reads, each into its domain value.

use serde::Deserialize;
use serde_json::Value;

use super::{
    Detail, DriftDetectionChange, EventError, ExecutionEnded, ObjectCreated, StackStatusChange,
    deserialize, malformed,
};
use crate::triggers::RefMoved;
use crate::triggers::webhook::parse::form_decode;
use crate::validate;

// -------------------------------------------------------------- CodeCommit

#[derive(Deserialize)]
struct CodeCommitEvent {
    event: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CodeCommitReference {
    repository_name: String,
    reference_type: String,
    reference_name: String,
    #[serde(default)]
    reference_full_name: Option<String>,
    commit_id: String,
}

pub(super) fn codecommit(detail: Value, region: &str) -> Result<Detail, EventError> {
    let kind: CodeCommitEvent = deserialize(detail.clone(), "detail")?;
    match kind.event.as_str() {
        "referenceCreated" | "referenceUpdated" => {}
        "referenceDeleted" => {
            let name = detail
                .get("referenceFullName")
                .and_then(Value::as_str)
                .unwrap_or("a reference");
            return Ok(Detail::Ignored {
                reason: format!("{name} was deleted"),
            });
        }
        other => {
            return Ok(Detail::Ignored {
                reason: format!("CodeCommit event {other:?} does not move a branch or tag"),
            });
        }
    }
    let r: CodeCommitReference = deserialize(detail, "detail")?;
    validate::region_name(region).map_err(|e| malformed("region", e))?;
    let name_ok = !r.repository_name.is_empty()
        && r.repository_name.len() <= 100
        && r.repository_name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if !name_ok {
        return Err(malformed(
            "detail.repositoryName",
            format!(
                "{:?} is not a CodeCommit repository name",
                r.repository_name
            ),
        ));
    }
    let prefix = match r.reference_type.as_str() {
        "branch" => "refs/heads/",
        "tag" => "refs/tags/",
        other => {
            return Ok(Detail::Ignored {
                reason: format!("CodeCommit reference type {other:?} is neither branch nor tag"),
            });
        }
    };
    let reference = match r.reference_full_name {
        Some(full) if full.starts_with(prefix) => full,
        _ => format!("{prefix}{}", r.reference_name),
    };
    if reference.len() == prefix.len()
        || reference.len() > 1024
        || reference.chars().any(char::is_control)
    {
        return Err(malformed(
            "detail.referenceName",
            format!("{:?} is not a branch or tag name", r.reference_name),
        ));
    }
    if !(r.commit_id.len() == 40 && r.commit_id.bytes().all(|b| b.is_ascii_hexdigit())) {
        return Err(malformed(
            "detail.commitId",
            format!("{:?} is not a commit id of 40 hex digits", r.commit_id),
        ));
    }
    // China (and the other partitions) live under their own domain.
    let domain = crate::partition::of_region(region).dns_suffix;
    let path = format!(
        "git-codecommit.{region}.{domain}/v1/repos/{}",
        r.repository_name
    );
    Ok(Detail::CodeCommitPush(RefMoved {
        repository_urls: vec![format!("https://{path}"), format!("ssh://{path}")],
        reference,
        commit: r.commit_id.to_ascii_lowercase(),
    }))
}

// --------------------------------------------------------------------- S3

#[derive(Deserialize)]
struct S3Detail {
    bucket: S3Bucket,
    object: S3Object,
    #[serde(default)]
    reason: Option<String>,
}

#[derive(Deserialize)]
struct S3Bucket {
    name: String,
}

#[derive(Deserialize)]
struct S3Object {
    key: String,
    #[serde(default)]
    size: Option<u64>,
    #[serde(default)]
    etag: Option<String>,
    #[serde(default, rename = "version-id")]
    version_id: Option<String>,
}

pub(super) fn object_created(detail: Value) -> Result<ObjectCreated, EventError> {
    let d: S3Detail = deserialize(detail, "detail")?;
    let bucket_ok = (3..=63).contains(&d.bucket.name.len())
        && d.bucket
            .name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'-'));
    if !bucket_ok {
        return Err(malformed(
            "detail.bucket.name",
            format!("{:?} is not an S3 bucket name", d.bucket.name),
        ));
    }
    let key = String::from_utf8(form_decode(d.object.key.as_bytes())).map_err(|_| {
        malformed(
            "detail.object.key",
            "is not UTF-8 once URL-decoded".to_owned(),
        )
    })?;
    if key.is_empty() {
        return Err(malformed("detail.object.key", "is empty".to_owned()));
    }
    Ok(ObjectCreated {
        bucket: d.bucket.name,
        key,
        raw_key: d.object.key,
        version_id: d.object.version_id.filter(|v| !v.is_empty()),
        etag: d.object.etag,
        size: d.object.size,
        reason: d.reason,
    })
}

// --------------------------------------------------------- CloudFormation

#[derive(Deserialize)]
struct StackDetail {
    #[serde(rename = "stack-id")]
    stack_id: String,
    #[serde(rename = "status-details")]
    status_details: StatusDetails,
    #[serde(default, rename = "client-request-token")]
    client_request_token: Option<String>,
}

#[derive(Deserialize)]
struct StatusDetails {
    status: String,
    #[serde(default, rename = "status-reason")]
    status_reason: Option<String>,
}

pub(super) fn stack_status_change(detail: Value) -> Result<StackStatusChange, EventError> {
    let d: StackDetail = deserialize(detail, "detail")?;
    let stack_name = stack_name_of(&d.stack_id).ok_or_else(|| {
        malformed(
            "detail.stack-id",
            format!(
                "{:?} is not a stack ARN (arn:<partition>:cloudformation:<region>:<account>:stack/<name>/<id>)",
                d.stack_id
            ),
        )
    })?;
    let non_empty = |s: Option<String>| s.filter(|s| !s.is_empty());
    Ok(StackStatusChange {
        stack_name,
        stack_id: d.stack_id,
        status: d.status_details.status,
        status_reason: non_empty(d.status_details.status_reason),
        client_request_token: non_empty(d.client_request_token),
    })
}

#[derive(Deserialize)]
struct DriftDetail {
    #[serde(rename = "stack-id")]
    stack_id: String,
    #[serde(rename = "stack-drift-detection-id")]
    detection_id: String,
    #[serde(rename = "status-details")]
    status_details: DriftStatusDetails,
}

#[derive(Deserialize)]
struct DriftStatusDetails {
    #[serde(rename = "detection-status")]
    detection_status: String,
    #[serde(default, rename = "stack-drift-status")]
    stack_drift: Option<String>,
}

pub(super) fn drift_detection_change(detail: Value) -> Result<DriftDetectionChange, EventError> {
    let d: DriftDetail = deserialize(detail, "detail")?;
    let stack_name = stack_name_of(&d.stack_id).ok_or_else(|| {
        malformed(
            "detail.stack-id",
            format!("{:?} is not a stack ARN", d.stack_id),
        )
    })?;
    if d.detection_id.trim().is_empty() {
        return Err(malformed(
            "detail.stack-drift-detection-id",
            "expected the detection's id",
        ));
    }
    Ok(DriftDetectionChange {
        stack_name,
        stack_id: d.stack_id,
        detection_id: d.detection_id,
        detection_status: d.status_details.detection_status,
        stack_drift: d.status_details.stack_drift.filter(|s| !s.is_empty()),
    })
}

/// The name in `arn:<partition>:cloudformation:<region>:<account>:stack/<name>/<id>`.
pub(super) fn stack_name_of(arn: &str) -> Option<String> {
    let mut parts = arn.splitn(6, ':');
    let (arn_word, _partition, service, _region, _account, resource) = (
        parts.next()?,
        parts.next()?,
        parts.next()?,
        parts.next()?,
        parts.next()?,
        parts.next()?,
    );
    if arn_word != "arn" || service != "cloudformation" {
        return None;
    }
    let (name, id) = resource.strip_prefix("stack/")?.split_once('/')?;
    (!id.is_empty() && validate::stack_name(name).is_ok()).then(|| name.to_owned())
}

// -------------------------------------------------------------- Step Functions

#[derive(Deserialize)]
struct ExecutionStatusChange {
    name: String,
    status: String,
    /// The execution's input, as JSON text (`null` when too large to send).
    #[serde(default)]
    input: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReconcileInput {
    stack_id: String,
}

pub(super) fn execution_ended(detail: Value) -> Result<Detail, EventError> {
    let change: ExecutionStatusChange = deserialize(detail, "detail")?;
    if !matches!(change.status.as_str(), "ABORTED" | "TIMED_OUT" | "FAILED") {
        return Ok(Detail::Ignored {
            reason: format!("execution {} is {}", change.name, change.status),
        });
    }
    let input = change
        .input
        .ok_or_else(|| malformed("detail.input", "the execution's input is missing"))?;
    let input: ReconcileInput = serde_json::from_str(&input)
        .map_err(|e| malformed("detail.input", format!("not a reconcile's input: {e}")))?;
    validate::stack_name(&input.stack_id).map_err(|e| malformed("detail.input.stackId", e))?;
    Ok(Detail::ExecutionEnded(ExecutionEnded {
        name: change.name,
        stack: input.stack_id,
        status: change.status,
    }))
}
