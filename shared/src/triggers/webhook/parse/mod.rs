//! Verified bodies into [`Received`]s, one reader per provider.
//!
//! Only what stacksync needs is read: the repository, the ref, the commit,
//! and whether the ref was deleted. Unknown fields are ignored, so payloads
//! may grow; a missing or mistyped field is [`WebhookError::Malformed`] with
//! its JSON path (`repository.clone_url`).
//!
//! A delivery names one repository, taken from the provider's own name of
//! it (GitHub and Bitbucket `repository.full_name`, GitLab
//! `project.path_with_namespace`, the generic `repository`): its HTTPS and
//! SSH URLs are built from that name and the host, and a URL of the payload
//! is kept only if it spells that same repository (see
//! `repository_urls`). So a secret's `"repositories"` list is checked
//! against the one repository, and only its stacks are looked up.
//!
//! Shapes, from each host's documentation and real deliveries (published
//! examples: tests/fixtures/webhook/):
//! - GitHub `push`: `ref`, `after`, `deleted`, `repository.{full_name,
//!   clone_url, ssh_url, git_url, html_url, url}` (the host is
//!   `html_url`'s), `head_commit.id`. For an annotated tag `after` is the
//!   tag object, so the tagged commit is taken from `head_commit`
//!   (consistent since GitHub's 2021-10-01 change). A webhook set to
//!   `application/x-www-form-urlencoded` sends the same JSON in the form
//!   field `payload`.
//! - GitLab `Push Hook` / `Tag Push Hook` (and `System Hook` with
//!   `object_kind` `push` / `tag_push`): `ref`, `after`, `checkout_sha` (the
//!   commit, also for annotated tags; null on deletion),
//!   `project.{path_with_namespace, web_url, git_http_url, git_ssh_url, …}`
//!   (the host is `web_url`'s). GitLab's "Test" button sends an ordinary
//!   push built from the latest commits, with the same header: it cannot be
//!   told apart and is treated as a push.
//! - Bitbucket Cloud `repo:push`: `push.changes[]` with `new` (null when the
//!   ref was deleted) `{type: branch|tag, name, target.hash}`, and
//!   `repository.{full_name, links.html.href}`; the payload has no clone
//!   URLs, so the HTTPS and SSH ones are built from `full_name`.
//! - Generic (`X-Stacksync-Event: push`): `{"repository": url, "ref":
//!   "refs/heads/main", "after": sha}`.

use super::verify::decode_hex;
use crate::source::{host_of, normalize_url};
use serde::de::DeserializeOwned;

use super::{Headers, Provider, Received, WebhookError, delivery_id};

mod bitbucket;
mod generic;
mod github;
mod gitlab;
mod pull_request;

use bitbucket::bitbucket;
use generic::generic;
use github::github;
use gitlab::gitlab;

/// The longest ref accepted, in bytes.
const MAX_REF_LEN: usize = 1024;
/// Longest excerpt of an offending value quoted back in an error.
pub(super) const MAX_QUOTE: usize = 80;

/// The event in a verified delivery from `provider`.
pub fn parse(provider: Provider, headers: &Headers, body: &[u8]) -> Result<Received, WebhookError> {
    let event = headers.get(provider.event_header()).unwrap_or_default();
    let id = || delivery_id(provider, headers, body);
    match provider {
        Provider::GitHub => github(event, headers, body, id),
        Provider::GitLab => gitlab(event, body, id),
        Provider::Bitbucket => bitbucket(event, body, id),
        Provider::Generic => generic(event, body, id),
    }
}

/// What an event of `host` (`"GitHub"`) that is no push is answered with:
/// a ping is a ping, any other event is ignored and said so; `None` for a
/// push, to be read.
pub(super) fn not_a_push(event: &str, host: &str) -> Option<Received> {
    match event {
        "ping" => Some(Received::Ping),
        "push" => None,
        other => Some(ignored(format!(
            "{host} event {} is not a push",
            quote(other)
        ))),
    }
}

pub(super) fn ignored(reason: impl Into<String>) -> Received {
    Received::Ignored {
        reason: reason.into(),
    }
}

pub(super) fn quote(value: &str) -> String {
    let mut end = value.len().min(MAX_QUOTE);
    while !value.is_char_boundary(end) {
        end -= 1;
    }
    let short = value.get(..end).unwrap_or_default();
    if end < value.len() {
        format!("{short:?}…")
    } else {
        format!("{short:?}")
    }
}

