//! A Lambda Function URL with `AuthType: AWS_IAM`, on 127.0.0.1, in front of
//! the real approval handler (`stacksync::triggers::answer`): what AWS does
//! before the function runs, done here because the emulator serves no
//! Function URL. Each request's SigV4 signature (service `lambda`) is checked
//! against a fixture of principals (access key → secret key and ARN), as
//! Lambda checks it against IAM; a request that is unsigned, signed by an
//! unknown key, with a wrong signature or a stale date gets `403` and never
//! reaches the handler. A signed one reaches it as the Function URL event
//! Lambda builds, the caller's ARN in `requestContext.authorizer.iam`.
//! The handler runs as the function `answer` (its AWS calls are recorded for
//! the IAM conformance test). Stopped on drop.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use stacksync::ports::{Answer, Blobs, TaskTokens};
use stacksync::registry::{Answers, ApprovalRecords, Entries, Registry};
use stacksync::triggers::answer::{AnswerHandler, caller_of};
use stacksync::triggers::webhook::handler::function_url_request;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::iam::as_function;

/// One IAM principal of the fixture: its keys, and the ARN AWS says signs
/// with them.
#[derive(Debug, Clone)]
pub struct Principal {
    pub access_key: String,
    pub secret_key: String,
    pub arn: String,
}

impl Principal {
    /// A principal whose keys are made from `name`.
    pub fn new(name: &str, arn: &str) -> Principal {
        Principal {
            access_key: format!("AKIA{}", name.to_ascii_uppercase()),
            secret_key: format!("secret-of-{name}"),
            arn: arn.to_owned(),
        }
    }

    /// The environment a CLI run as this principal has.
    pub fn env(&self) -> [(&'static str, String); 2] {
        [
            ("AWS_ACCESS_KEY_ID", self.access_key.clone()),
            ("AWS_SECRET_ACCESS_KEY", self.secret_key.clone()),
        ]
    }
}

/// What the URL saw: each request's status and the caller it verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub status: u16,
    pub caller: Option<String>,
}

/// The URL; stopped on drop.
#[derive(Debug)]
pub struct FunctionUrl {
    port: u16,
    task: tokio::task::JoinHandle<()>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl FunctionUrl {
    /// Serves `handler` to the `principals`, on the caller's runtime.
    pub async fn serve<R, B, T>(principals: Vec<Principal>, handler: AnswerHandler<R, B, T>) -> Self
    where
        R: Entries + ApprovalRecords + 'static,
        B: Blobs + 'static,
        T: TaskTokens + 'static,
    {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a port on 127.0.0.1");
        let port = listener.local_addr().expect("bound").port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let handler = Arc::new(handler);
        let principals = Arc::new(principals);
        let log = seen.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (handler, principals, log) = (handler.clone(), principals.clone(), log.clone());
                tokio::spawn(async move {
                    let _ = serve_one(stream, port, &principals, &handler, &log).await;
                });
            }
        });
        FunctionUrl { port, task, seen }
    }

    /// `http://127.0.0.1:PORT/`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Drop for FunctionUrl {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve_one<R, B, T>(
    mut stream: TcpStream,
    port: u16,
    principals: &[Principal],
    handler: &AnswerHandler<R, B, T>,
    log: &Mutex<Vec<Seen>>,
) -> std::io::Result<()>
where
    R: Entries + ApprovalRecords,
    B: Blobs,
    T: TaskTokens,
{
    let (method, path, headers, body) = read_request(&mut stream).await?;
    let url = format!("http://127.0.0.1:{port}{path}");
    let (status, answer, caller) = match verify(&url, &headers, &body, principals) {
        Err(why) => (403, json!({"Message": format!("Forbidden: {why}")}), None),
        Ok(principal) => {
            let event = json!({
                "headers": headers.iter().cloned().collect::<serde_json::Map<String, Value>>(),
                "body": String::from_utf8_lossy(&body),
                "isBase64Encoded": false,
                "requestContext": {
                    "http": {"method": method},
                    "authorizer": {"iam": {
                        "accessKey": principal.access_key,
                        "accountId": principal.arn.split(':').nth(4),
                        "userArn": principal.arn,
                    }},
                },
            });
            let caller = caller_of(&event).map(str::to_owned);
            let response = match function_url_request(&event) {
                Ok((_, body)) => {
                    let now = stacksync::clock::now_millis();
                    as_function("answer", handler.handle(caller.as_deref(), &body, now)).await
                }
                Err(response) => response,
            };
            (response.status, response.body, caller)
        }
    };
    log.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(Seen { status, caller });
    let body = answer.to_string();
    let head = format!(
        "HTTP/1.1 {status} X\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.flush().await
}

/// Method, path, headers (names in lower case, as Lambda gives them) and body.
async fn read_request(
    stream: &mut TcpStream,
) -> std::io::Result<(String, String, Vec<(String, Value)>, Vec<u8>)> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    let end = loop {
        let read = stream.read(&mut chunk).await?;
        if read == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buffer.extend_from_slice(&chunk[..read]);
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
    };
    let head = String::from_utf8_lossy(&buffer[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or_default().split_whitespace();
    let method = first.next().unwrap_or_default().to_owned();
    let path = first.next().unwrap_or("/").to_owned();
    let headers: Vec<(String, Value)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), Value::from(v.trim())))
        .collect();
    let length = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.as_str()?.parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = buffer[end + 4..].to_vec();
    while body.len() < length {
        let read = stream.read(&mut chunk).await?;
        if read == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..read]);
    }
    Ok((method, path, headers, body))
}

