//! The two CloudFormation back ends the scenarios about CloudFormation's
//! behaviour run on (issue "A second opinion"): moto, patched by
//! `scripts/moto_server.py`, and LocalStack's community core, each a
//! separate reading of AWS.
//!
//! On LocalStack, CloudFormation and S3 (where CloudFormation reads a
//! `TemplateURL`) are LocalStack's, and so is every service the
//! CloudFormation port reaches with the same configuration (SSM and
//! Secrets Manager, where a stack's values come from; STS, which assumes a
//! stack's role); the registry (DynamoDB), the event bus and Step Functions
//! stay in moto.
//!
//! One scenario body takes a [`Backend`]; [`scenarios!`](crate::scenarios)
//! makes a test of it on each. A scenario that cannot run on one back end
//! calls [`Backend::skip`], which says why in one line and adds the line to
//! `$STACKSYNC_TEST_SKIPS`; `scripts/test` prints them and their count at
//! the end of the run.

use std::collections::BTreeMap;

use aws_config::SdkConfig;
use stacksync::adapters::cloudformation::SdkCloudFormationFactory;

use crate::Emulator;
use crate::counted::CallCounter;
use crate::harness::Harness;
use crate::iam::record::counting_http_client;

/// Where CloudFormation's behaviour comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// moto server, with `scripts/moto_server.py`'s patches.
    Moto,
    /// LocalStack's community core (`STACKSYNC_TEST_LOCALSTACK`), the rest in moto.
    LocalStack,
}

/// The variable `scripts/emulator start --with localstack` sets to LocalStack's endpoint.
pub const LOCALSTACK_ENV: &str = "STACKSYNC_TEST_LOCALSTACK";

impl Backend {
    /// `moto` or `localstack`.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Moto => "moto",
            Backend::LocalStack => "localstack",
        }
    }

    /// LocalStack, when it was started for this run; otherwise the skip is
    /// recorded (`scenario` named) and `None`.
    pub fn localstack(scenario: &str) -> Option<Backend> {
        if localstack_endpoint().is_some() {
            Some(Backend::LocalStack)
        } else {
            Backend::LocalStack.skip(
                scenario,
                "LocalStack not started (scripts/emulator start --with localstack; scripts/test does)",
            );
            None
        }
    }

    /// Where this back end serves CloudFormation and S3.
    pub fn endpoint(self) -> String {
        match self {
            Backend::Moto => Emulator::shared().endpoint().to_owned(),
            Backend::LocalStack => localstack_endpoint().unwrap_or_else(|| {
                panic!("{LOCALSTACK_ENV} is not set: use Backend::localstack, which skips")
            }),
        }
    }

    /// The SDK configuration for CloudFormation, S3 and the services a
    /// stack's values come from (calls recorded as [`Emulator::sdk_config`]'s).
    pub fn sdk_config(self) -> SdkConfig {
        Emulator::shared().sdk_config_at(&self.endpoint())
    }

    /// [`Self::sdk_config`] with the credentials of `role` (AssumeRole on
    /// this back end: each emulator puts what they make in the role's account).
    pub async fn assumed_config(self, role: &str) -> SdkConfig {
        crate::assumed(self.sdk_config(), role).await
    }

    /// A CloudFormation client for this back end.
    pub fn cloudformation(self) -> aws_sdk_cloudformation::Client {
        aws_sdk_cloudformation::Client::new(&self.sdk_config())
    }

    /// An S3 client for this back end (path-style, as for any emulator).
    pub fn s3(self) -> aws_sdk_s3::Client {
        stacksync::adapters::s3_client(&self.sdk_config(), true)
    }

    /// An object's bytes (it must be there).
    pub async fn object(self, bucket: &str, key: &str) -> Vec<u8> {
        let out = self
            .s3()
            .get_object()
            .bucket(bucket)
            .key(key)
            .send()
            .await
            .expect("object read");
        out.body
            .collect()
            .await
            .expect("body read")
            .into_bytes()
            .to_vec()
    }

    pub async fn stack_status(self, stack: &str) -> Option<String> {
        let out = self
            .cloudformation()
            .describe_stacks()
            .stack_name(stack)
            .send()
            .await
            .ok()?;
        out.stacks()
            .first()
            .and_then(|s| s.stack_status())
            .map(|s| s.as_str().to_owned())
    }

    /// Waits until an operation started on `stack` outside stacksync has
    /// ended ([`settled`]).
    pub async fn settled(self, stack: &str) -> Option<String> {
        settled(&self.cloudformation(), stack).await
    }

    /// The change sets of `stack`, as ListChangeSets gives them (moto lists
    /// every stack's: those of other stacks are left out).
    pub async fn change_sets(
        self,
        stack: &str,
    ) -> Vec<aws_sdk_cloudformation::types::ChangeSetSummary> {
        let listed = self
            .cloudformation()
            .list_change_sets()
            .stack_name(stack)
            .send()
            .await
            .unwrap_or_else(|e| panic!("the change sets of {stack} are listed: {e:?}"));
        listed
            .summaries()
            .iter()
            .filter(|c| c.stack_name() == Some(stack))
            .cloned()
            .collect()
    }

    /// The stack `name` as DescribeStacks gives it (panics without one).
    pub async fn stack(self, name: &str) -> aws_sdk_cloudformation::types::Stack {
        let out = self
            .cloudformation()
            .describe_stacks()
            .stack_name(name)
            .send()
            .await
            .unwrap_or_else(|e| panic!("the stack {name} is described: {e:?}"));
        out.stacks()
            .first()
            .cloned()
            .unwrap_or_else(|| panic!("no stack {name}"))
    }

    /// The tags of the stack `name`, as DescribeStacks gives them.
    pub async fn stack_tags(self, name: &str) -> BTreeMap<String, String> {
        let stack = self.stack(name).await;
        stack
            .tags()
            .iter()
            .map(|t| (t.key().unwrap_or("").into(), t.value().unwrap_or("").into()))
            .collect()
    }

    /// The parameters of the stack `name`, as DescribeStacks gives them.
    pub async fn stack_parameters(self, name: &str) -> BTreeMap<String, String> {
        let stack = self.stack(name).await;
        stack
            .parameters()
            .iter()
            .map(|p| {
                (
                    p.parameter_key().unwrap_or("").into(),
                    p.parameter_value().unwrap_or("").into(),
                )
            })
            .collect()
    }

    /// The steps and the machine, CloudFormation and S3 on this back end,
    /// the registry and the event bus in moto; its CloudFormation calls
    /// counted in `cloudformation_calls` (neither emulator's own record:
    /// LocalStack keeps none).
    pub async fn harness(self, prefix: &str) -> Harness<SdkCloudFormationFactory> {
        let counter = CallCounter::new("cloudformation");
        let config = self
            .sdk_config()
            .to_builder()
            .http_client(counting_http_client(counter.clone()))
            .build();
        let mut harness = Harness::on(prefix, &config, &self.endpoint()).await;
        harness.cloudformation_calls = counter;
        harness
    }

    /// Sets what a child process (the CLI) needs in `command`'s
    /// environment: moto for every service, and on LocalStack its endpoint
    /// for CloudFormation and S3. On moto the per-service variables are
    /// removed, so none leaks in from the environment of the test run.
    pub fn configure(self, command: &mut std::process::Command) {
        command.envs(Emulator::shared().env());
        for service in SERVICES {
            match self {
                Backend::Moto => command.env_remove(service),
                Backend::LocalStack => command.env(service, self.endpoint()),
            };
        }
    }

    /// Records that `scenario` does not run on this back end, and why (one
    /// line): printed now, and listed by `scripts/test` at the end.
    pub fn skip(self, scenario: &str, why: &str) {
        let line = format!("{}\t{scenario}\t{why}", self.name());
        eprintln!("skipped on {}: {scenario}: {why}", self.name());
        if let Ok(path) = std::env::var("STACKSYNC_TEST_SKIPS") {
            use std::io::Write;
            let written = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .and_then(|mut f| writeln!(f, "{line}"));
            if let Err(e) = written {
                panic!("the skip could not be recorded in {path}: {e}");
            }
        }
    }
}

