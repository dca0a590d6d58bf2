//! Runs stopped from outside: a local run interrupted (SIGINT, SIGTERM)
//! gives the stack back and says so; a hold nobody will end (a run killed
//! with SIGKILL) is shown by `status` and ended by `unlock`.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{Cli, stderr, stdout};
use stacksync::clock::now_millis;
use stacksync::registry::{Entries, Leases, Registry, StackEntry};
use stacksync::status::{Phase, StallReason};
use stacksync_testkit::git::GitRepo;
use stacksync_testkit::unique_name;

const QUEUE: &[u8] = b"Resources:\n  Queue:\n    Type: AWS::SQS::Queue\n";

/// A registered stack whose run waits two real seconds for its change set.
async fn registered(prefix: &str) -> (Cli, Registry, String, String) {
    let (cli, registry) = Cli::new(prefix).await;
    let repo = GitRepo::new(prefix);
    repo.commit(&[("q.yaml", QUEUE)], "queue");
    let name = unique_name(prefix).replace('-', "x");
    let file = cli.file(
        "stacks.yaml",
        &format!(
            "stacks:\n  - name: {name}\n    source: {{git: '{}', path: q.yaml}}\n    pollInterval: 2s\n",
            repo.file_url()
        ),
    );
    let applied = cli.run(&["apply", "-f", &file]);
    assert!(applied.status.success(), "{}", stderr(&applied));
    let bucket = unique_name(prefix).to_lowercase();
    (cli, registry, name, bucket)
}

async fn entry(registry: &Registry, name: &str) -> StackEntry {
    registry.get(name).await.unwrap().unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_local_run_stopped_by_sigint_or_sigterm_gives_the_stack_back_and_says_so() {
    for signal in ["INT", "TERM"] {
        let (cli, registry, name, bucket) =
            registered(&format!("sig{}", signal.to_lowercase())).await;
        let mut child = cli
            .command(&["--bucket", &bucket, "reconcile", &name, "--local"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        // Interrupted while it waits for CloudFormation, its change set made.
        let waiting = lines
            .by_ref()
            .map_while(Result::ok)
            .find(|l| l.contains("waiting"));
        assert!(waiting.is_some(), "the run reached a wait");
        assert!(
            entry(&registry, &name).await.lease.is_some(),
            "held while it runs"
        );
        let sent = Command::new("kill")
            .args([format!("-{signal}"), child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        let out = child.wait_with_output().unwrap();
        let said = stderr(&out);
        assert!(!out.status.success(), "SIG{signal}: {said}");
        assert!(
            said.contains(&format!("interrupted by SIG{signal}")),
            "{said}"
        );
        let entry = entry(&registry, &name).await;
        assert!(
            entry.lease.is_none(),
            "SIG{signal}: the stack is given back"
        );
        assert_eq!(entry.status.phase, Phase::Failed);
        assert_eq!(entry.status.stall_reason, Some(StallReason::Interrupted));
        let message = entry.status.message.unwrap_or_default();
        assert!(
            message.contains(&format!("stopped by SIG{signal}")),
            "{message}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hold_nobody_will_end_is_shown_and_unlock_ends_it_after_asking() {
    let (cli, registry, name, _) = registered("unlock").await;
    // A local run killed with SIGKILL leaves its lease behind.
    let owner = format!("local-{name}-1");
    registry
        .acquire_lease(&name, &owner, Duration::from_secs(600), now_millis())
        .await
        .unwrap();
    let status = cli.run(&["status", &name]);
    let row = stdout(&status);
    assert!(
        row.contains(&format!("{owner} for ")),
        "status shows the holder and for how long: {row}"
    );
    let json = cli.run(&["-o", "json", "status", &name]);
    assert!(stdout(&json).contains("\"takenAt\""), "{}", stdout(&json));

    let refused = cli
        .command(&["unlock", &name])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(
        stderr(&refused).contains("pass --yes"),
        "{}",
        stderr(&refused)
    );
    assert!(
        entry(&registry, &name).await.lease.is_some(),
        "nothing changed without a yes"
    );

    let unlocked = cli.run(&["unlock", &name, "--yes"]);
    let said = stdout(&unlocked);
    assert!(unlocked.status.success(), "{said}{}", stderr(&unlocked));
    assert!(said.contains(&format!("held by {owner} since")), "{said}");
    assert!(said.contains("released"), "{said}");
    let entry = entry(&registry, &name).await;
    assert!(entry.lease.is_none());
    assert_eq!(entry.status.stall_reason, Some(StallReason::Interrupted));
    assert!(
        entry
            .status
            .message
            .unwrap_or_default()
            .contains("stacksync unlock")
    );
    assert!(entry.status.times.next_reconcile_at.is_some(), "due again");

    let again = cli.run(&["unlock", &name, "--yes"]);
    assert!(
        stdout(&again).contains("no run holds it"),
        "{}",
        stdout(&again)
    );
}
