//! The second interpreter: the reconcile definition run by moto's own Step
//! Functions interpreter, its Lambda tasks forwarded (scripts/moto_server.py)
//! to the real function binaries, started here as Lambda runtime processes.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use stacksync::reconcile::asl_runner::RECONCILE_ASL;
use stacksync::reconcile::steps::StepName;

use crate::{Emulator, repo_root, unique_name};

/// A one-file zip, for CreateFunction (the code never runs: invocations go
/// to the local processes).
const DUMMY_ZIP: &str = "UEsDBBQAAAAAAEYfdl0dnfsECgAAAAoAAAAJAAAAYm9vdHN0cmFwIyEvYmluL3NoClBLAQIUAxQAAAAAAEYfdl0dnfsECgAAAAoAAAAJAAAAAAAAAAAAAACAAQAAAABib290c3RyYXBQSwUGAAAAAAEAAQA3AAAAMQAAAAAA";

/// An Authorization header the emulator routes by (it checks no signature):
/// the credential scope names the service.
fn unsigned(service: &str) -> String {
    format!(
        "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/{service}/aws4_request, \
         SignedHeaders=host, Signature=0"
    )
}

/// The function binaries, running against the emulator; killed on drop.
#[derive(Debug)]
pub struct Functions {
    children: Vec<Child>,
    pub state_machine_arn: String,
}

impl Drop for Functions {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Where cargo put the workspace's binaries (next to this test's `deps/`).
fn binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .map(PathBuf::from)
        .expect("target folder");
    let path = dir.join(name);
    if !path.exists() {
        let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args(["build", "--quiet", "-p", name])
            .current_dir(repo_root())
            .status()
            .expect("cargo runs");
        assert!(status.success(), "cargo build -p {name}");
    }
    path
}

impl Emulator {
    /// An AWS JSON-protocol call straight to the emulator (it does not check signatures).
    pub fn aws_json(&self, target: &str, body: &Value) -> Value {
        let text = self.raw_request(
            "POST",
            "/",
            &[
                ("X-Amz-Target", target),
                ("Content-Type", "application/x-amz-json-1.0"),
                ("Authorization", &unsigned("states")),
            ],
            &body.to_string(),
        );
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{target}: not JSON ({e}): {text:?}"))
    }

    /// Turns on moto's Step Functions interpreter (and Lambda without Docker).
    ///
    /// moto keeps the state machines of its interpreter apart from the ones
    /// it only records: a machine created before the switch is not found
    /// after it. Tests share one emulator, so every test that creates a
    /// machine turns the interpreter on first ([`Emulator::pass_machine`],
    /// [`Emulator::deploy_functions`]): all machines live on the same side.
    pub fn execute_state_machines(&self) {
        self.moto_api(
            "POST",
            "/moto-api/config",
            r#"{"stepfunctions": {"execute_state_machine": true}, "lambda": {"use_docker": false}}"#,
        );
    }

