//! Touch only what is yours: stacks stacksync did not make are refused
//! unless the entry adopts them, through the reconcile state machine
//! against the emulator's CloudFormation, DynamoDB and S3 (and the scripted
//! CloudFormation for a failed stack the emulator cannot make).
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test
#![recursion_limit = "256"]

use std::collections::BTreeMap;

use serde_json::Value;
use stacksync::asl::{AslError, Outcome, TaskRunner};
use stacksync::registry::Entries;
use stacksync::stack_status::StackStatus as S;
use stacksync::status::{Phase, StallReason};
use stacksync_testkit::backend::Backend;
use stacksync_testkit::git::GitRepo;
use stacksync_testkit::harness::Harness;
use stacksync_testkit::scripted::ScriptedCloudFormation;
use stacksync_testkit::{Emulator, unique_name};

const THEIRS: &str = r#"{"Resources": {"Theirs": {"Type": "AWS::SNS::Topic"}}}"#;
const OURS: &[u8] = b"Resources:\n  Queue: {Type: AWS::SQS::Queue}\n";

fn ok(outcome: &Outcome) -> bool {
    matches!(outcome, Outcome::Succeeded(_))
}

async fn resources_of(backend: Backend, name: &str) -> Vec<String> {
    let out = backend
        .cloudformation()
        .list_stack_resources()
        .stack_name(name)
        .send()
        .await
        .unwrap();
    out.stack_resource_summaries()
        .iter()
        .map(|r| r.logical_resource_id().unwrap_or("").to_owned())
        .collect()
}

async fn a_stack_stacksync_did_not_make_is_refused_unless_the_entry_adopts_it(backend: Backend) {
    let name = unique_name("theirs").replace('-', "x");
    let cfn = backend.cloudformation();
    cfn.create_stack()
        .stack_name(&name)
        .template_body(THEIRS)
        .send()
        .await
        .unwrap();
    assert_eq!(
        backend.settled(&name).await.as_deref(),
        Some("CREATE_COMPLETE")
    );
    let repo = GitRepo::new("ownership");
    repo.commit(&[("t.yaml", OURS)], "ours");
    let h = backend.harness("ownership").await;
    let entry = |adopt: bool| {
        format!(
            "stacks:\n  - name: {name}\n    source: {{git: '{}', path: t.yaml}}\n    adopt: {adopt}\n",
            repo.file_url()
        )
    };

    h.apply(&entry(false)).await;
    assert!(!ok(&h.reconcile(&name).await));
    let status = h.entry(&name).await.status;
    assert_eq!(status.stall_reason, Some(StallReason::NotOwned));
    let message = status.message.unwrap();
    assert!(
        message.contains("it was not made by stacksync") && message.contains("adopt: true"),
        "{message}"
    );
    assert_eq!(
        resources_of(backend, &name).await,
        ["Theirs"],
        "left as it was"
    );

    // Adopted on purpose: previewed first, then updated to the template,
    // and tagged as the entry's.
    h.apply(&entry(true)).await;
    assert!(ok(&h.reconcile(&name).await));
    let status = h.entry(&name).await.status;
    assert_eq!(status.phase, Phase::Ready);
    let adoption = status.findings.adoption.expect("the preview is recorded");
    let rows: Vec<String> = adoption
        .changes
        .iter()
        .map(|c| format!("{} {}", c.action, c.logical_id))
        .collect();
    assert_eq!(
        rows,
        ["Add Queue", "Remove Theirs"],
        "what it would do, before it did"
    );
    assert!(adoption.stack_id.contains(&name), "{}", adoption.stack_id);
    assert!(
        adoption.previous_tags.is_empty(),
        "it had no stacksync tags"
    );
    assert_eq!(resources_of(backend, &name).await, ["Queue"]);
    let tags = backend.stack_tags(&name).await;
    assert_eq!(tags["stacksync:entry"], name);
    assert_eq!(tags["stacksync:installation"], h.steps.registry.table());
}

