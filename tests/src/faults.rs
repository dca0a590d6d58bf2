//! A fault-injecting HTTP proxy on 127.0.0.1, in front of the emulator: a
//! share of the calls of every AWS service (DynamoDB, S3, CloudFormation,
//! Step Functions, STS, …) fail the way AWS fails — throttled, a 500, the
//! connection dropped before the call reaches the service or after it did
//! (the call happened, the answer is lost), or an answer slower than the
//! client waits. The service is read from the request's SigV4 credential
//! scope, so each gets its own protocol's error (JSON `__type`, query XML,
//! S3 XML). Every exchange is logged: what was asked, what the emulator
//! answered, and which fault, if any, was injected.
//!
//! Where the emulator differs from AWS on a call sent again after its answer
//! was lost, the proxy answers as AWS does: a call carrying an idempotency
//! token (`ClientRequestToken`, `ClientToken`) that reached the emulator once
//! is answered again from that first answer, not run twice.
//!
//! One request per connection to the emulator (`Connection: close`); the
//! client's connection is kept alive between requests, as the SDK expects.

use crate::iam::call::percent_decode;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// How a call fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Fault {
    /// The service's throttling error (400 `Throttling…`, S3 503 `SlowDown`).
    Throttle,
    /// A 500 (`InternalFailure`, `InternalServerError`, `InternalError`).
    ServerError,
    /// The connection closes before the call reaches the service.
    DropBefore,
    /// The call reaches the service; its answer is lost with the connection.
    DropAfter,
    /// The call reaches the service; its answer comes after `slow`.
    Slow,
}

impl Fault {
    pub const ALL: [Fault; 5] = [
        Fault::Throttle,
        Fault::ServerError,
        Fault::DropBefore,
        Fault::DropAfter,
        Fault::Slow,
    ];
}

/// Which calls fail, and how.
#[derive(Debug, Clone)]
pub struct FaultPlan {
    /// The share of calls that fail, 0 to 1.
    pub rate: f64,
    /// The faults, chosen among evenly.
    pub kinds: Vec<Fault>,
    /// How long a [`Fault::Slow`] answer takes (past the client's timeout).
    pub slow: Duration,
    /// Where the choices start: the same seed, the same sequence of faults.
    pub seed: u64,
}

impl FaultPlan {
    /// No faults: the proxy only logs.
    pub fn none() -> Self {
        FaultPlan {
            rate: 0.0,
            kinds: Fault::ALL.to_vec(),
            slow: Duration::from_secs(3),
            seed: 1,
        }
    }
}

/// One call through the proxy.
#[derive(Debug, Clone)]
pub struct Exchange {
    /// The SigV4 service name (`dynamodb`, `s3`, `cloudformation`, `states`, …).
    pub service: String,
    /// The operation (`PutItem`, `ExecuteChangeSet`), or `METHOD /path` for S3.
    pub action: String,
    /// For query-protocol calls: their `StackName` and `ChangeSetName`.
    pub stack: Option<String>,
    pub change_set: Option<String>,
    /// The emulator's answer, when the call reached it.
    pub status: Option<u16>,
    pub fault: Option<Fault>,
    /// Answered by the proxy from an earlier call with the same idempotency
    /// token, as AWS answers it (the emulator ignores the tokens).
    pub replayed: bool,
}

#[derive(Debug)]
struct State {
    upstream: String,
    plan: Mutex<FaultPlan>,
    requests: AtomicU64,
    log: Mutex<Vec<Exchange>>,
    /// The answers to calls that carried an idempotency token, by call.
    answered: Mutex<HashMap<u64, (u16, Vec<u8>)>>,
}

