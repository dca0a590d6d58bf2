//! Recording the AWS calls each function makes while the integration suite
//! runs. The emulator enforces no IAM, so these records are what the IAM
//! conformance test (`tests/tests/iam.rs`) holds each role against.
//!
//! - **Who calls**: the function a piece of code runs as, set with
//!   [`as_function`] (a task-local): the local runner's Task states run as
//!   their step (`Harness`), the trigger tests wrap the handler they call.
//!   Calls made outside any function (a test's own set-up and checks) are
//!   not recorded.
//! - **What is called**: every request the SDK sends through the emulator's
//!   HTTP client ([`recording_http_client`]), read off the wire; and every
//!   call of the scripted CloudFormation (`crate::scripted`), which stands in
//!   for CloudFormation where the emulator cannot produce a state.
//! - **Where to**: one JSON line per call, appended to
//!   `$STACKSYNC_IAM_CALLS/calls-<pid>.jsonl`. Without that variable nothing
//!   is written (`scripts/test` sets it).

use std::fs::File;
use std::future::Future;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, SharedHttpClient, SharedHttpConnector,
    http_client_fn,
};
use aws_smithy_runtime_api::client::orchestrator::HttpRequest;

use super::call::{Call, Wire, from_wire, transforms};
use crate::counted::CallCounter;

/// The environment variable naming the folder the calls are written to.
pub const CALLS_DIR_ENV: &str = "STACKSYNC_IAM_CALLS";

tokio::task_local! {
    static FUNCTION: &'static str;
    static INSTALLATION: String;
}

/// Runs `future` as the function `function` (`change-set`, `webhook`, …):
/// the AWS calls it makes are recorded under that function's role.
pub async fn as_function<F: Future>(function: &'static str, future: F) -> F::Output {
    FUNCTION.scope(function, future).await
}

/// Runs `future` as a function of the installation `installation` (its
/// registry table): IAM's tag conditions compare the stacks' and the
/// requests' `stacksync:installation` tags with it.
pub async fn as_installation<F: Future>(installation: String, future: F) -> F::Output {
    INSTALLATION.scope(installation, future).await
}

/// The function the current task runs as, if any.
pub fn current_function() -> Option<&'static str> {
    FUNCTION.try_with(|f| *f).ok()
}

fn current_installation() -> Option<String> {
    INSTALLATION.try_with(Clone::clone).ok()
}

/// The file this process appends to, when recording is on.
fn sink() -> Option<&'static Mutex<File>> {
    static SINK: OnceLock<Option<Mutex<File>>> = OnceLock::new();
    SINK.get_or_init(|| {
        let dir = PathBuf::from(std::env::var_os(CALLS_DIR_ENV)?);
        std::fs::create_dir_all(&dir).ok()?;
        let path = dir.join(format!("calls-{}.jsonl", std::process::id()));
        let file = File::options()
            .create(true)
            .append(true)
            .open(&path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        Some(Mutex::new(file))
    })
    .as_ref()
}

/// The running test's name: nextest (and `cargo test --exact`) pass it as
/// the argument after `--exact`; otherwise the test binary's name.
fn test_name() -> &'static str {
    static NAME: OnceLock<String> = OnceLock::new();
    NAME.get_or_init(|| {
        let args: Vec<String> = std::env::args().collect();
        args.iter()
            .position(|a| a == "--exact")
            .and_then(|i| args.get(i + 1).cloned())
            .unwrap_or_else(|| args.first().cloned().unwrap_or_default())
    })
}

/// Appends one call (under the current function) to this process's record.
pub fn record(mut call: Call) {
    let Some(sink) = sink() else { return };
    let Some(function) = current_function() else {
        return;
    };
    call.function = function.to_owned();
    call.test = test_name().to_owned();
    if call.installation.is_none() {
        call.installation = current_installation();
    }
    let mut line = serde_json::to_string(&call).unwrap_or_default();
    line.push('\n');
    let mut file = sink
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    // One write per line: concurrent tests of one process never interleave.
    file.write_all(line.as_bytes())
        .expect("the IAM call record is writable");
}

/// Records a call the code made that no SDK request carries, as
/// `function` (Git over HTTPS to CodeCommit is authorized as
/// `codecommit:GitPull` on the repository, `target`).
pub fn record_call(
    function: &'static str,
    service: &str,
    operation: &str,
    region: &str,
    target: &str,
) {
    FUNCTION.sync_scope(function, || {
        record(Call {
            service: service.to_owned(),
            operation: operation.to_owned(),
            region: region.to_owned(),
            status: 200,
            target: Some(target.to_owned()),
            ..Call::default()
        })
    });
}

/// Whether a call made now would be recorded.
pub fn recording() -> bool {
    current_function().is_some() && sink().is_some()
}

