//! The test harness: a real AWS emulator (moto server) on 127.0.0.1.
//!
//! `scripts/test` starts one moto server for the whole run and exports
//! `STACKSYNC_TEST_ENDPOINT`; every test binary then talks to it. Run alone
//! (`cargo nextest run` without the script), each test process starts its own
//! server through `scripts/emulator`'s venv, watched by a small shell loop
//! that stops the server when the test process exits. Tests isolate
//! themselves by unique table and bucket names, never by resetting the server.

pub mod archives;
pub mod backend;
pub mod bus;
pub mod chain;
pub mod counted;
pub mod crash;
pub mod drift;
pub mod faults;
pub mod fleet;
pub mod function_url;
pub mod git;
pub mod git_hosts;
pub mod guard_rules;
pub mod harness;
pub mod http;
pub mod iam;
pub mod listener;
pub mod logs;
pub mod organizations;
pub mod parked;
pub mod private_sources;
pub mod pushes;
pub mod registry_world;
pub mod reliability;
pub mod scripted;
pub mod sshd;
pub mod stepfunctions;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_credential_types::Credentials;
use stacksync::registry::Registry;

/// The repository's root folder.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// A running emulator.
#[derive(Debug)]
pub struct Emulator {
    endpoint: String,
    /// Where the emulator serves the Lambda Runtime API (scripts/moto_server.py).
    lambda_runtime: Option<String>,
    /// The watchdog of a server this process started; it ends with us.
    _watchdog: Option<std::process::Child>,
}