    /// A state machine of one `Pass` state (its executions succeed at once):
    /// the target of trigger tests, which count the executions started.
    pub async fn pass_machine(&self, prefix: &str) -> String {
        self.execute_state_machines();
        aws_sdk_sfn::Client::new(&self.sdk_config())
            .create_state_machine()
            .name(unique_name(prefix))
            .definition(r#"{"StartAt": "P", "States": {"P": {"Type": "Pass", "End": true}}}"#)
            .role_arn("arn:aws:iam::123456789012:role/stacksync-test")
            .send()
            .await
            .expect("state machine created")
            .state_machine_arn
    }

    /// Starts the seven function binaries, creates their functions and the
    /// reconcile state machine in the emulator, and turns on its interpreter.
    pub fn deploy_functions(&self, table: &str, bucket: &str) -> Functions {
        self.deploy_functions_with(table, bucket, &[])
    }

    /// The same, with more environment for the functions (the installation's
    /// parameters, as template.yaml gives them).
    pub fn deploy_functions_with(
        &self,
        table: &str,
        bucket: &str,
        environment: &[(&str, &str)],
    ) -> Functions {
        let runtime = self
            .lambda_runtime()
            .expect("the emulator serves a Lambda Runtime API (scripts/moto_server.py)")
            .to_owned();
        self.execute_state_machines();
        let prefix = unique_name("fn");
        // Lambda checks that its role exists (and may be assumed by Lambda).
        let trust = "%7B%22Version%22%3A%222012-10-17%22%2C%22Statement%22%3A%5B%7B%22Effect%22%3A%22Allow%22%2C%22Principal%22%3A%7B%22Service%22%3A%22lambda.amazonaws.com%22%7D%2C%22Action%22%3A%22sts%3AAssumeRole%22%7D%5D%7D";
        self.raw_request(
            "POST",
            "/",
            &[("Content-Type", "application/x-www-form-urlencoded"), ("Authorization", &unsigned("iam"))],
            &format!("Action=CreateRole&Version=2010-05-08&RoleName={prefix}&AssumeRolePolicyDocument={trust}"),
        );
        let role = format!("arn:aws:iam::123456789012:role/{prefix}");
        let role = role.as_str();
        // Held from the start, so a failure below still stops the processes.
        let mut functions = Functions {
            children: Vec::new(),
            state_machine_arn: String::new(),
        };
        let mut substitutions = BTreeMap::new();
        for step in StepName::ALL {
            let (substitution, name) = (step.placeholder(), step.function());
            let function = format!("{prefix}-{name}");
            let created = self.raw_request(
                "POST",
                "/2015-03-31/functions",
                &[
                    ("Content-Type", "application/json"),
                    ("Authorization", &unsigned("lambda")),
                ],
                &json!({
                    "FunctionName": function,
                    "Runtime": "provided.al2023",
                    "Role": role,
                    "Handler": "bootstrap",
                    "Code": {"ZipFile": DUMMY_ZIP},
                })
                .to_string(),
            );
            let arn = serde_json::from_str::<Value>(&created)
                .ok()
                .and_then(|v| v["FunctionArn"].as_str().map(str::to_owned))
                .unwrap_or_else(|| panic!("CreateFunction {function}: {created}"));
            substitutions.insert(substitution.to_owned(), arn);
            let mut cmd = Command::new(binary(name));
            cmd.env("AWS_LAMBDA_RUNTIME_API", format!("{runtime}/{function}"))
                .env("AWS_LAMBDA_FUNCTION_NAME", &function)
                .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")
                .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
                .env("AWS_LAMBDA_LOG_STREAM_NAME", "local")
                .env("AWS_LAMBDA_LOG_GROUP_NAME", "local")
                .env("STACKSYNC_TABLE", table)
                .env("STACKSYNC_BUCKET", bucket)
                .env("STACKSYNC_LOG", "warn")
                // As an installation deployed with RequireRoleArn=false (the
                // tests' entries name no role unless they test roles).
                .env("STACKSYNC_REQUIRE_ROLE_ARN", "false")
                .stdin(Stdio::null());
            for (k, v) in self.env() {
                cmd.env(k, v);
            }
            for (k, v) in environment {
                cmd.env(k, v);
            }
            functions
                .children
                .push(cmd.spawn().expect("function process starts"));
        }
        let mut definition = RECONCILE_ASL.to_owned();
        for (name, arn) in &substitutions {
            definition = definition.replace(&format!("${{{name}}}"), arn);
        }
        let created = self.aws_json(
            "AWSStepFunctions.CreateStateMachine",
            &json!({"name": prefix, "definition": definition, "roleArn": role}),
        );
        functions.state_machine_arn = created["stateMachineArn"]
            .as_str()
            .unwrap_or_else(|| panic!("CreateStateMachine: {created}"))
            .to_owned();
        functions
    }
}

impl Functions {
    /// Starts an execution and waits for its end: (status, output or error).
    pub fn run(&self, emulator: &Emulator, name: &str, input: &Value) -> (String, Value) {
        let started = emulator.aws_json(
            "AWSStepFunctions.StartExecution",
            &json!({"stateMachineArn": self.state_machine_arn, "name": name, "input": input.to_string()}),
        );
        let arn = started["executionArn"]
            .as_str()
            .unwrap_or_else(|| panic!("StartExecution: {started}"))
            .to_owned();
        let deadline = Instant::now() + Duration::from_secs(180);
        loop {
            let described = emulator.aws_json(
                "AWSStepFunctions.DescribeExecution",
                &json!({"executionArn": arn}),
            );
            let status = described["status"].as_str().unwrap_or("").to_owned();
            if status != "RUNNING" {
                let output = described["output"]
                    .as_str()
                    .and_then(|o| serde_json::from_str(o).ok())
                    .unwrap_or_else(
                        || json!({"error": described["error"], "cause": described["cause"]}),
                    );
                return (status, output);
            }
            assert!(
                Instant::now() < deadline,
                "execution {name} still running after 180 s"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// Every execution of `machine` (its first 1,000): (name, input), sorted by
/// name.
pub async fn executions(sfn: &aws_sdk_sfn::Client, machine: &str) -> Vec<(String, Value)> {
    let listed = sfn
        .list_executions()
        .state_machine_arn(machine)
        .max_results(1000)
        .send()
        .await
        .expect("executions listed");
    let mut out = Vec::new();
    for e in listed.executions() {
        let described = sfn
            .describe_execution()
            .execution_arn(e.execution_arn())
            .send()
            .await
            .expect("execution described");
        let input =
            serde_json::from_str(described.input().unwrap_or("null")).unwrap_or(Value::Null);
        out.push((e.name().to_owned(), input));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}
