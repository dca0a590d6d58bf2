//! The same reconcile definition, two interpreters: the local runner
//! (in-process handlers) and moto's Step Functions interpreter (Lambda tasks
//! forwarded to the real function binaries). Each scenario must end in the
//! same registry status both ways.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use serde_json::json;
use stacksync::asl::Outcome;
use stacksync::registry::Entries;
use stacksync::status::{Phase, Status};
use stacksync_testkit::git::{GitDaemon, GitRepo};
use stacksync_testkit::harness::Harness;
use stacksync_testkit::{Emulator, unique_name};

const V1: &[u8] = b"Resources:\n  Queue:\n    Type: AWS::SQS::Queue\n";
const V2: &[u8] =
    b"Resources:\n  Queue:\n    Type: AWS::SQS::Queue\n  Topic:\n    Type: AWS::SNS::Topic\n";

/// A status without what differs between two stacks by design: times, the
/// execution that wrote it, and the change set's name (it names the stack,
/// so that two stacks with one template never share one); its form is
/// checked instead.
fn comparable(s: &Status) -> Status {
    assert!(
        s.run.execution.is_some(),
        "the execution that wrote it: {s:?}"
    );
    let change_set = s.run.change_set_name.as_deref().map(|n| {
        let (prefix, hash) = n.rsplit_once('-').unwrap_or((n, ""));
        assert!(
            prefix.starts_with("stacksync-v") && hash.len() == 16,
            "change set name {n}"
        );
        prefix.to_owned()
    });
    let mut s = s.clone();
    s.times = stacksync::status::Times::default();
    s.stack.at = s.stack.at.map(|_| stacksync::status::Timestamp(0));
    s.run.execution = None;
    s.run.change_set_name = change_set;
    // Two stacks: their ids and times differ, and the deployed hash (it
    // covers the stack's tags, and `stacksync:entry` names each entry);
    // what else was seen may not.
    s.applied.seen = s.applied.seen.map(|seen| stacksync::seen::Seen {
        stack_id: String::new(),
        changed_at: stacksync::status::Timestamp(0),
        deployed_hash: String::new(),
        ..seen
    });
    s
}

#[tokio::test(flavor = "multi_thread")]
async fn create_update_no_op_and_delete_end_alike_in_both_interpreters() {
    let emulator = Emulator::shared();
    emulator.start_recording();
    let h = Harness::new("twice").await;
    let functions = emulator.deploy_functions(h.steps.registry.table(), h.steps.blobs.bucket());
    let repo = GitRepo::new("twice");
    let daemon = GitDaemon::serve(&repo);
    repo.commit(&[("t.yaml", V1)], "v1");
    let local = unique_name("l").replace('-', "x");
    let moto = unique_name("m").replace('-', "x");
    let entry = |name: &str| {
        format!(
            // git:// on 127.0.0.1: the deployed functions fetch it only
            // because the spec says so.
            "  - name: {name}\n    source: {{git: '{}', path: t.yaml, insecure: true}}\n    pollInterval: 1s\n    destroyOnDelete: true\n",
            daemon.url(&repo)
        )
    };
    h.apply(&format!("stacks:\n{}{}", entry(&local), entry(&moto)))
        .await;

    let run_both = |scenario: &'static str| {
        let (h, functions, local, moto) = (&h, &functions, local.clone(), moto.clone());
        async move {
            let outcome = h.reconcile(&local).await;
            assert!(
                matches!(outcome, Outcome::Succeeded(_)),
                "{scenario}, local: {outcome:?}"
            );
            let input = json!({"stackId": moto, "trigger": {"kind": "manual"}});
            let execution = unique_name(scenario);
            // The wait polls the emulator synchronously: let the runtime know.
            let (status, output) = tokio::task::block_in_place(|| {
                functions.run(Emulator::shared(), &execution, &input)
            });
            assert_eq!(status, "SUCCEEDED", "{scenario}, moto: {output}");
            output
        }
    };

    // create
    run_both("create").await;
    let (l, m) = (h.entry(&local).await.status, h.entry(&moto).await.status);
    assert_eq!(l.phase, Phase::Ready, "{l:?}");
    assert_eq!(l.stack.status.as_deref(), Some("CREATE_COMPLETE"));
    assert_eq!(comparable(&l), comparable(&m), "create");

    // update by a template commit
    repo.commit(&[("t.yaml", V2)], "v2");
    run_both("update").await;
    let (l, m) = (h.entry(&local).await.status, h.entry(&moto).await.status);
    assert_eq!(l.stack.status.as_deref(), Some("UPDATE_COMPLETE"));
    assert_eq!(comparable(&l), comparable(&m), "update");

    // an unrelated commit: in sync, no change set, either way
    repo.commit(&[("README.md", b"docs")], "docs");
    let before = (
        emulator.recorded("CreateChangeSet", &local),
        emulator.recorded("CreateChangeSet", &moto),
    );
    run_both("noop").await;
    let (l, m) = (h.entry(&local).await.status, h.entry(&moto).await.status);
    assert_eq!(comparable(&l), comparable(&m), "no-op");
    assert_eq!(l.message.as_deref(), Some("in sync: nothing to change"));
    assert_eq!(
        (
            emulator.recorded("CreateChangeSet", &local),
            emulator.recorded("CreateChangeSet", &moto)
        ),
        before
    );
    assert_eq!(before, (2, 2));

    // delete: both entries removed (destroyOnDelete) -> stacks and entries gone
    h.apply("stacks: []\n").await;
    run_both("delete").await;
    assert!(h.steps.registry.get(&local).await.unwrap().is_none());
    assert!(h.steps.registry.get(&moto).await.unwrap().is_none());
    for name in [&local, &moto] {
        let described = emulator
            .cloudformation()
            .describe_stacks()
            .stack_name(name)
            .send()
            .await;
        assert!(described.is_err(), "{name} is deleted");
    }
}
