//! Whole deliveries, from fixtures shaped like the hosts' real payloads.

use super::verify::sign;
use super::*;

mod parsing;
mod pull_requests;
mod receiving;
mod repositories;

pub(super) const SECRET: &[u8] = b"whsec-test-0c4f9e1a";
pub(super) const NEXT_SECRET: &[u8] = b"whsec-test-rotated-77b2";

pub(super) const GITHUB_COMMIT: &str = "6113728f27ae82c7b1a177c8d03f9e96e0adf246";
pub(super) const GITLAB_COMMIT: &str = "da1560886d4f094c3e6c9ef40349f7d38b5d27d7";
pub(super) const BITBUCKET_COMMIT: &str = "c14c1bb05dfb1fdcdf06b31485fff61b0ea44277";

pub(super) fn fixture(name: &str) -> &'static str {
    match name {
        "github-push" => include_str!("../../../../../tests/fixtures/webhooks/github-push.json"),
        "github-tag-push" => {
            include_str!("../../../../../tests/fixtures/webhooks/github-tag-push.json")
        }
        "github-branch-deleted" => {
            include_str!("../../../../../tests/fixtures/webhooks/github-branch-deleted.json")
        }
        "github-ping" => include_str!("../../../../../tests/fixtures/webhooks/github-ping.json"),
        "github-issues" => {
            include_str!("../../../../../tests/fixtures/webhooks/github-issues.json")
        }
        "gitlab-push" => include_str!("../../../../../tests/fixtures/webhooks/gitlab-push.json"),
        "gitlab-tag-push" => {
            include_str!("../../../../../tests/fixtures/webhooks/gitlab-tag-push.json")
        }
        "gitlab-merge-request" => {
            include_str!("../../../../../tests/fixtures/webhooks/gitlab-merge-request.json")
        }
        "bitbucket-push" => {
            include_str!("../../../../../tests/fixtures/webhooks/bitbucket-push.json")
        }
        "generic-push" => include_str!("../../../../../tests/fixtures/webhooks/generic-push.json"),
        other => panic!("no fixture {other}"),
    }
}

/// A payload as its host published it (tests/fixtures/webhook/README.md),
/// byte for byte.
pub(super) fn published(name: &str) -> &'static str {
    match name {
        "github-push-branch" => {
            include_str!("../../../../../tests/fixtures/webhook/github-push-branch.json")
        }
        "github-push-tag" => {
            include_str!("../../../../../tests/fixtures/webhook/github-push-tag.json")
        }
        "gitlab-push" => include_str!("../../../../../tests/fixtures/webhook/gitlab-push.json"),
        "gitlab-tag-push" => {
            include_str!("../../../../../tests/fixtures/webhook/gitlab-tag-push.json")
        }
        "bitbucket-push-signed" => {
            include_str!("../../../../../tests/fixtures/webhook/bitbucket-push-signed.json")
        }
        "bitbucket-push-tag" => {
            include_str!("../../../../../tests/fixtures/webhook/bitbucket-push-tag.json")
        }
        other => panic!("no published payload {other}"),
    }
}

