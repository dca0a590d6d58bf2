//! The approval function on the fakes: the registry in memory, the bucket
//! in memory, task tokens recorded.

use super::*;
use crate::fakes::{MemoryBlobs, RecordingTokens};
use crate::registry::memory::MemoryRegistry;
use crate::registry::sample_entry;
use crate::status::{Phase, Status};

const ALICE: &str = "arn:aws:sts::111122223333:assumed-role/approvers/alice";
const MALLORY: &str = "arn:aws:sts::111122223333:assumed-role/developers/mallory";
const APPROVERS: &str = "arn:aws:iam::111122223333:role/approvers";
const NOW: EpochMillis = 1_800_000_000_000;

type Handler = AnswerHandler<MemoryRegistry, MemoryBlobs, RecordingTokens>;

/// `orders`, whose change set `cs-1` waits in run `run-1`, its token kept
/// in the bucket; the installation's approvers `approvers`.
fn waiting(approvers: &[&str]) -> Handler {
    let registry = MemoryRegistry::new();
    let mut entry = sample_entry("orders", Status::default());
    entry.status.phase = Phase::AwaitingApproval;
    entry.status.approval.awaiting = Some(AwaitingApproval {
        change_set: "cs-1".into(),
        why: "approval: always".into(),
        changes: Vec::new(),
        more: 0,
        checks: Vec::new(),
        run: "run-1".into(),
        answer_url: Some("https://x.lambda-url.us-east-1.on.aws/".into()),
        legacy_token: None,
        requested_at: Timestamp(NOW - 1000),
        expires_at: Timestamp(NOW + 1000),
    });
    registry.insert(entry);
    let blobs = MemoryBlobs::new();
    blobs.put(&approval_token_key("orders", "run-1"), b"token-1");
    AnswerHandler {
        registry,
        blobs,
        tokens: RecordingTokens::default(),
        approvers: approvers.iter().map(|a| (*a).to_owned()).collect(),
    }
}

fn body(value: Value) -> Vec<u8> {
    value.to_string().into_bytes()
}

fn approve(change_set: &str) -> Vec<u8> {
    body(json!({"stack": "orders", "decision": "approve", "changeSet": change_set}))
}

#[tokio::test]
async fn an_approver_s_approval_is_recorded_verified_then_answers_the_token() {
    let h = waiting(&[APPROVERS]);
    let response = h.handle(Some(ALICE), &approve("cs-1"), NOW).await;
    assert_eq!(response.status, 200, "{}", response.body);
    assert_eq!(response.body["by"], ALICE);
    let verified: VerifiedAnswer = serde_json::from_slice(
        &h.blobs
            .object(&approval_answer_key("orders", "run-1"))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        verified,
        VerifiedAnswer {
            change_set: "cs-1".into(),
            approved: true,
            by: ALICE.into(),
            at: NOW,
            requested_at: NOW - 1000,
        }
    );
    let answered = h.tokens.answered();
    assert_eq!(answered.len(), 1);
    assert_eq!(answered[0].0, "token-1");
    assert!(
        matches!(&answered[0].1, Answer::Success { output } if output["by"] == ALICE),
        "{answered:?}"
    );
}

#[tokio::test]
async fn anyone_else_is_refused_recorded_and_nothing_is_answered() {
    let h = waiting(&[APPROVERS]);
    let response = h.handle(Some(MALLORY), &approve("cs-1"), NOW).await;
    assert_eq!(response.status, 403, "{}", response.body);
    let message = response.body["message"].as_str().unwrap();
    assert!(
        message.contains(MALLORY) && message.contains(APPROVERS) && !message.contains("cs-1"),
        "the refusal tells nothing of the wait: {message}"
    );
    assert!(h.tokens.answered().is_empty(), "nothing answered");
    assert!(
        h.blobs
            .object(&approval_answer_key("orders", "run-1"))
            .is_none(),
        "no verified record"
    );
    let status = h.registry.entry("orders").unwrap().status;
    assert!(
        status.approval.awaiting.is_some(),
        "the change set still waits"
    );
    let record = status.approval.records.last().unwrap();
    assert_eq!(
        (record.decision, record.by.as_deref()),
        (Decision::Refused, Some(MALLORY))
    );
    // A rejection is refused the same way; so is an approval naming
    // another change set (not told which one waits).
    let reject = body(json!({"stack": "orders", "decision": "reject", "reason": "no"}));
    assert_eq!(h.handle(Some(MALLORY), &reject, NOW).await.status, 403);
    let other = h.handle(Some(MALLORY), &approve("cs-0"), NOW).await;
    assert_eq!(other.status, 403, "{}", other.body);
    assert!(!other.body.to_string().contains("cs-1"), "{}", other.body);
    assert!(h.tokens.answered().is_empty());
    // With nothing waiting, still only "not an approver".
    let mut entry = h.registry.entry("orders").unwrap();
    entry.status.approval.awaiting = None;
    h.registry.insert(entry);
    let idle = h.handle(Some(MALLORY), &approve("cs-1"), NOW).await;
    assert_eq!(
        (idle.status, idle.body["error"].as_str()),
        (403, Some("NotAnApprover")),
        "{}",
        idle.body
    );
}