/// The proxy; it stops when dropped.
#[derive(Debug)]
pub struct FaultProxy {
    endpoint: String,
    state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FaultProxy {
    /// Listens on 127.0.0.1 and forwards to `upstream` (`http://host:port`).
    pub async fn start(upstream: &str, plan: FaultPlan) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let endpoint = format!("http://{}", listener.local_addr().expect("address"));
        let state = Arc::new(State {
            upstream: upstream
                .trim_start_matches("http://")
                .trim_end_matches('/')
                .to_owned(),
            plan: Mutex::new(plan),
            requests: AtomicU64::new(0),
            log: Mutex::new(Vec::new()),
            answered: Mutex::new(HashMap::new()),
        });
        let shared = state.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let state = shared.clone();
                tokio::spawn(async move {
                    let _ = serve(client, &state).await;
                });
            }
        });
        FaultProxy {
            endpoint,
            state,
            task,
        }
    }

    /// `http://127.0.0.1:PORT`: the endpoint to give the SDK.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Changes the faults from the next call on.
    pub fn set_plan(&self, plan: FaultPlan) {
        *lock(&self.state.plan) = plan;
    }

    /// Every exchange so far.
    pub fn log(&self) -> Vec<Exchange> {
        lock(&self.state.log).clone()
    }

    /// How many exchanges so far (a mark for [`Self::since`]).
    pub fn len(&self) -> usize {
        lock(&self.state.log).len()
    }

    /// Whether nothing went through yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The exchanges since `mark`.
    pub fn since(&self, mark: usize) -> Vec<Exchange> {
        lock(&self.state.log)
            .get(mark..)
            .map(<[_]>::to_vec)
            .unwrap_or_default()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A request as read from the client.
struct Request {
    method: String,
    target: String,
    /// Header lines (name, value), as sent.
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Request {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn service(&self) -> String {
        // Credential=AKID/20261123/us-east-1/dynamodb/aws4_request
        self.header("authorization")
            .and_then(|a| a.split("Credential=").nth(1))
            .and_then(|c| c.split('/').nth(3))
            .unwrap_or("unknown")
            .to_owned()
    }

    fn form(&self, key: &str) -> Option<String> {
        let body = std::str::from_utf8(&self.body).ok()?;
        body.split('&').find_map(|pair| {
            let (k, v) = pair.split_once('=')?;
            (k == key).then(|| percent_decode(v))
        })
    }

    /// The call, when it carries an idempotency token (`ClientRequestToken`,
    /// `ClientToken`): AWS answers every call with the token as it answered
    /// the first.
    fn idempotency_key(&self) -> Option<u64> {
        let body = String::from_utf8_lossy(&self.body);
        let tokened = ["ClientRequestToken", "ClientToken"]
            .iter()
            .any(|t| body.contains(&format!("{t}=")) || body.contains(&format!("\"{t}\"")));
        tokened.then(|| {
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            (self.service(), &self.target, &self.body).hash(&mut hasher);
            hasher.finish()
        })
    }

    fn exchange(&self) -> Exchange {
        let service = self.service();
        let action = match self.header("x-amz-target") {
            Some(target) => target.rsplit('.').next().unwrap_or(target).to_owned(),
            None => self.form("Action").unwrap_or_else(|| {
                let path = self.target.split('?').next().unwrap_or("");
                format!("{} {path}", self.method)
            }),
        };
        Exchange {
            service,
            action,
            stack: self.form("StackName"),
            change_set: self.form("ChangeSetName"),
            status: None,
            fault: None,
            replayed: false,
        }
    }
}

/// Serves one client connection, request after request.
async fn serve(client: TcpStream, state: &State) -> std::io::Result<()> {
    let (read, mut write) = client.into_split();
    let mut reader = BufReader::new(read);
    loop {
        let Some(request) = read_request(&mut reader, &mut write).await? else {
            return Ok(());
        };
        let mut exchange = request.exchange();
        exchange.fault = choose(state);
        let answer = match exchange.fault {
            Some(Fault::Throttle) => Some(error_response(&exchange.service, &request, true)),
            Some(Fault::ServerError) => Some(error_response(&exchange.service, &request, false)),
            Some(Fault::DropBefore) => None,
            _ => {
                let key = request.idempotency_key();
                let earlier = key.and_then(|k| lock(&state.answered).get(&k).cloned());
                let response = match earlier {
                    Some(answer) => {
                        exchange.replayed = true;
                        Some(answer)
                    }
                    None => forward(&state.upstream, &request).await,
                };
                if let (Some(k), Some((status, bytes))) = (key, &response)
                    && (200..300).contains(status)
                {
                    lock(&state.answered).insert(k, (*status, bytes.clone()));
                }
                exchange.status = response.as_ref().map(|(status, _)| *status);
                response.map(|(_, bytes)| bytes)
            }
        };
        let fault = exchange.fault;
        lock(&state.log).push(exchange);
        match (fault, answer) {
            (Some(Fault::DropBefore | Fault::DropAfter), _) | (_, None) => return Ok(()),
            (Some(Fault::Slow), Some(bytes)) => {
                let slow = lock(&state.plan).slow;
                tokio::time::sleep(slow).await;
                write.write_all(&bytes).await?;
            }
            (_, Some(bytes)) => write.write_all(&bytes).await?,
        }
        if request
            .header("connection")
            .is_some_and(|c| c.eq_ignore_ascii_case("close"))
        {
            return Ok(());
        }
    }
}

/// Whether this call fails, and how: a hash of the seed and the call's number.
fn choose(state: &State) -> Option<Fault> {
    let plan = lock(&state.plan).clone();
    let n = state.requests.fetch_add(1, Ordering::SeqCst);
    let mut x = plan.seed ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 31;
    let unit = (x >> 11) as f64 / (1u64 << 53) as f64;
    if plan.kinds.is_empty() || unit >= plan.rate {
        return None;
    }
    let index = ((unit / plan.rate) * plan.kinds.len() as f64) as usize;
    plan.kinds.get(index.min(plan.kinds.len() - 1)).copied()
}

/// Reads one request; `None` when the client closed the connection.
async fn read_request<R, W>(
    reader: &mut BufReader<R>,
    write: &mut W,
) -> std::io::Result<Option<Request>>
where
    R: tokio::io::AsyncRead + Unpin,
    W: tokio::io::AsyncWrite + Unpin,
{
    let mut line = String::new();
    if reader.read_line(&mut line).await? == 0 {
        return Ok(None);
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("").to_owned();
    let target = parts.next().unwrap_or("").to_owned();
    let mut headers = Vec::new();
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header).await? == 0 {
            return Ok(None);
        }
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((k, v)) = header.split_once(':') {
            headers.push((k.trim().to_owned(), v.trim().to_owned()));
        }
    }
    let mut request = Request {
        method,
        target,
        headers,
        body: Vec::new(),
    };
    if request
        .header("expect")
        .is_some_and(|e| e.eq_ignore_ascii_case("100-continue"))
    {
        write.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").await?;
        request
            .headers
            .retain(|(k, _)| !k.eq_ignore_ascii_case("expect"));
    }
    if request
        .header("transfer-encoding")
        .is_some_and(|t| t.to_ascii_lowercase().contains("chunked"))
    {
        request.body = read_chunked(reader).await?;
        request
            .headers
            .retain(|(k, _)| !k.eq_ignore_ascii_case("transfer-encoding"));
        request
            .headers
            .push(("Content-Length".into(), request.body.len().to_string()));
    } else if let Some(length) = request.header("content-length") {
        let length: usize = length.parse().unwrap_or(0);
        let mut body = vec![0; length];
        reader.read_exact(&mut body).await?;
        request.body = body;
    }
    Ok(Some(request))
}

/// A chunked body, decoded.
async fn read_chunked<R: tokio::io::AsyncRead + Unpin>(
    reader: &mut BufReader<R>,
) -> std::io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut size = String::new();
        reader.read_line(&mut size).await?;
        let size =
            usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16).unwrap_or(0);
        if size == 0 {
            // Trailers, up to the empty line.
            loop {
                let mut trailer = String::new();
                if reader.read_line(&mut trailer).await? == 0 || trailer.trim().is_empty() {
                    return Ok(body);
                }
            }
        }
        let mut chunk = vec![0; size + 2];
        reader.read_exact(&mut chunk).await?;
        chunk.truncate(size);
        body.extend(chunk);
    }
}

