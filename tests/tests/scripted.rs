//! The full reconcile state machine against a scripted CloudFormation, for
//! the stack states the emulator never produces. Registry, bucket and Git are real.
#![allow(clippy::unwrap_used)]
// tests: a failed unwrap is a failed test
// The run's future nests the interpreter, the steps and their ports deeply.
#![recursion_limit = "256"]

use stacksync::asl::{Outcome, Progress};
use stacksync::ports::{Blobs, PortError};
use stacksync::registry::{Entries, Leases, Specs};
use stacksync::stack_status::StackStatus as S;
use stacksync::status::{Phase, StallReason};
use stacksync_testkit::git::GitRepo;
use stacksync_testkit::harness::Harness;
use stacksync_testkit::scripted::{ScriptedCloudFormation, failed, failure_event, pending, ready};
use stacksync_testkit::unique_name;

const TEMPLATE: &[u8] = b"Resources:\n  Queue:\n    Type: AWS::SQS::Queue\n";

async fn harness(
    fake: &ScriptedCloudFormation,
    extra: &str,
) -> (Harness<ScriptedCloudFormation>, String) {
    harness_with(fake, TEMPLATE, extra).await
}

/// A harness whose stack's template is `template`.
async fn harness_with(
    fake: &ScriptedCloudFormation,
    template: &[u8],
    extra: &str,
) -> (Harness<ScriptedCloudFormation>, String) {
    let h = Harness::with_port("scripted", fake.clone()).await;
    let repo = GitRepo::new("scripted");
    repo.commit(&[("t.yaml", template)], "template");
    let name = unique_name("s").replace('-', "x");
    h.apply(&format!(
        "stacks:\n  - name: {name}\n    source: {{git: '{}', path: t.yaml}}\n    pollInterval: 5s\n{extra}",
        repo.file_url()
    ))
    .await;
    (h, name)
}

/// A change set CloudFormation found nothing in (it fails, saying so).
fn empty_change_set() -> stacksync::ports::ChangeSetInfo {
    failed(
        "The submitted information didn't contain changes. Submit different information to create a change set.",
    )
}

fn ok(outcome: &Outcome) -> bool {
    matches!(outcome, Outcome::Succeeded(_))
}

