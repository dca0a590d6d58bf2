//! A smart-HTTP Git server on 127.0.0.1 for tests: `git http-backend` run
//! as CGI behind a small HTTP/1.1 server that can require credentials (HTTP
//! basic, as GitHub, GitLab and Bitbucket take tokens), serve a fake GitHub
//! App token endpoint (`POST /api/v3/app/installations/ID/access_tokens`,
//! the JWT checked against the app's public key), or hang (accept and never
//! answer). It counts what it was asked; it stops when dropped.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_lc_rs::signature::{RSA_PKCS1_2048_8192_SHA256, UnparsedPublicKey};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::{Value, json};

use crate::git::GitRepo;

/// A GitHub App the server knows: tokens are made for its installation
/// when asked with a JWT its key signed.
#[derive(Debug, Clone)]
pub struct App {
    pub app_id: String,
    pub installation_id: String,
    /// The app's public key (RSAPublicKey, DER).
    pub public_key: Vec<u8>,
    /// The installation token the server hands out.
    pub token: String,
}

impl App {
    /// An app with a fresh 2048-bit RSA key, in the PKCS#1 PEM GitHub
    /// hands out (made by ssh-keygen): (the app, its private key PEM).
    pub fn generate(app_id: &str, installation_id: &str, token: &str) -> (App, String) {
        let dir = std::env::temp_dir().join(crate::unique_name("app-key"));
        std::fs::create_dir_all(&dir).expect("key folder");
        let path = dir.join("key");
        let made = Command::new("ssh-keygen")
            .args(["-q", "-t", "rsa", "-b", "2048", "-m", "PEM", "-N", "", "-f"])
            .arg(&path)
            .status()
            .expect("ssh-keygen runs");
        assert!(made.success(), "ssh-keygen made the key");
        let pem = std::fs::read_to_string(&path).expect("key read");
        let _ = std::fs::remove_dir_all(&dir);
        let der: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
        let der = STANDARD.decode(der).expect("PEM body");
        let pair = aws_lc_rs::signature::RsaKeyPair::from_der(&der).expect("an RSA key");
        let public_key = aws_lc_rs::signature::KeyPair::public_key(&pair)
            .as_ref()
            .to_vec();
        let app = App {
            app_id: app_id.into(),
            installation_id: installation_id.into(),
            public_key,
            token: token.into(),
        };
        (app, pem)
    }
}

/// CodeCommit's way in: the password is a SigV4 signature the server
/// recomputes with the caller's keys (as CodeCommit does with the role's).
#[derive(Debug, Clone)]
pub struct CodeCommit {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: Option<String>,
}

impl CodeCommit {
    /// The keys `config` signs with.
    pub async fn of(config: &aws_config::SdkConfig) -> CodeCommit {
        use aws_credential_types::provider::ProvideCredentials;
        let keys = config
            .credentials_provider()
            .expect("credentials")
            .provide_credentials()
            .await
            .expect("keys");
        CodeCommit {
            access_key_id: keys.access_key_id().to_owned(),
            secret_access_key: keys.secret_access_key().to_owned(),
            session_token: keys.session_token().map(str::to_owned),
        }
    }

    /// Whether `user` and `password` are this caller's signature for
    /// `path` at `host`, made within the last 15 minutes.
    fn verify(&self, host: &str, path: &str, user: &str, password: &str) -> bool {
        use stacksync::adapters::credentials::codecommit::{Keys, Repository, credentials};
        let Some((timestamp, _)) = password.split_once('Z') else {
            return false;
        };
        let repo = Repository {
            region: "us-east-1".into(),
            host: host.into(),
            path: path.into(),
            scheme: "http",
        };
        let keys = Keys {
            access_key_id: &self.access_key_id,
            secret_access_key: &self.secret_access_key,
            session_token: self.session_token.as_deref(),
        };
        let now = stacksync::adapters::credentials::codecommit::timestamp(SystemTime::now());
        let fresh = timestamp <= now.as_str() && timestamp[..8] == now[..8];
        fresh && credentials(&repo, &keys, timestamp) == (user.to_owned(), password.to_owned())
    }
}