impl Emulator {
    /// The emulator of this test run (started on first use when none was given).
    pub fn shared() -> &'static Emulator {
        static EMULATOR: OnceLock<Emulator> = OnceLock::new();
        EMULATOR.get_or_init(|| match std::env::var("STACKSYNC_TEST_ENDPOINT") {
            Ok(endpoint) if !endpoint.is_empty() => Emulator {
                endpoint,
                lambda_runtime: std::env::var("STACKSYNC_TEST_LAMBDA_RUNTIME").ok(),
                _watchdog: None,
            },
            _ => Emulator::start_private(),
        })
    }

    fn start_private() -> Emulator {
        let venv = Command::new(repo_root().join("scripts/venv"))
            .stderr(Stdio::inherit())
            .output()
            .expect("scripts/venv runs");
        assert!(venv.status.success(), "scripts/venv failed");
        let venv = String::from_utf8_lossy(&venv.stdout).trim().to_owned();
        let free_port = || {
            std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map(|a| a.port())
                .expect("a free port on 127.0.0.1")
        };
        let (port, runtime_port) = (free_port(), free_port());
        // The shell loop outlives neither us nor the server: it stops the
        // server as soon as this test process is gone.
        let watchdog = format!(
            "MOTO_PORT={port} STACKSYNC_LAMBDA_RUNTIME_PORT={runtime_port} MOTO_RECORDER_FILEPATH={recording} {venv}/bin/python {launcher} -H 127.0.0.1 -p {port} >/dev/null 2>&1 & server=$!; \
             trap 'kill $server 2>/dev/null' EXIT; \
             while kill -0 {parent} 2>/dev/null && kill -0 $server 2>/dev/null; do sleep 0.5; done",
            parent = std::process::id(),
            // Not in the working directory (moto's default).
            recording = std::env::temp_dir()
                .join(format!("stacksync-moto-recording-{port}"))
                .display(),
            launcher = repo_root().join("scripts/moto_server.py").display()
        );
        let watchdog = Command::new("bash")
            .arg("-c")
            .arg(watchdog)
            .stdin(Stdio::null())
            .spawn()
            .expect("bash starts the emulator");
        let endpoint = format!("http://127.0.0.1:{port}");
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "moto server did not start on {endpoint}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        Emulator {
            endpoint,
            lambda_runtime: Some(format!("http://127.0.0.1:{runtime_port}")),
            _watchdog: Some(watchdog),
        }
    }

    /// The Lambda Runtime API the emulator forwards invocations to.
    pub fn lambda_runtime(&self) -> Option<&str> {
        self.lambda_runtime.as_deref()
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// SDK configuration for the emulator: its endpoint, dummy credentials,
    /// us-east-1, and an HTTP client that records the calls made under a
    /// function ([`iam::as_function`]) for the IAM conformance test.
    pub fn sdk_config(&self) -> SdkConfig {
        self.sdk_config_at(&self.endpoint)
    }

    /// The same, its requests of `counter`'s service counted by operation.
    pub fn sdk_config_counted(&self, counter: &counted::CallCounter) -> SdkConfig {
        self.sdk_config()
            .to_builder()
            .http_client(iam::record::counting_http_client(counter.clone()))
            .build()
    }

    /// The same, reaching the emulator through `endpoint` (a proxy).
    pub fn sdk_config_at(&self, endpoint: &str) -> SdkConfig {
        SdkConfig::builder()
            .behavior_version(BehaviorVersion::latest())
            .http_client(iam::record::recording_http_client())
            // As aws_config's loader gives them: STS (assumeRoleArn) needs both.
            .time_source(aws_smithy_async::time::SystemTimeSource::new())
            .sleep_impl(aws_smithy_async::rt::sleep::TokioSleep::new())
            .region(Region::new("us-east-1"))
            .endpoint_url(endpoint)
            .credentials_provider(
                aws_credential_types::provider::SharedCredentialsProvider::new(
                    Credentials::for_tests(),
                ),
            )
            .build()
    }

    /// The environment a child process (the CLI) needs to reach the emulator.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", self.endpoint.clone()),
            ("AWS_ACCESS_KEY_ID", "testing".into()),
            ("AWS_SECRET_ACCESS_KEY", "testing".into()),
            ("AWS_REGION", "us-east-1".into()),
            ("AWS_CONFIG_FILE", "/dev/null".into()),
            ("AWS_SHARED_CREDENTIALS_FILE", "/dev/null".into()),
        ]
    }

    /// Sends one HTTP request to the emulator's own API (`/moto-api/...`).
    pub fn moto_api(&self, method: &str, path: &str, body: &str) -> String {
        self.raw_request(method, path, &[("Content-Type", "application/json")], body)
    }

    /// One plain HTTP/1.0 request to the emulator; returns the body.
    pub fn raw_request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> String {
        let address = self.endpoint.trim_start_matches("http://");
        let mut stream = std::net::TcpStream::connect(address).expect("emulator reachable");
        let extra: String = headers
            .iter()
            .map(|(k, v)| format!("{k}: {v}\r\n"))
            .collect();
        let request = format!(
            "{method} {path} HTTP/1.0\r\nHost: {address}\r\n{extra}Content-Length: {}\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).expect("request sent");
        let mut response = String::new();
        stream.read_to_string(&mut response).expect("response read");
        response
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_owned())
            .unwrap_or_default()
    }

    /// Turns moto's request recorder on (it records every API call from then on).
    pub fn start_recording(&self) {
        self.moto_api("POST", "/moto-api/recorder/start-recording", "");
    }

    /// The recorded API calls whose operation is `operation` and whose body
    /// mentions `containing` (tests share the server: filter by your names).
    pub fn recorded(&self, operation: &str, containing: &str) -> usize {
        self.recorded_bodies(operation, containing).len()
    }

    /// The bodies of those calls (form-encoded or JSON), oldest first.
    pub fn recorded_bodies(&self, operation: &str, containing: &str) -> Vec<String> {
        self.recorded_calls()
            .into_iter()
            .filter_map(|(call, body)| {
                let target = call["headers"]["X-Amz-Target"].as_str().unwrap_or("");
                let is_op = target.ends_with(&format!(".{operation}"))
                    || body.contains(&format!("Action={operation}&"))
                    || body.ends_with(&format!("Action={operation}"));
                (is_op && body.contains(containing)).then_some(body)
            })
            .collect()
    }

    /// Every recorded call (moto's JSON record) with its body decoded, oldest first.
    fn recorded_calls(&self) -> Vec<(serde_json::Value, String)> {
        use base64::Engine;
        let recording = self.moto_api("GET", "/moto-api/recorder/download-recording", "");
        recording
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .map(|call| {
                let raw = call["body"].as_str().unwrap_or("");
                let body = if call["body_encoded"].as_bool() == Some(true) {
                    base64::engine::general_purpose::STANDARD
                        .decode(raw)
                        .map(|b| String::from_utf8_lossy(&b).into_owned())
                        .unwrap_or_default()
                } else {
                    raw.to_owned()
                };
                (call, body)
            })
            .collect()
    }

    /// Clears moto's recording (tests share the server: only the bench, which
    /// owns its emulator, may call this) and keeps recording.
    pub fn reset_recording(&self) {
        self.moto_api("POST", "/moto-api/recorder/reset-recording", "");
        self.start_recording();
    }

    /// Every recorded call as `service:Operation`, oldest first.
    pub fn recorded_operations(&self) -> Vec<String> {
        self.recorded_operations_containing("")
    }

    /// The recorded calls whose body mentions `containing`, as
    /// `service:Operation`, oldest first (one download of the recording).
    pub fn recorded_operations_containing(&self, containing: &str) -> Vec<String> {
        self.recorded_calls()
            .into_iter()
            .filter(|(_, body)| body.contains(containing))
            .map(|(call, body)| {
                let headers = &call["headers"];
                if let Some(target) = headers["X-Amz-Target"].as_str() {
                    let (service, op) = target.split_once('.').unwrap_or(("?", target));
                    let service = if service.starts_with("DynamoDB") {
                        "dynamodb"
                    } else {
                        service
                    };
                    return format!("{service}:{op}");
                }
                if let Some(action) = body.split('&').find_map(|kv| kv.strip_prefix("Action=")) {
                    return format!("cloudformation:{action}");
                }
                // S3 (REST): the method and whether a key is named.
                let method = call["method"].as_str().unwrap_or("");
                let url = call["url"].as_str().unwrap_or("");
                let path = url.splitn(4, '/').nth(3).unwrap_or("");
                let path = path.split('?').next().unwrap_or("");
                let has_key = path.trim_end_matches('/').contains('/');
                let op = match (method, has_key) {
                    ("HEAD", true) => "HeadObject",
                    ("GET", true) => "GetObject",
                    ("PUT", true) => "PutObject",
                    ("PUT", false) => "CreateBucket",
                    ("HEAD", false) => "HeadBucket",
                    (m, _) => m,
                };
                format!("s3:{op}")
            })
            .collect()
    }

    /// A CloudFormation client for the emulator.
    pub fn cloudformation(&self) -> aws_sdk_cloudformation::Client {
        aws_sdk_cloudformation::Client::new(&self.sdk_config())
    }

    /// The stack's status as the emulator's CloudFormation has it; `None`
    /// when there is no such stack.
    pub async fn stack_status(&self, stack: &str) -> Option<String> {
        backend::Backend::Moto.stack_status(stack).await
    }

    /// The tags of the stack `name` in the emulator, as DescribeStacks gives them.
    pub async fn stack_tags(&self, name: &str) -> std::collections::BTreeMap<String, String> {
        backend::Backend::Moto.stack_tags(name).await
    }

    /// The parameters of the stack `name` in the emulator, as DescribeStacks
    /// gives them.
    pub async fn stack_parameters(&self, name: &str) -> std::collections::BTreeMap<String, String> {
        backend::Backend::Moto.stack_parameters(name).await
    }

    /// The emulator's SDK configuration with the credentials of `role`
    /// (STS AssumeRole): moto puts what they make in the role's account.
    pub async fn assumed_config(&self, role: &str) -> SdkConfig {
        assumed(self.sdk_config(), role).await
    }

    /// A DynamoDB client for the emulator.
    pub fn dynamodb(&self) -> aws_sdk_dynamodb::Client {
        aws_sdk_dynamodb::Client::new(&self.sdk_config())
    }

    /// A DynamoDB client whose calls `counter` counts.
    pub fn dynamodb_counted(&self, counter: &counted::CallCounter) -> aws_sdk_dynamodb::Client {
        aws_sdk_dynamodb::Client::from_conf(
            aws_sdk_dynamodb::config::Builder::from(&self.sdk_config())
                .interceptor(counter.clone())
                .build(),
        )
    }

    /// A Secrets Manager secret holding `value`; its ARN.
    pub async fn put_secret(&self, name: &str, value: &str) -> String {
        aws_sdk_secretsmanager::Client::new(&self.sdk_config())
            .create_secret()
            .name(unique_name(name))
            .secret_string(value)
            .send()
            .await
            .expect("secret created")
            .arn
            .expect("secret ARN")
    }

    /// An SSM SecureString parameter holding `value`; its ARN.
    pub async fn put_parameter(&self, name: &str, value: &str) -> String {
        let name = format!("/stacksync-tests/{}", unique_name(name));
        aws_sdk_ssm::Client::new(&self.sdk_config())
            .put_parameter()
            .name(&name)
            .value(value)
            .r#type(aws_sdk_ssm::types::ParameterType::SecureString)
            .send()
            .await
            .expect("parameter created");
        format!("arn:aws:ssm:us-east-1:123456789012:parameter{name}")
    }

    /// An S3 client for the emulator (path-style).
    pub fn s3(&self) -> aws_sdk_s3::Client {
        stacksync::adapters::s3_client(&self.sdk_config(), true)
    }

    /// A new bucket for S3 sources (named `source-…`: the IAM conformance
    /// test tells source buckets from the artifact bucket by it), with
    /// versioning on when `versioned`.
    pub async fn source_bucket(&self, versioned: bool) -> String {
        let bucket = unique_name("source").to_lowercase();
        let s3 = self.s3();
        s3.create_bucket()
            .bucket(&bucket)
            .send()
            .await
            .expect("bucket");
        if versioned {
            s3.put_bucket_versioning()
                .bucket(&bucket)
                .versioning_configuration(
                    aws_sdk_s3::types::VersioningConfiguration::builder()
                        .status(aws_sdk_s3::types::BucketVersioningStatus::Enabled)
                        .build(),
                )
                .send()
                .await
                .expect("versioning on");
        }
        bucket
    }

    /// Puts an object; its version id, if the bucket keeps versions.
    pub async fn put_object(&self, bucket: &str, key: &str, body: Vec<u8>) -> Option<String> {
        self.s3()
            .put_object()
            .bucket(bucket)
            .key(key)
            .body(body.into())
            .send()
            .await
            .expect("object put")
            .version_id
    }

    /// A new registry table with a unique name, created and active.
    pub async fn new_registry(&self, prefix: &str) -> Registry {
        self.new_registry_with(self.dynamodb(), prefix).await
    }

    /// The same, reached through `client`.
    pub async fn new_registry_with(
        &self,
        client: aws_sdk_dynamodb::Client,
        prefix: &str,
    ) -> Registry {
        let registry = Registry::new(client, unique_name(prefix));
        registry
            .create_table()
            .await
            .expect("registry table created");
        registry
    }
}

/// A name no other test of this run uses: `prefix-<pid>-<time>-<n>`.
pub fn unique_name(prefix: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "{prefix}-{}-{nanos:x}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// `config` with the credentials of `role` (STS AssumeRole at `config`'s
/// endpoint).
pub async fn assumed(config: SdkConfig, role: &str) -> SdkConfig {
    let provider = aws_config::sts::AssumeRoleProvider::builder(role)
        .session_name("test")
        .configure(&config)
        .build()
        .await;
    config
        .to_builder()
        .credentials_provider(
            aws_credential_types::provider::SharedCredentialsProvider::new(provider),
        )
        .build()
}
