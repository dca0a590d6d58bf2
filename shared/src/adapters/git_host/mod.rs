//! The Git host port over each host's REST API: GitHub (and GitHub
//! Enterprise Server), GitLab, Bitbucket Cloud. Only the calls listed in
//! each host's module are made, with the request and response shapes of
//! its documentation (linked there).
//!
//! Credentials are the repository's source secret, read and bound by
//! [`Credentials::api_access`]: nothing is sent to a host or an API the
//! secret does not name. Every call has a timeout; an answer worth another
//! try (a connection error, 429, 5xx) is tried again with backoff, at most
//! [`ATTEMPTS`] times, and then reported: the caller logs it and goes on.

mod bitbucket;
mod github;
mod gitlab;

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::adapters::credentials::Credentials;
use crate::adapters::credentials::api::{ApiAccess, ApiAuth, status_error};
use crate::ports::{CommitStatus, GitHost, HostRepository, PortError, PortResult, Posted};
use crate::pull_request::Host;

/// Tries of one call before it is reported.
pub const ATTEMPTS: u32 = 3;
/// The wait before the second try; doubled for each after.
const BACKOFF: Duration = Duration::from_millis(300);
/// Longest wait for one answer.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);
/// The most pages of comments looked through for the marker.
pub const MAX_PAGES: usize = 20;

/// The Git hosts' APIs, with the sources' credentials.
#[derive(Debug, Clone)]
pub struct GitHosts {
    credentials: Arc<Credentials>,
    client: reqwest::Client,
}

impl GitHosts {
    pub fn new(credentials: Arc<Credentials>) -> Self {
        let client = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .connect_timeout(Duration::from_secs(5))
            .user_agent(concat!("stacksync/", env!("CARGO_PKG_VERSION")))
            .build()
            .unwrap_or_default();
        Self {
            credentials,
            client,
        }
    }

    async fn access(&self, repository: &HostRepository) -> PortResult<Api<'_>> {
        let arn = repository.credentials.as_deref().ok_or_else(|| {
            PortError::Refused(format!(
                "{}: the entries of {} name no source.credentialsSecret, so nothing can be \
                 posted to {}",
                repository.repository, repository.url, repository.host
            ))
        })?;
        let access = self
            .credentials
            .api_access(repository.host, &repository.url, arn)
            .await
            .map_err(PortError::Refused)?;
        Ok(Api {
            client: &self.client,
            access,
            host: repository.host,
        })
    }
}

/// A comment to write on pull request `number`: the one holding `marker`
/// edited, else one made if `create` (and its body is a text).
#[derive(Clone, Copy)]
pub(crate) struct Comment<'a> {
    pub(crate) number: u64,
    pub(crate) marker: &'a str,
    pub(crate) body: Body<'a>,
    pub(crate) create: bool,
}

/// The body a comment is given: a text, or an edit of the one there.
#[derive(Clone, Copy)]
pub(crate) enum Body<'a> {
    Text(&'a str),
    Edit(&'a (dyn Fn(&str) -> String + Send + Sync)),
}

impl Body<'_> {
    /// The new body, given the one there (`None`: no comment yet).
    pub(crate) fn over(&self, old: Option<&str>) -> Option<String> {
        match (self, old) {
            (Body::Text(text), _) => Some((*text).to_owned()),
            (Body::Edit(edit), Some(old)) => Some(edit(old)),
            (Body::Edit(_), None) => None,
        }
    }
}

impl GitHosts {
    /// The comment written on its host.
    async fn comment_on(
        &self,
        repository: &HostRepository,
        comment: Comment<'_>,
    ) -> PortResult<Option<Posted>> {
        let api = self.access(repository).await?;
        let repo = &repository.repository;
        match repository.host {
            Host::GitHub => github::upsert_comment(&api, repo, comment).await,
            Host::GitLab => gitlab::upsert_comment(&api, repo, comment).await,
            Host::Bitbucket => bitbucket::upsert_comment(&api, repo, comment).await,
        }
    }
}

/// One host's API with its credentials, for one call.
pub(crate) struct Api<'a> {
    client: &'a reqwest::Client,
    access: ApiAccess,
    host: Host,
}