#[tokio::test]
async fn the_entry_s_approvers_replace_the_installation_s() {
    let h = waiting(&[APPROVERS]);
    let mut entry = h.registry.entry("orders").unwrap();
    entry.spec.approvers = vec!["arn:aws:iam::111122223333:role/developers".into()];
    h.registry.insert(entry);
    assert_eq!(
        h.handle(Some(ALICE), &approve("cs-1"), NOW).await.status,
        403
    );
    assert_eq!(
        h.handle(Some(MALLORY), &approve("cs-1"), NOW).await.status,
        200
    );
}

#[tokio::test]
async fn with_no_approvers_anywhere_nobody_may_approve_and_says_where_to_name_them() {
    let h = waiting(&[]);
    let response = h.handle(Some(ALICE), &approve("cs-1"), NOW).await;
    assert_eq!(response.status, 403);
    assert!(
        response.body["message"]
            .as_str()
            .unwrap()
            .contains("Approvers parameter"),
        "{}",
        response.body
    );
}

#[tokio::test]
async fn a_rejection_fails_the_task_with_the_verified_caller_and_the_reason() {
    let h = waiting(&[APPROVERS]);
    let reject = body(json!({"stack": "orders", "decision": "reject", "reason": "not today"}));
    let response = h.handle(Some(ALICE), &reject, NOW).await;
    assert_eq!(response.status, 200, "{}", response.body);
    let answered = h.tokens.answered();
    assert!(
        matches!(&answered[0].1, Answer::Failure { error, cause }
            if *error == rejection_error() && cause == &format!("by {ALICE}: not today")),
        "{answered:?}"
    );
}

#[tokio::test]
async fn bad_requests_are_refused_before_anything_is_read() {
    let h = waiting(&[APPROVERS]);
    for (caller, request, status, says) in [
        (None, approve("cs-1"), 403, "IAM-authorised"),
        (Some("alice"), approve("cs-1"), 403, "IAM-authorised"),
        (Some(ALICE), b"{not json".to_vec(), 400, "not an answer"),
        (
            Some(ALICE),
            body(
                json!({"stack": "orders", "decision": "approve", "changeSet": "cs-1", "by": ALICE}),
            ),
            400,
            "unknown field",
        ),
        (Some(ALICE), vec![b' '; MAX_BODY + 1], 400, "at most"),
        (Some(ALICE), approve("cs-0"), 409, "not cs-0"),
        (
            Some(ALICE),
            body(json!({"stack": "elsewhere", "decision": "approve", "changeSet": "cs-1"})),
            404,
            "not registered",
        ),
    ] {
        let response = h.handle(caller, &request, NOW).await;
        assert_eq!(response.status, status, "{caller:?}: {}", response.body);
        assert!(
            response.body["message"].as_str().unwrap().contains(says),
            "{says}: {}",
            response.body
        );
    }
    assert!(h.tokens.answered().is_empty());
}

#[tokio::test]
async fn a_wait_that_ended_says_so_and_a_wait_from_before_the_upgrade_is_answered() {
    let h = waiting(&[APPROVERS]);
    h.tokens.ended.lock().unwrap().push("token-1".into());
    let response = h.handle(Some(ALICE), &approve("cs-1"), NOW).await;
    assert_eq!(response.status, 409);
    assert!(
        response.body["message"]
            .as_str()
            .unwrap()
            .contains("no longer waiting")
    );

    // A token an older version left in the status (read, never shown).
    let h = waiting(&[APPROVERS]);
    h.blobs.delete(&approval_token_key("orders", "run-1"));
    let mut entry = h.registry.entry("orders").unwrap();
    entry
        .status
        .approval
        .awaiting
        .as_mut()
        .unwrap()
        .legacy_token = Some("old-token".into());
    h.registry.insert(entry);
    let response = h.handle(Some(ALICE), &approve("cs-1"), NOW).await;
    assert_eq!(response.status, 200, "{}", response.body);
    assert_eq!(h.tokens.answered()[0].0, "old-token");
}

#[test]
fn the_caller_is_read_from_the_authorizer_lambda_fills_in() {
    let event = json!({"requestContext": {"authorizer": {"iam": {"userArn": ALICE}}}});
    assert_eq!(caller_of(&event), Some(ALICE));
    assert_eq!(
        caller_of(&json!({"requestContext": {"authorizer": null}})),
        None
    );
}