/// How the server behaves.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// Accepted (username, password) pairs; none: anyone may read.
    pub accounts: Vec<(String, String)>,
    /// Git ignores the user name with a token (as GitHub does).
    pub any_username: bool,
    pub app: Option<App>,
    /// Serve repositories at CodeCommit's paths (`/v1/repos/NAME`), to
    /// callers who sign as CodeCommit wants.
    pub codecommit: Option<CodeCommit>,
    /// Accept connections and never answer.
    pub hang: bool,
    /// Answer every request with `302 Found` to this base URL (the same
    /// path and query there).
    pub redirect_to: Option<String>,
}

/// What the server saw.
#[derive(Debug, Default, Clone)]
pub struct Seen {
    /// Requests by path (query left out).
    pub requests: BTreeMap<String, usize>,
    /// Requests refused with 401.
    pub refused: usize,
    /// Token requests answered.
    pub tokens_issued: usize,
    /// Requests let in by a CodeCommit signature.
    pub signed: usize,
    /// Bytes of response bodies sent.
    pub bytes_sent: usize,
    /// Connections accepted and never answered (`hang`).
    pub held: usize,
    /// Connections accepted, answered or not.
    pub connections: usize,
    /// Requests that carried an `Authorization` header (any scheme).
    pub authorized: usize,
}

/// The server; stopped on drop.
#[derive(Debug)]
pub struct GitHttpServer {
    port: u16,
    base: PathBuf,
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<Seen>>,
}

impl GitHttpServer {
    /// Serves every repository under `base`.
    pub fn serve(base: &Path, config: Config) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a port on 127.0.0.1");
        listener
            .set_nonblocking(true)
            .expect("non-blocking listener");
        let port = listener.local_addr().expect("bound").port();
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(Seen::default()));
        let (s, k, b) = (stop.clone(), seen.clone(), base.to_path_buf());
        let config = Arc::new(config);
        std::thread::spawn(move || accept(listener, &b, &config, &s, &k));
        Self {
            port,
            base: base.to_path_buf(),
            stop,
            seen,
        }
    }

    /// Serves `repo`'s parent folder.
    pub fn serve_repo(repo: &GitRepo, config: Config) -> Self {
        Self::serve(repo.dir.parent().expect("repo has a parent"), config)
    }

    /// `http://127.0.0.1:PORT/NAME` of a served repository.
    pub fn url(&self, repo: &GitRepo) -> String {
        let name = repo.dir.strip_prefix(&self.base).expect("served repo");
        format!("http://127.0.0.1:{}/{}", self.port, name.display())
    }

    /// `http://127.0.0.1:PORT`.
    pub fn root(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The GitHub API base (`apiUrl`) this server answers on.
    pub fn api_url(&self) -> String {
        format!("http://127.0.0.1:{}/api/v3", self.port)
    }

    pub fn seen(&self) -> Seen {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Drop for GitHttpServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

fn accept(
    listener: TcpListener,
    base: &Path,
    config: &Arc<Config>,
    stop: &AtomicBool,
    seen: &Arc<Mutex<Seen>>,
) {
    let mut held = Vec::new();
    while !stop.load(Ordering::SeqCst) {
        let accepted = listener.accept();
        if accepted.is_ok() {
            seen.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .connections += 1;
        }
        match accepted {
            Ok((stream, _)) if config.hang => {
                held.push(stream); // never answered
                seen.lock().unwrap_or_else(PoisonError::into_inner).held += 1;
            }
            Ok((stream, _)) => {
                let (base, config, seen) = (base.to_path_buf(), config.clone(), seen.clone());
                std::thread::spawn(move || {
                    let _ = stream.set_nonblocking(false);
                    let _ = serve_connection(stream, &base, &config, &seen);
                });
            }
            Err(_) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
}

/// One request (`Connection: close`).
pub(crate) struct Request {
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) query: String,
    pub(crate) headers: BTreeMap<String, String>,
    pub(crate) body: Vec<u8>,
}

pub(crate) fn read_request(stream: &TcpStream) -> std::io::Result<Request> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_owned();
    let target = parts.next().unwrap_or_default().to_owned();
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    let mut headers = BTreeMap::new();
    loop {
        let mut header = String::new();
        reader.read_line(&mut header)?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_owned());
        }
    }
    let mut body = Vec::new();
    if let Some(length) = headers
        .get("content-length")
        .and_then(|l| l.parse::<usize>().ok())
    {
        body.resize(length, 0);
        reader.read_exact(&mut body)?;
    } else if headers
        .get("transfer-encoding")
        .is_some_and(|t| t.contains("chunked"))
    {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size)?;
            let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk)?;
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    }
    Ok(Request {
        method,
        path: path.to_owned(),
        query: query.to_owned(),
        headers,
        body,
    })
}

