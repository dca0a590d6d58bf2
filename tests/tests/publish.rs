//! Outputs published to SSM (`publish: {ssm: PATH}`), against the emulator
//! and the real state machine: a stack's outputs land as parameters of its
//! account and region when it ends `Ready`; a run that changes nothing
//! writes nothing (their versions stay); a changed output is written again,
//! a removed one deleted; a new path moves them; deleting the stack deletes
//! them. Recorded for the IAM conformance test (the `PublishOutputs` grants
//! under the fixture's `PublishParameterPath`, `/published/`).
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use stacksync::asl::Outcome;
use stacksync::registry::Entries;
use stacksync::status::Phase;
use stacksync_testkit::Emulator;
use stacksync_testkit::registry_world::World;

const TEMPLATE: &str = "Parameters:\n  Label: {Type: String, Default: a}\nResources:\n  Queue:\n    Type: AWS::SQS::Queue\nOutputs:\n  QueueUrl: {Value: !Ref Queue}\n  Label: {Value: !Ref Label}\n";
const WITHOUT_LABEL: &str = "Parameters:\n  Label: {Type: String, Default: a}\nResources:\n  Queue:\n    Type: AWS::SQS::Queue\nOutputs:\n  QueueUrl: {Value: !Ref Queue}\n";

/// A parameter's value and version, if it is there.
async fn parameter(name: &str) -> Option<(String, i64)> {
    let ssm = aws_sdk_ssm::Client::new(&Emulator::shared().sdk_config());
    let out = ssm.get_parameter().name(name).send().await.ok()?;
    let p = out.parameter()?;
    Some((p.value()?.to_owned(), p.version()))
}

async fn reconcile(w: &World, name: &str) {
    let outcome = w.h.reconcile(name).await;
    assert!(matches!(outcome, Outcome::Succeeded(_)), "{outcome:?}");
}

fn file(w: &World, name: &str, path: &str, label: &str) -> String {
    format!(
        "stacks:\n  - name: {name}\n    source: {{git: '{}', path: t.yaml, insecure: true}}\n    \
         destroyOnDelete: true\n    parameters: {{Label: {label}}}\n    publish: {{ssm: '{path}'}}\n",
        w.url
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn outputs_land_in_ssm_follow_their_changes_and_go_with_the_stack() {
    let w = World::new("publish").await;
    w.repo.commit(&[("t.yaml", TEMPLATE.as_bytes())], "t");
    let name = w.name("app");
    let path = format!("/published/{name}/{{output}}");
    let at = |output: &str| format!("/published/{name}/{output}");
    w.h.apply(&file(&w, &name, &path, "a")).await;

    reconcile(&w, &name).await;
    let entry = w.h.steps.registry.get(&name).await.unwrap().unwrap();
    assert_eq!(entry.status.phase, Phase::Ready);
    assert!(
        entry
            .status
            .message
            .as_deref()
            .is_some_and(|m| m.contains("outputs published to SSM: 2 written, 0 deleted")),
        "{:?}",
        entry.status.message
    );
    let (url, _) = parameter(&at("QueueUrl")).await.unwrap();
    assert!(url.contains("sqs"), "{url}");
    assert_eq!(parameter(&at("Label")).await, Some(("a".into(), 1)));

    // Nothing changed: nothing written.
    reconcile(&w, &name).await;
    assert_eq!(parameter(&at("Label")).await, Some(("a".into(), 1)));
    assert_eq!(parameter(&at("QueueUrl")).await.map(|p| p.1), Some(1));

    // A changed output is written again; the other is left alone.
    w.h.apply(&file(&w, &name, &path, "b")).await;
    reconcile(&w, &name).await;
    assert_eq!(parameter(&at("Label")).await, Some(("b".into(), 2)));
    assert_eq!(parameter(&at("QueueUrl")).await.map(|p| p.1), Some(1));

    // A removed output's parameter is deleted.
    w.repo
        .commit(&[("t.yaml", WITHOUT_LABEL.as_bytes())], "no label");
    reconcile(&w, &name).await;
    assert_eq!(parameter(&at("Label")).await, None);
    assert!(parameter(&at("QueueUrl")).await.is_some());

    // A new path: the stack is in sync, its outputs move.
    let moved = format!("/published/{name}/v2/{{output}}");
    w.h.apply(&file(&w, &name, &moved, "b")).await;
    reconcile(&w, &name).await;
    assert_eq!(parameter(&at("QueueUrl")).await, None);
    let moved_url = format!("/published/{name}/v2/QueueUrl");
    assert_eq!(parameter(&moved_url).await.map(|p| p.0), Some(url));

    // The stack deleted: its parameters go with it.
    w.h.apply("stacks: []\n").await;
    reconcile(&w, &name).await;
    assert!(w.h.steps.registry.get(&name).await.unwrap().is_none());
    assert_eq!(parameter(&moved_url).await, None);
}

/// A parameter of another account and region (through the role the tests
/// reach it by), if it is there.
async fn parameter_in(account_role: &str, region: &str, name: &str) -> Option<String> {
    let config = Emulator::shared().assumed_config(account_role).await;
    let config = config
        .to_builder()
        .region(aws_config::Region::new(region.to_owned()))
        .build();
    let out = aws_sdk_ssm::Client::new(&config)
        .get_parameter()
        .name(name)
        .send()
        .await
        .ok()?;
    out.parameter()?.value().map(str::to_owned)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stack_in_another_account_publishes_there_and_not_in_the_installations() {
    let w = World::new("publish-x").await;
    w.repo.commit(&[("t.yaml", TEMPLATE.as_bytes())], "t");
    let name = w.name("x");
    let role = "arn:aws:iam::210987654321:role/stacksync-target";
    let at = format!("/published/{name}/Label");
    w.h.apply(&format!(
        "stacks:\n  - name: {name}\n    source: {{git: '{}', path: t.yaml, insecure: true}}\n    \
         assumeRoleArn: {role}\n    region: eu-west-1\n    destroyOnDelete: true\n    \
         publish: {{ssm: '/published/{name}/{{output}}'}}\n",
        w.url
    ))
    .await;
    reconcile(&w, &name).await;
    assert_eq!(
        parameter_in(role, "eu-west-1", &at).await.as_deref(),
        Some("a"),
        "in the stack's account and region"
    );
    assert_eq!(parameter(&at).await, None, "not in the installation's");
    assert_eq!(
        parameter_in(role, "us-east-1", &at).await,
        None,
        "nor in another region"
    );

    w.h.apply("stacks: []\n").await;
    reconcile(&w, &name).await;
    assert_eq!(
        parameter_in(role, "eu-west-1", &at).await,
        None,
        "gone with the stack"
    );
}
