//! Templates as teams write them, end to end through the local runner
//! against the emulator: a parent template with nested stacks, a Lambda
//! function's code and a layer named by local paths, packaged in-process
//! (`stacksync::package`), created, and updated by content; refusals of
//! paths that leave the source, are missing, loop or name too much; one
//! object for one folder, whichever stack names it. The comparison with
//! `aws cloudformation package` itself: `package_cli.rs`.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test
#![recursion_limit = "256"]

use base64::Engine;
use stacksync::asl::Outcome;
use stacksync::status::{Phase, StallReason};
use stacksync_testkit::backend::Backend;
use stacksync_testkit::git::{GitDaemon, GitRepo};
use stacksync_testkit::harness::Harness;
use stacksync_testkit::{Emulator, unique_name};

const PARENT: &str = "\
AWSTemplateFormatVersion: '2010-09-09'
Resources:
  Network:
    Type: AWS::CloudFormation::Stack
    Properties:
      TemplateURL: ./nested/network.yaml
  Storage:
    Type: AWS::CloudFormation::Stack
    Properties:
      TemplateURL: nested/storage.yaml
  Role:
    Type: AWS::IAM::Role
    Properties:
      AssumeRolePolicyDocument:
        Version: '2012-10-17'
        Statement:
          - Effect: Allow
            Principal: {Service: lambda.amazonaws.com}
            Action: sts:AssumeRole
  Layer:
    Type: AWS::Lambda::LayerVersion
    Properties:
      LayerName: !Sub '${AWS::StackName}-deps'
      Content: ./layer
  Fn:
    Type: AWS::Lambda::Function
    Properties:
      Runtime: python3.12
      Handler: index.handler
      Role: !GetAtt Role.Arn
      Code: ./src
      # Not `Layers: [!Ref Layer]`: moto keeps a function's old code on a
      # stack update when it names a layer (TESTING.md); AWS does not.
Outputs:
  Function: {Value: !Ref Fn}
";

const NETWORK: &str = "\
Resources:
  Queue:
    Type: AWS::SQS::Queue
Outputs:
  QueueArn: {Value: !GetAtt Queue.Arn}
";

const STORAGE: &str = "\
Resources:
  Topic:
    Type: AWS::SNS::Topic
";

const STORAGE_TWO: &str = "\
Resources:
  Topic:
    Type: AWS::SNS::Topic
  Audit:
    Type: AWS::SNS::Topic
";

/// A stack name no other test uses.
fn stack_name(prefix: &str) -> String {
    unique_name(prefix).replace('-', "x")
}

fn entry(name: &str, url: &str, path: &str) -> String {
    format!(
        "stacks:\n  - name: {name}\n    source: {{git: '{url}', path: {path}}}\n    capabilities: [CAPABILITY_IAM]\n"
    )
}

/// The parent without its function (nor the output naming it).
fn without_function(parent: &str) -> String {
    let (head, _) = parent.split_once("  Fn:\n").unwrap();
    head.to_owned()
}

fn app(parent: &'static [u8]) -> Vec<(&'static str, &'static [u8])> {
    vec![
        ("app/parent.yaml", parent),
        ("app/nested/network.yaml", NETWORK.as_bytes()),
        ("app/nested/storage.yaml", STORAGE.as_bytes()),
        (
            "app/src/index.py",
            b"def handler(event, context):\n    return 1\n",
        ),
        ("app/src/util/helpers.py", b"X = 1\n"),
        ("app/layer/python/deps.py", b"VERSION = '1.0'\n"),
        ("README.md", b"v1"),
    ]
}

async fn run<F: stacksync::ports::CloudFormationFactory>(
    h: &Harness<F>,
    name: &str,
) -> (Outcome, stacksync::status::Status) {
    let outcome = h.reconcile(name).await;
    (outcome, h.entry(name).await.status)
}

/// The nested stack a parent's resource made: its id, status and resources.
async fn nested(backend: Backend, parent: &str, logical: &str) -> (String, String, Vec<String>) {
    let cfn = backend.cloudformation();
    let resource = cfn
        .describe_stack_resource()
        .stack_name(parent)
        .logical_resource_id(logical)
        .send()
        .await
        .unwrap();
    let id = resource
        .stack_resource_detail()
        .unwrap()
        .physical_resource_id()
        .unwrap()
        .to_owned();
    let stack = cfn.describe_stacks().stack_name(&id).send().await.unwrap();
    let status = stack.stacks()[0]
        .stack_status()
        .unwrap()
        .as_str()
        .to_owned();
    let listed = cfn
        .describe_stack_resources()
        .stack_name(&id)
        .send()
        .await
        .unwrap();
    let mut resources: Vec<String> = listed
        .stack_resources()
        .iter()
        .filter_map(|r| r.logical_resource_id().map(str::to_owned))
        .collect();
    resources.sort();
    (id, status, resources)
}