pub(crate) fn respond(
    mut stream: &TcpStream,
    status: &str,
    headers: &[(&str, String)],
    body: &[u8],
) -> std::io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {status}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    stream.flush()
}

fn serve_connection(
    stream: TcpStream,
    base: &Path,
    config: &Config,
    seen: &Mutex<Seen>,
) -> std::io::Result<()> {
    let request = read_request(&stream)?;
    let note = |f: &dyn Fn(&mut Seen)| f(&mut seen.lock().unwrap_or_else(PoisonError::into_inner));
    note(&|s| *s.requests.entry(request.path.clone()).or_default() += 1);
    if request.headers.contains_key("authorization") {
        note(&|s| s.authorized += 1);
    }
    if let Some(base) = &config.redirect_to {
        let query = if request.query.is_empty() {
            String::new()
        } else {
            format!("?{}", request.query)
        };
        return respond(
            &stream,
            "302 Found",
            &[("Location", format!("{base}{}{query}", request.path))],
            b"",
        );
    }
    if request.path.starts_with("/api/v3/app/installations/") {
        let (status, body) = issue_token(&request, config.app.as_ref());
        if status.starts_with("201") {
            note(&|s| s.tokens_issued += 1);
        }
        return respond(
            &stream,
            status,
            &[("Content-Type", "application/json".into())],
            body.to_string().as_bytes(),
        );
    }
    let mut request = request;
    if let Some(codecommit) = &config.codecommit {
        let Some(repo_path) = signed_by(&request, codecommit) else {
            note(&|s| s.refused += 1);
            return respond(
                &stream,
                "401 Unauthorized",
                &[("WWW-Authenticate", "Basic realm=\"git\"".into())],
                b"",
            );
        };
        note(&|s| s.signed += 1);
        request.path =
            request
                .path
                .replacen(&repo_path, &repo_path.replacen("/v1/repos", "", 1), 1);
    } else if !authorized(&request, config) {
        note(&|s| s.refused += 1);
        return respond(
            &stream,
            "401 Unauthorized",
            &[("WWW-Authenticate", "Basic realm=\"git\"".into())],
            b"",
        );
    }
    let (status, headers, body) = cgi(&request, base)?;
    note(&|s| s.bytes_sent += body.len());
    respond(
        &stream,
        &status,
        &headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.clone()))
            .collect::<Vec<_>>(),
        &body,
    )
}

/// The user and password of a request's HTTP basic authentication.
fn basic(request: &Request) -> Option<(String, String)> {
    let given = request
        .headers
        .get("authorization")
        .and_then(|h| h.strip_prefix("Basic "))
        .and_then(|b| STANDARD.decode(b).ok())
        .and_then(|b| String::from_utf8(b).ok())?;
    let (user, password) = given.split_once(':')?;
    Some((user.to_owned(), password.to_owned()))
}

/// The repository path (`/v1/repos/NAME`) of a request CodeCommit would let in.
fn signed_by(request: &Request, codecommit: &CodeCommit) -> Option<String> {
    let rest = request.path.strip_prefix("/v1/repos/")?;
    let name = rest.split('/').next()?;
    let path = format!("/v1/repos/{name}");
    let host = request.headers.get("host")?;
    let (user, password) = basic(request)?;
    codecommit
        .verify(host, &path, &user, &password)
        .then_some(path)
}

