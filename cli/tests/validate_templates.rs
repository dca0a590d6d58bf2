//! `stacksync validate -f FILE --templates`: each entry's template and
//! parameter file, fetched at its ref from a real Git repository (served on
//! 127.0.0.1, and through `file://`), checked for what makes a run certain
//! to fail. No AWS call: the endpoint given is a closed port.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::process::{Command, Output};

use serde_json::Value;
use stacksync_testkit::git::{GitDaemon, GitRepo};
use stacksync_testkit::unique_name;

/// Needs a password no one gives, and a role no capability acknowledges.
const NEEDS: &[u8] = b"Parameters:
  DbPassword: {Type: String, NoEcho: true}
  Days: {Type: Number, Default: 7}
Resources:
  Role:
    Type: AWS::IAM::Role
    Properties:
      AssumeRolePolicyDocument: {Version: '2012-10-17', Statement: []}
";
/// A named role, with CAPABILITY_IAM only: CAPABILITY_NAMED_IAM it needs.
const NAMED: &[u8] = b"Resources:
  Role:
    Type: AWS::IAM::Role
    Properties:
      RoleName: !Sub '${AWS::StackName}-role'
      AssumeRolePolicyDocument: {Version: '2012-10-17', Statement: []}
";
/// Every parameter given one way or another: nothing to say.
const GIVEN: &[u8] = b"Parameters:
  Owner: {Type: String}
  Password: {Type: String, NoEcho: true}
  Vpc: {Type: String}
  Ami: {Type: 'AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>', Default: /aws/ami}
Resources:
  Queue: {Type: AWS::SQS::Queue}
";

