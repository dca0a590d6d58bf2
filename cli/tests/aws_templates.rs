//! What a real sender sends: 22 templates from AWS's public
//! `aws-cloudformation-templates` repository, unmodified
//! (tests/fixtures/aws-templates/, whose README names the commit, each file's
//! path and the licence), each deployed twice on the emulator with the same
//! parameters and capabilities:
//!
//! - by stacksync: committed as it is to a real Git repository (`file://`),
//!   registered in a stacks file of one entry, and run with
//!   `stacksync sync -f FILE --local`;
//! - by CloudFormation directly: `CreateStack` with the same template body,
//!   under another stack name, followed to a terminal status.
//!
//! Both must agree: both created, or both failed for the same cause. Each
//! fixture's outcome on the emulator is also written down in [`FIXTURES`],
//! so that a change in the emulator is seen rather than agreed with.
//!
//! What is compared, and the normalisations made:
//! - Created: stacksync exits 0 and records the entry `Ready` with
//!   `CREATE_COMPLETE`; DescribeStacks says `CREATE_COMPLETE` for both stacks.
//! - Failed: stacksync exits 1 and records the entry `Failed`; no
//!   DescribeStacks says `CREATE_COMPLETE` for either stack (the emulator
//!   has no rollback, so a failed create is left `REVIEW_IN_PROGRESS` or
//!   `CREATE_IN_PROGRESS` there, not `ROLLBACK_COMPLETE`: the statuses
//!   themselves are not compared).
//! - The cause: CloudFormation's own message — `CreateStack`'s error
//!   (the emulator makes a stack in the call, and refuses it there), or,
//!   where a create runs and fails (AWS), the reason of the first failed
//!   resource event — must be found whole in the message stacksync records.
//!   Two exceptions, each marked in the table: where the emulator answers
//!   HTTP 500 with no message at all, both sides must report HTTP 500
//!   ([`Expect::ServerError`]); where stacksync refuses the template before
//!   CloudFormation is asked (a parameter nothing gives), its own words
//!   must name what CloudFormation's refusal names ([`Expect::RefusedFirst`]).
//! - Parameter values are the same on both sides, except that `{stack}` in
//!   a value becomes the stack's own name: a bucket, queue or dashboard name
//!   given as a parameter must differ between two stacks of one account, or
//!   the second side would fail for the first one's resource.
//!
//! The two sides of every fixture run at once, all fixtures at once (each
//! stack and named resource is its own, so the order changes nothing). The
//! stacks of both sides are deleted at the end, before anything is asserted
//! (the emulator answers some of those deletes with an error — a VPC with
//! dependencies, a stack whose outputs it cannot render — which is ignored).
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use aws_sdk_cloudformation::Client;
use aws_sdk_cloudformation::config::http::HttpResponse;
use aws_sdk_cloudformation::config::retry::RetryConfig;
use aws_sdk_cloudformation::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_cloudformation::types::{Capability, Parameter};
use common::{Cli, stderr, stdout};
use stacksync_testkit::git::GitRepo;
use stacksync_testkit::{Emulator, unique_name};

/// The most a template may be as `TemplateBody` (CreateStack's limit).
const MAX_TEMPLATE_BODY: usize = 51_200;

/// One template of the repository, as it is deployed here.
struct Fixture {
    /// Its path in aws-cloudformation/aws-cloudformation-templates, and
    /// under tests/fixtures/aws-templates/.
    path: &'static str,
    /// Given on both sides (`{stack}`: the stack's own name).
    parameters: &'static [(&'static str, &'static str)],
    /// Given on both sides.
    capabilities: &'static [&'static str],
    /// What the emulator does with it.
    expect: Expect,
}

