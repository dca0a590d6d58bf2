//! A fake of the three Git hosts' APIs on 127.0.0.1, for exactly the calls
//! stacksync makes (comments listed, created and updated; commit statuses;
//! GitHub check runs), with the request and response shapes of each host's
//! documentation (the links are in `shared/src/adapters/git_host/`):
//!
//! - GitHub, under `/api/v3` (as GitHub Enterprise Server):
//!   `GET|POST /repos/{o}/{r}/issues/{n}/comments` (`[{id, body}]`, `?per_page&page`),
//!   `PATCH /repos/{o}/{r}/issues/comments/{id}`, `POST /repos/{o}/{r}/statuses/{sha}`
//!   (`{state, context, description, target_url}`), `POST /repos/{o}/{r}/check-runs`
//!   (403 "Resource not accessible by integration" unless `check_runs`);
//! - GitLab, under `/api/v4`: `GET|POST /projects/{id}/merge_requests/{iid}/notes`,
//!   `PUT …/notes/{id}`, `POST /projects/{id}/statuses/{sha}` (`{state, name, …}`);
//! - Bitbucket Cloud, under `/2.0`: `GET|POST /repositories/{w}/{r}/pullrequests/{id}/comments`
//!   (`{values: [{id, content: {raw}}], next}`), `PUT …/comments/{id}`,
//!   `POST /repositories/{w}/{r}/commit/{sha}/statuses/build` (`{key, state, name, url}`).
//!
//! Every call must carry the expected token (`Authorization: Bearer`), which
//! a GitHub App's JWT can be exchanged for (`with_app`); it
//! can be made to fail (503) for a while. It records what it was asked and
//! what it holds; it stops when dropped.

use std::collections::BTreeMap;
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::{Value, json};

use crate::http::{Request, read_request, respond};

/// A status as the fake keeps it: one row per call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenStatus {
    pub host: &'static str,
    pub repository: String,
    pub commit: String,
    pub state: String,
    pub context: String,
    pub description: String,
    pub url: Option<String>,
}