async fn a_stack_made_anew_by_someone_else_is_not_deleted_with_the_entry(backend: Backend) {
    let name = unique_name("gone").replace('-', "x");
    let repo = GitRepo::new("ownership-delete");
    repo.commit(&[("t.yaml", OURS)], "ours");
    let h = backend.harness("ownership-delete").await;
    h.apply(&format!(
        "stacks:\n  - name: {name}\n    source: {{git: '{}', path: t.yaml}}\n    destroyOnDelete: true\n",
        repo.file_url()
    ))
    .await;
    assert!(ok(&h.reconcile(&name).await));
    assert_eq!(backend.stack_tags(&name).await["stacksync:entry"], name);
    // Someone deletes it and makes their own of that name.
    let cfn = backend.cloudformation();
    cfn.delete_stack().stack_name(&name).send().await.unwrap();
    assert_eq!(backend.settled(&name).await, None);
    cfn.create_stack()
        .stack_name(&name)
        .template_body(THEIRS)
        .send()
        .await
        .unwrap();
    assert_eq!(
        backend.settled(&name).await.as_deref(),
        Some("CREATE_COMPLETE")
    );
    // The entry is removed (destroyOnDelete): the stack is not stacksync's.
    h.apply("stacks: []\n").await;
    assert!(ok(&h.reconcile(&name).await));
    assert!(
        h.steps.registry.get(&name).await.unwrap().is_none(),
        "entry removed"
    );
    assert_eq!(
        resources_of(backend, &name).await,
        ["Theirs"],
        "their stack stays"
    );
}