#[tokio::test(flavor = "multi_thread")]
async fn someone_elses_update_in_progress_is_polled_with_growing_intervals_then_updated() {
    let fake = ScriptedCloudFormation::with_stack(&[
        Some(S::UpdateInProgress),
        Some(S::UpdateInProgress),
        Some(S::UpdateInProgress),
        Some(S::UpdateInProgress),
        Some(S::UpdateComplete),
    ]);
    let (h, name) = harness(&fake, "").await;
    let outcome = h.reconcile(&name).await;
    assert!(ok(&outcome), "{outcome:?}");
    let waits = h.take_waits();
    assert_eq!(waits[..4], [5.0, 8.0, 12.0, 18.0], "{waits:?}");
    let ops = fake.operations();
    let create = ops.iter().position(|o| o == "CreateChangeSet").unwrap();
    assert!(
        ops[..create]
            .iter()
            .filter(|o| *o == "DescribeStacks")
            .count()
            >= 5,
        "{ops:?}"
    );
    assert!(
        fake.script()
            .calls
            .iter()
            .any(|c| c.starts_with("CreateChangeSet") && c.ends_with("Update"))
    );
    assert_eq!(h.entry(&name).await.status.phase, Phase::Ready);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rolled_back_create_is_deleted_and_created_again() {
    let fake = ScriptedCloudFormation::with_stack(&[Some(S::RollbackComplete)]);
    fake.script().after_execute = vec![Some(S::CreateInProgress), Some(S::CreateComplete)];
    let (h, name) = harness(&fake, "").await;
    let outcome = h.reconcile(&name).await;
    assert!(ok(&outcome), "{outcome:?}");
    let calls = fake.script().calls.clone();
    let delete = calls
        .iter()
        .position(|c| c.starts_with("DeleteStack"))
        .expect("deleted");
    let create = calls
        .iter()
        .position(|c| c.starts_with("CreateChangeSet"))
        .expect("created");
    assert!(delete < create, "{calls:?}");
    assert!(
        calls[create].ends_with("Create"),
        "a CREATE change set: {}",
        calls[create]
    );
    let entry = h.entry(&name).await;
    assert_eq!(entry.status.phase, Phase::Ready);
    assert_eq!(
        entry.status.stack.status.as_deref(),
        Some("CREATE_COMPLETE")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_rollback_is_continued_then_the_update_is_made() {
    let fake = ScriptedCloudFormation::with_stack(&[Some(S::UpdateRollbackFailed)]);
    let (h, name) = harness(&fake, "").await;
    let outcome = h.reconcile(&name).await;
    assert!(ok(&outcome), "{outcome:?}");
    let ops = fake.operations();
    let cont = ops
        .iter()
        .position(|o| o == "ContinueUpdateRollback")
        .expect("rollback continued");
    let create = ops
        .iter()
        .position(|o| o == "CreateChangeSet")
        .expect("then updated");
    assert!(cont < create, "{ops:?}");
    assert_eq!(h.entry(&name).await.status.phase, Phase::Ready);
}

#[tokio::test(flavor = "multi_thread")]
async fn delete_failed_is_retried_once_then_reported_with_the_resource_that_failed() {
    let fake = ScriptedCloudFormation::with_stack(&[Some(S::CreateComplete)]);
    {
        let mut s = fake.script();
        s.after_delete = vec![Some(S::DeleteInProgress), Some(S::DeleteFailed)];
        s.events = vec![failure_event(
            "Bucket",
            "DELETE_FAILED",
            "The bucket you tried to delete is not empty",
        )];
        // The operation's own events are asked for first; not served here
        // (as by the emulator), the stack's events give the reason.
        s.operations = vec![("DELETE_STACK".into(), "op-delete".into())];
    }
    let (h, name) = harness(&fake, "    destroyOnDelete: true\n").await;
    h.steps
        .registry
        .request_deletion(&name, stacksync::clock::now_millis())
        .await
        .unwrap();
    let outcome = h.reconcile(&name).await;
    assert!(matches!(&outcome, Outcome::Failed(_)), "{outcome:?}");
    assert_eq!(
        fake.operations()
            .iter()
            .filter(|o| *o == "DeleteStack")
            .count(),
        2
    );
    assert!(fake.operations().contains(&"DescribeEvents".to_owned()));
    let entry = h.entry(&name).await;
    assert_eq!(entry.status.phase, Phase::Failed);
    let message = entry.status.message.unwrap();
    assert!(
        message.contains("DELETE_FAILED")
            && message.contains("Bucket")
            && message.contains("not empty"),
        "{message}"
    );
    assert!(
        entry.deletion_requested_at.is_some(),
        "the entry stays until the stack is gone"
    );
    assert!(entry.lease.is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_change_set_failing_for_another_reason_fails_the_run_and_is_cleaned_up() {
    let fake = ScriptedCloudFormation::with_stack(&[Some(S::CreateComplete)]);
    fake.script().change_set = [
        pending(),
        failed("Template error: instance of Fn::GetAtt references undefined resource"),
    ]
    .into_iter()
    .collect();
    let (h, name) = harness(&fake, "").await;
    let outcome = h.reconcile(&name).await;
    assert!(matches!(&outcome, Outcome::Failed(_)), "{outcome:?}");
    assert!(
        fake.operations().contains(&"DeleteChangeSet".to_owned()),
        "cleaned up"
    );
    assert!(!fake.operations().contains(&"ExecuteChangeSet".to_owned()));
    let entry = h.entry(&name).await;
    assert_eq!(entry.status.phase, Phase::Failed);
    assert!(entry.status.message.unwrap().contains("undefined resource"));
    assert!(entry.status.run.change_set_name.is_some());
}

#[tokio::test(flavor = "multi_thread")]
async fn an_empty_change_set_is_success_and_is_deleted() {
    let fake = ScriptedCloudFormation::with_stack(&[Some(S::UpdateComplete)]);
    fake.script().change_set = [empty_change_set()].into_iter().collect();
    let (h, name) = harness(&fake, "").await;
    assert!(ok(&h.reconcile(&name).await));
    assert!(fake.operations().contains(&"DeleteChangeSet".to_owned()));
    assert!(!fake.operations().contains(&"ExecuteChangeSet".to_owned()));
    let entry = h.entry(&name).await;
    assert_eq!(entry.status.phase, Phase::Ready);
    assert!(entry.status.message.unwrap().contains("empty"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stack_left_rolled_back_at_the_applied_state_is_in_sync_without_a_change_set() {
    // Someone's update rolled back; Git's template is what the stack holds.
    let fake = ScriptedCloudFormation::with_stack(&[Some(S::UpdateRollbackComplete)]);
    fake.script().change_set = [empty_change_set()].into_iter().collect();
    let (h, name) = harness(&fake, "").await;
    // The first run knows nothing of the stack: a change set, found empty.
    assert!(ok(&h.reconcile(&name).await));
    let entry = h.entry(&name).await;
    assert_eq!(entry.status.phase, Phase::Ready);
    let seen = entry.status.applied.seen.expect("seen as the run left it");
    assert_eq!(seen.stack_status, "UPDATE_ROLLBACK_COMPLETE");
    let change_sets = |ops: &[String]| ops.iter().filter(|o| *o == "CreateChangeSet").count();
    assert_eq!(change_sets(&fake.operations()), 1);

    // The next run finds it as left: at the applied state, though not in a
    // COMPLETE status the shortcut trusts; the change-set step decides it is
    // in sync from the stack's status, and records it as seen again.
    assert!(ok(&h.reconcile(&name).await));
    assert_eq!(change_sets(&fake.operations()), 1, "no second change set");
    let entry = h.entry(&name).await;
    assert_eq!(entry.status.phase, Phase::Ready);
    assert_eq!(
        entry.status.message.as_deref(),
        Some("in sync: nothing to change")
    );
    assert!(entry.status.applied.seen.is_some());
}

#[tokio::test(flavor = "multi_thread")]
async fn throttling_is_retried_by_the_state_machine_and_the_run_succeeds() {
    let fake = ScriptedCloudFormation::with_stack(&[None]);
    fake.script().after_execute = vec![Some(S::CreateComplete)];
    fake.script().failures.insert(
        "DescribeStacks",
        std::iter::repeat_n(
            PortError::Transient("DescribeStacks: Throttling: Rate exceeded".into()),
            3,
        )
        .collect(),
    );
    let (h, name) = harness(&fake, "").await;
    let outcome = h.reconcile(&name).await;
    assert!(ok(&outcome), "{outcome:?}");
    let retries = h
        .events
        .lock()
        .unwrap()
        .iter()
        .filter(|e| matches!(e, Progress::TaskFailed { error, retry_in: Some(_), .. } if error.name == "StackSync.Transient"))
        .count();
    assert_eq!(retries, 3);
    assert_eq!(h.entry(&name).await.status.phase, Phase::Ready);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_killed_mid_way_records_the_failure_releases_the_lease_and_the_next_run_proceeds() {
    let fake = ScriptedCloudFormation::with_stack(&[None]);
    fake.script().after_execute = vec![Some(S::CreateComplete)];
    fake.script().failures.insert(
        "ExecuteChangeSet",
        [PortError::Refused(
            "ExecuteChangeSet: AccessDenied: not allowed".into(),
        )]
        .into_iter()
        .collect(),
    );
    let (h, name) = harness(&fake, "").await;
    let outcome = h.reconcile(&name).await;
    assert!(
        matches!(&outcome, Outcome::Failed(e) if e.name == "StackSync.ReconcileFailed"),
        "{outcome:?}"
    );
    let entry = h.entry(&name).await;
    assert!(entry.lease.is_none(), "released on the Catch path");
    assert_eq!(entry.status.phase, Phase::Failed);
    assert!(entry.status.message.unwrap().contains("AccessDenied"));
    assert!(
        entry.status.times.next_reconcile_at.is_some(),
        "a retry is scheduled"
    );

    // The next run takes the lease and finishes (the change set is re-used by name).
    fake.script().stack = [None].into_iter().collect();
    fake.script().change_set = [ready()].into_iter().collect();
    let outcome = h.reconcile(&name).await;
    assert!(ok(&outcome), "{outcome:?}");
    assert_eq!(h.entry(&name).await.status.phase, Phase::Ready);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_update_that_rolls_back_fails_with_the_first_failed_resource() {
    let fake = ScriptedCloudFormation::with_stack(&[Some(S::UpdateComplete)]);
    {
        let mut s = fake.script();
        s.after_execute = vec![
            Some(S::UpdateInProgress),
            Some(S::UpdateRollbackInProgress),
            Some(S::UpdateRollbackComplete),
        ];
        s.events = vec![failure_event(
            "Queue",
            "UPDATE_FAILED",
            "Resource handler returned message: \"Invalid value for VisibilityTimeout\"",
        )];
    }
    let (h, name) = harness(&fake, "").await;
    let outcome = h.reconcile(&name).await;
    assert!(matches!(&outcome, Outcome::Failed(_)), "{outcome:?}");
    let entry = h.entry(&name).await;
    assert_eq!(entry.status.phase, Phase::Failed);
    let message = entry.status.message.unwrap();
    assert!(
        message.contains("UPDATE_ROLLBACK_COMPLETE")
            && message.contains("Queue")
            && message.contains("VisibilityTimeout"),
        "{message}"
    );
    assert_eq!(
        entry.status.applied.last_applied_revision, None,
        "nothing was applied"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_that_finds_the_lease_held_ends_without_touching_anything() {
    let fake = ScriptedCloudFormation::with_stack(&[None]);
    let (h, name) = harness(&fake, "").await;
    h.steps
        .registry
        .acquire_lease(
            &name,
            "someone-else",
            std::time::Duration::from_secs(600),
            stacksync::clock::now_millis(),
        )
        .await
        .unwrap();
    let outcome = h.reconcile(&name).await;
    assert!(ok(&outcome), "{outcome:?}");
    assert!(fake.operations().is_empty(), "no CloudFormation call");
    let entry = h.entry(&name).await;
    assert_eq!(entry.lease.unwrap().owner, "someone-else");
    assert_eq!(entry.status.phase, Phase::Pending);
}

#[tokio::test(flavor = "multi_thread")]
async fn sources_that_cannot_be_read_fail_clearly_without_touching_the_stack() {
    let fake = ScriptedCloudFormation::with_stack(&[None]);
    let h = Harness::with_port("unsupported", fake.clone()).await;
    let private = unique_name("p").replace('-', "x");
    let archive = unique_name("a").replace('-', "x");
    let secret = "arn:aws:secretsmanager:us-east-1:111122223333:secret:git-token";
    let file = [
        "stacks:".to_owned(),
        format!("  - name: {private}"),
        format!("    source: {{git: 'https://example.invalid/r.git', path: t.yaml, credentialsSecret: '{secret}'}}"),
        format!("  - name: {archive}"),
        "    source: {s3: 's3://source-never-made/app.zip', path: t.yaml}".to_owned(),
    ]
    .join("\n");
    h.apply(&file).await;
    for (name, expected) in [
        (&private, "can't find the specified secret"),
        (&archive, "s3://source-never-made/app.zip"),
    ] {
        let outcome = h.reconcile(name).await;
        assert!(matches!(&outcome, Outcome::Failed(_)), "{outcome:?}");
        let entry = h.entry(name).await;
        assert_eq!(entry.status.phase, Phase::Failed);
        assert_eq!(
            entry.status.stall_reason,
            Some(StallReason::SourceUnavailable)
        );
        assert!(
            entry.status.message.clone().unwrap().contains(expected),
            "{:?}",
            entry.status.message
        );
        assert!(entry.lease.is_none());
    }
    assert!(fake.operations().is_empty(), "no CloudFormation call");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stack_left_in_review_is_cleaned_of_old_change_sets_then_created() {
    let fake = ScriptedCloudFormation::with_stack(&[Some(S::ReviewInProgress)]);
    fake.script().after_execute = vec![Some(S::CreateInProgress), Some(S::CreateComplete)];
    let (h, name) = harness(&fake, "").await;
    let outcome = h.reconcile(&name).await;
    assert!(ok(&outcome), "{outcome:?}");
    let calls = fake.script().calls.clone();
    let list = calls
        .iter()
        .position(|c| c.starts_with("ListChangeSets"))
        .expect("listed");
    let cleaned = calls
        .iter()
        .position(|c| c == "DeleteChangeSet stacksync-v1-left-over")
        .expect("the left-over change set is deleted");
    let create = calls
        .iter()
        .position(|c| c.starts_with("CreateChangeSet"))
        .unwrap();
    assert!(list < cleaned && cleaned < create, "{calls:?}");
    assert!(calls[create].ends_with("Create"), "{}", calls[create]);
    assert_eq!(h.entry(&name).await.status.phase, Phase::Ready);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rollback_that_stays_failed_is_reported_with_the_resource_that_failed() {
    let fake = ScriptedCloudFormation::with_stack(&[Some(S::UpdateRollbackFailed)]);
    {
        let mut s = fake.script();
        s.after_continue = vec![
            Some(S::UpdateRollbackInProgress),
            Some(S::UpdateRollbackFailed),
        ];
        s.events = vec![failure_event(
            "Table",
            "UPDATE_FAILED",
            "Resource handler returned message: the table is being modified",
        )];
        s.operations = vec![
            ("CONTINUE_ROLLBACK".into(), "op-continue".into()),
            ("UPDATE_STACK".into(), "op-update".into()),
        ];
    }
    let role = "arn:aws:iam::123456789012:role/cfn-exec";
    let (h, name) = harness(&fake, &format!("    roleArn: {role}\n")).await;
    let outcome = h.reconcile(&name).await;
    assert!(matches!(&outcome, Outcome::Failed(_)), "{outcome:?}");
    let ops = fake.operations();
    assert_eq!(
        ops.iter()
            .filter(|o| *o == "ContinueUpdateRollback")
            .count(),
        1,
        "{ops:?}"
    );
    for asked in ["DescribeEvents", "DescribeStackEvents"] {
        assert!(ops.contains(&asked.to_owned()), "{asked}: {ops:?}");
    }
    assert!(!ops.contains(&"CreateChangeSet".to_owned()), "{ops:?}");
    let entry = h.entry(&name).await;
    assert_eq!(entry.status.phase, Phase::Failed);
    let message = entry.status.message.unwrap();
    assert!(
        message.contains("still UPDATE_ROLLBACK_FAILED")
            && message.contains("Table")
            && message.contains("being modified"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn termination_protection_and_the_stack_policy_are_set_after_an_update_and_protection_is_lifted_to_delete()
 {
    let fake = ScriptedCloudFormation::with_stack(&[Some(S::CreateComplete)]);
    let extra = "    terminationProtection: true\n    destroyOnDelete: true\n    stackPolicy: {Statement: [{Effect: Deny, Action: 'Update:Replace', Principal: '*', Resource: '*'}]}\n";
    let (h, name) = harness(&fake, extra).await;
    assert!(ok(&h.reconcile(&name).await));
    let calls = fake.script().calls.clone();
    let executed = calls
        .iter()
        .position(|c| c.starts_with("ExecuteChangeSet"))
        .unwrap();
    let protected = calls
        .iter()
        .position(|c| *c == format!("UpdateTerminationProtection {name} true"))
        .expect("protection turned on");
    let policy = calls
        .iter()
        .position(|c| c.starts_with("SetStackPolicy"))
        .expect("policy set");
    assert!(executed < protected && executed < policy, "{calls:?}");

    // Removing the entry (destroyOnDelete) lifts the protection first.
    h.steps
        .registry
        .request_deletion(&name, stacksync::clock::now_millis())
        .await
        .unwrap();
    fake.script().calls.clear();
    assert!(ok(&h.reconcile(&name).await));
    let calls = fake.script().calls.clone();
    let lifted = calls
        .iter()
        .position(|c| *c == format!("UpdateTerminationProtection {name} false"))
        .expect("protection lifted");
    let deleted = calls
        .iter()
        .position(|c| c.starts_with("DeleteStack"))
        .unwrap();
    assert!(lifted < deleted, "{calls:?}");
    assert!(h.steps.registry.get(&name).await.unwrap().is_none());
}

/// Termination protection turned off and the policy replaced in the console
/// change no `LastUpdatedTime`: the next run, in sync otherwise, puts both
/// back without a change set, and says so.
#[tokio::test(flavor = "multi_thread")]
async fn protection_and_policy_changed_outside_stacksync_are_put_back_without_a_change_set() {
    let fake = ScriptedCloudFormation::with_stack(&[Some(S::CreateComplete)]);
    let extra = "    terminationProtection: true\n    stackPolicy: {Statement: [{Effect: Deny, Action: 'Update:Replace', Principal: '*', Resource: '*'}]}\n";
    let (h, name) = harness(&fake, extra).await;
    assert!(ok(&h.reconcile(&name).await));
    {
        let mut s = fake.script();
        s.termination_protection = false;
        s.stack_policy = Some(r#"{"Statement": [{"Effect": "Allow", "Action": "Update:*", "Principal": "*", "Resource": "*"}]}"#.into());
        s.calls.clear();
    }
    assert!(ok(&h.reconcile(&name).await));
    let calls = fake.script().calls.clone();
    assert!(
        calls.contains(&format!("UpdateTerminationProtection {name} true")),
        "{calls:?}"
    );
    assert!(
        calls.iter().any(|c| c.starts_with("SetStackPolicy")),
        "{calls:?}"
    );
    assert!(
        !calls.iter().any(|c| c.starts_with("CreateChangeSet")),
        "{calls:?}"
    );
    let message = h.entry(&name).await.status.message.unwrap_or_default();
    assert_eq!(
        message,
        "in sync: nothing to change; termination protection turned on, stack policy set"
    );
    // Once put back, nothing more is done.
    fake.script().calls.clear();
    assert!(ok(&h.reconcile(&name).await));
    let calls = fake.operations();
    assert!(
        !calls
            .iter()
            .any(|c| c == "UpdateTerminationProtection" || c == "SetStackPolicy"),
        "{calls:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_template_with_a_transform_is_deployed_with_auto_expand() {
    const SAM: &[u8] = b"Transform: AWS::Serverless-2016-10-31\nResources:\n  Table:\n    Type: AWS::Serverless::SimpleTable\n";
    let fake = ScriptedCloudFormation::with_stack(&[None]);
    fake.script().after_execute = vec![Some(S::CreateInProgress), Some(S::CreateComplete)];
    let (h, name) = harness_with(&fake, SAM, "    capabilities: [CAPABILITY_AUTO_EXPAND]\n").await;
    let outcome = h.reconcile(&name).await;
    assert!(ok(&outcome), "{outcome:?}");
    let requests = fake.script().requests.clone();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].capabilities, ["CAPABILITY_AUTO_EXPAND"]);
    // The template went up as it is: CloudFormation runs the transform.
    let key = requests[0]
        .template_url
        .rsplit_once("/templates/")
        .unwrap()
        .1
        .split('?')
        .next()
        .unwrap();
    let stored = h
        .steps
        .blobs
        .get(&format!("templates/{key}"), 1 << 20)
        .await
        .unwrap();
    assert_eq!(stored, SAM);
}

fn count(ops: &[String], op: &str) -> usize {
    ops.iter().filter(|o| *o == op).count()
}

/// Seconds from the run's end to the next try (`None`: no next try).
fn next_try(entry: &stacksync::registry::StackEntry) -> Option<i64> {
    let status = &entry.status;
    Some((status.times.next_reconcile_at?.0 - status.times.last_reconcile_at?.0) / 1000)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_create_that_keeps_failing_is_made_again_once_then_left_until_forced() {
    let fake = ScriptedCloudFormation::with_stack(&[None]);
    fake.script().after_execute = vec![
        Some(S::CreateInProgress),
        Some(S::RollbackInProgress),
        Some(S::RollbackComplete),
    ];
    fake.script().after_delete = vec![Some(S::DeleteInProgress), None];
    let (h, name) = harness(&fake, "").await;

    // 1: the create fails and rolls back; tried again in retryInterval.
    assert!(!ok(&h.reconcile(&name).await));
    let entry = h.entry(&name).await;
    assert_eq!(entry.status.stall_reason, Some(StallReason::StackFailed));
    assert_eq!(next_try(&entry), Some(120));
    assert_eq!(entry.status.run.failures.as_ref().unwrap().count, 1);

    // 2: deleted, made anew, fails again; the wait doubles.
    assert!(!ok(&h.reconcile(&name).await));
    let ops = fake.operations();
    assert_eq!(
        (count(&ops, "DeleteStack"), count(&ops, "CreateChangeSet")),
        (1, 2)
    );
    let entry = h.entry(&name).await;
    assert_eq!(next_try(&entry), Some(240));
    let failures = entry.status.run.failures.clone().unwrap();
    assert!(failures.recreated && failures.count == 2, "{failures:?}");

    // 3: not made a third time at this revision: left as it failed, and
    // out of the queue.
    assert!(!ok(&h.reconcile(&name).await));
    let ops = fake.operations();
    assert_eq!(
        (count(&ops, "DeleteStack"), count(&ops, "CreateChangeSet")),
        (1, 2),
        "no delete, no change set: {:?}",
        fake.script().calls
    );
    let entry = h.entry(&name).await;
    assert_eq!(
        entry.status.stall_reason,
        Some(StallReason::FailedCreateStays)
    );
    assert_eq!(entry.status.times.next_reconcile_at, None);
    let message = entry.status.message.clone().unwrap();
    assert!(message.contains("ROLLBACK_COMPLETE"), "{message}");

    // 4: started again (a mark): ends at once, touching nothing.
    let before = fake.operations().len();
    assert!(ok(&h.reconcile(&name).await), "ends without a failure");
    assert_eq!(fake.operations().len(), before, "no CloudFormation call");
    assert_eq!(h.entry(&name).await.status.message.unwrap(), message);

    // 5: forced: deleted and made again.
    let forced = serde_json::json!({"stackId": name, "trigger": {"kind": "manual", "force": true}});
    assert!(!ok(&h.reconcile_with(&name, forced).await));
    let ops = fake.operations();
    assert_eq!(
        (count(&ops, "DeleteStack"), count(&ops, "CreateChangeSet")),
        (2, 3)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn on_failed_create_keep_leaves_the_failed_stack_for_inspection() {
    let fake = ScriptedCloudFormation::with_stack(&[None]);
    fake.script().after_execute = vec![Some(S::CreateInProgress), Some(S::CreateFailed)];
    let (h, name) = harness(&fake, "    onFailedCreate: keep\n").await;
    assert!(!ok(&h.reconcile(&name).await));
    let requests = fake.script().requests.clone();
    assert_eq!(
        requests[0].on_stack_failure,
        Some(stacksync::spec::OnStackFailure::DoNothing),
        "asked CloudFormation not to roll back"
    );
    assert!(!ok(&h.reconcile(&name).await));
    let ops = fake.operations();
    assert_eq!(count(&ops, "DeleteStack"), 0, "{ops:?}");
    assert_eq!(count(&ops, "CreateChangeSet"), 1);
    let entry = h.entry(&name).await;
    assert_eq!(
        entry.status.stall_reason,
        Some(StallReason::FailedCreateStays)
    );
    let message = entry.status.message.unwrap();
    assert!(
        message.contains("onFailedCreate: keep") && message.contains("CREATE_FAILED"),
        "says why: {message}"
    );
    assert_eq!(entry.status.times.next_reconcile_at, None);
}

/// The change set options of the spec reach CloudFormation as it names
/// them: `OnStackFailure` on a create, `IncludeNestedStacks`,
/// `ImportExistingResources`, and `DeploymentConfig` on every change set.
#[tokio::test(flavor = "multi_thread")]
async fn change_set_options_of_the_spec_reach_cloudformation() {
    use stacksync::spec::{DeploymentConfig, DeploymentMode, OnStackFailure};
    let fake = ScriptedCloudFormation::with_stack(&[None]);
    fake.script().after_execute = vec![Some(S::CreateInProgress), Some(S::CreateComplete)];
    let options = "    onStackFailure: DELETE\n    includeNestedStacks: true\n    importExistingResources: true\n";
    let (h, name) = harness(&fake, options).await;
    assert!(ok(&h.reconcile(&name).await));
    let request = fake.script().requests[0].clone();
    assert_eq!(
        (
            request.on_stack_failure,
            request.include_nested_stacks,
            request.import_existing_resources
        ),
        (Some(OnStackFailure::Delete), true, true)
    );

    let fake = ScriptedCloudFormation::with_stack(&[None]);
    fake.script().after_execute = vec![Some(S::CreateInProgress), Some(S::CreateComplete)];
    let (h, name) = harness(&fake, "    deploymentConfig: {mode: EXPRESS}\n").await;
    assert!(ok(&h.reconcile(&name).await));
    assert_eq!(
        fake.script().requests[0].deployment_config,
        Some(DeploymentConfig {
            mode: DeploymentMode::Express,
            disable_rollback: None
        })
    );
}

/// Where CloudFormation serves an operation's events (`DescribeEvents`),
/// the root cause comes from them: a validation that failed before anything
/// was deployed, which the stack's events never show (they say only that
/// resources were cancelled).
#[tokio::test(flavor = "multi_thread")]
async fn the_root_cause_is_taken_from_the_operations_events_where_cloudformation_serves_them() {
    use stacksync::ports::OperationEvent;
    let fake = ScriptedCloudFormation::with_stack(&[Some(S::UpdateComplete)]);
    {
        let mut s = fake.script();
        s.after_execute = vec![Some(S::UpdateInProgress), Some(S::UpdateRollbackComplete)];
        s.events = vec![failure_event(
            "Queue",
            "UPDATE_FAILED",
            "Resource update cancelled",
        )];
        s.operations = vec![
            ("ROLLBACK".into(), "op-rollback".into()),
            ("UPDATE_STACK".into(), "op-update".into()),
        ];
        s.operation_events = Some(vec![
            OperationEvent {
                kind: "STACK_EVENT".into(),
                logical_id: Some("Queue".into()),
                reason: Some("Resource update cancelled".into()),
                ..OperationEvent::default()
            },
            OperationEvent {
                kind: "VALIDATION_ERROR".into(),
                reason: Some("#/VisibilityTimeout: expected maximum: 43200".into()),
                validation: Some("PROPERTY_VALIDATION".into()),
                path: Some("/Resources/Queue/Properties/VisibilityTimeout".into()),
                ..OperationEvent::default()
            },
        ]);
    }
    let (h, name) = harness(&fake, "").await;
    assert!(!ok(&h.reconcile(&name).await));
    let message = h.entry(&name).await.status.message.unwrap();
    assert!(
        message.contains(
            "validation PROPERTY_VALIDATION failed at /Resources/Queue/Properties/VisibilityTimeout: #/VisibilityTimeout: expected maximum: 43200"
        ) && !message.contains("cancelled"),
        "{message}"
    );
    assert!(fake.operations().contains(&"DescribeEvents".to_owned()));
}

/// `approval: onReplace`, through the state machine: a change set that only
/// modifies runs at once; one that replaces a resource waits for a person
/// (answered here through the registry, as `stacksync approve` answers a
/// local run) and then runs.
#[tokio::test(flavor = "multi_thread")]
async fn on_replace_waits_for_a_replacement_and_not_for_a_plain_modify() {
    use stacksync::ports::ResourceChange;
    let row = |replacement: &str| ResourceChange {
        action: "Modify".into(),
        logical_id: "Queue".into(),
        resource_type: "AWS::SQS::Queue".into(),
        physical_id: None,
        replacement: Some(replacement.into()),
        changed: vec!["Properties.QueueName".into()],
    };
    let fake = ScriptedCloudFormation::with_stack(&[Some(S::UpdateComplete)]);
    fake.script().changes = vec![row("False")];
    let (h, name) = harness(&fake, "    approval: onReplace\n").await;
    assert!(ok(&h.reconcile(&name).await), "a modify runs at once");
    assert!(h.entry(&name).await.status.approval.records.is_empty());

    let fake = ScriptedCloudFormation::with_stack(&[Some(S::UpdateComplete)]);
    fake.script().changes = vec![row("True")];
    let (h, name) = harness(&fake, "    approval: onReplace\n").await;
    let (outcome, ()) = tokio::join!(h.reconcile(&name), async {
        let awaiting = h.awaiting(&name).await;
        assert!(awaiting.why.contains("replaces Queue"), "{}", awaiting.why);
        assert!(!fake.operations().contains(&"ExecuteChangeSet".to_owned()));
        h.approve(&name, &awaiting).await;
    });
    assert!(ok(&outcome), "{outcome:?}");
    assert!(fake.operations().contains(&"ExecuteChangeSet".to_owned()));
}

/// A fleet's rollout (`rollout:`): a first wave's run that ends in sync on
/// a change set CloudFormation refuses as empty at once (the change-set
/// step ends it) starts the next wave's target, held until then.
#[tokio::test(flavor = "multi_thread")]
async fn an_empty_change_set_that_ends_a_wave_starts_the_next_one() {
    use stacksync::manifest::parse_manifest;
    use stacksync::ports::{RunStarter, TriggerKind};
    use stacksync::registry::plan::Writer;
    use stacksync::registry::targets::plan_with_fleets;
    use stacksync_testkit::parked::ChannelStarter;
    let fake = ScriptedCloudFormation::with_stack(&[Some(S::UpdateComplete)]);
    fake.script().nothing_to_change = true;
    let mut h = Harness::with_port("scripted-wave", fake.clone()).await;
    let (starter, mut starts) = ChannelStarter::new();
    h.steps.starter = RunStarter::by(std::sync::Arc::new(starter));
    let repo = GitRepo::new("scripted-wave");
    repo.commit(&[("t.yaml", TEMPLATE)], "template");
    let name = unique_name("w").replace('-', "x");
    let text = format!(
        "stacks:\n  - name: {name}\n    source: {{git: '{}', path: t.yaml}}\n    \
         assumeRoleArn: 'arn:aws:iam::{{account}}:role/deploy'\n    \
         targets: {{accounts: ['111122223333'], regions: [us-east-1, eu-west-1]}}\n    \
         rollout: {{maxConcurrent: 1, order: [us-east-1]}}\n",
        repo.file_url()
    );
    let desired = parse_manifest("stacks.yaml", &text).unwrap();
    let registry = &h.steps.registry;
    let now = stacksync::clock::now_millis();
    let units = Default::default();
    let plan = plan_with_fleets(&desired, &units, &[], false, None, Writer::Cli).unwrap();
    stacksync::registry::apply_plan(registry, &plan, now, |_| {})
        .await
        .unwrap();
    stacksync::triggers::fleets::record_fleets(registry, &desired, &units, false, now)
        .await
        .unwrap();
    let (east, west) = (
        format!("{name}-111122223333-us-east-1"),
        format!("{name}-111122223333-eu-west-1"),
    );
    // The stack is the first wave's target's own.
    fake.script().tags = Some(
        [
            (
                stacksync::ownership::INSTALLATION_TAG,
                stacksync::fakes::TEST_INSTALLATION,
            ),
            (stacksync::ownership::ENTRY_TAG, east.as_str()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect(),
    );
    assert!(ok(&h.reconcile(&west).await));
    assert!(h.entry(&west).await.status.inputs.held_by_rollout.is_some());
    let outcome = h.reconcile(&east).await;
    assert!(
        ok(&outcome),
        "{outcome:?}: {:?}",
        h.entry(&east).await.status.message
    );
    let states = h.take_states();
    assert!(!states.contains(&"PollStatus".to_owned()), "{states:?}");
    let entry = h.entry(&east).await;
    assert_eq!(entry.status.phase, Phase::Ready);
    assert!(!fake.operations().contains(&"ExecuteChangeSet".to_owned()));
    let (started, trigger) = starts.try_recv().expect("the next wave started");
    assert_eq!((started, trigger.kind), (west, TriggerKind::Rollout));
}

/// A run the change-set step ends in sync (CloudFormation refuses the
/// change set as empty at once) publishes the stack's outputs
/// (`publish:`), as any run that ends `Ready`: the change-set function
/// may write them (the IAM test records the calls).
#[tokio::test(flavor = "multi_thread")]
async fn a_run_the_change_set_step_ends_in_sync_publishes_the_outputs() {
    let fake = ScriptedCloudFormation::with_stack(&[Some(S::UpdateComplete)]);
    {
        let mut s = fake.script();
        s.nothing_to_change = true;
        s.outputs = [("QueueUrl".to_owned(), "https://queue".to_owned())]
            .into_iter()
            .collect();
    }
    let name_path = unique_name("p").replace('-', "x");
    let (h, name) = harness(
        &fake,
        &format!("    publish: {{ssm: '/published/{name_path}/{{output}}'}}\n"),
    )
    .await;
    let outcome = h.reconcile(&name).await;
    assert!(
        ok(&outcome),
        "{outcome:?}: {:?}",
        h.entry(&name).await.status.message
    );
    assert!(!h.take_states().contains(&"PollStatus".to_owned()));
    assert_eq!(
        fake.script()
            .published
            .get(&format!("/published/{name_path}/QueueUrl"))
            .map(String::as_str),
        Some("https://queue")
    );
    // The output renamed (someone's update outside stacksync): a forced run,
    // ended in sync by the change-set step, deletes the old parameter.
    fake.script().outputs = [("QueueArn".to_owned(), "arn:queue".to_owned())]
        .into_iter()
        .collect();
    let forced = serde_json::json!({"stackId": name, "trigger": {"kind": "manual", "force": true}});
    let outcome = h.reconcile_with(&name, forced).await;
    assert!(
        ok(&outcome),
        "{outcome:?}: {:?}",
        h.entry(&name).await.status.message
    );
    let published = fake.script().published.clone();
    assert_eq!(
        published.keys().cloned().collect::<Vec<_>>(),
        [format!("/published/{name_path}/QueueArn")],
        "{published:?}"
    );
}
