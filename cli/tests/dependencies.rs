//! Dependencies and provenance through the `stacksync` binary, against the
//! emulator: a cycle is refused before anything is written; deleting a
//! stack others depend on is refused (naming them) unless `--force`;
//! `get --explain` says where each value came from, secrets masked, and
//! shows the outputs.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test
#![recursion_limit = "256"]

mod common;

use common::{Cli, stacksync_on, stderr, stdout};
use serde_json::Value;
use stacksync::asl::Outcome;
use stacksync::registry::Specs;
use stacksync_testkit::git::GitRepo;
use stacksync_testkit::harness::Harness;
use stacksync_testkit::unique_name;

fn entry(name: &str, extra: &str) -> String {
    format!(
        "  - name: {name}\n    source: {{git: https://github.com/acme/infra.git, path: {name}.yaml}}\n{extra}"
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cycle_is_refused_and_a_depended_on_stack_is_not_deleted_unless_forced() {
    let (cli, registry) = Cli::new("cli-deps").await;
    let chain = format!(
        "stacks:\n{}{}{}",
        entry("net", ""),
        entry(
            "db",
            "    parameters: {Vpc: {fromStack: net, output: VpcId}}\n"
        ),
        entry("app", "    dependsOn: [db]\n"),
    );
    let cycle = format!(
        "stacks:\n{}{}{}",
        entry("net", "    dependsOn: [app]\n"),
        entry(
            "db",
            "    parameters: {Vpc: {fromStack: net, output: VpcId}}\n"
        ),
        entry("app", "    dependsOn: [db]\n"),
    );
    let out = cli.run(&["apply", "-f", &cli.file("cycle.yaml", &cycle)]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(err.contains("cycle (app → db → net → app)"), "{err}");
    assert!(err.contains("nothing was applied"), "{err}");
    assert!(registry.list().await.unwrap().is_empty(), "nothing written");

    let unknown = format!("stacks:\n{}", entry("db", "    dependsOn: [nowhere]\n"));
    let out = cli.run(&["apply", "-f", &cli.file("unknown.yaml", &unknown)]);
    assert!(
        stderr(&out).contains("depends on nowhere, which is neither in the file nor registered"),
        "{}",
        stderr(&out)
    );

    let out = cli.run(&["apply", "-f", &cli.file("chain.yaml", &chain)]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = cli.run(&["delete", "net"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("refused: db depends on it") && err.contains("--force"),
        "{err}"
    );
    let listed = registry.list().await.unwrap();
    assert!(listed.iter().all(|e| e.deletion_requested_at.is_none()));
    // Pruning it from the file is refused the same way.
    let without = format!(
        "stacks:\n{}{}",
        entry(
            "db",
            "    parameters: {Vpc: {fromStack: net, output: VpcId}}\n"
        ),
        entry("app", "    dependsOn: [db]\n"),
    );
    let out = cli.run(&[
        "apply",
        "-f",
        &cli.file("without.yaml", &without),
        "--prune",
    ]);
    assert!(
        stderr(&out).contains("net would be pruned"),
        "{}",
        stderr(&out)
    );
    // Forced: deleted, its dependents named in the plan of what waits.
    let out = cli.run(&["delete", "net", "--force"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let net = registry
        .list()
        .await
        .unwrap()
        .into_iter()
        .find(|e| e.name == "net")
        .unwrap();
    assert!(net.deletion_requested_at.is_some());
}

#[tokio::test(flavor = "multi_thread")]
async fn get_explain_says_where_each_value_came_from_masks_secrets_and_shows_outputs() {
    let h = Harness::new("explain").await;
    let table = h.steps.registry.table().to_owned();
    let repo = GitRepo::new("explain");
    repo.commit(
        &[
            (
                "t.yaml",
                b"Parameters:\n  Days: {Type: String}\n  Owner: {Type: String}\n  Pw: {Type: String, NoEcho: true}\nResources:\n  Queue: {Type: AWS::SQS::Queue}\nOutputs:\n  QueueName:\n    Value: !GetAtt Queue.QueueName\n" as &[u8],
            ),
            (
                "p.json",
                br#"{"Parameters": {"Days": "7", "Owner": "file", "Pw": "from-file-pw"}, "Tags": {"team": "file"}}"#,
            ),
        ],
        "template",
    );
    let name = unique_name("expl").replace('-', "x");
    h.apply(&format!(
        "stacks:\n  - name: {name}\n    source: {{git: '{}', path: t.yaml}}\n    parameterFile: p.json\n    \
         parameters: {{Owner: entry}}\n    tags: {{cost: '42'}}\n",
        repo.file_url()
    ))
    .await;
    assert!(matches!(h.reconcile(&name).await, Outcome::Succeeded(_)));

    let out = stacksync_on(&table, &["-o", "json", "get", &name, "--explain"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let json: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let row = |kind: &str, key: &str| {
        json[kind]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == key)
            .map(|r| {
                (
                    r["from"].as_str().unwrap().to_owned(),
                    r["value"].as_str().unwrap().to_owned(),
                )
            })
            .unwrap()
    };
    assert_eq!(
        row("parameters", "Days"),
        ("parameter file p.json".into(), "7".into())
    );
    assert_eq!(
        row("parameters", "Owner"),
        (
            "stacks.yaml (over the parameter file p.json)".into(),
            "entry".into()
        )
    );
    assert_eq!(
        row("parameters", "Pw"),
        ("parameter file p.json".into(), "****".into())
    );
    assert_eq!(
        row("tags", "team"),
        ("parameter file p.json".into(), "file".into())
    );
    assert_eq!(row("tags", "cost"), ("stacks.yaml".into(), "42".into()));
    assert!(
        json["outputs"]["QueueName"]
            .as_str()
            .is_some_and(|q| !q.is_empty()),
        "{json}"
    );
    let table_out = stdout(&stacksync_on(&table, &["get", &name, "--explain"]).await);
    assert!(
        table_out.contains("parameter file p.json") && table_out.contains("outputs:"),
        "{table_out}"
    );
    for text in [
        stdout(&out),
        table_out,
        stdout(&stacksync_on(&table, &["-o", "json", "get", &name]).await),
    ] {
        assert!(
            !text.contains("from-file-pw"),
            "a NoEcho value is shown: {text}"
        );
    }

    // A preview of a new NoEcho value never shows it.
    repo.commit(
        &[(
            "p.json",
            br#"{"Parameters": {"Days": "7", "Owner": "file", "Pw": "other-pw"}, "Tags": {"team": "file"}}"# as &[u8],
        )],
        "rotate",
    );
    let out = stacksync_on(&table, &["-o", "json", "diff", &name]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        !text.contains("other-pw") && !text.contains("from-file-pw"),
        "{text}"
    );
    let diff: Value = serde_json::from_str(&text).unwrap();
    let pw = diff["diff"]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "Pw")
        .cloned();
    // CloudFormation reports a NoEcho value as `****`, so the preview
    // cannot tell whether it changed; if it lists it, masked.
    assert!(pw.is_none_or(|p| p["desired"] == "****"), "{text}");
}