/// Someone's change set on a stack stacksync keeps (made in the console,
/// not executed) is not stacksync's to delete: runs that make, find empty
/// and delete their own change sets leave it as it was.
async fn someone_else_s_change_set_on_the_stack_is_left_alone(backend: Backend) {
    use aws_sdk_cloudformation::types::ChangeSetType;
    let name = unique_name("theirscs").replace('-', "x");
    let repo = GitRepo::new("ownership-cs");
    repo.commit(&[("t.yaml", OURS)], "ours");
    let h = backend.harness("ownership-cs").await;
    h.apply(&format!(
        "stacks:\n  - name: {name}\n    source: {{git: '{}', path: t.yaml}}\n",
        repo.file_url()
    ))
    .await;
    assert!(ok(&h.reconcile(&name).await));
    let cfn = backend.cloudformation();
    cfn.create_change_set()
        .stack_name(&name)
        .change_set_name("console-edit")
        .change_set_type(ChangeSetType::Update)
        .template_body(THEIRS)
        .send()
        .await
        .unwrap();
    let theirs = || async {
        backend
            .change_sets(&name)
            .await
            .into_iter()
            .find(|c| c.change_set_name() == Some("console-edit"))
            .map(|c| {
                (
                    c.status().map(|s| s.as_str().to_owned()),
                    c.execution_status().map(|s| s.as_str().to_owned()),
                )
            })
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let made = loop {
        match theirs().await {
            Some((Some(status), _))
                if status.ends_with("_PENDING") || status.ends_with("_IN_PROGRESS") => {}
            Some(made) => break made,
            None => {}
        }
        assert!(
            std::time::Instant::now() < deadline,
            "their change set is made"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert_eq!(made.1.as_deref(), Some("AVAILABLE"), "{made:?}");

    // A run in sync, then a forced one whose change set is found empty and
    // deleted: theirs stays, untouched.
    assert!(ok(&h.reconcile(&name).await));
    let forced = serde_json::json!({"stackId": name, "trigger": {"kind": "manual", "force": true}});
    assert!(ok(&h.reconcile_with(&name, forced).await));
    let message = h.entry(&name).await.status.message.unwrap_or_default();
    assert!(message.contains("the change set was empty"), "{message}");
    assert_eq!(theirs().await, Some(made), "their change set as it was");
    assert_eq!(resources_of(backend, &name).await, ["Queue"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_stack_stacksync_did_not_make_is_not_deleted_and_recreated() {
    let fake = ScriptedCloudFormation::with_stack(&[Some(S::RollbackComplete)]);
    fake.script().tags = Some(BTreeMap::new());
    let h = Harness::with_port("ownership-failed", fake.clone()).await;
    let repo = GitRepo::new("ownership-failed");
    repo.commit(&[("t.yaml", OURS)], "ours");
    let name = unique_name("f").replace('-', "x");
    h.apply(&format!(
        "stacks:\n  - name: {name}\n    source: {{git: '{}', path: t.yaml}}\n",
        repo.file_url()
    ))
    .await;
    assert!(!ok(&h.reconcile(&name).await));
    let ops = fake.operations();
    assert!(
        !ops.iter()
            .any(|o| o == "DeleteStack" || o == "CreateChangeSet"),
        "{ops:?}"
    );
    assert_eq!(
        h.entry(&name).await.status.stall_reason,
        Some(StallReason::NotOwned)
    );
}

/// Without `roleArn`, CloudFormation deploys under the role already on the
/// stack, unchecked by the installation's `iam:PassRole` limit: a run of an
/// entry that does not name the stack's role is refused.
#[tokio::test(flavor = "multi_thread")]
async fn a_stack_whose_service_role_the_entry_does_not_name_is_refused() {
    let repo = GitRepo::new("ownership-role");
    repo.commit(&[("t.yaml", OURS)], "ours");
    let h = Harness::new("ownership-role").await;
    let name = unique_name("role").replace('-', "x");
    let entry = |role: &str| {
        format!(
            "stacks:\n  - name: {name}\n    source: {{git: '{}', path: t.yaml}}\n{role}",
            repo.file_url()
        )
    };
    let role = "arn:aws:iam::123456789012:role/cfn-deploy";
    h.apply(&entry(&format!("    roleArn: {role}\n"))).await;
    assert!(ok(&h.reconcile(&name).await));

    // The entry drops its roleArn: the stack keeps the role.
    h.apply(&entry("    tags: {team: x}\n")).await;
    assert!(!ok(&h.reconcile(&name).await));
    let status = h.entry(&name).await.status;
    assert_eq!(status.stall_reason, Some(StallReason::ServiceRoleNotNamed));
    let message = status.message.unwrap();
    assert!(
        message.contains(role) && message.contains("Set roleArn"),
        "{message}"
    );
    assert!(
        !Emulator::shared()
            .stack_tags(&name)
            .await
            .contains_key("team"),
        "nothing deployed under the unnamed role"
    );
}

const SUBSTITUTED: &[u8] =
    b"Resources:\n  Queue: {Type: AWS::SQS::Queue}\n  Planted: {Type: AWS::SNS::Topic}\n";

/// Templates are stored by the hash of their bytes and re-used: an object
/// written over one in the bucket is found (compared byte for byte), written
/// again, and never deployed.
async fn a_template_object_overwritten_in_the_bucket_is_not_deployed(backend: Backend) {
    let repo = GitRepo::new("integrity");
    repo.commit(&[("t.yaml", OURS)], "ours");
    let h = backend.harness("integrity").await;
    let name = unique_name("tpl").replace('-', "x");
    h.apply(&format!(
        "stacks:\n  - name: {name}\n    source: {{git: '{}', path: t.yaml}}\n",
        repo.file_url()
    ))
    .await;
    assert!(ok(&h.reconcile(&name).await));
    let key = stacksync::naming::template_key(&stacksync::hash::sha256_hex(OURS), None);
    let bucket = h.steps.blobs.bucket().to_owned();
    put_object(backend, &bucket, &key, SUBSTITUTED).await;

    // A forced run: a change set of the same revision, its template re-used.
    let forced = serde_json::json!({"stackId": name, "trigger": {"kind": "manual", "force": true}});
    assert!(ok(&h.reconcile_with(&name, forced).await));
    assert_eq!(
        resources_of(backend, &name).await,
        ["Queue"],
        "the template from Git"
    );
    assert_eq!(backend.object(&bucket, &key).await, OURS, "written again");
}

/// The object is written over after template-upload compared it and before
/// the change set is made: the change-set step, which sends the template
/// as the change set's body, finds it no longer the bytes its key names
/// and refuses; nothing is deployed, and the next run stores it again and
/// deploys the template from Git. (A template too large for a body goes by
/// a URL pinned to the compared version: `change_set` unit tests.)
async fn a_template_overwritten_between_the_check_and_the_change_set_is_not_deployed(
    backend: Backend,
) {
    let repo = GitRepo::new("integrity-race");
    repo.commit(&[("t.yaml", OURS)], "ours");
    let h = backend.harness("integrity-race").await;
    let name = unique_name("race").replace('-', "x");
    h.apply(&format!(
        "stacks:\n  - name: {name}\n    source: {{git: '{}', path: t.yaml}}\n",
        repo.file_url()
    ))
    .await;
    let bucket = h.steps.blobs.bucket().to_owned();
    let runner = Overwriting {
        inner: h.functions(),
        backend,
        bucket: bucket.clone(),
    };
    let (_, outcome) = h.reconcile_by(&runner, &name).await;
    assert!(!ok(&outcome), "{outcome:?}");
    let key = stacksync::naming::template_key(&stacksync::hash::sha256_hex(OURS), None);
    assert_eq!(
        backend.object(&bucket, &key).await,
        SUBSTITUTED,
        "the race happened"
    );
    let status = h.entry(&name).await.status;
    let message = status.message.unwrap_or_default();
    assert!(
        message.contains("no longer holds the template") && message.contains(&key),
        "{message}"
    );
    assert_eq!(backend.stack_status(&name).await, None, "nothing deployed");

    assert!(ok(&h.reconcile(&name).await));
    assert_eq!(resources_of(backend, &name).await, ["Queue"], "from Git");
    assert_eq!(backend.object(&bucket, &key).await, OURS, "stored again");
}

/// Runs the steps, writing over the stored template as soon as
/// template-upload has returned.
struct Overwriting<R> {
    inner: R,
    backend: Backend,
    bucket: String,
}

impl<R: TaskRunner> TaskRunner for Overwriting<R> {
    async fn run(&self, resource: &str, input: Value) -> Result<Value, AslError> {
        let output = self.inner.run(resource, input).await?;
        if resource.ends_with(":template-upload")
            && let Some(key) = output["templateKey"].as_str()
        {
            put_object(self.backend, &self.bucket, key, SUBSTITUTED).await;
        }
        Ok(output)
    }
}

async fn put_object(backend: Backend, bucket: &str, key: &str, body: &[u8]) {
    backend
        .s3()
        .put_object()
        .bucket(bucket)
        .key(key)
        .body(body.to_vec().into())
        .send()
        .await
        .unwrap();
}

/// Issue "Real payloads and real templates" (8): a CREATE change set that
/// fails leaves its `REVIEW_IN_PROGRESS` placeholder, untagged where the
/// endpoint does not tag it. It is the entry's own (its StackId was
/// recorded when CreateChangeSet answered): the next run tries again and
/// says the change set's own cause, never `NotOwned`.
#[tokio::test(flavor = "multi_thread")]
async fn the_placeholder_of_a_failed_create_is_the_entry_s_own_and_its_cause_stays_shown() {
    let fake = ScriptedCloudFormation::with_stack(&[None]);
    fake.script().tags = Some(BTreeMap::new());
    let cause = "Template format error: Unresolved resource dependencies [Nope]";
    fake.script().change_set = [stacksync_testkit::scripted::failed(cause)]
        .into_iter()
        .collect();
    let h = Harness::with_port("placeholder", fake.clone()).await;
    let repo = GitRepo::new("placeholder");
    repo.commit(&[("t.yaml", OURS)], "ours");
    let name = unique_name("ph").replace('-', "x");
    h.apply(&format!(
        "stacks:\n  - name: {name}\n    source: {{git: '{}', path: t.yaml}}\n",
        repo.file_url()
    ))
    .await;
    assert!(!ok(&h.reconcile(&name).await));
    let first = h.entry(&name).await.status;
    assert_eq!(
        (
            first.stall_reason,
            first.message.as_deref().map(|m| m.contains(cause))
        ),
        (Some(StallReason::ChangeSetFailed), Some(true)),
        "{:?}",
        first.message
    );

    // The placeholder the failed change set left, untagged.
    fake.script().stack = [Some(S::ReviewInProgress)].into_iter().collect();
    assert!(!ok(&h.reconcile(&name).await));
    let second = h.entry(&name).await.status;
    assert_eq!(
        second.stall_reason,
        Some(StallReason::ChangeSetFailed),
        "the real cause, not NotOwned: {:?}",
        second.message
    );
    assert!(
        fake.operations()
            .iter()
            .filter(|o| *o == "CreateChangeSet")
            .count()
            == 2,
        "made again: {:?}",
        fake.operations()
    );
}

stacksync_testkit::scenarios!(
    a_stack_stacksync_did_not_make_is_refused_unless_the_entry_adopts_it,
    a_stack_made_anew_by_someone_else_is_not_deleted_with_the_entry,
    someone_else_s_change_set_on_the_stack_is_left_alone,
    a_template_object_overwritten_in_the_bucket_is_not_deployed,
    a_template_overwritten_between_the_check_and_the_change_set_is_not_deployed,
);
