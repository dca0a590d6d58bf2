//! Templates that name local files, seen from the CLI against the
//! emulator: `diff` packages them as a run does (its objects under
//! `previews/`) and says which changed since the last run; `get --explain`
//! lists what the last run packaged.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test
#![recursion_limit = "256"]

mod common;

use common::{stacksync_on as stacksync, stderr, stdout};
use serde_json::Value;
use stacksync::asl::Outcome;
use stacksync_testkit::git::GitRepo;
use stacksync_testkit::harness::Harness;
use stacksync_testkit::unique_name;

const FUNCTION: &[u8] = b"Resources:
  Role:
    Type: AWS::IAM::Role
    Properties:
      AssumeRolePolicyDocument: {Version: '2012-10-17', Statement: [{Effect: Allow, Principal: {Service: lambda.amazonaws.com}, Action: 'sts:AssumeRole'}]}
  Fn:
    Type: AWS::Lambda::Function
    Properties:
      Runtime: python3.12
      Handler: index.handler
      Role: !GetAtt Role.Arn
      Code: src
";

async fn json(table: &str, args: &[&str]) -> Value {
    let out = stacksync(table, &[&["-o", "json"], args].concat()).await;
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    serde_json::from_str(&stdout(&out)).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn diff_packages_as_a_run_does_and_says_which_local_files_changed() {
    let h = Harness::new("clipack").await;
    let table = h.steps.registry.table().to_owned();
    let repo = GitRepo::new("clipack");
    let first = repo.commit(
        &[
            ("t.yaml", FUNCTION),
            ("src/index.py", b"def handler(e, c):\n    return 1\n"),
        ],
        "function",
    );
    let name = unique_name("clipack").replace('-', "x");
    h.apply(&format!(
        "stacks:\n  - name: {name}\n    source: {{git: '{}', path: t.yaml}}\n    capabilities: [CAPABILITY_IAM]\n",
        repo.file_url()
    ))
    .await;
    let outcome = h.reconcile(&name).await;
    assert!(matches!(outcome, Outcome::Succeeded(_)), "{outcome:?}");

    let explained = json(&table, &["get", &name, "--explain"]).await;
    let packaged = explained["packaged"].as_array().unwrap();
    assert_eq!(packaged.len(), 1, "{explained}");
    assert_eq!(packaged[0]["path"], "src");
    assert_eq!(packaged[0]["at"], "t.yaml: resource Fn property Code");
    assert!(
        packaged[0]["key"]
            .as_str()
            .unwrap()
            .starts_with("templates/packages/")
    );
    let text = stdout(&stacksync(&table, &["get", &name, "--explain"]).await);
    assert!(
        text.contains("packaged (local files the templates name"),
        "{text}"
    );

    // The code changed: the preview packages it, says so, and shows the
    // function's update.
    repo.commit(
        &[(
            "src/index.py",
            b"def handler(e, c):\n    return 2\n".as_slice(),
        )],
        "v2",
    );
    let diff = json(&table, &["diff", &name]).await["diff"].clone();
    assert_eq!(diff["packaged"][0]["path"], "src", "{diff}");
    assert_eq!(diff["packaged"][0]["changed"], true, "{diff}");
    let modified: Vec<&str> = diff["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["action"] == "Modify")
        .filter_map(|c| c["logicalId"].as_str())
        .collect();
    assert_eq!(modified, ["Fn"], "{diff}");
    let text = stdout(&stacksync(&table, &["diff", &name]).await);
    assert!(
        text.contains("local files packaged:")
            && text.contains("src (t.yaml: resource Fn property Code): changed"),
        "{text}"
    );

    // At the deployed commit: the same content as the last run's.
    let same = json(&table, &["diff", &name, "--ref", &first]).await["diff"].clone();
    assert_eq!(same["packaged"][0]["changed"], false, "{same}");
}