/// A queue named after its stack with `suffix`, its visibility `seconds`:
/// renaming it (another `suffix`) replaces it, where CloudFormation says so
/// (LocalStack; moto reports no replacements), a new visibility does not.
pub fn named_queue(suffix: &str, seconds: u32) -> Vec<u8> {
    format!(
        "Resources:\n  Queue:\n    Type: AWS::SQS::Queue\n    Properties:\n      \
         QueueName: !Sub '${{AWS::StackName}}-{suffix}'\n      VisibilityTimeout: {seconds}\n"
    )
    .into_bytes()
}

/// The services LocalStack serves for a scenario (the SDK's variables): as
/// in-process, where [`Backend::sdk_config`] serves the CloudFormation port
/// (and the STS that assumes a stack's role).
const SERVICES: [&str; 5] = [
    "AWS_ENDPOINT_URL_CLOUDFORMATION",
    "AWS_ENDPOINT_URL_S3",
    "AWS_ENDPOINT_URL_SSM",
    "AWS_ENDPOINT_URL_SECRETS_MANAGER",
    "AWS_ENDPOINT_URL_STS",
];

/// Waits until an operation started on `stack` outside stacksync (a
/// test's own UpdateStack or DeleteStack, as a person's in the console) has
/// ended, as AWS and LocalStack run them, asynchronously: the status it
/// ended in, `None` once the stack is gone. Through `cfn`, which may be
/// another account's or region's. Panics after a minute.
pub async fn settled(cfn: &aws_sdk_cloudformation::Client, stack: &str) -> Option<String> {
    for _ in 0..600 {
        let out = cfn.describe_stacks().stack_name(stack).send().await;
        let status = out.ok().and_then(|o| {
            o.stacks()
                .first()
                .and_then(|s| s.stack_status())
                .map(|s| s.as_str().to_owned())
        });
        match status.as_deref() {
            None | Some("DELETE_COMPLETE") => return None,
            Some(s) if !s.ends_with("_IN_PROGRESS") => return status,
            _ => tokio::time::sleep(std::time::Duration::from_millis(100)).await,
        }
    }
    panic!("{stack} did not settle in a minute")
}

fn localstack_endpoint() -> Option<String> {
    std::env::var(LOCALSTACK_ENV).ok().filter(|e| !e.is_empty())
}

/// One test per scenario and back end: `on_moto::NAME` and
/// `on_localstack::NAME`, each calling the scenario `async fn NAME(Backend)`
/// of the test file. Without LocalStack started, its tests skip (recorded).
#[macro_export]
macro_rules! scenarios {
    ($($scenario:ident),+ $(,)?) => {
        mod on_moto {
            $(
                #[tokio::test(flavor = "multi_thread")]
                async fn $scenario() {
                    super::$scenario($crate::backend::Backend::Moto).await
                }
            )+
        }
        mod on_localstack {
            $(
                #[tokio::test(flavor = "multi_thread")]
                async fn $scenario() {
                    if let Some(backend) = $crate::backend::Backend::localstack(stringify!($scenario)) {
                        super::$scenario(backend).await
                    }
                }
            )+
        }
    };
}