/// A fixture's outcome on the emulator, the same on both sides.
#[derive(Debug, Clone, Copy)]
enum Expect {
    /// Both stacks `CREATE_COMPLETE`.
    Created,
    /// CloudFormation refuses the create with this message (CreateStack's
    /// error on the emulator); stacksync records it whole.
    Refused(&'static str),
    /// The emulator answers HTTP 500, with no error code or message, to
    /// `direct` (CreateStack, or DescribeStacks of the stack it made) and to
    /// `stacksync` (the call of the run that fails last); each side must
    /// report HTTP 500 from that operation.
    ServerError {
        direct: &'static str,
        stacksync: &'static str,
    },
    /// stacksync refuses the template before CloudFormation is asked, in
    /// its own words, naming `names`; CloudFormation refuses it with
    /// `cloudformation`, which names it too.
    RefusedFirst {
        names: &'static str,
        cloudformation: &'static str,
    },
}

const IAM: &[&str] = &["CAPABILITY_IAM"];
/// A template with a `Transform`: CreateStack wants CAPABILITY_AUTO_EXPAND
/// (a change set, stacksync's way, does not; it is given on both sides).
const EXPAND: &[&str] = &["CAPABILITY_AUTO_EXPAND"];
/// No such subnet, VPC or key in the emulator.
const SUBNET: &str = "subnet-0123456789abcdef0";
const VPC: &str = "vpc-0123456789abcdef0";
const KEY: &str = "stacksync-test-key";

/// The 22 templates: 11 the emulator creates, 11 it does not.
const FIXTURES: &[Fixture] = &[
    Fixture {
        path: "SQS/SQSStandardQueue.json",
        parameters: &[],
        capabilities: &[],
        expect: Expect::Created,
    },
    Fixture {
        path: "SQS/SQSFIFOQueue.yaml",
        parameters: &[("QueueName", "{stack}")],
        capabilities: &[],
        expect: Expect::Created,
    },
    Fixture {
        path: "SNS/SNSTopic.yaml",
        parameters: &[(
            "SubscriptionEndPoint",
            "arn:aws:sqs:us-east-1:123456789012:{stack}",
        )],
        capabilities: &[],
        expect: Expect::Created,
    },
    Fixture {
        path: "DynamoDB/DynamoDB_Table.json",
        parameters: &[("HashKeyElementName", "id")],
        capabilities: &[],
        expect: Expect::Created,
    },
    Fixture {
        path: "VPC/VPC_With_Managed_NAT_And_Private_Subnet.json",
        parameters: &[],
        capabilities: &[],
        expect: Expect::Created,
    },
    Fixture {
        path: "S3/compliant-bucket.yaml",
        parameters: &[("AppName", "{stack}")],
        capabilities: IAM,
        expect: Expect::Created,
    },
    Fixture {
        path: "CloudWatch/CloudWatch_Dashboard_NAT_FlowLogs.json",
        parameters: &[
            ("NatGatewayPrivateIP", "10.0.0.10"),
            ("NatGatewayID", "nat-{stack}"),
            ("VpcCidr", "10.0.0.0/16"),
            ("LogGroupName", "{stack}-flow-logs"),
        ],
        capabilities: &[],
        expect: Expect::Created,
    },
    Fixture {
        path: "Solutions/VPCPeering/templates/VPCPeering-Accepter-Role.cfn.yaml",
        parameters: &[("PeerOwnerIds", "123456789012")],
        capabilities: IAM,
        expect: Expect::Created,
    },
    Fixture {
        path: "EMR/EMRCLusterGangliaWithSparkOrS3backedHbase.yaml",
        parameters: &[("KeyName", KEY), ("Applications", "Spark")],
        capabilities: IAM,
        expect: Expect::Created,
    },
    Fixture {
        path: "S3/S3_LambdaTrigger.yaml",
        parameters: &[("NotificationBucket", "{stack}")],
        capabilities: IAM,
        expect: Expect::Created,
    },
    // A macro no one has registered: AWS refuses it ("No transform named
    // …"); the emulator does not run macros, and creates what is there.
    Fixture {
        path: "CloudFormation/MacrosExamples/Explode/test.yaml",
        parameters: &[],
        capabilities: EXPAND,
        expect: Expect::Created,
    },
    // The emulator knows engine names in lower case only.
    Fixture {
        path: "RDS/RDS_PIOPS.yaml",
        parameters: &[("DBUser", "admin")],
        capabilities: &[],
        expect: Expect::Refused(
            "Value MySQL for parameter Engine is invalid. Reason: engine MySQL not supported",
        ),
    },
    Fixture {
        path: "EC2/EC2InstanceWithSecurityGroupSample.json",
        parameters: &[("KeyName", KEY), ("Subnets", SUBNET)],
        capabilities: &[],
        expect: Expect::Refused("The subnet ID 'subnet-0123456789abcdef0' does not exist"),
    },
    Fixture {
        path: "Solutions/VPCFlowLogs/templates/VPCFlowLogsCloudWatch.cfn.yaml",
        parameters: &[("VPCFlowLogsCloudWatchKMSKey", ""), ("VPCID", VPC)],
        capabilities: IAM,
        expect: Expect::Refused("VpcID vpc-0123456789abcdef0 does not exist."),
    },
    // The emulator reads `!Select [0, !GetAZs …]` in YAML short form wrongly
    // (the same template in JSON fails differently, on the region).
    Fixture {
        path: "ECS/FargateLaunchType/clusters/public-vpc.yaml",
        parameters: &[],
        capabilities: IAM,
        expect: Expect::Refused(
            "Value ([(ScalarNode(tag='tag:yaml.org,2002:str', value='Ref'), \
             ScalarNode(tag='tag:yaml.org,2002:str', value='AWS::Region'))]a) for parameter \
             availabilityZone is invalid.",
        ),
    },
    // Imports what the cluster stack (named `production` by default) exports.
    Fixture {
        path: "ECS/FargateLaunchType/services/public-service.json",
        parameters: &[],
        capabilities: &[],
        expect: Expect::Refused("No export named production:ECSTaskExecutionRole found."),
    },
    // The emulator's classic load balancer has no `SourceSecurityGroup.*`.
    Fixture {
        path: "ElasticLoadBalancing/ELBWithLockedDownAutoScaledInstances.yaml",
        parameters: &[("KeyName", KEY)],
        capabilities: &[],
        expect: Expect::Refused(
            "Template error: resource ElasticLoadBalancer does not support attribute type \
             SourceSecurityGroup in Fn::GetAtt",
        ),
    },
    Fixture {
        path: "CloudFormation/CustomResources/getfromjson/example-templates/getfromjson-consumer.yml",
        parameters: &[],
        capabilities: &[],
        expect: Expect::Refused("No export named Custom-GetFromJson found."),
    },
    Fixture {
        path: "AutoScaling/AutoScalingMultiAZWithNotifications.json",
        parameters: &[
            ("OperatorEMail", "ops@example.com"),
            ("KeyName", KEY),
            (
                "KmsKeyArn",
                "arn:aws:kms:us-east-1:123456789012:key/0123abcd-0123-abcd-0123-0123456789ab",
            ),
            (
                "CertificateArn",
                "arn:aws:acm:us-east-1:123456789012:certificate/0123abcd-0123-abcd-0123-0123456789ab",
            ),
            ("SecurityGroups", "sg-0123456789abcdef0"),
            ("Subnets", SUBNET),
            ("AZs", "us-east-1a,us-east-1b"),
            ("VPC", VPC),
        ],
        capabilities: &[],
        expect: Expect::Refused("The VPC ID 'vpc-0123456789abcdef0' is not found"),
    },
    // `Fn::ForEach` in `Outputs` (AWS::LanguageExtensions): the emulator
    // fails inside CreateStack and CreateChangeSet alike.
    Fixture {
        path: "CloudFormation/fn-foreach-s3-outputs.yaml",
        parameters: &[],
        capabilities: EXPAND,
        expect: Expect::ServerError {
            direct: "CreateStack",
            stacksync: "CreateChangeSet",
        },
    },
    // AWS::AppRunner::Service is unknown to the emulator: the stack is made,
    // but its outputs (`!GetAtt AppRunner.ServiceUrl`) cannot be rendered, so
    // every DescribeStacks of it is an HTTP 500.
    Fixture {
        path: "AppRunner/AppRunnerServiceFromECR.yaml",
        parameters: &[],
        capabilities: IAM,
        expect: Expect::ServerError {
            direct: "DescribeStacks",
            stacksync: "DescribeStacks",
        },
    },
    // No value for a parameter without a default (the JSON sibling above is
    // given one).
    Fixture {
        path: "DynamoDB/DynamoDB_Table.yaml",
        parameters: &[],
        capabilities: &[],
        expect: Expect::RefusedFirst {
            names: "HashKeyElementName",
            cloudformation: "Missing parameter HashKeyElementName",
        },
    },
];

/// What one side ended with.
#[derive(Default)]
struct Side {
    stack: String,
    /// Created (`CREATE_COMPLETE`).
    created: bool,
    /// Why not: the operation and what it said.
    cause: String,
    /// CloudFormation's own message, when it gave one.
    message: Option<String>,
    /// The HTTP status of a failed call, when the answer had one.
    http_status: Option<u16>,
    /// DescribeStacks of the stack after the run: its status, or the error.
    described: String,
    /// stacksync only: its exit code, the entry's phase and what it printed.
    exit: Option<i32>,
    phase: String,
    printed: String,
}

impl std::fmt::Debug for Side {
    /// All but what stacksync printed of other entries (the status table
    /// that ends a sync lists every entry of the registry).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let printed: Vec<&str> = self
            .printed
            .lines()
            .filter(|l| l.contains(&self.stack))
            .collect();
        f.debug_struct("Side")
            .field("stack", &self.stack)
            .field("created", &self.created)
            .field("cause", &self.cause)
            .field("message", &self.message)
            .field("http_status", &self.http_status)
            .field("described", &self.described)
            .field("exit", &self.exit)
            .field("phase", &self.phase)
            .field("printed", &printed)
            .finish()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn stacksync_and_cloudformation_agree_on_22_unmodified_aws_templates() {
    assert_eq!(FIXTURES.len(), 22);
    let fixtures_dir =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/aws-templates");
    let templates: Vec<Vec<u8>> = FIXTURES
        .iter()
        .map(|f| std::fs::read(fixtures_dir.join(f.path)).unwrap())
        .collect();
    for (f, body) in FIXTURES.iter().zip(&templates) {
        assert!(
            body.len() <= MAX_TEMPLATE_BODY,
            "{} fits in a TemplateBody",
            f.path
        );
    }

    // The templates as they are, at their paths, in one commit.
    let repo = GitRepo::new("aws-templates");
    let files: Vec<(&str, &[u8])> = FIXTURES
        .iter()
        .zip(&templates)
        .map(|(f, body)| (f.path, body.as_slice()))
        .collect();
    repo.commit(&files, "22 templates from aws-cloudformation-templates");

    let (cli, _registry) = Cli::new("aws-templates").await;
    let bucket = unique_name("aws-templates-bucket");
    let run = unique_name("awst");
    let cfn = Client::from_conf(
        aws_sdk_cloudformation::config::Builder::from(&Emulator::shared().sdk_config())
            // One call, one answer: a create is not sent twice.
            .retry_config(RetryConfig::disabled())
            .build(),
    );

    let mut tasks = Vec::new();
    for (i, (fixture, body)) in FIXTURES.iter().zip(&templates).enumerate() {
        let synced = format!("{run}-{i:02}-s");
        let direct_name = format!("{run}-{i:02}-d");
        let file = cli.file(
            &format!("stacks-{i:02}.yaml"),
            &stacks_file(fixture, &synced, &repo.file_url()),
        );
        let command = sync_command(&cli, &bucket, &file);
        let status = status_command(&cli, &bucket, &synced);
        let body = String::from_utf8(body.clone()).unwrap();
        let cfn = cfn.clone();
        tasks.push(tokio::spawn(async move {
            let (synced, direct) = tokio::join!(
                by_stacksync(&cfn, command, status, synced),
                directly(&cfn, fixture, &body, direct_name),
            );
            (synced, direct)
        }));
    }
    let mut outcomes = Vec::new();
    for task in tasks {
        outcomes.push(task.await.unwrap());
    }

    for (synced, direct) in &outcomes {
        delete_stack(&cfn, &synced.stack).await;
        delete_stack(&cfn, &direct.stack).await;
    }

    // What each side did, one line each (shown with --no-capture, or on failure).
    for (fixture, (synced, direct)) in FIXTURES.iter().zip(&outcomes) {
        let said = |side: &Side| match side.created {
            true => "CREATE_COMPLETE".to_owned(),
            false => side.cause.clone(),
        };
        println!(
            "{}\n    stacksync: {}\n    direct:    {}",
            fixture.path,
            said(synced),
            said(direct)
        );
    }

    let mut problems = String::new();
    for (fixture, (synced, direct)) in FIXTURES.iter().zip(&outcomes) {
        for problem in judge(fixture.expect, synced, direct) {
            let _ = writeln!(
                problems,
                "{}: {problem}\n    stacksync: {synced:?}\n    direct:    {direct:?}",
                fixture.path
            );
        }
    }
    assert!(problems.is_empty(), "\n{problems}");
}

/// The stacks file of one entry: the template at its path in `repo`, the
/// fixture's parameters and capabilities.
fn stacks_file(fixture: &Fixture, stack: &str, repo: &str) -> String {
    let mut entry = serde_json::json!({
        "name": stack,
        "source": {"git": repo, "path": fixture.path},
    });
    if !fixture.parameters.is_empty() {
        entry["parameters"] = fixture
            .parameters
            .iter()
            .map(|(k, v)| ((*k).to_owned(), serde_json::Value::from(value(v, stack))))
            .collect::<serde_json::Map<_, _>>()
            .into();
    }
    if !fixture.capabilities.is_empty() {
        entry["capabilities"] = fixture.capabilities.into();
    }
    serde_yaml_ng::to_string(&serde_json::json!({ "stacks": [entry] })).unwrap()
}

/// A parameter value for the stack `stack`.
fn value(template: &str, stack: &str) -> String {
    template.replace("{stack}", stack)
}

fn stacksync(cli: &Cli, bucket: &str, args: &[&str]) -> Command {
    let mut all = vec!["--bucket", bucket];
    all.extend_from_slice(args);
    let mut cmd = cli.command(&all);
    cmd.env("STACKSYNC_SPEEDUP", "1000");
    cmd
}

fn sync_command(cli: &Cli, bucket: &str, file: &str) -> Command {
    stacksync(cli, bucket, &["sync", "-f", file, "--local"])
}

fn status_command(cli: &Cli, bucket: &str, stack: &str) -> Command {
    stacksync(cli, bucket, &["-o", "json", "status", stack])
}

async fn output(mut cmd: Command) -> Output {
    tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap()
}

/// `stacksync sync -f FILE --local`, then what the registry and
/// CloudFormation say of the entry's stack.
async fn by_stacksync(cfn: &Client, sync: Command, status: Command, stack: String) -> Side {
    let out = output(sync).await;
    let printed = format!("{}{}", stdout(&out), stderr(&out));
    let rows: serde_json::Value =
        serde_json::from_slice(&output(status).await.stdout).unwrap_or(serde_json::Value::Null);
    let row = &rows[0];
    let phase = row["phase"].as_str().unwrap_or("").to_owned();
    let (described, _) = describe(cfn, &stack).await;
    Side {
        created: row["stackStatus"] == "CREATE_COMPLETE",
        cause: row["message"].as_str().unwrap_or("").to_owned(),
        exit: out.status.code(),
        phase,
        described,
        printed,
        stack,
        ..Side::default()
    }
}

/// CreateStack of the template, followed to a terminal status.
async fn directly(cfn: &Client, fixture: &Fixture, body: &str, stack: String) -> Side {
    let parameters = fixture.parameters.iter().map(|(k, v)| {
        Parameter::builder()
            .parameter_key(*k)
            .parameter_value(value(v, &stack))
            .build()
    });
    let capabilities = fixture.capabilities.iter().map(|c| Capability::from(*c));
    let created = cfn
        .create_stack()
        .stack_name(&stack)
        .template_body(body)
        .set_parameters(Some(parameters.collect()))
        .set_capabilities(Some(capabilities.collect()))
        .send()
        .await;
    let id = match created {
        Ok(out) => out.stack_id().unwrap_or(&stack).to_owned(),
        Err(e) => {
            let (described, _) = describe(cfn, &stack).await;
            return Side {
                described,
                ..failed(stack, "CreateStack", &e)
            };
        }
    };
    // The emulator answers with the stack complete; AWS works on it first.
    let mut status = String::new();
    for _ in 0..600 {
        match cfn.describe_stacks().stack_name(&id).send().await {
            Ok(out) => {
                status = out
                    .stacks()
                    .first()
                    .and_then(|s| s.stack_status())
                    .map(|s| s.as_str().to_owned())
                    .unwrap_or_default();
            }
            Err(e) => {
                return Side {
                    described: error_text("DescribeStacks", &e),
                    ..failed(stack, "DescribeStacks", &e)
                };
            }
        }
        if !status.ends_with("_IN_PROGRESS") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    if status == "CREATE_COMPLETE" {
        return Side {
            created: true,
            described: status,
            stack,
            ..Side::default()
        };
    }
    let reason = first_failed_event(cfn, &id).await;
    Side {
        cause: format!("{status}: {}", reason.as_deref().unwrap_or("")),
        message: reason,
        described: status,
        stack,
        ..Side::default()
    }
}

/// The reason of the stack's first failed resource event, oldest first.
async fn first_failed_event(cfn: &Client, stack: &str) -> Option<String> {
    let mut events = Vec::new();
    let mut pages = cfn
        .describe_stack_events()
        .stack_name(stack)
        .into_paginator()
        .send();
    while let Some(Ok(page)) = pages.next().await {
        events.extend(page.stack_events().to_vec());
    }
    events
        .iter()
        .rev()
        .find(|e| {
            e.resource_status()
                .is_some_and(|s| s.as_str().ends_with("_FAILED"))
        })
        .and_then(|e| e.resource_status_reason().map(str::to_owned))
}

fn failed<E: ProvideErrorMetadata + std::fmt::Debug>(
    stack: String,
    operation: &str,
    e: &SdkError<E, HttpResponse>,
) -> Side {
    Side {
        cause: error_text(operation, e),
        message: e.message().map(str::to_owned),
        http_status: http_status(e),
        stack,
        ..Side::default()
    }
}

fn http_status<E>(e: &SdkError<E, HttpResponse>) -> Option<u16> {
    e.raw_response().map(|r| r.status().as_u16())
}

/// `OPERATION: CODE: MESSAGE`, or the HTTP status where the answer had
/// neither, or the SDK's own words.
fn error_text<E: ProvideErrorMetadata + std::fmt::Debug>(
    operation: &str,
    e: &SdkError<E, HttpResponse>,
) -> String {
    match (e.code(), e.message(), http_status(e)) {
        (code, Some(message), _) => format!("{operation}: {}: {message}", code.unwrap_or("")),
        (Some(code), None, _) => format!("{operation}: {code}"),
        (None, None, Some(status)) => format!("{operation}: HTTP {status}"),
        (None, None, None) => format!("{operation}: {e:?}"),
    }
}

/// DescribeStacks of `stack`: its status, or the error.
async fn describe(cfn: &Client, stack: &str) -> (String, bool) {
    match cfn.describe_stacks().stack_name(stack).send().await {
        Ok(out) => {
            let status = out
                .stacks()
                .first()
                .and_then(|s| s.stack_status())
                .map(|s| s.as_str().to_owned())
                .unwrap_or_default();
            (status, true)
        }
        Err(e) => (error_text("DescribeStacks", &e), false),
    }
}

/// Deletes the stack of that name (twice: the emulator can hold two stacks
/// of one name after a create was tried again); errors are ignored.
async fn delete_stack(cfn: &Client, stack: &str) {
    for _ in 0..2 {
        let _ = cfn.delete_stack().stack_name(stack).send().await;
    }
}

/// Whatever of `expect` either side did not do, and any disagreement.
fn judge(expect: Expect, synced: &Side, direct: &Side) -> Vec<String> {
    let mut problems = Vec::new();
    let mut check = |ok: bool, what: &str| {
        if !ok {
            problems.push(what.to_owned());
        }
    };
    check(
        synced.created == direct.created,
        "the two sides disagree: one created the stack, the other did not",
    );
    if let Expect::Created = expect {
        check(synced.exit == Some(0), "stacksync exits 0");
        check(
            synced
                .printed
                .contains(&format!("✓ {}: applied", synced.stack)),
            "stacksync prints the entry applied",
        );
        check(synced.phase == "Ready", "stacksync records Ready");
        check(synced.created, "stacksync records CREATE_COMPLETE");
        check(
            synced.described == "CREATE_COMPLETE",
            "stacksync's stack is CREATE_COMPLETE",
        );
        check(direct.created, "CreateStack creates the stack");
        check(
            direct.described == "CREATE_COMPLETE",
            "the direct stack is CREATE_COMPLETE",
        );
        return problems;
    }
    check(synced.exit == Some(1), "stacksync exits 1");
    check(
        synced
            .printed
            .contains(&format!("failed: {}: ", synced.stack)),
        "stacksync prints the entry failed",
    );
    check(synced.phase == "Failed", "stacksync records Failed");
    check(!synced.created, "stacksync does not record CREATE_COMPLETE");
    check(
        synced.described != "CREATE_COMPLETE",
        "stacksync's stack is not CREATE_COMPLETE",
    );
    check(!direct.created, "CreateStack does not create the stack");
    check(
        direct.described != "CREATE_COMPLETE",
        "the direct stack is not CREATE_COMPLETE",
    );
    match expect {
        Expect::Created => {}
        Expect::Refused(message) => {
            check(
                direct
                    .message
                    .as_deref()
                    .is_some_and(|m| m.contains(message)),
                &format!("CloudFormation says {message:?}"),
            );
            check(
                direct
                    .message
                    .as_deref()
                    .is_some_and(|m| synced.cause.contains(m)),
                "stacksync records CloudFormation's message whole",
            );
        }
        Expect::ServerError {
            direct: direct_op,
            stacksync: synced_op,
        } => {
            check(
                direct.http_status == Some(500) && direct.message.is_none(),
                "the emulator answers HTTP 500 with no message",
            );
            check(
                direct.cause.starts_with(&format!("{direct_op}:")),
                &format!("the direct side's HTTP 500 is {direct_op}'s"),
            );
            check(
                synced
                    .cause
                    .contains(&format!("{synced_op}: HTTP 500 Internal Server Error")),
                &format!("stacksync records {synced_op}'s HTTP 500"),
            );
        }
        Expect::RefusedFirst {
            names,
            cloudformation,
        } => {
            check(
                direct
                    .message
                    .as_deref()
                    .is_some_and(|m| m.contains(cloudformation) && m.contains(names)),
                &format!("CloudFormation says {cloudformation:?}"),
            );
            check(
                synced.cause.contains(names),
                &format!("stacksync's refusal names {names}"),
            );
            check(
                synced.described.contains("does not exist"),
                "stacksync asks CloudFormation for nothing: no stack",
            );
        }
    }
    problems
}