/// The function's code hash, as Lambda reports it (base64 of SHA-256).
async fn code_sha(backend: Backend, parent: &str) -> String {
    let cfn = backend.cloudformation();
    let resource = cfn
        .describe_stack_resource()
        .stack_name(parent)
        .logical_resource_id("Fn")
        .send()
        .await
        .unwrap();
    let function = resource
        .stack_resource_detail()
        .unwrap()
        .physical_resource_id()
        .unwrap()
        .to_owned();
    let endpoint = backend.endpoint();
    let address = endpoint.trim_start_matches("http://").to_owned();
    let path = format!("/2015-03-31/functions/{function}");
    let body = tokio::task::spawn_blocking(move || {
        use std::io::{Read, Write};
        let scope = "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/lambda/aws4_request, SignedHeaders=host, Signature=0";
        let mut stream = std::net::TcpStream::connect(&address).unwrap();
        let request = format!(
            "GET {path} HTTP/1.0\r\nHost: {address}\r\nAuthorization: {scope}\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        response.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default()
    })
    .await
    .unwrap();
    let got: serde_json::Value = serde_json::from_str(&body).unwrap_or_else(|_| panic!("{body}"));
    got["Configuration"]["CodeSha256"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Base64 of the SHA-256 of `bytes` (Lambda's `CodeSha256`).
fn sha_b64(bytes: &[u8]) -> String {
    let hex = stacksync::hash::sha256_hex(bytes);
    let raw: Vec<u8> = (0..32)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
        .collect();
    base64::engine::general_purpose::STANDARD.encode(raw)
}

fn key_of(status: &stacksync::status::Status, path: &str) -> String {
    status
        .inputs
        .packaged
        .iter()
        .find(|a| a.path == path)
        .unwrap_or_else(|| panic!("{path} packaged: {:?}", status.inputs.packaged))
        .key
        .clone()
}

/// The first run: the stack and its nested stacks created from the
/// packaged objects, the function running the stored zip. The code stored,
/// and the network stack as made.
async fn created(
    backend: Backend,
    h: &Harness<stacksync::adapters::cloudformation::SdkCloudFormationFactory>,
    name: &str,
    functions: bool,
) -> (Vec<u8>, (String, String, Vec<String>)) {
    let (outcome, status) = run(h, name).await;
    assert!(
        matches!(outcome, Outcome::Succeeded(_)),
        "{outcome:?} {:?}",
        status.message
    );
    assert_eq!(status.phase, Phase::Ready, "{:?}", status.message);
    let packaged: Vec<(&str, &str)> = status
        .inputs
        .packaged
        .iter()
        .map(|a| (a.path.as_str(), a.at.as_str()))
        .collect();
    assert_eq!(
        packaged,
        [
            (
                "app/nested/network.yaml",
                "app/parent.yaml: resource Network property TemplateURL"
            ),
            (
                "app/nested/storage.yaml",
                "app/parent.yaml: resource Storage property TemplateURL"
            ),
            (
                "app/layer",
                "app/parent.yaml: resource Layer property Content"
            ),
            ("app/src", "app/parent.yaml: resource Fn property Code"),
        ][..packaged.len().max(3)]
    );
    assert_eq!(packaged.len(), if functions { 4 } else { 3 });
    let bucket = h.steps.config.bucket.clone();
    let code = if functions {
        backend.object(&bucket, &key_of(&status, "app/src")).await
    } else {
        Vec::new()
    };
    let sha = sha_b64(&code);
    if functions {
        assert_eq!(
            code_sha(backend, name).await,
            sha,
            "the function runs the zip stored by content"
        );
    }
    let network = nested(backend, name, "Network").await;
    let storage = nested(backend, name, "Storage").await;
    assert_eq!(
        (network.1.as_str(), network.2.clone()),
        ("CREATE_COMPLETE", vec!["Queue".to_owned()])
    );
    assert_eq!(
        (storage.1.as_str(), storage.2.clone()),
        ("CREATE_COMPLETE", vec!["Topic".to_owned()])
    );
    (code, network)
}

stacksync_testkit::scenarios!(
    nested_stacks_code_and_a_layer_are_packaged_created_and_updated_by_content
);

async fn nested_stacks_code_and_a_layer_are_packaged_created_and_updated_by_content(
    backend: Backend,
) {
    let h = backend.harness("pack").await;
    let repo = GitRepo::new("pack");
    let daemon = GitDaemon::serve(&repo);
    // LocalStack's Lambda installs a runtime from the internet to create a
    // function, which this machine lacks: there, the parent has none.
    let functions = backend == Backend::Moto;
    if !functions {
        backend.skip(
            "nested_stacks_code_and_a_layer_are_packaged_created_and_updated_by_content (the function)",
            "LocalStack's Lambda installs its runtime from the internet to create a function",
        );
    }
    let parent: &'static [u8] = if functions {
        PARENT.as_bytes()
    } else {
        Box::leak(without_function(PARENT).into_bytes().into_boxed_slice())
    };
    repo.commit(&app(parent), "app");
    let name = stack_name("pack");
    h.apply(&entry(&name, &daemon.url(&repo), "app/parent.yaml"))
        .await;
    let change_sets = || {
        h.cloudformation_calls
            .count_of("cloudformation:CreateChangeSet")
    };

    let (code, network) = created(backend, &h, &name, functions).await;
    let sha = sha_b64(&code);
    let bucket = h.steps.config.bucket.clone();
    assert_eq!(change_sets(), 1);

    // A nested template edited: the parent updates, the other nested stack
    // is left as it was.
    repo.commit(
        &[("app/nested/storage.yaml", STORAGE_TWO.as_bytes())],
        "audit topic",
    );
    let (outcome, status) = run(&h, &name).await;
    assert!(
        matches!(outcome, Outcome::Succeeded(_)),
        "{outcome:?} {:?}",
        status.message
    );
    assert_eq!(change_sets(), 2);
    assert_eq!(
        nested(backend, &name, "Network").await,
        network,
        "untouched"
    );
    let storage_now = nested(backend, &name, "Storage").await;
    if backend == Backend::Moto {
        assert_eq!(storage_now.2, ["Audit", "Topic"], "{storage_now:?}");
    } else {
        // The parent's change set ran (its TemplateURL is another object);
        // LocalStack leaves the nested stack as it was.
        backend.skip(
            "nested_stacks_code_and_a_layer_are_packaged_created_and_updated_by_content (the nested stack's update)",
            "LocalStack keeps a nested stack as it was when its parent's TemplateURL changes (AWS updates it)",
        );
    }
    if functions {
        assert_eq!(
            code_sha(backend, &name).await,
            sha,
            "the code did not change"
        );
    }

    // A code file edited: a new object, the function's code replaced.
    repo.commit(
        &[(
            "app/src/index.py",
            b"def handler(event, context):\n    return 2\n".as_slice(),
        )],
        "v2",
    );
    let (outcome, status) = run(&h, &name).await;
    assert!(
        matches!(outcome, Outcome::Succeeded(_)),
        "{outcome:?} {:?}",
        status.message
    );
    // (Where the template names no code, the edit touches nothing it names.)
    let made = if functions { 3 } else { 2 };
    assert_eq!(change_sets(), made);
    if functions {
        let new_code = backend.object(&bucket, &key_of(&status, "app/src")).await;
        assert_ne!(new_code, code);
        let new_sha = sha_b64(&new_code);
        assert_eq!(code_sha(backend, &name).await, new_sha, "was {sha}");
    }

    // An unrelated commit: the same objects, the same template, no change set.
    repo.commit(&[("README.md", b"v2".as_slice())], "docs");
    let (outcome, after) = run(&h, &name).await;
    assert!(matches!(outcome, Outcome::Succeeded(_)), "{outcome:?}");
    assert_eq!(after.phase, Phase::Ready);
    assert_eq!(change_sets(), made, "in sync: nothing to change");
    assert_eq!(after.inputs.packaged, status.inputs.packaged);
}

#[tokio::test(flavor = "multi_thread")]
async fn two_stacks_naming_one_folder_at_one_commit_store_one_object() {
    let h = Harness::new("packone").await;
    let repo = GitRepo::new("packone");
    let daemon = GitDaemon::serve(&repo);
    let function = |name: &str| {
        format!(
            "Resources:\n  Role:\n    Type: AWS::IAM::Role\n    Properties:\n      AssumeRolePolicyDocument: {{Version: '2012-10-17', Statement: [{{Effect: Allow, Principal: {{Service: lambda.amazonaws.com}}, Action: 'sts:AssumeRole'}}]}}\n  Fn:\n    Type: AWS::Lambda::Function\n    Properties:\n      FunctionName: {name}\n      Runtime: python3.12\n      Handler: index.handler\n      Role: !GetAtt Role.Arn\n      Code: ../shared/src\n"
        )
    };
    let (a, b) = (stack_name("one"), stack_name("two"));
    let (ta, tb) = (function(&a), function(&b));
    repo.commit(
        &[
            ("a/t.yaml", ta.as_bytes()),
            ("b/t.yaml", tb.as_bytes()),
            ("shared/src/index.py", b"def handler(e, c):\n    return 1\n"),
        ],
        "two",
    );
    let url = daemon.url(&repo);
    let both = format!(
        "{}{}",
        entry(&a, &url, "a/t.yaml"),
        entry(&b, &url, "b/t.yaml").trim_start_matches("stacks:\n")
    );
    h.apply(&both).await;
    for name in [&a, &b] {
        let (outcome, status) = run(&h, name).await;
        assert!(
            matches!(outcome, Outcome::Succeeded(_)),
            "{name}: {outcome:?} {:?}",
            status.message
        );
    }
    let (ka, kb) = (
        key_of(&h.entry(&a).await.status, "shared/src"),
        key_of(&h.entry(&b).await.status, "shared/src"),
    );
    assert_eq!(ka, kb);
    let listed = Emulator::shared()
        .s3()
        .list_objects_v2()
        .bucket(&h.steps.config.bucket)
        .prefix("templates/packages/")
        .send()
        .await
        .unwrap();
    let keys: Vec<&str> = listed.contents().iter().filter_map(|o| o.key()).collect();
    assert_eq!(keys, [ka.as_str()], "one object for one folder's content");
}

#[tokio::test(flavor = "multi_thread")]
async fn paths_that_escape_are_missing_loop_or_name_too_much_are_refused_and_nothing_is_made() {
    let h = Harness::new("packbad").await;
    let repo = GitRepo::new("packbad");
    let daemon = GitDaemon::serve(&repo);
    let function = |code: &str| {
        format!(
            "Resources:\n  Fn:\n    Type: AWS::Lambda::Function\n    Properties:\n      Runtime: python3.12\n      Handler: index.handler\n      Role: arn:aws:iam::123456789012:role/r\n      Code: {code}\n"
        )
    };
    let nests = |to: &str| {
        format!(
            "Resources:\n  N:\n    Type: AWS::CloudFormation::Stack\n    Properties:\n      TemplateURL: {to}\n"
        )
    };
    let many: Vec<(String, Vec<u8>)> = (0..=stacksync::package::MAX_PACKAGED_FILES)
        .map(|i| (format!("big/f{i}.txt"), vec![b'x']))
        .collect();
    let (escape, missing, cycle, too_many) = (
        function("../../etc"),
        function("./nope"),
        nests("b.yaml"),
        function("../big"),
    );
    let back = nests("a.yaml");
    let mut files: Vec<(&str, &[u8])> = vec![
        ("t/escape.yaml", escape.as_bytes()),
        ("t/missing.yaml", missing.as_bytes()),
        ("t/a.yaml", cycle.as_bytes()),
        ("t/b.yaml", back.as_bytes()),
        ("t/many.yaml", too_many.as_bytes()),
    ];
    files.extend(many.iter().map(|(p, b)| (p.as_str(), b.as_slice())));
    repo.commit(&files, "bad");
    let url = daemon.url(&repo);
    let cases = [
        (
            "escape",
            "t/escape.yaml: resource Fn property Code names \"../../etc\", which leaves the source",
        ),
        (
            "missing",
            "t/missing.yaml: resource Fn property Code names t/nope, which is not in the source",
        ),
        (
            "a",
            "nested templates form a cycle: t/a.yaml → t/b.yaml → t/a.yaml",
        ),
        (
            "many",
            "over 5000 files (the templates name too many local files",
        ),
    ];
    for (file, expected) in cases {
        let name = stack_name(&format!("bad{file}"));
        h.apply(&entry(&name, &url, &format!("t/{file}.yaml")))
            .await;
        let (outcome, status) = run(&h, &name).await;
        assert!(
            !matches!(outcome, Outcome::Succeeded(_)) || status.phase == Phase::Failed,
            "{file}: {outcome:?}"
        );
        let message = status.message.clone().unwrap_or_default();
        assert!(message.contains(expected), "{file}: {message}");
        assert!(
            matches!(
                status.stall_reason,
                Some(StallReason::InvalidTemplate | StallReason::InvalidSource)
            ),
            "{file}: {:?}",
            status.stall_reason
        );
        assert_eq!(
            Emulator::shared().stack_status(&name).await,
            None,
            "{file}: nothing created"
        );
    }
}
