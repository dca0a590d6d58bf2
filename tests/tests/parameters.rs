//! Parameter files as teams already have them (the AWS CLI's, CodePipeline's
//! template configuration, AWS CloudFormation Git sync's deployment file, a
//! plain mapping; JSON or YAML), read from a real Git repository, with the
//! entry's parameters and tags over them, deployed into the emulator.
#![allow(clippy::unwrap_used)]
// tests: a failed unwrap is a failed test
#![recursion_limit = "256"]

use std::collections::BTreeMap;

use stacksync::asl::Outcome;
use stacksync::status::{Phase, StallReason};
use stacksync_testkit::git::GitRepo;
use stacksync_testkit::harness::Harness;
use stacksync_testkit::{Emulator, unique_name};

const TEMPLATE: &[u8] = b"Parameters:
  Retention: {Type: String}
  Owner: {Type: String}
Resources:
  Queue:
    Type: AWS::SQS::Queue
";

/// The stack's parameters as the emulator's CloudFormation has them.
async fn stack_parameters(stack: &str) -> BTreeMap<String, String> {
    Emulator::shared().stack_parameters(stack).await
}

#[tokio::test(flavor = "multi_thread")]
async fn every_parameter_file_shape_is_read_as_is_and_the_entry_overrides_it() {
    let h = Harness::new("pfiles").await;
    let repo = GitRepo::new("pfiles");
    // Each file says Retention 7 and Owner "file"; those with tags say team
    // "file" and cost "file". The entry overrides Owner and team.
    let files: [(&str, &[u8], bool); 5] = [
        (
            "cli.json",
            br#"[{"ParameterKey": "Retention", "ParameterValue": "7"}, {"ParameterKey": "Owner", "ParameterValue": "file"}]"#,
            false,
        ),
        (
            "pipeline.json",
            br#"{"Parameters": {"Retention": "7", "Owner": "file"}, "Tags": {"team": "file", "cost": "file"}}"#,
            true,
        ),
        (
            "deployment.yaml",
            b"template-file-path: ./t.yaml\nparameters:\n  Retention: 7\n  Owner: file\ntags:\n  team: file\n  cost: file\n",
            true,
        ),
        ("plain.yaml", b"Retention: 7\nOwner: file\n", false),
        ("plain.json", br#"{"Retention": 7, "Owner": "file"}"#, false),
    ];
    let mut commit: Vec<(&str, &[u8])> = vec![("t.yaml", TEMPLATE)];
    commit.extend(files.iter().map(|(name, bytes, _)| (*name, *bytes)));
    repo.commit(&commit, "parameter files");
    let mut stacks = String::from("stacks:\n");
    let mut names = Vec::new();
    for (file, _, tagged) in &files {
        let name = unique_name("pf").replace('-', "x");
        stacks.push_str(&format!(
            "  - name: {name}\n    source: {{git: '{}', path: t.yaml}}\n    parameterFile: {file}\n    \
             parameters: {{Owner: entry}}\n    tags: {{team: entry}}\n",
            repo.file_url()
        ));
        names.push((name, *file, *tagged));
    }
    h.apply(&stacks).await;

    for (name, file, tagged) in &names {
        let outcome = h.reconcile(name).await;
        assert!(
            matches!(outcome, Outcome::Succeeded(_)),
            "{file}: {outcome:?}: {:?}",
            h.entry(name).await.status.message
        );
        assert_eq!(
            stack_parameters(name).await,
            BTreeMap::from([
                ("Retention".to_owned(), "7".to_owned()),
                ("Owner".to_owned(), "entry".to_owned()),
            ]),
            "{file}"
        );
        let tags = Emulator::shared().stack_tags(name).await;
        assert_eq!(
            tags.get("team").map(String::as_str),
            Some("entry"),
            "{file}"
        );
        assert_eq!(
            tags.get("cost").map(String::as_str),
            tagged.then_some("file"),
            "{file}: {tags:?}"
        );
        // Applied, the next run finds the stack as it wants it: in sync.
        assert!(matches!(h.reconcile(name).await, Outcome::Succeeded(_)));
        let status = h.entry(name).await.status;
        assert_eq!(status.phase, Phase::Ready, "{file}");
        assert!(
            status
                .message
                .as_deref()
                .unwrap_or("")
                .starts_with("in sync"),
            "{file}: {:?}",
            status.message
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_deployment_file_for_another_template_or_a_stack_policy_in_a_file_is_refused_naming_it() {
    let h = Harness::new("pfbad").await;
    let repo = GitRepo::new("pfbad");
    repo.commit(
        &[
            ("t.yaml", TEMPLATE),
            (
                "other.yaml",
                b"template-file-path: other.yaml\nparameters: {Retention: 7}\n",
            ),
            (
                "policy.json",
                br#"{"Parameters": {"Retention": "7"}, "StackPolicy": {"Statement": []}}"#,
            ),
        ],
        "bad files",
    );
    for (file, words) in [
        ("other.yaml", "source.path"),
        ("policy.json", "StackPolicy"),
    ] {
        let name = unique_name("pfbad").replace('-', "x");
        h.apply(&format!(
            "stacks:\n  - name: {name}\n    source: {{git: '{}', path: t.yaml}}\n    parameterFile: {file}\n",
            repo.file_url()
        ))
        .await;
        assert!(!matches!(h.reconcile(&name).await, Outcome::Succeeded(_)));
        let status = h.entry(&name).await.status;
        assert_eq!(status.stall_reason, Some(StallReason::InvalidTemplate));
        let message = status.message.unwrap();
        assert!(
            message.contains(file) && message.contains(words),
            "{message}"
        );
        assert_eq!(
            Emulator::shared().stack_status(&name).await,
            None,
            "nothing made"
        );
    }
}