/// Sends the request to the emulator; its status and the answer to give the
/// client (with a `Content-Length`), or `None` when it could not be reached.
async fn forward(upstream: &str, request: &Request) -> Option<(u16, Vec<u8>)> {
    let mut server = TcpStream::connect(upstream).await.ok()?;
    let mut head = format!("{} {} HTTP/1.1\r\n", request.method, request.target);
    for (k, v) in &request.headers {
        if !k.eq_ignore_ascii_case("connection") {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
    }
    head.push_str("Connection: close\r\n\r\n");
    server.write_all(head.as_bytes()).await.ok()?;
    server.write_all(&request.body).await.ok()?;
    let mut raw = Vec::new();
    server.read_to_end(&mut raw).await.ok()?;
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut body = raw[split + 4..].to_vec();
    let mut lines = head.split("\r\n");
    let status_line = lines.next()?.to_owned();
    let status: u16 = status_line.split_whitespace().nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let chunked = headers.iter().any(|(k, v)| {
        k.eq_ignore_ascii_case("transfer-encoding") && v.to_ascii_lowercase().contains("chunked")
    });
    if chunked {
        body = decode_chunked(&body);
    }
    let bodiless = request.method == "HEAD" || status == 204 || status == 304;
    let mut out = format!("{status_line}\r\n");
    for (k, v) in &headers {
        let hop = ["connection", "transfer-encoding", "keep-alive"]
            .iter()
            .any(|h| k.eq_ignore_ascii_case(h));
        // HEAD keeps the length of what a GET would have sent.
        let length = k.eq_ignore_ascii_case("content-length") && !bodiless;
        if !hop && !length {
            out.push_str(&format!("{k}: {v}\r\n"));
        }
    }
    if !bodiless {
        out.push_str(&format!("Content-Length: {}\r\n", body.len()));
    } else {
        body.clear();
    }
    out.push_str("\r\n");
    let mut bytes = out.into_bytes();
    bytes.extend(body);
    Some((status, bytes))
}

fn decode_chunked(mut raw: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    while let Some(end) = raw.windows(2).position(|w| w == b"\r\n") {
        let size = std::str::from_utf8(&raw[..end])
            .ok()
            .and_then(|s| usize::from_str_radix(s.trim().split(';').next()?, 16).ok())
            .unwrap_or(0);
        raw = &raw[end + 2..];
        if size == 0 || raw.len() < size {
            break;
        }
        body.extend_from_slice(&raw[..size]);
        raw = raw.get(size + 2..).unwrap_or_default();
    }
    body
}

/// The service's own throttling or internal error, in its protocol.
fn error_response(service: &str, request: &Request, throttle: bool) -> Vec<u8> {
    let (status, content_type, body) = match (service, throttle) {
        ("s3", true) => (
            503,
            "application/xml",
            s3_error("SlowDown", "Please reduce your request rate."),
        ),
        ("s3", false) => (
            500,
            "application/xml",
            s3_error("InternalError", "We encountered an internal error."),
        ),
        ("dynamodb", _) | ("states", _) | ("secretsmanager", _) | ("ssm", _) => {
            let (status, code) = match (service, throttle) {
                ("dynamodb", true) => (400, "com.amazonaws.dynamodb.v20120810#ThrottlingException"),
                ("dynamodb", false) => {
                    (500, "com.amazonaws.dynamodb.v20120810#InternalServerError")
                }
                (_, true) => (400, "ThrottlingException"),
                (_, false) => (500, "InternalServerError"),
            };
            let version = if service == "dynamodb" || service == "states" {
                "1.0"
            } else {
                "1.1"
            };
            (
                status,
                if version == "1.0" {
                    "application/x-amz-json-1.0"
                } else {
                    "application/x-amz-json-1.1"
                },
                format!(r#"{{"__type":"{code}","message":"injected by the fault proxy"}}"#),
            )
        }
        (_, true) => (
            400,
            "text/xml",
            query_error("Sender", "Throttling", "Rate exceeded"),
        ),
        (_, false) => (
            500,
            "text/xml",
            query_error("Receiver", "InternalFailure", "injected by the fault proxy"),
        ),
    };
    let body = if request.method == "HEAD" {
        String::new()
    } else {
        body
    };
    let reason = match status {
        400 => "Bad Request",
        500 => "Internal Server Error",
        _ => "Service Unavailable",
    };
    format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nx-amzn-RequestId: fault\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

fn s3_error(code: &str, message: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{code}</Code><Message>{message}</Message><RequestId>fault</RequestId></Error>"
    )
}

fn query_error(kind: &str, code: &str, message: &str) -> String {
    format!(
        "<ErrorResponse><Error><Type>{kind}</Type><Code>{code}</Code><Message>{message}</Message></Error><RequestId>fault</RequestId></ErrorResponse>"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_values_are_decoded_and_chunks_joined() {
        assert_eq!(percent_decode("a%2Fb+c%3A"), "a/b c:");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(
            decode_chunked(b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"),
            b"abcde"
        );
    }

    #[test]
    fn the_rate_is_the_share_of_calls_that_fail() {
        let state = State {
            upstream: String::new(),
            plan: Mutex::new(FaultPlan {
                rate: 0.3,
                ..FaultPlan::none()
            }),
            requests: AtomicU64::new(0),
            log: Mutex::new(Vec::new()),
            answered: Mutex::new(HashMap::new()),
        };
        let faults: Vec<_> = (0..10_000).filter_map(|_| choose(&state)).collect();
        assert!((2_800..3_200).contains(&faults.len()), "{}", faults.len());
        for kind in Fault::ALL {
            let n = faults.iter().filter(|f| **f == kind).count();
            assert!((450..750).contains(&n), "{kind:?}: {n}");
        }
    }
}
