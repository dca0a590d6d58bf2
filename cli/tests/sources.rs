//! `stacksync source …` as a person runs it, against the emulator and a
//! Git repository served by `git daemon` on 127.0.0.1: a registry source
//! added, read, shown, held, approved, synced locally and removed.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use serde_json::Value;
use stacksync_testkit::git::{GitDaemon, GitRepo};
use stacksync_testkit::{Emulator, unique_name};

use common::{Cli, stderr, stdout};

const QUEUE: &[u8] = b"Resources:\n  Queue:\n    Type: AWS::SQS::Queue\n";

fn stacks(names: &[&str]) -> String {
    let mut text = String::from("stacks:\n");
    for name in names {
        text.push_str(&format!(
            "  - name: {name}\n    source: {{ path: ./t.yaml }}\n    destroyOnDelete: true\n"
        ));
    }
    text
}

/// `stacksync source add NAME --git URL --ref main --path PATH --insecure`.
fn add_source(cli: &Cli, url: &str, name: &str, path: &str) -> std::process::Output {
    cli.run(&[
        "source",
        "add",
        name,
        "--git",
        url,
        "--ref",
        "main",
        "--path",
        path,
        "--insecure",
    ])
}

fn json(out: &std::process::Output) -> Value {
    assert!(out.status.success(), "{}\n{}", stdout(out), stderr(out));
    serde_json::from_str(&stdout(out)).unwrap_or_else(|e| panic!("{e}: {}", stdout(out)))
}

fn refused(out: &std::process::Output, says: &str) {
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}\n{}",
        stdout(out),
        stderr(out)
    );
    assert!(
        stderr(out).contains(says),
        "expected {says:?} in: {}",
        stderr(out)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_source_is_added_read_shown_held_approved_and_removed_from_the_command_line() {
    let (cli, _registry) = Cli::new("cli-source").await;
    let repo = GitRepo::new("cli-source");
    let daemon = GitDaemon::serve(&repo);
    let url = daemon.url(&repo);
    let p = unique_name("clisrc").replace('-', "x");
    let names: Vec<String> = (0..3).map(|i| format!("{p}{i}")).collect();
    let all: Vec<&str> = names.iter().map(String::as_str).collect();
    let c1 = repo.commit(
        &[
            ("deploy/stacks.yaml", stacks(&all).as_bytes()),
            ("deploy/t.yaml", QUEUE),
        ],
        "three stacks",
    );
    let add = |name: &str, path: &str| add_source(&cli, &url, name, path);
    let out = add("platform", "deploy/stacks.yaml");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("stacksync source sync platform"),
        "{}",
        stdout(&out)
    );
    refused(&add("platform", "deploy/stacks.yaml"), "exists already");
    refused(&add("bad name", "**/*.yaml"), "begins with a wildcard");

    let synced = json(&cli.run(&["source", "sync", "platform", "-o", "json"]));
    assert_eq!(synced["outcome"], "applied", "{synced}");
    assert_eq!(synced["created"].as_array().unwrap().len(), 3);
    let list = cli.run(&["source", "list"]);
    let row = stdout(&list)
        .lines()
        .find(|l| l.starts_with("platform"))
        .unwrap_or_default()
        .to_owned();
    assert!(
        row.contains("Ready") && row.contains(&c1[..12]),
        "{}",
        stdout(&list)
    );
    let got = json(&cli.run(&["source", "get", "platform", "-o", "json"]));
    assert_eq!(got["status"]["appliedRevision"], c1.as_str());
    assert_eq!(got["owned"][0]["file"], "deploy/stacks.yaml", "{got}");
    let entry = json(&cli.run(&["get", &names[0], "-o", "json"]));
    assert_eq!(entry["owner"]["source"], "platform");
    assert_eq!(entry["owner"]["commit"], c1.as_str());
    let status = stdout(&cli.run(&["status"]));
    assert!(
        status.contains("SOURCE") && status.contains("platform"),
        "{status}"
    );

    // The CLI does not change or delete what a source owns.
    let file = cli.file(
        "mine.yaml",
        &format!(
            "stacks:\n  - name: {}\n    source: {{git: '{url}', path: deploy/t.yaml}}\n",
            names[0]
        ),
    );
    refused(
        &cli.run(&["apply", "-f", &file]),
        "owned by the registry source \"platform\"",
    );
    refused(
        &cli.run(&["delete", &names[0]]),
        "owned by the registry source \"platform\"",
    );

    // Every entry removed: held until approved.
    let c2 = repo.commit(&[("deploy/stacks.yaml", b"stacks:\n")], "all go");
    refused(
        &cli.run(&["source", "sync", "platform"]),
        "held by the prune guard",
    );
    let got = json(&cli.run(&["source", "get", "platform", "-o", "json"]));
    assert_eq!(got["status"]["state"], "Held", "{got}");
    assert_eq!(
        got["status"]["hold"]["entries"].as_array().unwrap().len(),
        3
    );
    refused(
        &cli.run(&["source", "approve-prune", "platform", "--commit", &c1]),
        "held at commit",
    );
    let approved = cli.run(&["source", "approve-prune", "platform", "--commit", &c2]);
    assert!(approved.status.success(), "{}", stderr(&approved));
    let synced = json(&cli.run(&["source", "sync", "platform", "-o", "json"]));
    assert_eq!(synced["pruned"].as_array().unwrap().len(), 3, "{synced}");
}