/// The template's transforms, read from the emulator's S3 (the template URL
/// is `http://localhost:PORT/BUCKET/KEY`, as moto wants it).
pub fn template_transforms(template_url: &str) -> Vec<String> {
    let path = template_url
        .split_once("://")
        .and_then(|(_, rest)| rest.find('/').map(|i| &rest[i..]))
        .unwrap_or("");
    let auth = "AWS4-HMAC-SHA256 Credential=recorder/20260101/us-east-1/s3/aws4_request, \
                SignedHeaders=host, Signature=0";
    let body = crate::Emulator::shared().raw_request("GET", path, &[("Authorization", auth)], "");
    transforms(body.as_bytes())
}

/// The emulator's HTTP client (plain HTTP on loopback), recording every
/// request made under a function.
pub fn recording_http_client() -> SharedHttpClient {
    http_client(None)
}

/// The same, also counting every request of `counter`'s service by its
/// operation (one per attempt, made under a function or not).
pub fn counting_http_client(counter: CallCounter) -> SharedHttpClient {
    http_client(Some(counter))
}

fn http_client(counter: Option<CallCounter>) -> SharedHttpClient {
    let inner = aws_smithy_http_client::Builder::new().build_http();
    http_client_fn(move |settings, components| {
        SharedHttpConnector::new(Recording {
            inner: inner.http_connector(settings, components),
            counter: counter.clone(),
        })
    })
}

#[derive(Debug)]
struct Recording {
    inner: SharedHttpConnector,
    counter: Option<CallCounter>,
}

impl HttpConnector for Recording {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        if let Some(counter) = &self.counter
            && let Ok(calls) = from_wire(&wire_of(&request))
        {
            for call in calls.iter().filter(|c| counter.counts(&c.service)) {
                counter.note(&call.operation);
            }
        }
        // Read here, in the caller's task, where the function is known.
        let calls = recording().then(|| {
            let installation = current_installation();
            let mut calls = calls_of(&request);
            for call in &mut calls {
                call.installation.clone_from(&installation);
            }
            calls
        });
        let function = current_function();
        let response = self.inner.call(request);
        HttpConnectorFuture::new(async move {
            let response = response.await;
            if let (Some(calls), Some(function)) = (calls, function) {
                let status = response.as_ref().map_or(0, |r| r.status().as_u16());
                as_function(function, async {
                    for call in calls {
                        record(Call { status, ..call });
                    }
                })
                .await;
            }
            response
        })
    }
}

fn wire_of(request: &HttpRequest) -> Wire<'_> {
    let headers = request.headers();
    Wire {
        method: request.method(),
        uri: request.uri(),
        authorization: headers.get("authorization"),
        target: headers.get("x-amz-target"),
        copy_source: headers.get("x-amz-copy-source"),
        body: request.body().bytes().unwrap_or(&[]),
    }
}

fn calls_of(request: &HttpRequest) -> Vec<Call> {
    let mut calls = from_wire(&wire_of(request)).unwrap_or_else(|e| {
        // A call the recorder cannot read is a call the IAM test cannot
        // check: fail the test that made it, here, with the reason.
        panic!("IAM recorder: {e}")
    });
    for call in &mut calls {
        if call.operation == "CreateChangeSet"
            && let Some(url) = &call.template_url
        {
            call.transforms = template_transforms(url);
        }
        if TAG_CONDITIONED.contains(&call.operation.as_str())
            && !call.assumed
            && let Some(stack) = &call.stack
        {
            call.stack_installation = stack_installation(stack, &call.region);
        }
    }
    calls
}

/// The CloudFormation calls whose roles condition on the stack's tags.
pub const TAG_CONDITIONED: [&str; 9] = [
    "CreateChangeSet",
    "ExecuteChangeSet",
    "DeleteChangeSet",
    "DeleteStack",
    "ContinueUpdateRollback",
    "UpdateTerminationProtection",
    "SetStackPolicy",
    "TagResource",
    "UntagResource",
];

/// The `stacksync:installation` tag of the stack `stack` (a name or an id)
/// in the emulator, as it is before the call is sent: what IAM's
/// `aws:ResourceTag` sees. `None`: untagged, or no such stack.
pub fn stack_installation(stack: &str, region: &str) -> Option<String> {
    let auth = format!(
        "AWS4-HMAC-SHA256 Credential=recorder/20260101/{region}/cloudformation/aws4_request, \
         SignedHeaders=host, Signature=0"
    );
    let body = format!(
        "Action=DescribeStacks&Version=2010-05-15&StackName={}",
        super::call::percent_encode(stack)
    );
    let answer = crate::Emulator::shared().raw_request(
        "POST",
        "/",
        &[
            ("Authorization", &auth),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ],
        &body,
    );
    let key = format!("<Key>{}</Key>", stacksync::ownership::INSTALLATION_TAG);
    let after = &answer[answer.find(&key)? + key.len()..];
    let value = after.split_once("<Value>")?.1.split_once("</Value>")?.0;
    Some(value.to_owned())
}