fn authorized(request: &Request, config: &Config) -> bool {
    if config.accounts.is_empty() && config.app.is_none() {
        return true;
    }
    let Some((user, password)) = basic(request) else {
        return false;
    };
    let account = config
        .accounts
        .iter()
        .any(|(u, p)| *p == password && (config.any_username || *u == user));
    let app = config
        .app
        .as_ref()
        .is_some_and(|app| app.token == password && user == "x-access-token");
    account || app
}

/// A CGI answer: status line, headers, body.
type CgiAnswer = (String, Vec<(String, String)>, Vec<u8>);

/// `git http-backend` as CGI for one request.
fn cgi(request: &Request, base: &Path) -> std::io::Result<CgiAnswer> {
    let mut command = Command::new("git");
    command
        .arg("http-backend")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("GIT_PROJECT_ROOT", base)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", base)
        .env("REQUEST_METHOD", &request.method)
        .env("PATH_INFO", &request.path)
        .env("QUERY_STRING", &request.query)
        .env("REMOTE_USER", "tests")
        .env("REMOTE_ADDR", "127.0.0.1")
        .env("CONTENT_LENGTH", request.body.len().to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    for (header, var) in [
        ("content-type", "CONTENT_TYPE"),
        ("git-protocol", "GIT_PROTOCOL"),
    ] {
        if let Some(value) = request.headers.get(header) {
            command.env(var, value);
        }
    }
    let mut child = command.spawn()?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(&request.body)?;
    }
    let output = child.wait_with_output()?;
    let split = output
        .stdout
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, 4))
        .or_else(|| {
            output
                .stdout
                .windows(2)
                .position(|w| w == b"\n\n")
                .map(|i| (i, 2))
        });
    let Some((end, gap)) = split else {
        return Ok((
            "500 Internal Server Error".into(),
            Vec::new(),
            output.stdout,
        ));
    };
    let mut status = "200 OK".to_owned();
    let mut headers = Vec::new();
    for line in String::from_utf8_lossy(&output.stdout[..end]).lines() {
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("status") {
                status = value.trim().to_owned();
            } else {
                headers.push((name.trim().to_owned(), value.trim().to_owned()));
            }
        }
    }
    Ok((status, headers, output.stdout[end + gap..].to_vec()))
}

/// The fake GitHub App token endpoint: a token for a JWT the app's key
/// signed, for the app's installation, issued and expiring as GitHub's.
pub(crate) fn issue_token(request: &Request, app: Option<&App>) -> (&'static str, Value) {
    let refused = |m: &str| ("401 Unauthorized", json!({ "message": m }));
    let Some(app) = app else {
        return ("404 Not Found", json!({"message": "Not Found"}));
    };
    let installation = request
        .path
        .trim_start_matches("/api/v3/app/installations/")
        .trim_end_matches("/access_tokens");
    let Some(jwt) = request
        .headers
        .get("authorization")
        .and_then(|h| h.strip_prefix("Bearer "))
    else {
        return refused("A JSON web token could not be decoded");
    };
    let parts: Vec<&str> = jwt.split('.').collect();
    let [header, claims, signature] = parts.as_slice() else {
        return refused("A JSON web token could not be decoded");
    };
    let signature = URL_SAFE_NO_PAD.decode(signature).unwrap_or_default();
    let key = UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, &app.public_key);
    if key
        .verify(format!("{header}.{claims}").as_bytes(), &signature)
        .is_err()
    {
        return refused("A JSON web token could not be decoded");
    }
    let claims: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(claims).unwrap_or_default())
        .unwrap_or_default();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    let (iat, exp) = (
        claims["iat"].as_u64().unwrap_or(0),
        claims["exp"].as_u64().unwrap_or(0),
    );
    if claims["iss"].as_str() != Some(app.app_id.as_str())
        || exp <= now
        || exp - iat > 660
        || iat > now + 60
    {
        return refused("'Issuer' or expiry claim is invalid");
    }
    if installation != app.installation_id {
        return ("404 Not Found", json!({"message": "Not Found"}));
    }
    let expires =
        humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_secs(now + 3600)).to_string();
    (
        "201 Created",
        json!({"token": app.token, "expires_at": expires}),
    )
}