impl Api<'_> {
    /// `METHOD {base}{path}` with `body`, tried again on a transient
    /// failure; the answer's JSON (`Null` when empty).
    pub(crate) async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> PortResult<Value> {
        let url = format!("{}{path}", self.access.base);
        let mut wait = BACKOFF;
        let mut attempt = 1;
        loop {
            match self.once(method.clone(), &url, body).await {
                Err(e) if e.is_transient() && attempt < ATTEMPTS => {
                    tracing::warn!(error = %e, attempt, "{} API call failed; trying again", self.host);
                    tokio::time::sleep(wait).await;
                    wait *= 2;
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    async fn once(
        &self,
        method: reqwest::Method,
        url: &str,
        body: Option<&Value>,
    ) -> PortResult<Value> {
        let what = format!("{method} {url}");
        let mut request = self.client.request(method, url);
        request = match &self.access.auth {
            ApiAuth::Bearer(token) => request.bearer_auth(token.expose()),
            ApiAuth::Basic { username, password } => {
                request.basic_auth(username, Some(password.expose()))
            }
        };
        if self.host == Host::GitHub {
            request = request
                .header("Accept", "application/vnd.github+json")
                .header("X-GitHub-Api-Version", "2022-11-28");
        }
        if let Some(body) = body {
            request = request
                .header("Content-Type", "application/json")
                .body(body.to_string());
        }
        let response = request
            .send()
            .await
            .map_err(|e| PortError::Transient(format!("{what}: {e}")))?;
        let status = response.status().as_u16();
        let text = response
            .text()
            .await
            .map_err(|e| PortError::Transient(format!("{what}: {e}")))?;
        if !(200..300).contains(&status) {
            let said: String = text.chars().take(300).collect();
            return Err(status_error(
                status,
                &format!("{what}: HTTP {status}: {said}"),
            ));
        }
        if text.trim().is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_str(&text)
            .map_err(|e| PortError::Refused(format!("{what}: the answer is not JSON: {e}")))
    }

    /// Whether the credentials are a GitHub App's (check runs).
    pub(crate) fn is_app(&self) -> bool {
        self.access.app
    }
}

/// The first comment holding `marker` among pages of comments listed as
/// JSON arrays of `{id, body}` (GitHub's issue comments, GitLab's notes):
/// page `n`'s path is `page(n)`, a page shorter than `per_page` the last.
/// Its id and body.
pub(crate) async fn find_in_pages(
    api: &Api<'_>,
    page: impl Fn(usize) -> String,
    per_page: usize,
    marker: &str,
) -> PortResult<Option<(String, String)>> {
    for n in 1..=MAX_PAGES {
        let path = page(n);
        let listed = api.call(reqwest::Method::GET, &path, None).await?;
        let items = listed
            .as_array()
            .ok_or_else(|| PortError::Refused(format!("GET {path}: not a list")))?;
        let found = items.iter().find_map(|c| {
            let body = c.get("body").and_then(Value::as_str)?;
            body.contains(marker).then_some((c, body))
        });
        if let Some((comment, body)) = found {
            return Ok(Some((id_of(comment, &path)?, body.to_owned())));
        }
        if items.len() < per_page {
            break;
        }
    }
    Ok(None)
}

/// Where a host keeps a pull request's comments, and how it takes one.
pub(crate) struct CommentsAt<'a> {
    /// Where one is made (`POST`).
    pub(crate) create: String,
    /// Where comment `id` is edited, and with which method.
    pub(crate) edit: &'a (dyn Fn(&str) -> (reqwest::Method, String) + Sync),
    /// The host's request body for a comment's text.
    pub(crate) payload: fn(&str) -> Value,
}

/// Writes `comment`, given the one found holding its marker (id and
/// body): that one edited in place, else one made if asked; `None`: none
/// was there, and none was made.
pub(crate) async fn write_comment(
    api: &Api<'_>,
    comment: Comment<'_>,
    found: Option<(String, String)>,
    at: CommentsAt<'_>,
) -> PortResult<Option<Posted>> {
    let Some(body) = comment.body.over(found.as_ref().map(|(_, b)| b.as_str())) else {
        return Ok(None);
    };
    if let Some((id, _)) = found {
        let (method, path) = (at.edit)(&id);
        api.call(method, &path, Some(&(at.payload)(&body))).await?;
        return Ok(Some(Posted { id, created: false }));
    }
    if !comment.create {
        return Ok(None);
    }
    let made = api
        .call(
            reqwest::Method::POST,
            &at.create,
            Some(&(at.payload)(&body)),
        )
        .await?;
    Ok(Some(Posted {
        id: id_of(&made, &at.create)?,
        created: true,
    }))
}

/// An id the host gave (a number or a string) as text.
pub(crate) fn id_of(value: &Value, what: &str) -> PortResult<String> {
    match value.get("id") {
        Some(Value::Number(n)) => Ok(n.to_string()),
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        _ => Err(PortError::Refused(format!("{what}: the answer has no id"))),
    }
}

/// `text` with every byte outside `[A-Za-z0-9._~-]` percent-encoded: a
/// path segment (GitLab's `group%2Fproject`).
pub(crate) fn encode_segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'~' | b'-') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `repository` as API path segments: each of its `/`-parts encoded.
pub(crate) fn repository_path(repository: &str) -> String {
    repository
        .split('/')
        .map(encode_segment)
        .collect::<Vec<_>>()
        .join("/")
}

impl GitHost for GitHosts {
    async fn repository_of(&self, url: &str, credentials: Option<&str>) -> Option<HostRepository> {
        let api = match credentials {
            Some(arn) => self.credentials.api_url_of(arn).await,
            None => None,
        };
        Some(HostRepository {
            host: crate::ports::git_host::host_by_name(url, api.as_deref())?,
            repository: crate::ports::git_host::repository_path(url)?,
            url: url.to_owned(),
            credentials: credentials.map(str::to_owned),
        })
    }

    async fn upsert_comment(
        &self,
        repository: &HostRepository,
        number: u64,
        marker: &str,
        body: &str,
        create: bool,
    ) -> PortResult<Option<Posted>> {
        let comment = Comment {
            number,
            marker,
            body: Body::Text(body),
            create,
        };
        self.comment_on(repository, comment).await
    }

    async fn edit_comment(
        &self,
        repository: &HostRepository,
        number: u64,
        marker: &str,
        edit: &(dyn Fn(&str) -> String + Send + Sync),
    ) -> PortResult<Option<Posted>> {
        let comment = Comment {
            number,
            marker,
            body: Body::Edit(edit),
            create: false,
        };
        self.comment_on(repository, comment).await
    }

    async fn set_status(
        &self,
        repository: &HostRepository,
        commit: &str,
        status: &CommitStatus,
    ) -> PortResult<()> {
        let api = self.access(repository).await?;
        let repo = &repository.repository;
        match repository.host {
            Host::GitHub => github::set_status(&api, repo, commit, status).await,
            Host::GitLab => gitlab::set_status(&api, repo, commit, status).await,
            Host::Bitbucket => bitbucket::set_status(&api, repository, commit, status).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_segments_are_encoded() {
        assert_eq!(encode_segment("group/sub/project"), "group%2Fsub%2Fproject");
        assert_eq!(repository_path("acme/in fra"), "acme/in%20fra");
    }
}