/// The principal whose keys signed the request, as IAM would tell: the
/// signature recomputed with the fixture's secret key must be the one sent,
/// and its date within five minutes.
fn verify<'a>(
    url: &str,
    headers: &[(String, Value)],
    body: &[u8],
    principals: &'a [Principal],
) -> Result<&'a Principal, String> {
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .and_then(|(_, v)| v.as_str())
    };
    let authorization = header("authorization").ok_or("unsigned")?;
    let credential = authorization
        .split("Credential=")
        .nth(1)
        .and_then(|c| c.split(',').next())
        .ok_or("no credential")?;
    let mut scope = credential.split('/');
    let (key, _date, region, service) = (
        scope.next().unwrap_or_default(),
        scope.next().unwrap_or_default(),
        scope.next().unwrap_or_default(),
        scope.next().unwrap_or_default(),
    );
    if service != "lambda" {
        return Err(format!("signed for {service}, not lambda"));
    }
    let principal = principals
        .iter()
        .find(|p| p.access_key == key)
        .ok_or("an unknown access key")?;
    let at = amz_date(header("x-amz-date").ok_or("no x-amz-date")?).ok_or("a bad x-amz-date")?;
    let skew = SystemTime::now()
        .duration_since(at)
        .or_else(|e| Ok::<_, ()>(e.duration()))
        .unwrap_or_default();
    if skew > Duration::from_secs(300) {
        return Err("a stale signature".into());
    }
    let credentials = aws_credential_types::Credentials::new(
        &principal.access_key,
        &principal.secret_key,
        None,
        None,
        "fixture",
    );
    let expected =
        stacksync::adapters::answer_url::signed_headers(url, body, credentials, region, at)?;
    let matches = expected
        .iter()
        .any(|(k, v)| k == "authorization" && v == authorization);
    if matches {
        Ok(principal)
    } else {
        Err("the signature does not match".into())
    }
}

/// `YYYYMMDDTHHMMSSZ` → the instant.
fn amz_date(text: &str) -> Option<SystemTime> {
    if text.len() != 16 {
        return None;
    }
    let rfc3339 = format!(
        "{}-{}-{}T{}:{}:{}Z",
        &text[0..4],
        &text[4..6],
        &text[6..8],
        &text[9..11],
        &text[11..13],
        &text[13..15]
    );
    humantime::parse_rfc3339(&rfc3339).ok()
}

/// Task tokens as the tests' runs wait on them: a local runner's (`local:`)
/// answered through the registry, where it looks (outside the function, as
/// the local interpreter's own doing); any other through Step Functions.
#[derive(Debug, Clone)]
pub struct TestTokens {
    pub registry: Registry,
    pub step_functions: stacksync::adapters::stepfunctions::StepFunctionsTokens,
}

impl TaskTokens for TestTokens {
    async fn answer_token(
        &self,
        token: &str,
        answer: &Answer,
    ) -> stacksync::ports::PortResult<bool> {
        if !token.starts_with("local:") {
            return self.step_functions.answer_token(token, answer).await;
        }
        let (registry, token, answer) = (self.registry.clone(), token.to_owned(), answer.clone());
        // A task of its own: not recorded as the function's call.
        tokio::spawn(async move {
            registry
                .answer(&token, &answer, stacksync::clock::now_millis())
                .await
        })
        .await
        .map_err(|e| stacksync::ports::PortError::Transient(e.to_string()))?
        .map_err(|e| stacksync::ports::PortError::Refused(e.to_string()))
    }
}
