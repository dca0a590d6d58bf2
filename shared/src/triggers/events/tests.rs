//! The events, from real-shaped payloads.
use super::detail::stack_name_of;
use super::*;
use crate::source::normalize_url;

/// An edit of a fixture's JSON.
type Edit = fn(&mut Value);

fn fixture(name: &str) -> &'static str {
    match name {
        "codecommit-reference-updated" => {
            include_str!("../../../../tests/fixtures/events/codecommit-reference-updated.json")
        }
        "codecommit-tag-created" => {
            include_str!("../../../../tests/fixtures/events/codecommit-tag-created.json")
        }
        "codecommit-reference-deleted" => {
            include_str!("../../../../tests/fixtures/events/codecommit-reference-deleted.json")
        }
        "s3-object-created" => {
            include_str!("../../../../tests/fixtures/events/s3-object-created.json")
        }
        "cloudformation-stack-status-change" => {
            include_str!(
                "../../../../tests/fixtures/events/cloudformation-stack-status-change.json"
            )
        }
        "cloudformation-drift-detection-status-change" => {
            include_str!(
                "../../../../tests/fixtures/events/cloudformation-drift-detection-status-change.json"
            )
        }
        "stepfunctions-execution-aborted" => {
            include_str!("../../../../tests/fixtures/events/stepfunctions-execution-aborted.json")
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
        [
            "git-codecommit.eu-west-1.amazonaws.com/v1/repos/platform-infra#refs/heads/main",
            "git-codecommit.eu-west-1.amazonaws.com/v1/repos/platform-infra#main"
        ]
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

#[test]
fn an_execution_that_ended_without_succeeding_names_its_stack_and_itself() {
    let e = event("stepfunctions-execution-aborted");
    let Detail::ExecutionEnded(ended) = e.detail else {
        panic!("{:?}", e.detail)
    };
    assert_eq!(
        (
            ended.name.as_str(),
            ended.stack.as_str(),
            ended.status.as_str()
        ),
        ("orders_manual_1a2b3c", "orders", "ABORTED")
    );
    for status in ["SUCCEEDED", "RUNNING"] {
        let e = edited("stepfunctions-execution-aborted", |v| {
            v["detail"]["status"] = status.into()
        });
        assert!(
            matches!(e.unwrap().detail, Detail::Ignored { .. }),
            "{status}"
        );
    }
    let no_input = edited("stepfunctions-execution-aborted", |v| {
        v["detail"]["input"] = Value::Null
    });
    assert_eq!(path_of(no_input), "detail.input");
    let not_ours = edited("stepfunctions-execution-aborted", |v| {
        v["detail"]["input"] = "{\"x\": 1}".into()
    });
    assert_eq!(path_of(not_ours), "detail.input");
    let bad_name = edited("stepfunctions-execution-aborted", |v| {
        v["detail"]["input"] = "{\"stackId\": \"../x\"}".into()
    });
    assert_eq!(path_of(bad_name), "detail.input.stackId");
}

/// A relayed push is read as a webhook's push is checked: URLs, a full
/// ref, a commit id; anything else is refused, naming the field.
#[test]
fn a_relayed_push_is_checked_field_by_field() {
    let event = |push: serde_json::Value| {
        serde_json::json!({
            "version": "0", "id": "e", "detail-type": "Registry Source Pushed", "source": "stacksync",
            "account": "123456789012", "time": "2026-11-26T00:00:00Z", "region": "us-east-1",
            "resources": [], "detail": {"installation": "stacksync", "push": push}
        })
    };
    let good = serde_json::json!({"repositoryUrls": ["https://git.example/a.git"], "reference": "refs/heads/main", "commit": "A".repeat(40)});
    let parsed = crate::triggers::events::from_value(event(good)).unwrap();
    let crate::triggers::events::Detail::RegistrySourcePushed(moved) = parsed.detail else {
        panic!("{parsed:?}")
    };
    assert_eq!(moved.commit, "a".repeat(40));
    for (bad, field) in [
        (
            serde_json::json!({"repositoryUrls": [], "reference": "refs/heads/main", "commit": "a".repeat(40)}),
            "repositoryUrls",
        ),
        (
            serde_json::json!({"repositoryUrls": ["u"], "reference": "main", "commit": "a".repeat(40)}),
            "reference",
        ),
        (
            serde_json::json!({"repositoryUrls": ["u"], "reference": "refs/heads/main", "commit": "HEAD"}),
            "commit",
        ),
        (serde_json::Value::Null, "push"),
    ] {
        let error = crate::triggers::events::from_value(event(bad))
            .unwrap_err()
            .to_string();
        assert!(error.contains(field), "{field}: {error}");
    }
}

#[test]
fn a_drift_detections_end_is_read_with_its_id_and_a_malformed_one_says_where() {
    let e = event("cloudformation-drift-detection-status-change");
    let Detail::DriftDetectionChange(change) = &e.detail else {
        panic!("{e:?}")
    };
    assert_eq!(change.stack_name, "acme-network");
    assert_eq!(change.detection_id, "7a1b2c3d-4e5f-11ef-9a8b-0a1b2c3d4e5f");
    assert_eq!(change.stack_drift.as_deref(), Some("DRIFTED"));
    assert!(change.ended());
    let running = edited("cloudformation-drift-detection-status-change", |v| {
        v["detail"]["status-details"]["detection-status"] = "DETECTION_IN_PROGRESS".into();
    })
    .unwrap();
    assert!(matches!(running.detail, Detail::DriftDetectionChange(ref c) if !c.ended()));
    let err = edited("cloudformation-drift-detection-status-change", |v| {
        v["detail"]["stack-drift-detection-id"] = "".into();
    })
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "malformed EventBridge event at detail.stack-drift-detection-id: expected the detection's id"
    );
    let err = edited("cloudformation-drift-detection-status-change", |v| {
        v["detail"]["stack-id"] = "acme-network".into();
    })
    .unwrap_err();
    assert!(err.to_string().contains("detail.stack-id"), "{err}");
}