/// (host, repository, number): one pull request.
type PrKey = (&'static str, String, u64);

#[derive(Debug, Default)]
struct State {
    /// (host, repository, number) → comments (id, body), in order.
    comments: BTreeMap<PrKey, Vec<(u64, String)>>,
    statuses: Vec<SeenStatus>,
    calls: Vec<String>,
    next_id: u64,
    /// Calls answered 503 before the host is back (`u32::MAX`: for ever).
    failing: u32,
    check_runs: bool,
    /// A GitHub App whose installation tokens it issues (the JWT checked
    /// against the app's key, as `http.rs`'s token endpoint does).
    app: Option<crate::http::App>,
}

/// The fake; stopped on drop.
#[derive(Debug)]
pub struct GitHostApi {
    port: u16,
    token: String,
    stop: Arc<AtomicBool>,
    state: Arc<Mutex<State>>,
}

impl GitHostApi {
    /// A fake that takes `token`.
    pub fn serve(token: &str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a port on 127.0.0.1");
        listener.set_nonblocking(true).expect("non-blocking");
        let port = listener.local_addr().expect("bound").port();
        let stop = Arc::new(AtomicBool::new(false));
        let state = Arc::new(Mutex::new(State::default()));
        let (s, k, t) = (stop.clone(), state.clone(), token.to_owned());
        std::thread::spawn(move || accept(&listener, &s, &k, &t));
        Self {
            port,
            token: token.to_owned(),
            stop,
            state,
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The `apiUrl` of `host` (`github`, `gitlab`, `bitbucket`).
    pub fn api_url(&self, host: &str) -> String {
        let root = match host {
            "github" => "/api/v3",
            "gitlab" => "/api/v4",
            _ => "/2.0",
        };
        format!("http://127.0.0.1:{}{root}", self.port)
    }

    /// The token it takes.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// Issues `app`'s installation tokens (`POST /api/v3/app/installations/ID/access_tokens`),
    /// the token the app's requests carry being this fake's.
    pub fn with_app(self, mut app: crate::http::App) -> Self {
        app.token.clone_from(&self.token);
        self.state().app = Some(app);
        self
    }

    /// The next `calls` calls are answered 503 (`u32::MAX`: all of them).
    pub fn fail(&self, calls: u32) {
        self.state().failing = calls;
    }

    /// Check runs are allowed (a GitHub App with `checks:write`).
    pub fn allow_check_runs(&self) {
        self.state().check_runs = true;
    }

    /// The comments of a pull request: (id, body), in order.
    pub fn comments(&self, host: &str, repository: &str, number: u64) -> Vec<(u64, String)> {
        let key = (host_name(host), repository.to_owned(), number);
        self.state().comments.get(&key).cloned().unwrap_or_default()
    }

    /// Every status set, in order.
    pub fn statuses(&self) -> Vec<SeenStatus> {
        self.state().statuses.clone()
    }

    /// Every call, `METHOD path`, in order.
    pub fn calls(&self) -> Vec<String> {
        self.state().calls.clone()
    }
}

impl Drop for GitHostApi {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

fn host_name(host: &str) -> &'static str {
    match host {
        "github" => "github",
        "gitlab" => "gitlab",
        _ => "bitbucket",
    }
}

fn accept(listener: &TcpListener, stop: &AtomicBool, state: &Arc<Mutex<State>>, token: &str) {
    while !stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((stream, _)) => {
                let (state, token) = (state.clone(), token.to_owned());
                std::thread::spawn(move || {
                    let _ = stream.set_nonblocking(false);
                    let _ = serve(&stream, &state, &token);
                });
            }
            Err(_) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
}

fn serve(stream: &TcpStream, state: &Mutex<State>, token: &str) -> std::io::Result<()> {
    let request = read_request(stream)?;
    let (status, body) = answer(&request, state, token);
    let body = body.to_string().into_bytes();
    respond(
        stream,
        status,
        &[("Content-Type", "application/json".to_owned())],
        &body,
    )
}

fn answer(request: &Request, state: &Mutex<State>, token: &str) -> (&'static str, Value) {
    let mut s = state.lock().unwrap_or_else(PoisonError::into_inner);
    s.calls.push(format!("{} {}", request.method, request.path));
    if s.failing > 0 {
        if s.failing != u32::MAX {
            s.failing -= 1;
        }
        return ("503 Service Unavailable", json!({"message": "down"}));
    }
    if request.method == "POST" && request.path.ends_with("/access_tokens") {
        return crate::http::issue_token(request, s.app.as_ref());
    }
    let authorized = request
        .headers
        .get("authorization")
        .is_some_and(|a| a == &format!("Bearer {token}"));
    if !authorized {
        return ("401 Unauthorized", json!({"message": "Bad credentials"}));
    }
    let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
    let parts: Vec<&str> = request.path.trim_matches('/').split('/').collect();
    let method = request.method.as_str();
    match parts.as_slice() {
        ["api", "v3", rest @ ..] => github(&mut s, method, rest, &request.query, &body),
        ["api", "v4", rest @ ..] => gitlab(&mut s, method, rest, &body),
        ["2.0", rest @ ..] => bitbucket(&mut s, method, rest, &body),
        _ => ("404 Not Found", json!({"message": "Not Found"})),
    }
}

/// The `page`-th page (from 1) of `per_page` comments, as `[{id, body}]`.
fn page(comments: &[(u64, String)], query: &str) -> Value {
    let param = |name: &str, default: usize| {
        query
            .split('&')
            .find_map(|p| p.strip_prefix(&format!("{name}=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let (per_page, page) = (param("per_page", 30), param("page", 1).max(1));
    let shown: Vec<Value> = comments
        .iter()
        .skip((page - 1) * per_page)
        .take(per_page)
        .map(|(id, body)| json!({"id": id, "body": body}))
        .collect();
    Value::Array(shown)
}

fn add_comment(s: &mut State, key: PrKey, body: &str) -> u64 {
    s.next_id += 1;
    let id = s.next_id;
    s.comments
        .entry(key)
        .or_default()
        .push((id, body.to_owned()));
    id
}

/// Replaces comment `id`'s body; false if there is none.
fn edit_comment(s: &mut State, host: &'static str, id: u64, body: &str) -> bool {
    let found = s
        .comments
        .iter_mut()
        .filter(|((h, _, _), _)| *h == host)
        .flat_map(|(_, list)| list.iter_mut())
        .find(|(i, _)| *i == id);
    match found {
        Some((_, old)) => {
            *old = body.to_owned();
            true
        }
        None => false,
    }
}

fn text(body: &Value, pointer: &str) -> String {
    body.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn github(
    s: &mut State,
    method: &str,
    path: &[&str],
    query: &str,
    body: &Value,
) -> (&'static str, Value) {
    match (method, path) {
        ("GET", ["repos", o, r, "issues", n, "comments"]) => {
            let key = ("github", format!("{o}/{r}"), n.parse().unwrap_or(0));
            let all = s.comments.get(&key).cloned().unwrap_or_default();
            ("200 OK", page(&all, query))
        }
        ("POST", ["repos", o, r, "issues", n, "comments"]) => {
            let key = ("github", format!("{o}/{r}"), n.parse().unwrap_or(0));
            let id = add_comment(s, key, &text(body, "/body"));
            (
                "201 Created",
                json!({"id": id, "body": text(body, "/body")}),
            )
        }
        ("PATCH", ["repos", _, _, "issues", "comments", id]) => {
            let id = id.parse().unwrap_or(0);
            if edit_comment(s, "github", id, &text(body, "/body")) {
                ("200 OK", json!({"id": id, "body": text(body, "/body")}))
            } else {
                ("404 Not Found", json!({"message": "Not Found"}))
            }
        }
        ("POST", ["repos", o, r, "statuses", sha]) => {
            let state = text(body, "/state");
            if !matches!(state.as_str(), "pending" | "success" | "failure" | "error")
                || text(body, "/description").chars().count() > 140
            {
                return (
                    "422 Unprocessable Entity",
                    json!({"message": "Validation Failed"}),
                );
            }
            s.statuses.push(SeenStatus {
                host: "github",
                repository: format!("{o}/{r}"),
                commit: (*sha).to_owned(),
                state,
                context: text(body, "/context"),
                description: text(body, "/description"),
                url: body
                    .get("target_url")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            });
            (
                "201 Created",
                json!({"id": s.statuses.len(), "state": text(body, "/state")}),
            )
        }
        ("POST", ["repos", o, r, "check-runs"]) if s.check_runs => {
            let state = text(body, "/conclusion");
            s.statuses.push(SeenStatus {
                host: "github",
                repository: format!("{o}/{r}"),
                commit: text(body, "/head_sha"),
                state: if state.is_empty() {
                    text(body, "/status")
                } else {
                    state
                },
                context: text(body, "/name"),
                description: text(body, "/output/title"),
                url: body
                    .get("details_url")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            });
            ("201 Created", json!({"id": s.statuses.len()}))
        }
        ("POST", ["repos", _, _, "check-runs"]) => (
            "403 Forbidden",
            json!({"message": "Resource not accessible by integration"}),
        ),
        _ => ("404 Not Found", json!({"message": "Not Found"})),
    }
}

fn gitlab(s: &mut State, method: &str, path: &[&str], body: &Value) -> (&'static str, Value) {
    let decode = |p: &str| p.replace("%2F", "/").replace("%2f", "/");
    match (method, path) {
        ("GET", ["projects", p, "merge_requests", n, "notes"]) => {
            let key = ("gitlab", decode(p), n.parse().unwrap_or(0));
            let all = s.comments.get(&key).cloned().unwrap_or_default();
            ("200 OK", page(&all, "per_page=100"))
        }
        ("POST", ["projects", p, "merge_requests", n, "notes"]) => {
            let key = ("gitlab", decode(p), n.parse().unwrap_or(0));
            let id = add_comment(s, key, &text(body, "/body"));
            (
                "201 Created",
                json!({"id": id, "body": text(body, "/body")}),
            )
        }
        ("PUT", ["projects", _, "merge_requests", _, "notes", id]) => {
            let id = id.parse().unwrap_or(0);
            if edit_comment(s, "gitlab", id, &text(body, "/body")) {
                ("200 OK", json!({"id": id}))
            } else {
                ("404 Not Found", json!({"message": "404 Not found"}))
            }
        }
        ("POST", ["projects", p, "statuses", sha]) => {
            s.statuses.push(SeenStatus {
                host: "gitlab",
                repository: decode(p),
                commit: (*sha).to_owned(),
                state: text(body, "/state"),
                context: text(body, "/name"),
                description: text(body, "/description"),
                url: body
                    .get("target_url")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            });
            (
                "201 Created",
                json!({"id": s.statuses.len(), "status": text(body, "/state")}),
            )
        }
        _ => ("404 Not Found", json!({"message": "404 Not found"})),
    }
}

fn bitbucket(s: &mut State, method: &str, path: &[&str], body: &Value) -> (&'static str, Value) {
    match (method, path) {
        ("GET", ["repositories", w, r, "pullrequests", n, "comments"]) => {
            let key = ("bitbucket", format!("{w}/{r}"), n.parse().unwrap_or(0));
            let values: Vec<Value> = s
                .comments
                .get(&key)
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(|(id, raw)| json!({"id": id, "content": {"raw": raw}}))
                .collect();
            ("200 OK", json!({"values": values, "pagelen": 100}))
        }
        ("POST", ["repositories", w, r, "pullrequests", n, "comments"]) => {
            let key = ("bitbucket", format!("{w}/{r}"), n.parse().unwrap_or(0));
            let id = add_comment(s, key, &text(body, "/content/raw"));
            ("201 Created", json!({"id": id}))
        }
        ("PUT", ["repositories", _, _, "pullrequests", _, "comments", id]) => {
            let id = id.parse().unwrap_or(0);
            if edit_comment(s, "bitbucket", id, &text(body, "/content/raw")) {
                ("200 OK", json!({"id": id}))
            } else {
                ("404 Not Found", json!({"type": "error"}))
            }
        }
        ("POST", ["repositories", w, r, "commit", sha, "statuses", "build"]) => {
            if text(body, "/url").is_empty() || text(body, "/key").is_empty() {
                return (
                    "400 Bad Request",
                    json!({"type": "error", "error": {"message": "Enter a valid URL."}}),
                );
            }
            s.statuses.push(SeenStatus {
                host: "bitbucket",
                repository: format!("{w}/{r}"),
                commit: (*sha).to_owned(),
                state: text(body, "/state"),
                context: text(body, "/name"),
                description: text(body, "/description"),
                url: Some(text(body, "/url")),
            });
            (
                "201 Created",
                json!({"key": text(body, "/key"), "state": text(body, "/state")}),
            )
        }
        _ => ("404 Not Found", json!({"type": "error"})),
    }
}

/// GitHub's published `pull_request` payload
/// (`tests/fixtures/webhook/github-pull-request-opened.json`), its action,
/// its repository `acme/infra` at `url` (served on 127.0.0.1), pull request
/// 7 from `feature` (a fork's, with `fork`) at `head` into `main`.
pub fn github_pull_request(url: &str, action: &str, head: &str, fork: bool) -> Vec<u8> {
    let text = std::fs::read_to_string(
        crate::repo_root().join("tests/fixtures/webhook/github-pull-request-opened.json"),
    )
    .expect("the published payload");
    let mut body: Value = serde_json::from_str(&text).expect("JSON");
    body["action"] = action.into();
    body["number"] = 7.into();
    body["repository"]["full_name"] = "acme/infra".into();
    body["repository"]["html_url"] = url.into();
    body["repository"]["clone_url"] = format!("{url}.git").into();
    for field in ["url", "ssh_url", "git_url"] {
        body["repository"][field] = Value::Null;
    }
    body["pull_request"]["base"]["ref"] = "main".into();
    body["pull_request"]["base"]["repo"]["full_name"] = "acme/infra".into();
    body["pull_request"]["head"]["ref"] = "feature".into();
    body["pull_request"]["head"]["sha"] = head.into();
    let head_repo = if fork { "someone/infra" } else { "acme/infra" };
    body["pull_request"]["head"]["repo"]["full_name"] = head_repo.into();
    body["pull_request"]["html_url"] = format!("{url}/pull/7").into();
    body.to_string().into_bytes()
}

/// `body` as GitHub delivers a `pull_request` event signed with `secret`.
pub fn signed_github_pull_request(
    body: &[u8],
    secret: &str,
) -> stacksync::triggers::webhook::Headers {
    [
        ("X-GitHub-Event", "pull_request".to_owned()),
        ("X-GitHub-Delivery", crate::unique_name("delivery")),
        (
            "X-Hub-Signature-256",
            stacksync::triggers::webhook::verify::sign(secret.as_bytes(), body),
        ),
    ]
    .into_iter()
    .collect()
}