/// A fixture's headers and body (the body as compact JSON bytes), unsigned.
pub(super) struct Fixture {
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Fixture {
    fn load(name: &str) -> Self {
        let value: serde_json::Value = serde_json::from_str(fixture(name)).unwrap();
        let headers = value["headers"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
            .collect();
        let body = serde_json::to_vec(&value["body"]).unwrap();
        Self { headers, body }
    }

    /// The fixture with its JSON body edited by `edit`.
    fn edited(name: &str, edit: impl FnOnce(&mut serde_json::Value)) -> Self {
        let mut d = Self::load(name);
        let mut body: serde_json::Value = serde_json::from_slice(&d.body).unwrap();
        edit(&mut body);
        d.body = serde_json::to_vec(&body).unwrap();
        d
    }

    fn provider(&self) -> Provider {
        Provider::detect(&self.headers()).unwrap()
    }

    fn headers(&self) -> Headers {
        self.headers.iter().cloned().collect()
    }

    /// Signed as the fixture's provider signs, with `secret`, over `signed_body`.
    fn signed_over(mut self, secret: &[u8], signed_body: &[u8]) -> Self {
        let (name, value) = match self.provider() {
            Provider::GitHub => ("X-Hub-Signature-256", sign(secret, signed_body)),
            Provider::Bitbucket => ("X-Hub-Signature", sign(secret, signed_body)),
            Provider::Generic => ("X-Stacksync-Signature-256", sign(secret, signed_body)),
            Provider::GitLab => (
                "X-Gitlab-Token",
                String::from_utf8(secret.to_vec()).unwrap(),
            ),
        };
        self.headers.push((name.to_owned(), value));
        self
    }

    fn signed_with(self, secret: &[u8]) -> Self {
        let body = self.body.clone();
        self.signed_over(secret, &body)
    }

    fn signed(self) -> Self {
        self.signed_with(SECRET)
    }

    fn without(mut self, header: &str) -> Self {
        self.headers
            .retain(|(n, _)| !n.eq_ignore_ascii_case(header));
        self
    }

    fn with(mut self, header: &str, value: &str) -> Self {
        self = self.without(header);
        self.headers.push((header.to_owned(), value.to_owned()));
        self
    }

    fn receive(&self) -> Result<Received, WebhookError> {
        receive(&self.headers(), &self.body, &[SECRET])
    }
}

/// One pushed ref with its delivery's provider and id, flattened for assertions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Push {
    provider: Provider,
    delivery_id: String,
    repository_urls: Vec<String>,
    reference: String,
    commit: String,
}

impl Push {
    fn source_keys(&self) -> Vec<String> {
        crate::triggers::RefMoved {
            repository_urls: self.repository_urls.clone(),
            reference: self.reference.clone(),
            commit: self.commit.clone(),
        }
        .source_keys()
    }
}

pub(super) fn pushes(event: Received) -> Vec<Push> {
    match event {
        Received::Push(delivery) => delivery
            .refs
            .into_iter()
            .map(|r| Push {
                provider: delivery.provider,
                delivery_id: delivery.delivery_id.clone(),
                repository_urls: r.repository_urls,
                reference: r.reference,
                commit: r.commit,
            })
            .collect(),
        other => panic!("expected a push, got {other:?}"),
    }
}

pub(super) fn one_push(name: &str) -> Push {
    let mut pushes = pushes(Fixture::load(name).signed().receive().unwrap());
    assert_eq!(pushes.len(), 1);
    pushes.remove(0)
}

pub(super) fn reason(event: Received) -> String {
    match event {
        Received::Ignored { reason } => reason,
        other => panic!("expected an ignored event, got {other:?}"),
    }
}

pub(super) fn malformed(result: Result<Received, WebhookError>) -> String {
    match result {
        Err(e @ WebhookError::Malformed(_)) => {
            assert_eq!(e.status_code(), 400);
            e.to_string()
        }
        other => panic!("expected Malformed, got {other:?}"),
    }
}

pub(super) fn unauthorized(result: Result<Received, WebhookError>) -> String {
    match result {
        Err(e @ WebhookError::Unauthorized(_)) => {
            assert_eq!(e.status_code(), 401);
            e.to_string()
        }
        other => panic!("expected Unauthorized, got {other:?}"),
    }
}

/// An edit of a fixture's JSON body.
pub(super) type Edit = fn(&mut serde_json::Value);

pub(super) const SIGNED_FIXTURES: [(&str, &str); 4] = [
    ("github-push", "X-Hub-Signature-256"),
    ("gitlab-push", "X-Gitlab-Token"),
    ("bitbucket-push", "X-Hub-Signature"),
    ("generic-push", "X-Stacksync-Signature-256"),
];

// ------------------------------------------------------------ headers
