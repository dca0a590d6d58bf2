//! The rewrite follows the reference tool: one repository packaged by
//! `aws cloudformation package` (the AWS CLI, in its own venv:
//! `scripts/venv bench`) against the emulator's S3, and by stacksync
//! (`stacksync::package`); the templates, the nested ones too, differ only
//! in the objects' keys, and a folder's zip holds the same entries.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::path::Path;
use std::process::Command;

use serde_json::Value;
use stacksync::package::{Destination, package};
use stacksync_testkit::backend::Backend;
use stacksync_testkit::{Emulator, repo_root, unique_name};

/// Every kind of property the CLI packages that a template of one stack
/// has room for, each as a team writes it.
const PARENT: &str = "\
AWSTemplateFormatVersion: '2010-09-09'
Transform: AWS::Serverless-2016-10-31
Resources:
  Network:
    Type: AWS::CloudFormation::Stack
    Properties:
      TemplateURL: nested/network.yaml
      Parameters: {Name: !Ref AWS::StackName}
  Fn:
    Type: AWS::Lambda::Function
    Properties:
      Runtime: python3.12
      Handler: index.handler
      Role: !GetAtt Role.Arn
      Code: src
  Sam:
    Type: AWS::Serverless::Function
    Properties:
      Runtime: python3.12
      Handler: index.handler
      CodeUri: ./src
  Layer:
    Type: AWS::Lambda::LayerVersion
    Properties:
      Content: layer
  SamLayer:
    Type: AWS::Serverless::LayerVersion
    Properties:
      ContentUri: layer/
  Api:
    Type: AWS::ApiGateway::RestApi
    Properties:
      BodyS3Location: api/openapi.yaml
  SamApi:
    Type: AWS::Serverless::Api
    Properties:
      StageName: prod
      DefinitionUri: api/openapi.yaml
  Machine:
    Type: AWS::StepFunctions::StateMachine
    Properties:
      RoleArn: !GetAtt Role.Arn
      DefinitionS3Location: machine.asl.json
  Job:
    Type: AWS::Glue::Job
    Properties:
      Role: !Ref Role
      Command: {Name: glueetl, ScriptLocation: jobs/etl.py}
  Version:
    Type: AWS::ElasticBeanstalk::ApplicationVersion
    Properties:
      ApplicationName: app
      SourceBundle: site
  Inline:
    Type: AWS::Lambda::Function
    Properties:
      Runtime: python3.12
      Handler: index.handler
      Role: !GetAtt Role.Arn
      Code: {ZipFile: 'def handler(e, c): return 1'}
  Remote:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: s3://elsewhere/code.zip
  Topic:
    Type: AWS::SNS::Topic
    Properties:
      Fn::Transform:
        Name: AWS::Include
        Parameters: {Location: snippets/topic.yaml}
  Role:
    Type: AWS::IAM::Role
    Properties:
      AssumeRolePolicyDocument: {Version: '2012-10-17', Statement: []}
";

const NETWORK: &str = "\
Parameters:
  Name: {Type: String}
Resources:
  Queue:
    Type: AWS::SQS::Queue
    Properties:
      QueueName: !Sub '${Name}-q'
  Handler:
    Type: AWS::Serverless::Function
    Properties:
      Runtime: python3.12
      Handler: index.handler
      CodeUri: ../src
";

fn write(root: &Path, files: &[(&str, &str)]) {
    for (path, body) in files {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, body).unwrap();
    }
}

fn repository(root: &Path) -> Vec<(String, Vec<u8>)> {
    let files = [
        ("parent.yaml", PARENT),
        ("nested/network.yaml", NETWORK),
        (
            "src/index.py",
            "def handler(event, context):\n    return 1\n",
        ),
        ("src/lib/util.py", "X = 1\n"),
        ("layer/python/deps.py", "VERSION = '1'\n"),
        (
            "api/openapi.yaml",
            "openapi: 3.0.0\ninfo: {title: t, version: '1'}\npaths: {}\n",
        ),
        (
            "machine.asl.json",
            "{\"StartAt\": \"P\", \"States\": {\"P\": {\"Type\": \"Pass\", \"End\": true}}}",
        ),
        ("jobs/etl.py", "print('etl')\n"),
        ("site/index.html", "<p>hi</p>\n"),
        ("snippets/topic.yaml", "TopicName: included\n"),
    ];
    write(root, &files);
    let mut listed: Vec<(String, Vec<u8>)> = files
        .iter()
        .map(|(p, b)| ((*p).to_owned(), b.as_bytes().to_vec()))
        .collect();
    listed.sort();
    listed
}

