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
//!
//! Shapes: the EventBridge event reference of each service (CodeCommit
//! "Monitoring CodeCommit events", S3 "EventBridge event message structure",
//! CloudFormation "Stack Status Change event detail").

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::source::source_key;
use crate::validate;
use crate::webhook::parse::form_decode;

/// `source` and `detail-type` of a CodeCommit repository event.
pub const CODECOMMIT: (&str, &str) = ("aws.codecommit", "CodeCommit Repository State Change");
/// `source` and `detail-type` of an S3 object-created event.
pub const S3_OBJECT_CREATED: (&str, &str) = ("aws.s3", "Object Created");
/// `source` and `detail-type` of a CloudFormation stack status event.
pub const STACK_STATUS_CHANGE: (&str, &str) =
    ("aws.cloudformation", "CloudFormation Stack Status Change");

/// One EventBridge event: the envelope's fields and the parsed detail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsEvent {
    /// The event's id: the same when EventBridge delivers it again, so a
    /// good `trigger` for [`crate::webhook::execution_name`].
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
    CodeCommitPush(CodeCommitPush),
    /// An object written to S3.
    ObjectCreated(ObjectCreated),
    /// A CloudFormation stack's status changed.
    StackStatusChange(StackStatusChange),
    /// A known event with nothing to do (a deleted branch, a pull request).
    Ignored {
        /// Why, for the log.
        reason: String,
    },
}

/// A CodeCommit ref now at a commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeCommitPush {
    /// The repository's name.
    pub repository_name: String,
    /// Its HTTPS and SSH clone URLs in the event's region, which
    /// [`crate::source::normalize_url`] makes equal.
    pub repository_urls: Vec<String>,
    /// The full ref: `refs/heads/<branch>` or `refs/tags/<tag>`.
    pub reference: String,
    /// The commit the ref now points at: 40 lower-case hex digits.
    pub commit: String,
}

impl CodeCommitPush {
    /// The registry's source-index key this push matches.
    pub fn source_keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = Vec::new();
        for url in &self.repository_urls {
            let key = source_key(url, Some(&self.reference));
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        keys
    }
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
    /// Whether an operation is still running (`*_IN_PROGRESS`).
    pub fn in_progress(&self) -> bool {
        self.status.ends_with("_IN_PROGRESS")
    }
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
         stacksync handles {:?}, {:?} and {:?}",
        CODECOMMIT.1, S3_OBJECT_CREATED.1, STACK_STATUS_CHANGE.1
    )]
    Unexpected {
        /// The event's `source`.
        event_source: String,
        /// The event's `detail-type`.
        detail_type: String,
    },
}