/// `bytes` as JSON of type `T`, or the path of the first thing wrong.
pub(super) fn from_json<T: DeserializeOwned>(
    bytes: &[u8],
    context: &str,
) -> Result<T, WebhookError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value: T = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        WebhookError::Malformed(format!("{context}at {path}: {}", e.inner()))
    })?;
    de.end()
        .map_err(|e| WebhookError::Malformed(format!("{context}trailing data: {e}")))?;
    Ok(value)
}

/// A full branch or tag ref, checked for length and control characters.
/// `None` for other refs (`refs/notes/…`, `refs/pull/…`).
pub(super) fn branch_or_tag(path: &str, reference: &str) -> Result<Option<String>, WebhookError> {
    if reference.len() > MAX_REF_LEN || reference.chars().any(char::is_control) {
        return Err(WebhookError::Malformed(format!(
            "at {path}: not a Git ref: {}",
            quote(reference)
        )));
    }
    let name = reference
        .strip_prefix("refs/heads/")
        .or_else(|| reference.strip_prefix("refs/tags/"));
    Ok(name.filter(|n| !n.is_empty()).map(|_| reference.to_owned()))
}

/// Whether `sha` is Git's null id, which a deleted ref moves to.
pub(super) fn is_null_sha(sha: &str) -> bool {
    !sha.is_empty() && sha.bytes().all(|b| b == b'0')
}

/// A commit id: 40 hex digits, lower-cased.
pub(super) fn commit_id(path: &str, sha: &str) -> Result<String, WebhookError> {
    let hex = sha.bytes().all(|b| b.is_ascii_hexdigit());
    if sha.len() == 40 && hex {
        Ok(sha.to_ascii_lowercase())
    } else if sha.len() == 64 && hex {
        Err(WebhookError::Malformed(format!(
            "at {path}: {}",
            crate::source::SHA256_REFUSED
        )))
    } else {
        Err(WebhookError::Malformed(format!(
            "at {path}: expected a commit id of 40 hex digits, got {}",
            quote(sha)
        )))
    }
}

/// The URLs of the one repository a delivery names: `https://HOST/PATH.git`
/// and `git@HOST:PATH.git`, built from the host and the provider's own
/// name of the repository (`full_name`, `path_with_namespace`), then those
/// of `candidates` that spell that same repository (same host and path; a
/// port may differ, as in `ssh://git@host:2222/PATH.git`). A URL that names
/// another repository is left out: it is no spelling of this one, and a
/// secret's `"repositories"` list is checked against this one only.
///
/// `path` is checked (`at {path_field}`): segments of `[A-Za-z0-9._-]`.
pub(super) fn repository_urls<'a>(
    path_field: &str,
    host: &str,
    path: &str,
    candidates: impl IntoIterator<Item = Option<&'a str>>,
) -> Result<Vec<String>, WebhookError> {
    let path = path.trim().trim_matches('/');
    let path = path.strip_suffix(".git").unwrap_or(path);
    let segment_ok = |s: &str| {
        !s.is_empty()
            && s != "."
            && s != ".."
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    };
    if path.len() > MAX_REF_LEN || !path.contains('/') || !path.split('/').all(segment_ok) {
        return Err(WebhookError::Malformed(format!(
            "at {path_field}: expected <owner>/<repository>, got {}",
            quote(path)
        )));
    }
    let host_ok = !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-'));
    if !host_ok {
        return Err(WebhookError::Malformed(format!(
            "at {path_field}: the repository's host {} is not a host name",
            quote(host)
        )));
    }
    let https = format!("https://{host}/{path}.git");
    let ssh = format!("git@{host}:{path}.git");
    let wanted = path.to_ascii_lowercase();
    let same = |url: &&str| {
        let normal = normalize_url(url);
        host_of(url).eq_ignore_ascii_case(host)
            && normal.split_once('/').is_some_and(|(_, p)| p == wanted)
    };
    let spellings: Vec<&str> = candidates.into_iter().flatten().filter(same).collect();
    let built = [https.as_str(), ssh.as_str()];
    Ok(urls(built.into_iter().chain(spellings).map(Some)))
}

/// The host of the first of `urls` given: where the repository lives.
pub(super) fn first_host<'a>(urls: impl IntoIterator<Item = Option<&'a str>>) -> Option<&'a str> {
    urls.into_iter()
        .flatten()
        .map(str::trim)
        .find(|u| !u.is_empty())
        .map(host_of)
}