/// The value with every object key the packagers chose replaced by `<key>`
/// and every URL of the bucket by `<url>` (the bucket's name kept).
fn normalized(value: &Value, bucket: &str) -> Value {
    match value {
        Value::String(s) if s.starts_with(&format!("s3://{bucket}/")) => {
            Value::String(format!("s3://{bucket}/<key>"))
        }
        Value::String(s) if s.starts_with("http") && s.contains(&format!("/{bucket}/")) => {
            Value::String("<url>".into())
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let keyed = matches!(k.as_str(), "S3Key" | "Key")
                        && (map.get("S3Bucket") == Some(&Value::String(bucket.into()))
                            || map.get("Bucket") == Some(&Value::String(bucket.into())));
                    let v = if keyed {
                        Value::String("<key>".into())
                    } else {
                        normalized(v, bucket)
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(|v| normalized(v, bucket)).collect()),
        other => other.clone(),
    }
}

fn parse(bytes: &[u8]) -> Value {
    stacksync::guard::parse_template(bytes).unwrap()
}

fn zip_names(bytes: &[u8]) -> Vec<String> {
    let mut archive = zip::ZipArchive::new(std::io::Cursor::new(bytes.to_vec())).unwrap();
    let mut names: Vec<String> = (0..archive.len())
        .map(|i| archive.by_index(i).unwrap().name().unwrap().into_owned())
        .collect();
    names.sort();
    names
}

/// The AWS CLI of the `bench` tool set.
fn aws_cli() -> std::path::PathBuf {
    let out = Command::new(repo_root().join("scripts/venv"))
        .arg("bench")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Path::new(String::from_utf8(out.stdout).unwrap().trim()).join("bin/aws")
}

#[tokio::test(flavor = "multi_thread")]
async fn stacksync_packages_a_repository_as_aws_cloudformation_package_does() {
    let emulator = Emulator::shared();
    let bucket = emulator.source_bucket(false).await;
    let root = std::env::temp_dir().join(unique_name("package-cli"));
    let files = repository(&root);

    let out = Command::new(aws_cli())
        .current_dir(&root)
        .envs(emulator.env())
        .env_remove("AWS_ENDPOINT_URL_S3")
        .env_remove("AWS_ENDPOINT_URL_CLOUDFORMATION")
        .args([
            "cloudformation",
            "package",
            "--template-file",
            "parent.yaml",
        ])
        .args([
            "--s3-bucket",
            &bucket,
            "--output-template-file",
            "packaged.yaml",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "aws cloudformation package: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let theirs = parse(&std::fs::read(root.join("packaged.yaml")).unwrap());

    let destination = Destination {
        bucket: bucket.clone(),
        url_base: format!("{}/{bucket}", emulator.endpoint()),
        prefix: String::new(),
    };
    let ours = package("parent.yaml", PARENT.as_bytes(), files, &destination).unwrap();
    let mine = parse(&ours.template);
    assert_eq!(normalized(&mine, &bucket), normalized(&theirs, &bucket));

    // The nested template: packaged by both, alike.
    let url = theirs["Resources"]["Network"]["Properties"]["TemplateURL"]
        .as_str()
        .unwrap();
    let key = url.split_once(&format!("/{bucket}/")).unwrap().1;
    let nested_theirs = parse(&Backend::Moto.object(&bucket, key).await);
    let our_url = mine["Resources"]["Network"]["Properties"]["TemplateURL"]
        .as_str()
        .unwrap();
    let our_key = our_url.split_once(&format!("/{bucket}/")).unwrap().1;
    let nested_ours = ours.objects.iter().find(|o| o.key == our_key).unwrap();
    assert_eq!(
        normalized(&parse(&ours.bytes(nested_ours).unwrap()), &bucket),
        normalized(&nested_theirs, &bucket)
    );

    // A folder's zip: the same entries.
    let code_key = theirs["Resources"]["Fn"]["Properties"]["Code"]["S3Key"]
        .as_str()
        .unwrap();
    let our_code = mine["Resources"]["Fn"]["Properties"]["Code"]["S3Key"]
        .as_str()
        .unwrap();
    let our_zip = ours.objects.iter().find(|o| o.key == our_code).unwrap();
    assert_eq!(
        zip_names(&ours.bytes(our_zip).unwrap()),
        zip_names(&Backend::Moto.object(&bucket, code_key).await)
    );
    assert_eq!(
        zip_names(&ours.bytes(our_zip).unwrap()),
        ["index.py", "lib/util.py"]
    );
    std::fs::remove_dir_all(&root).ok();
}