fn validate(file: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stacksync"))
        .args([&["validate", "-f", file], args].concat())
        .env_remove("AWS_PROFILE")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "nobody")
        .env("AWS_SECRET_ACCESS_KEY", "nothing")
        // Any AWS call would fail here: none is made.
        .env("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn validate_templates_finds_a_missing_parameter_and_a_missing_capability_at_the_ref() {
    let repo = GitRepo::new("vt");
    let daemon = GitDaemon::serve(&repo);
    repo.commit(
        &[
            ("needs.yaml", NEEDS),
            ("named.yaml", NAMED),
            ("given.yaml", GIVEN),
            ("p.json", br#"{"Parameters": {"Owner": "file"}}"#),
        ],
        "three templates",
    );
    let served = daemon.url(&repo);
    let local = repo.file_url();
    let dir = std::env::temp_dir().join(unique_name("vt-file"));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("stacks.yaml");
    std::fs::write(
        &file,
        format!(
            "stacks:\n  - name: needs\n    source: {{git: '{served}', path: needs.yaml}}\n    \
             parameters: {{Days: 3}}\n  \
             - name: named\n    source: {{git: '{local}', path: named.yaml}}\n    \
             capabilities: [CAPABILITY_IAM]\n  \
             - name: given\n    source: {{git: '{served}', path: given.yaml}}\n    \
             parameterFile: p.json\n    \
             parameters:\n      Password: {{secret: db, key: password}}\n      \
             Vpc: {{fromStack: net, output: VpcId}}\n  \
             - name: net\n    source: {{git: '{local}', path: given.yaml}}\n    \
             parameters: {{Owner: a, Password: {{ssm: /pw}}, Vpc: v}}\n"
        ),
    )
    .unwrap();
    let file = file.display().to_string();

    // Without --templates: the file alone, as before.
    let out = validate(&file, &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("4 entries, all valid"));

    let out = validate(&file, &["--templates"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let err = text(&out.stderr);
    let lines: Vec<&str> = err.lines().collect();
    let wanted = [
        "error: 3 problems in the templates:".to_owned(),
        format!(
            "{file}: stacks[0] (needs): template needs.yaml: parameter DbPassword has no \
             Default and the entry gives none"
        ),
        format!(
            "{file}: stacks[0] (needs): template needs.yaml: declares AWS::IAM::Role (Role) \
             but capabilities lack CAPABILITY_IAM"
        ),
        format!(
            "{file}: stacks[1] (named): template named.yaml: declares AWS::IAM::Role (Role) \
             with RoleName but capabilities lack CAPABILITY_NAMED_IAM"
        ),
    ];
    assert_eq!(lines, wanted, "{err}");

    let out = validate(&file, &["--templates", "-o", "json"]);
    assert_eq!(out.status.code(), Some(1));
    let listed: Value = serde_json::from_str(&text(&out.stdout)).unwrap();
    let problems = listed["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 3, "{listed}");
    assert_eq!(problems[0]["entry"], "needs");
    assert_eq!(problems[0]["index"], 0);
    assert_eq!(problems[0]["template"], "needs.yaml");
    assert_eq!(
        problems[2]["message"],
        "template named.yaml: declares AWS::IAM::Role (Role) with RoleName but capabilities \
         lack CAPABILITY_NAMED_IAM"
    );

    // Fixed at a new commit: nothing to say.
    repo.commit(
        &[(
            "needs.yaml",
            text(NEEDS)
                .replace("NoEcho: true}", "NoEcho: true, Default: x}")
                .as_bytes(),
        )],
        "a default",
    );
    let fixed = std::fs::read_to_string(&file)
        .unwrap()
        .replace(
            "capabilities: [CAPABILITY_IAM]",
            "capabilities: [CAPABILITY_NAMED_IAM]",
        )
        .replace(
            "path: needs.yaml}\n",
            "path: needs.yaml}\n    capabilities: [CAPABILITY_IAM]\n",
        );
    std::fs::write(&file, fixed).unwrap();
    let out = validate(&file, &["--templates"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("4 entries, all valid, their templates too"),
        "{}",
        text(&out.stdout)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn validate_templates_refuses_local_paths_a_run_would_refuse() {
    let repo = GitRepo::new("vtpack");
    let missing = b"Resources:\n  Fn:\n    Type: AWS::Serverless::Function\n    Properties:\n      CodeUri: ./build/orders\n";
    let cycle = b"Resources:\n  Child:\n    Type: AWS::CloudFormation::Stack\n    Properties:\n      TemplateURL: cycle.yaml\n";
    let fine = b"Resources:\n  Fn:\n    Type: AWS::Serverless::Function\n    Properties:\n      CodeUri: src/\n";
    repo.commit(
        &[
            ("app/missing.yaml", missing.as_slice()),
            ("app/cycle.yaml", cycle.as_slice()),
            ("app/fine.yaml", fine.as_slice()),
            (
                "app/src/index.js",
                b"exports.handler = async () => 1;\n".as_slice(),
            ),
        ],
        "local paths",
    );
    let local = repo.file_url();
    let dir = std::env::temp_dir().join(unique_name("vtpack-file"));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("stacks.yaml");
    std::fs::write(
        &file,
        format!(
            "stacks:\n  - name: missing\n    source: {{git: '{local}', path: app/missing.yaml}}\n  \
             - name: cycle\n    source: {{git: '{local}', path: app/cycle.yaml}}\n  \
             - name: fine\n    source: {{git: '{local}', path: app/fine.yaml}}\n"
        ),
    )
    .unwrap();
    let file = file.display().to_string();
    let out = validate(&file, &["--templates"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let err = text(&out.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(
        lines,
        [
            "error: 2 problems in the templates:".to_owned(),
            format!(
                "{file}: stacks[0] (missing): app/missing.yaml: resource Fn property CodeUri \
                 names app/build/orders, which is not in the source"
            ),
            format!(
                "{file}: stacks[1] (cycle): nested templates form a cycle: app/cycle.yaml → \
                 app/cycle.yaml"
            ),
        ],
        "{err}"
    );
    assert!(!err.contains("(fine)"), "{err}");
}