/// The non-blank URLs, in order, without repeats.
pub(super) fn urls<'a>(candidates: impl IntoIterator<Item = Option<&'a str>>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for url in candidates.into_iter().flatten() {
        let url = url.trim();
        if !url.is_empty() && !out.iter().any(|u| u == url) {
            out.push(url.to_owned());
        }
    }
    out
}

pub(super) fn require_urls(path: &str, urls: Vec<String>) -> Result<Vec<String>, WebhookError> {
    if urls.is_empty() {
        Err(WebhookError::Malformed(format!(
            "at {path}: the repository has no URL"
        )))
    } else {
        Ok(urls)
    }
}

// ------------------------------------------------------------ Form bodies

/// The value of `name` in an `application/x-www-form-urlencoded` body,
/// decoded; `None` if absent.
pub(crate) fn form_field(body: &[u8], name: &str) -> Option<Vec<u8>> {
    body.split(|&b| b == b'&').find_map(|pair| {
        let (key, value) = match pair.iter().position(|&b| b == b'=') {
            Some(i) => (pair.get(..i)?, pair.get(i + 1..)?),
            None => (pair, &[][..]),
        };
        (form_decode(key) == name.as_bytes()).then(|| form_decode(value))
    })
}

/// Form decoding: `+` is a space, `%XX` a byte; a `%` not followed by two
/// hex digits stays as it is.
pub(crate) fn form_decode(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len());
    let mut i = 0;
    while let Some(&b) = input.get(i) {
        match b {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = input
                    .get(i + 1..i + 3)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(decode_hex)
                    .and_then(|v| v.first().copied());
                if let Some(byte) = hex {
                    out.push(byte);
                    i += 3;
                    continue;
                }
                out.push(b'%');
            }
            _ => out.push(b),
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_decoding_handles_plus_percent_and_stray_percent() {
        assert_eq!(form_decode(b"a+b%2Fc%7b%7D"), b"a b/c{}");
        assert_eq!(form_decode(b"100%"), b"100%");
        assert_eq!(form_decode(b"%zz%4"), b"%zz%4");
        assert_eq!(form_decode(b"%+1"), b"% 1");
        assert_eq!(form_decode(b"%C3%A9"), "é".as_bytes());
    }

    #[test]
    fn form_fields_are_found_by_decoded_name() {
        let body = b"a=1&payload=%7B%22x%22%3A1%7D&flag";
        assert_eq!(form_field(body, "payload").unwrap(), br#"{"x":1}"#);
        assert_eq!(form_field(body, "flag").unwrap(), b"");
        assert_eq!(form_field(body, "missing"), None);
    }

    #[test]
    fn commit_ids_are_40_hex_digits_lower_cased() {
        let sha = "A".repeat(40);
        assert_eq!(commit_id("after", &sha).unwrap(), "a".repeat(40));
        for bad in ["", "abc", &"g".repeat(40), &"a".repeat(41), &"é".repeat(20)] {
            let err = commit_id("after", bad).unwrap_err();
            assert!(err.to_string().contains("at after: expected a commit id"));
        }
        // Issue "Real payloads and real templates" (6): a SHA-256 id is said
        // for what it is, not as a malformed one.
        let err = commit_id("after", &"a".repeat(64)).unwrap_err().to_string();
        assert!(
            err.contains("at after: a SHA-256 repository") && err.contains("SHA-1"),
            "{err}"
        );
    }

    #[test]
    fn quoted_values_are_cut_on_a_char_boundary() {
        let long = "é".repeat(100);
        let q = quote(&long);
        assert!(q.ends_with('…'), "{q}");
        assert!(q.len() < 100);
    }

    #[test]
    fn only_branches_and_tags_are_refs_to_deploy() {
        assert_eq!(
            branch_or_tag("ref", "refs/heads/main").unwrap().as_deref(),
            Some("refs/heads/main")
        );
        assert_eq!(
            branch_or_tag("ref", "refs/tags/v1").unwrap().as_deref(),
            Some("refs/tags/v1")
        );
        assert_eq!(branch_or_tag("ref", "refs/notes/x").unwrap(), None);
        assert_eq!(branch_or_tag("ref", "refs/heads/").unwrap(), None);
        assert!(branch_or_tag("ref", "refs/heads/a\nb").is_err());
        assert!(branch_or_tag("ref", &format!("refs/heads/{}", "a".repeat(2000))).is_err());
    }
}