fn malformed(path: &str, message: impl Into<String>) -> EventError {
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
fn deserialize<T: DeserializeOwned>(value: Value, prefix: &str) -> Result<T, EventError> {
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

fn codecommit(detail: Value, region: &str) -> Result<Detail, EventError> {
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
    Ok(Detail::CodeCommitPush(CodeCommitPush {
        repository_urls: vec![format!("https://{path}"), format!("ssh://{path}")],
        repository_name: r.repository_name,
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

fn object_created(detail: Value) -> Result<ObjectCreated, EventError> {
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

fn stack_status_change(detail: Value) -> Result<StackStatusChange, EventError> {
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

/// The name in `arn:<partition>:cloudformation:<region>:<account>:stack/<name>/<id>`.
fn stack_name_of(arn: &str) -> Option<String> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::normalize_url;

    /// An edit of a fixture's JSON.
    type Edit = fn(&mut Value);

    fn fixture(name: &str) -> &'static str {
        match name {
            "codecommit-reference-updated" => {
                include_str!("../../tests/fixtures/events/codecommit-reference-updated.json")
            }
            "codecommit-tag-created" => {
                include_str!("../../tests/fixtures/events/codecommit-tag-created.json")
            }
            "codecommit-reference-deleted" => {
                include_str!("../../tests/fixtures/events/codecommit-reference-deleted.json")
            }
            "s3-object-created" => {
                include_str!("../../tests/fixtures/events/s3-object-created.json")
            }
            "cloudformation-stack-status-change" => {
                include_str!("../../tests/fixtures/events/cloudformation-stack-status-change.json")
            }
            other => panic!("no fixture {other}"),
        }
    }

    fn event(name: &str) -> AwsEvent {
        parse_event(fixture(name).as_bytes()).unwrap()
    }

    fn edited(name: &str, edit: impl FnOnce(&mut Value)) -> Result<AwsEvent, EventError> {
        let mut value: Value = serde_json::from_str(fixture(name)).unwrap();
        edit(&mut value);
        from_value(value)
    }

    fn path_of(result: Result<AwsEvent, EventError>) -> String {
        match result {
            Err(EventError::Malformed { path, .. }) => path,
            other => panic!("expected Malformed, got {other:?}"),
        }
    }

    #[test]
    fn a_codecommit_branch_update_is_a_push_with_both_clone_urls() {
        let e = event("codecommit-reference-updated");
        assert_eq!(e.id, "3b1f0f2a-6b1e-4e0c-9a0d-7c3c0f4b5a61");
        assert_eq!(e.account, "123456789012");
        assert_eq!(e.region, "eu-west-1");
        let Detail::CodeCommitPush(push) = e.detail else {
            panic!("{:?}", e.detail)
        };
        assert_eq!(push.repository_name, "platform-infra");
        assert_eq!(push.reference, "refs/heads/main");
        assert_eq!(push.commit, "7f7ef5e3a9c24b1d8e6f5a4b3c2d1e0f9a8b7c6d");
        assert_eq!(
            push.repository_urls,
            [
                "https://git-codecommit.eu-west-1.amazonaws.com/v1/repos/platform-infra",
                "ssh://git-codecommit.eu-west-1.amazonaws.com/v1/repos/platform-infra",
            ]
        );
        // One repository, whichever URL the stack was registered with.
        assert_eq!(
            normalize_url(&push.repository_urls[0]),
            normalize_url(&push.repository_urls[1])
        );
        assert_eq!(
            push.source_keys(),
            ["git-codecommit.eu-west-1.amazonaws.com/v1/repos/platform-infra#main"]
        );
    }

    #[test]
    fn a_codecommit_tag_is_a_push_of_refs_tags() {
        let Detail::CodeCommitPush(push) = event("codecommit-tag-created").detail else {
            panic!()
        };
        assert_eq!(push.reference, "refs/tags/v1.2.0");
        // Without referenceFullName, the ref is built from type and name.
        let e = edited("codecommit-tag-created", |v| {
            v["detail"]
                .as_object_mut()
                .unwrap()
                .remove("referenceFullName");
        })
        .unwrap();
        let Detail::CodeCommitPush(push) = e.detail else {
            panic!()
        };
        assert_eq!(push.reference, "refs/tags/v1.2.0");
    }

    #[test]
    fn a_codecommit_deletion_is_ignored() {
        let e = event("codecommit-reference-deleted");
        assert_eq!(
            e.detail,
            Detail::Ignored {
                reason: "refs/heads/feature-x was deleted".into()
            }
        );
    }

    #[test]
    fn codecommit_urls_in_china_use_the_china_domain() {
        let e = edited("codecommit-reference-updated", |v| {
            v["region"] = "cn-north-1".into()
        })
        .unwrap();
        let Detail::CodeCommitPush(push) = e.detail else {
            panic!()
        };
        assert_eq!(
            push.repository_urls[0],
            "https://git-codecommit.cn-north-1.amazonaws.com.cn/v1/repos/platform-infra"
        );
    }

    #[test]
    fn bad_codecommit_fields_are_reported_with_their_path() {
        let cases: [(Edit, &str); 4] = [
            (
                |v| v["detail"]["commitId"] = "7f7ef5e3EXAMPLE".into(),
                "detail.commitId",
            ),
            (
                |v| {
                    v["detail"].as_object_mut().unwrap().remove("commitId");
                },
                "detail",
            ),
            (
                |v| v["detail"]["repositoryName"] = "../x".into(),
                "detail.repositoryName",
            ),
            (|v| v["region"] = "eu-west-1/evil".into(), "region"),
        ];
        for (edit, path) in cases {
            assert_eq!(path_of(edited("codecommit-reference-updated", edit)), path);
        }
    }

    #[test]
    fn an_s3_object_created_event_gives_the_decoded_key_and_version() {
        let e = event("s3-object-created");
        let Detail::ObjectCreated(o) = e.detail else {
            panic!("{:?}", e.detail)
        };
        assert_eq!(o.bucket, "acme-stacksync-sources");
        assert_eq!(o.raw_key, "platform/network+stack/release%2B1.zip");
        assert_eq!(o.key, "platform/network stack/release+1.zip");
        assert_eq!(
            o.version_id.as_deref(),
            Some("IYV3p45BT0ac8hjHg1houSdS1a.Mro8e")
        );
        assert_eq!(o.etag.as_deref(), Some("b1946ac92492d2347c6235b4d2611184"));
        assert_eq!(o.size, Some(48213));
        assert_eq!(o.reason.as_deref(), Some("PutObject"));
        assert_eq!(
            o.url(),
            "s3://acme-stacksync-sources/platform/network stack/release+1.zip"
        );
        assert_eq!(
            o.source_key(),
            "s3://acme-stacksync-sources/platform/network stack/release+1.zip#"
        );
    }

    #[test]
    fn bad_s3_fields_are_reported_with_their_path() {
        let cases: [(Edit, &str); 4] = [
            (
                |v| v["detail"]["object"]["key"] = 5.into(),
                "detail.object.key",
            ),
            (
                |v| v["detail"]["object"]["key"] = "".into(),
                "detail.object.key",
            ),
            (
                |v| v["detail"]["object"]["key"] = "%FF".into(),
                "detail.object.key",
            ),
            (
                |v| v["detail"]["bucket"]["name"] = "a/b".into(),
                "detail.bucket.name",
            ),
        ];
        for (edit, path) in cases {
            assert_eq!(path_of(edited("s3-object-created", edit)), path);
        }
    }

    #[test]
    fn a_stack_status_change_names_the_stack_from_its_arn() {
        let e = event("cloudformation-stack-status-change");
        let Detail::StackStatusChange(s) = e.detail else {
            panic!("{:?}", e.detail)
        };
        assert_eq!(s.stack_name, "acme-network");
        assert_eq!(
            s.stack_id,
            "arn:aws:cloudformation:eu-west-1:123456789012:stack/acme-network/5e3f7c20-1a2b-11ef-8c3d-0a1b2c3d4e5f"
        );
        assert_eq!(s.status, "UPDATE_ROLLBACK_COMPLETE");
        assert_eq!(
            s.status_reason.as_deref(),
            Some("The following resource(s) failed to update: [PrivateSubnetA]. ")
        );
        assert_eq!(
            s.client_request_token.as_deref(),
            Some("Console-UpdateStack-0d2c8a77-5a8e-4f5a-9f2b-6a1c3e4d5f60")
        );
        assert!(!s.in_progress());
    }

    #[test]
    fn an_empty_reason_and_token_are_absent_and_in_progress_is_told() {
        let e = edited("cloudformation-stack-status-change", |v| {
            v["detail"]["status-details"] =
                serde_json::json!({"status": "UPDATE_IN_PROGRESS", "status-reason": ""});
            v["detail"]["client-request-token"] = "".into();
        })
        .unwrap();
        let Detail::StackStatusChange(s) = e.detail else {
            panic!()
        };
        assert_eq!(s.status_reason, None);
        assert_eq!(s.client_request_token, None);
        assert!(s.in_progress());
    }

    #[test]
    fn stack_names_come_only_from_stack_arns() {
        let good = "arn:aws-cn:cloudformation:cn-north-1:123456789012:stack/a-b/uuid";
        assert_eq!(stack_name_of(good).as_deref(), Some("a-b"));
        for bad in [
            "",
            "acme-network",
            "arn:aws:s3:::bucket",
            "arn:aws:cloudformation:eu-west-1:123456789012:stackset/x:uuid",
            "arn:aws:cloudformation:eu-west-1:123456789012:stack/acme-network",
            "arn:aws:cloudformation:eu-west-1:123456789012:stack/acme-network/",
            "arn:aws:cloudformation:eu-west-1:123456789012:stack/1bad/uuid",
        ] {
            assert_eq!(stack_name_of(bad), None, "{bad}");
        }
        let path = path_of(edited("cloudformation-stack-status-change", |v| {
            v["detail"]["stack-id"] = "acme-network".into()
        }));
        assert_eq!(path, "detail.stack-id");
    }

    #[test]
    fn unknown_detail_types_and_spoofed_sources_are_refused() {
        let err = edited("s3-object-created", |v| {
            v["detail-type"] = "Object Deleted".into()
        })
        .unwrap_err();
        assert!(matches!(err, EventError::Unexpected { .. }));
        assert!(err.to_string().contains("\"Object Deleted\""), "{err}");
        // A custom event cannot use an aws.* source; one that copies the
        // detail-type under its own source is refused.
        let err = edited("s3-object-created", |v| v["source"] = "acme.custom".into()).unwrap_err();
        assert!(matches!(err, EventError::Unexpected { .. }), "{err}");
    }

    #[test]
    fn a_broken_envelope_is_malformed_with_its_path() {
        assert_eq!(path_of(parse_event(b"{")), ".");
        assert_eq!(path_of(parse_event(b"[]")), ".");
        let path = path_of(edited("s3-object-created", |v| {
            v.as_object_mut().unwrap().remove("detail-type");
        }));
        assert_eq!(path, ".");
        let path = path_of(edited("s3-object-created", |v| v["region"] = 1.into()));
        assert_eq!(path, "region");
    }
}
