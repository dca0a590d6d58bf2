//! Webhook deliveries from Git hosts, verified and reduced to pushes.
//!
//! Pure (all but [`handler`], which does the I/O through the ports): the
//! webhook function hands over the request's headers and raw body
//! (already base64-decoded from the Function URL event) and the accepted
//! secrets, and gets back a [`Received`] or a [`WebhookError`] that knows its
//! HTTP status. The steps, each usable alone:
//!
//! 1. the size limit ([`MAX_BODY_BYTES`]),
//! 2. [`Provider::detect`] from the event header each host sends,
//! 3. [`verify::verify`]: the signature (or GitLab's token) against every
//!    accepted secret, in constant time,
//! 4. [`parse::parse`]: the body into pushes, a ping, or an ignored event.
//!
//! [`receive`] runs all four; the [`handler`] runs them one by one, so that
//! what it answers before a signature is checked stays generic (see
//! [`handler::Refusal`]). The execution a push starts is named by
//! [`crate::naming::execution_name`] from the stack and the commit, so a
//! retried or replayed delivery starts nothing new.

pub mod handler;
pub mod parse;
pub mod verify;

use crate::hash::sha256_hex;
use crate::triggers::RefMoved;

/// The largest body accepted, in bytes: 4 MiB.
///
/// Above the usual 1 MiB because GitHub does not cap the `commits` of a push
/// webhook at 20 (that cap is for timeline events) and lists up to 5,000
/// added, removed and modified paths per commit, so a large merge or vendor
/// import passes 1 MiB; a rejected push would wait for the scheduler. Below
/// Lambda's 6 MB invocation payload even when the Function URL base64-encodes
/// the body (×4/3), so the limit is ours to report, as a 413.
pub const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// The longest delivery id kept as sent; longer or odder ids are hashed.
pub const MAX_DELIVERY_ID_LEN: usize = 64;

/// The request headers, looked up by name in any case.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Headers {
    /// (lower-case name, value), in the order given.
    pairs: Vec<(String, String)>,
}

impl Headers {
    /// No headers.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one header; a name given twice keeps both values.
    pub fn insert(&mut self, name: impl AsRef<str>, value: impl AsRef<str>) {
        self.pairs.push((
            name.as_ref().trim().to_ascii_lowercase(),
            value.as_ref().to_owned(),
        ));
    }

    /// The first value of `name` (any case), trimmed; `None` when absent or
    /// blank.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.trim())
            .filter(|v| !v.is_empty())
    }

    /// Whether `name` is present with a non-blank value.
    pub fn contains(&self, name: &str) -> bool {
        self.get(name).is_some()
    }
}

impl<K: AsRef<str>, V: AsRef<str>> FromIterator<(K, V)> for Headers {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut headers = Self::new();
        for (name, value) in iter {
            headers.insert(name, value);
        }
        headers
    }
}

/// Who sent a delivery, told by the event header each host sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Provider {
    /// GitHub (and GitHub Enterprise Server): `X-GitHub-Event`.
    GitHub,
    /// GitLab: `X-Gitlab-Event`.
    GitLab,
    /// Bitbucket Cloud: `X-Event-Key` with `X-Hook-UUID` or `X-Request-UUID`.
    Bitbucket,
    /// Anything else that signs like GitHub: `X-Stacksync-Event`.
    Generic,
}

impl Provider {
    /// Every provider, in the order [`Provider::detect`] tries them.
    pub const ALL: [Provider; 4] = [
        Provider::GitHub,
        Provider::GitLab,
        Provider::Bitbucket,
        Provider::Generic,
    ];

    /// The provider whose headers the request carries; the first in
    /// [`Provider::ALL`] order if several match.
    pub fn detect(headers: &Headers) -> Result<Self, WebhookError> {
        Self::ALL
            .into_iter()
            .find(|p| p.matches(headers))
            .ok_or_else(|| {
                WebhookError::Malformed(
                    "unknown webhook sender: expected an X-GitHub-Event, X-Gitlab-Event, \
                     X-Event-Key (with X-Hook-UUID or X-Request-UUID, Bitbucket Cloud) \
                     or X-Stacksync-Event header"
                        .to_owned(),
                )
            })
    }

    fn matches(self, headers: &Headers) -> bool {
        match self {
            Provider::Bitbucket => {
                headers.contains("x-event-key")
                    && (headers.contains("x-hook-uuid") || headers.contains("x-request-uuid"))
            }
            _ => headers.contains(self.event_header()),
        }
    }

    /// The header that names the event.
    pub fn event_header(self) -> &'static str {
        match self {
            Provider::GitHub => "X-GitHub-Event",
            Provider::GitLab => "X-Gitlab-Event",
            Provider::Bitbucket => "X-Event-Key",
            Provider::Generic => "X-Stacksync-Event",
        }
    }

    /// Lower-case name, for logs and keys: `github`, `gitlab`, `bitbucket`,
    /// `generic`.
    pub fn as_str(self) -> &'static str {
        match self {
            Provider::GitHub => "github",
            Provider::GitLab => "gitlab",
            Provider::Bitbucket => "bitbucket",
            Provider::Generic => "generic",
        }
    }
}

