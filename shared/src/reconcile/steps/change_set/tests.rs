use super::super::testing::*;
use super::*;
use crate::fakes::ScriptedCloudFormation;
use crate::stack_status::StackStatus as S;

/// A run brought to the change-set step, the stack answering `statuses`.
async fn at_change_set(
    statuses: &[Option<S>],
    extra: impl FnOnce(&mut StackEntry),
) -> (Test, RunState) {
    let t = Test::with(ScriptedCloudFormation::with_stack(statuses), extra).await;
    let state = t.steps.artifact_fetch(t.input("run-1")).await.unwrap();
    let state = t.steps.template_upload(state).await.unwrap();
    (t, state)
}

#[tokio::test]
async fn an_attached_role_the_installation_may_pass_needs_no_naming_and_another_is_refused() {
    for (attached, refused) in [
        ("arn:aws:iam::123456789012:role/deploy-orders", false),
        ("arn:aws:iam::123456789012:role/cdk-exec", true),
    ] {
        let (mut t, state) = at_change_set(&[Some(S::UpdateComplete)], |_| {}).await;
        t.cfn.script().role_arn = Some(attached.into());
        t.steps.config.policy = crate::ownership::InstallationPolicy {
            service_roles: Some(vec!["arn:aws:iam::123456789012:role/deploy-*".into()]),
            ..Default::default()
        };
        match t.steps.change_set(state).await {
            Err(e) if refused => {
                assert_eq!(e.name(), "StackSync.Stalled.NotAllowed");
                assert!(e.message().contains(attached), "{}", e.message());
                assert!(t.cfn.script().requests.is_empty(), "no change set");
            }
            Ok(state) if !refused => {
                assert_eq!(state.wait.on, Some(WaitOn::ChangeSet));
                assert_eq!(t.cfn.script().requests[0].role_arn, None);
            }
            other => panic!("{attached}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn no_stack_gets_a_create_change_set_with_the_spec_settings() {
    let (t, state) = at_change_set(&[None], |e| {
        e.spec.role_arn = Some("arn:aws:iam::123456789012:role/cfn".into());
        e.spec.tags.insert("team".into(), "orders".into());
    })
    .await;
    let state = t.steps.change_set(state).await.unwrap();
    assert_eq!(
        (state.next, state.wait.on, state.wait.seconds),
        (Next::Wait, Some(WaitOn::ChangeSet), 5)
    );
    let request = t.cfn.script().requests[0].clone();
    assert_eq!(request.kind, ChangeSetKind::Create);
    assert_eq!(
        Some(request.change_set_name.as_str()),
        state.change_set_name()
    );
    assert_eq!(
        request.role_arn.as_deref(),
        Some("arn:aws:iam::123456789012:role/cfn")
    );
    // The spec's tags, and the two that say whose the stack is.
    let tags: Vec<(&str, &str)> = request
        .tags
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        tags,
        [
            ("stacksync:entry", "orders"),
            ("stacksync:installation", "stacksync-test"),
            ("team", "orders")
        ]
    );
    assert!(
        request
            .template_url
            .starts_with("https://bucket.s3.us-east-1.amazonaws.com/templates/")
    );
}

/// A template that fits a `TemplateBody` goes as one: the very bytes
/// template-upload checked, with nothing for CloudFormation to read from
/// the bucket.
#[tokio::test]
async fn a_template_that_fits_is_sent_as_the_checked_body() {
    let (t, state) = at_change_set(&[None], |_| {}).await;
    t.steps.change_set(state).await.unwrap();
    let request = t.cfn.script().requests[0].clone();
    assert_eq!(
        request.template_body.as_deref().map(str::as_bytes),
        Some(TEMPLATE)
    );
}

/// Written over after template-upload checked it: refused before any
/// change set, as parameters are; the next run stores it again.
#[tokio::test]
async fn a_template_overwritten_after_it_was_checked_is_refused_before_any_change_set() {
    let (t, state) = at_change_set(&[None], |_| {}).await;
    let key = state.uploaded.clone().unwrap().template_key;
    t.steps.blobs.inner.put(&key, b"Resources: {Evil: {}}");
    match t.steps.change_set(state).await.unwrap_err() {
        StepError::Stalled { reason, message } => {
            assert_eq!(reason, StallReason::ArtifactUnavailable);
            assert!(
                message.contains("no longer holds the template") && message.contains(&key),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(t.cfn.script().requests.is_empty(), "no change set made");
}

/// One too large for a `TemplateBody` goes by its URL, pinned to the
/// version template-upload checked: an object written there since is not
/// what CloudFormation reads (where it honours `versionId`: TESTING.md).
#[tokio::test]
async fn a_template_too_large_for_a_body_is_read_by_its_pinned_url() {
    let t = Test::with(ScriptedCloudFormation::with_stack(&[None]), |_| {}).await;
    let mut large = TEMPLATE.to_vec();
    large.extend_from_slice(format!("Description: '{}'\n", "x".repeat(60_000)).as_bytes());
    t.steps
        .sources
        .commit(URL, "main", HEAD, &[("t.yaml", &large)]);
    let state = t.steps.artifact_fetch(t.input("run-1")).await.unwrap();
    let state = t.steps.template_upload(state).await.unwrap();
    let key = state.uploaded.clone().unwrap().template_key;
    let checked = state.uploaded.clone().unwrap().template_version.unwrap();
    let mut evil = b"Resources: {Evil: {}}\n".to_vec();
    evil.extend_from_slice(format!("Description: '{}'\n", "y".repeat(60_000)).as_bytes());
    t.steps.blobs.inner.put(&key, &evil);
    t.steps.change_set(state).await.unwrap();
    let request = t.cfn.script().requests[0].clone();
    assert_eq!(request.template_body, None);
    assert!(
        request
            .template_url
            .ends_with(&format!("/{key}?versionId={checked}")),
        "{}",
        request.template_url
    );
    assert_eq!(
        t.steps.blobs.inner.version(&key, &checked).as_deref(),
        Some(large.as_slice())
    );
}

#[tokio::test]
async fn parameters_overwritten_after_they_were_stored_are_refused_before_any_change_set() {
    let (t, state) = at_change_set(&[None], |_| {}).await;
    let key = state.uploaded.clone().unwrap().parameters_key.unwrap();
    t.steps.blobs.inner.put(&key, br#"{"Admin":"true"}"#);
    let err = t.steps.change_set(state).await.unwrap_err();
    match err {
        StepError::Stalled { reason, message } => {
            assert_eq!(reason, StallReason::ArtifactUnavailable);
            assert!(
                message.contains("no longer holds") && message.contains(&key),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(t.cfn.script().requests.is_empty(), "no change set made");
}

#[tokio::test]
async fn a_stack_left_in_review_is_cleaned_of_other_change_sets_first() {
    let (t, state) = at_change_set(&[Some(S::ReviewInProgress)], |_| {}).await;
    t.steps.change_set(state).await.unwrap();
    assert_eq!(
        t.cfn.operations(),
        [
            "DescribeStacks",
            "ListChangeSets",
            "DeleteChangeSet",
            "CreateChangeSet"
        ]
    );
    // Only stacksync's own: someone else's change set survives.
    let calls = t.cfn.script().calls.clone();
    assert!(calls.contains(&"DeleteChangeSet stacksync-v1-left-over".to_owned()));
    assert!(
        !calls.iter().any(|c| c.contains("someone-elses")),
        "{calls:?}"
    );
}

#[tokio::test]
async fn a_failed_rollback_is_continued_once_then_reported_with_the_failed_resource() {
    let (t, state) = at_change_set(&[Some(S::UpdateRollbackFailed)], |_| {}).await;
    t.cfn.script().events = vec![crate::fakes::failure_event(
        "Table",
        "UPDATE_FAILED",
        "being modified",
    )];
    let state = t.steps.change_set(state).await.unwrap();
    assert_eq!(
        (state.wait.on, state.budgets.rollback_continues),
        (Some(WaitOn::Rollback), 1)
    );
    t.stack_answers(&[Some(S::UpdateRollbackFailed)]);
    let err = t.steps.change_set(state).await.unwrap_err();
    match err {
        StepError::Stalled { reason, message } => {
            assert_eq!(reason, StallReason::RollbackFailed);
            assert!(
                message.contains("Table") && message.contains("being modified"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_failed_create_goes_to_delete_for_recreation() {
    let (t, state) = at_change_set(&[Some(S::RollbackComplete)], |_| {}).await;
    let state = t.steps.change_set(state).await.unwrap();
    assert_eq!((state.next, state.budgets.recreate), (Next::Delete, true));
}

#[tokio::test]
async fn a_ready_change_set_is_executed_once_even_when_the_step_is_retried() {
    let (t, state) = at_change_set(&[Some(S::UpdateComplete)], |_| {}).await;
    let mut state = t.steps.change_set(state).await.unwrap();
    state.change_set.as_mut().unwrap().execute = true;
    let again = state.clone();
    let state = t.steps.change_set(state).await.unwrap();
    assert_eq!(state.wait.on, Some(WaitOn::Execution));
    t.steps.change_set(again).await.unwrap();
    let executes = t
        .cfn
        .operations()
        .iter()
        .filter(|o| *o == "ExecuteChangeSet")
        .count();
    assert_eq!(executes, 1, "{:?}", t.cfn.operations());
}

#[tokio::test]
async fn someone_elses_operation_is_waited_for_and_delete_failed_is_left_alone() {
    let (t, state) = at_change_set(&[Some(S::UpdateInProgress)], |_| {}).await;
    let state = t.steps.change_set(state).await.unwrap();
    assert_eq!(state.wait.on, Some(WaitOn::Stack));
    t.stack_answers(&[Some(S::DeleteFailed)]);
    let err = t.steps.change_set(state).await.unwrap_err();
    assert!(
        matches!(
            err,
            StepError::Stalled {
                reason: StallReason::StackBlocked,
                ..
            }
        ),
        "{err:?}"
    );
}

#[tokio::test]
async fn an_adopted_stack_is_previewed_recorded_and_logged_before_its_change_set_runs() {
    let (t, state) = at_change_set(&[Some(S::UpdateComplete)], |e| e.spec.adopt = true).await;
    t.cfn.script().tags = Some(std::collections::BTreeMap::from([(
        "team".into(),
        "theirs".into(),
    )]));
    t.cfn.script().changes = vec![crate::preview::ResourceChange {
        action: "Remove".into(),
        logical_id: "Theirs".into(),
        resource_type: "AWS::SNS::Topic".into(),
        physical_id: None,
        replacement: None,
        changed: Vec::new(),
    }];
    let mut state = t.steps.change_set(state).await.unwrap();
    assert!(state.change_set.as_ref().unwrap().adopting);
    assert_eq!(
        t.entry().status.findings.adoption,
        None,
        "not before it is ready"
    );
    state.change_set.as_mut().unwrap().execute = true;
    t.steps.change_set(state).await.unwrap();
    let adoption = t.entry().status.findings.adoption.expect("recorded");
    assert_eq!(adoption.changes[0].logical_id, "Theirs");
    assert_eq!(adoption.previous_tags["team"], "theirs");
    assert_eq!(adoption.run, "run-1");
    let ops = t.cfn.operations();
    let previewed = ops.iter().rposition(|o| o == "DescribeChangeSet").unwrap();
    let executed = ops.iter().position(|o| o == "ExecuteChangeSet").unwrap();
    assert!(previewed < executed, "previewed first: {ops:?}");
}