#[tokio::test(flavor = "multi_thread")]
async fn source_sync_local_runs_the_entries_a_commit_changed() {
    let (cli, _registry) = Cli::new("cli-source-local").await;
    let repo = GitRepo::new("cli-source-local");
    let name = unique_name("clisrclocal").replace('-', "x");
    repo.commit(
        &[
            ("stacks.yaml", stacks(&[&name]).as_bytes()),
            ("t.yaml", QUEUE),
        ],
        "one stack",
    );
    let url = repo.file_url();
    let bucket = unique_name("cli-source-bucket");
    let run = |args: &[&str]| {
        let mut cmd = cli.command(&[&["--bucket", bucket.as_str()][..], args].concat());
        cmd.env("STACKSYNC_SPEEDUP", "1000");
        for (k, v) in Emulator::shared().env() {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    };
    assert!(
        run(&[
            "source",
            "add",
            "local",
            "--git",
            &url,
            "--path",
            "stacks.yaml"
        ])
        .status
        .success()
    );
    let out = run(&["source", "sync", "local", "--local"]);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}\n{}", stderr(&out));
    assert!(text.contains(&format!("✓ {name}: applied")), "{text}");
    let stack = Emulator::shared()
        .cloudformation()
        .describe_stacks()
        .stack_name(&name)
        .send()
        .await
        .unwrap();
    assert_eq!(
        stack.stacks()[0].stack_status().unwrap().as_str(),
        "CREATE_COMPLETE"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_source_removed_keeping_its_entries_leaves_them_to_the_cli() {
    let (cli, _registry) = Cli::new("cli-source-keep").await;
    let repo = GitRepo::new("cli-source-keep");
    let daemon = GitDaemon::serve(&repo);
    let url = daemon.url(&repo);
    let p = unique_name("clikeep").replace('-', "x");
    let add = |name: &str, path: &str| add_source(&cli, &url, name, path);
    // A second source: removed keeping its entries (the CLI's from then on).
    repo.commit(
        &[
            ("team/stacks.yaml", stacks(&[&format!("{p}t")]).as_bytes()),
            ("team/t.yaml", QUEUE),
        ],
        "a team",
    );
    assert!(add("team", "team/stacks.yaml").status.success());
    json(&cli.run(&["source", "sync", "team", "-o", "json"]));
    refused(&cli.run(&["source", "remove", "team"]), "--keep-entries");
    let removed = cli.run(&["source", "remove", "team", "--keep-entries"]);
    assert!(removed.status.success(), "{}", stderr(&removed));
    let kept = json(&cli.run(&["get", &format!("{p}t"), "-o", "json"]));
    assert!(kept.get("owner").is_none(), "{kept}");
    refused(
        &cli.run(&["source", "get", "team"]),
        "no registry source named \"team\"",
    );
}