impl std::fmt::Display for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a delivery is refused; each maps to one HTTP status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WebhookError {
    /// 400: not a delivery we understand (unknown sender, bad JSON, a
    /// missing field, a commit that is not a commit id). Says where.
    #[error("malformed webhook: {0}")]
    Malformed(String),
    /// 401: signature or token missing or wrong. Names the header, never a
    /// secret.
    #[error("unauthorized webhook: {0}")]
    Unauthorized(String),
    /// 413: the body exceeds [`MAX_BODY_BYTES`].
    #[error("webhook body too large: {size} bytes, at most {limit}")]
    TooLarge {
        /// The body's size in bytes.
        size: usize,
        /// The limit, [`MAX_BODY_BYTES`].
        limit: usize,
    },
}

impl WebhookError {
    /// The HTTP status to answer with: 400, 401 or 413.
    pub fn status_code(&self) -> u16 {
        match self {
            WebhookError::Malformed(_) => 400,
            WebhookError::Unauthorized(_) => 401,
            WebhookError::TooLarge { .. } => 413,
        }
    }

    /// The error's name: `Malformed`, `Unauthorized` or `TooLarge`.
    pub fn name(&self) -> &'static str {
        match self {
            WebhookError::Malformed(_) => "Malformed",
            WebhookError::Unauthorized(_) => "Unauthorized",
            WebhookError::TooLarge { .. } => "TooLarge",
        }
    }

    /// The response body: `{"error": name, "message": text}`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({ "error": self.name(), "message": self.to_string() })
    }
}

/// What a verified delivery asks of stacksync.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Received {
    /// Branches or tags moved to new commits.
    Push(Delivery),
    /// A pull request opened, pushed to, merged or closed.
    PullRequest(PullRequestDelivery),
    /// A hello from the host (GitHub's `ping`, the generic `ping`): answer 200.
    Ping,
    /// Nothing to do: another event, or a branch or tag deleted.
    Ignored {
        /// Why, for the log and the response.
        reason: String,
    },
}

/// One delivery of pushes: Bitbucket sends several refs in one, the others one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// Who sent it.
    pub provider: Provider,
    /// The delivery's id (see [`delivery_id`]): bounded, `[A-Za-z0-9._-]`.
    pub delivery_id: String,
    /// The refs that moved: never empty.
    pub refs: Vec<RefMoved>,
}

/// One delivery of a pull-request event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRequestDelivery {
    pub provider: Provider,
    /// As [`Delivery::delivery_id`].
    pub delivery_id: String,
    pub pull_request: crate::pull_request::PullRequest,
}

impl Delivery {
    /// The source-index keys of every ref, without repeats.
    pub fn source_keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = Vec::new();
        for key in self.refs.iter().flat_map(RefMoved::source_keys) {
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        keys
    }
}

/// Everything in one call: size, sender, signature, then the body.
///
/// `secrets` are the accepted secrets (current and previous, for rotation):
/// the delivery is authentic if any one matches. Blank secrets are ignored;
/// with none left, every delivery is refused.
pub fn receive<S: AsRef<[u8]>>(
    headers: &Headers,
    body: &[u8],
    secrets: &[S],
) -> Result<Received, WebhookError> {
    check_size(body)?;
    let provider = Provider::detect(headers)?;
    verify::verify(provider, headers, body, secrets)?;
    parse::parse(provider, headers, body)
}

/// [`WebhookError::TooLarge`] if `body` exceeds [`MAX_BODY_BYTES`].
pub fn check_size(body: &[u8]) -> Result<(), WebhookError> {
    if body.len() > MAX_BODY_BYTES {
        return Err(WebhookError::TooLarge {
            size: body.len(),
            limit: MAX_BODY_BYTES,
        });
    }
    Ok(())
}

/// The id that stays the same when the host redelivers, for deduplication.
///
/// From the provider's header: GitHub `X-GitHub-Delivery`; GitLab
/// `Idempotency-Key` (GitLab ≥ 17.4, "consistent across webhook retries"),
/// else `X-Gitlab-Event-UUID`; Bitbucket `X-Request-UUID` (not
/// `X-Hook-UUID`: that names the webhook, the same for every delivery);
/// generic `X-Stacksync-Delivery`. Without one, `body-` and a SHA-256 of the
/// body (a redelivery sends the same bytes). An id longer than
/// [`MAX_DELIVERY_ID_LEN`] or with characters outside `[A-Za-z0-9._-]` is
/// replaced by `id-` and its SHA-256, so it is safe in keys and names.
pub fn delivery_id(provider: Provider, headers: &Headers, body: &[u8]) -> String {
    header_delivery_id(provider, headers).unwrap_or_else(|| format!("body-{}", short_hash(body)))
}

/// [`delivery_id`] from the headers alone (made safe the same way); `None`
/// when the provider's header is absent.
pub fn header_delivery_id(provider: Provider, headers: &Headers) -> Option<String> {
    let candidates: &[&str] = match provider {
        Provider::GitHub => &["x-github-delivery"],
        Provider::GitLab => &["idempotency-key", "x-gitlab-event-uuid"],
        Provider::Bitbucket => &["x-request-uuid"],
        Provider::Generic => &["x-stacksync-delivery"],
    };
    let id = candidates.iter().find_map(|name| headers.get(name))?;
    Some(if is_safe_id(id) {
        id.to_owned()
    } else {
        format!("id-{}", short_hash(id.as_bytes()))
    })
}

fn is_safe_id(id: &str) -> bool {
    id.len() <= MAX_DELIVERY_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// The first 40 hex digits of a SHA-256: 160 bits, plenty against collisions.
fn short_hash(bytes: &[u8]) -> String {
    let mut hex = sha256_hex(bytes);
    hex.truncate(40);
    hex
}

#[cfg(test)]
mod tests;
