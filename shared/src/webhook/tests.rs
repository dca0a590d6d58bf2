//! Whole deliveries, from fixtures shaped like the hosts' real payloads.

use super::verify::sign;
use super::*;
use crate::source::normalize_url;

const SECRET: &[u8] = b"whsec-test-0c4f9e1a";
const NEXT_SECRET: &[u8] = b"whsec-test-rotated-77b2";

const GITHUB_COMMIT: &str = "6113728f27ae82c7b1a177c8d03f9e96e0adf246";
const GITLAB_COMMIT: &str = "da1560886d4f094c3e6c9ef40349f7d38b5d27d7";
const BITBUCKET_COMMIT: &str = "c14c1bb05dfb1fdcdf06b31485fff61b0ea44277";

fn fixture(name: &str) -> &'static str {
    match name {
        "github-push" => include_str!("../../../tests/fixtures/webhooks/github-push.json"),
        "github-tag-push" => include_str!("../../../tests/fixtures/webhooks/github-tag-push.json"),
        "github-branch-deleted" => {
            include_str!("../../../tests/fixtures/webhooks/github-branch-deleted.json")
        }
        "github-ping" => include_str!("../../../tests/fixtures/webhooks/github-ping.json"),
        "github-issues" => include_str!("../../../tests/fixtures/webhooks/github-issues.json"),
        "gitlab-push" => include_str!("../../../tests/fixtures/webhooks/gitlab-push.json"),
        "gitlab-tag-push" => include_str!("../../../tests/fixtures/webhooks/gitlab-tag-push.json"),
        "gitlab-merge-request" => {
            include_str!("../../../tests/fixtures/webhooks/gitlab-merge-request.json")
        }
        "bitbucket-push" => include_str!("../../../tests/fixtures/webhooks/bitbucket-push.json"),
        "generic-push" => include_str!("../../../tests/fixtures/webhooks/generic-push.json"),
        other => panic!("no fixture {other}"),
    }
}

/// A fixture's headers and body (the body as compact JSON bytes), unsigned.
struct Delivery {
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Delivery {
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

    fn receive(&self) -> Result<Event, WebhookError> {
        receive(&self.headers(), &self.body, &[SECRET])
    }
}

fn pushes(event: Event) -> Vec<Push> {
    match event {
        Event::Push(pushes) => pushes,
        other => panic!("expected a push, got {other:?}"),
    }
}

fn one_push(name: &str) -> Push {
    let mut pushes = pushes(Delivery::load(name).signed().receive().unwrap());
    assert_eq!(pushes.len(), 1);
    pushes.remove(0)
}

fn reason(event: Event) -> String {
    match event {
        Event::Ignored { reason } => reason,
        other => panic!("expected an ignored event, got {other:?}"),
    }
}

fn malformed(result: Result<Event, WebhookError>) -> String {
    match result {
        Err(e @ WebhookError::Malformed(_)) => {
            assert_eq!(e.status_code(), 400);
            e.to_string()
        }
        other => panic!("expected Malformed, got {other:?}"),
    }
}

fn unauthorized(result: Result<Event, WebhookError>) -> String {
    match result {
        Err(e @ WebhookError::Unauthorized(_)) => {
            assert_eq!(e.status_code(), 401);
            e.to_string()
        }
        other => panic!("expected Unauthorized, got {other:?}"),
    }
}

/// An edit of a fixture's JSON body.
type Edit = fn(&mut serde_json::Value);

const SIGNED_FIXTURES: [(&str, &str); 4] = [
    ("github-push", "X-Hub-Signature-256"),
    ("gitlab-push", "X-Gitlab-Token"),
    ("bitbucket-push", "X-Hub-Signature"),
    ("generic-push", "X-Stacksync-Signature-256"),
];

// ------------------------------------------------------------ headers

#[test]
fn headers_are_found_in_any_case_and_blank_ones_are_absent() {
    let h: Headers = [
        ("x-github-event", " push "),
        ("X-Empty", "  "),
        ("X-Twice", "first"),
        ("x-twice", "second"),
    ]
    .into_iter()
    .collect();
    assert_eq!(h.get("X-GitHub-Event"), Some("push"));
    assert_eq!(h.get("X-GITHUB-EVENT"), Some("push"));
    assert_eq!(h.get("x-empty"), None);
    assert_eq!(h.get("x-missing"), None);
    assert_eq!(h.get("X-Twice"), Some("first"));
}

// ------------------------------------------------------ provider detection

#[test]
fn each_fixture_is_told_by_its_headers() {
    let expected = [
        ("github-push", Provider::GitHub),
        ("gitlab-push", Provider::GitLab),
        ("bitbucket-push", Provider::Bitbucket),
        ("generic-push", Provider::Generic),
    ];
    for (name, provider) in expected {
        assert_eq!(Delivery::load(name).provider(), provider, "{name}");
    }
}

#[test]
fn an_unknown_sender_is_a_clear_400() {
    let d = Delivery::load("github-push")
        .signed()
        .without("X-GitHub-Event");
    let message = malformed(d.receive());
    assert!(message.contains("unknown webhook sender"), "{message}");
    assert!(message.contains("X-GitHub-Event"), "{message}");
}

#[test]
fn bitbucket_server_without_a_uuid_header_is_not_taken_for_bitbucket_cloud() {
    let h: Headers = [
        ("X-Event-Key", "repo:refs_changed"),
        ("X-Request-Id", "abc"),
    ]
    .into_iter()
    .collect();
    assert!(Provider::detect(&h).is_err());
    let h: Headers = [("X-Event-Key", "repo:push"), ("X-Hook-UUID", "abc")]
        .into_iter()
        .collect();
    assert_eq!(Provider::detect(&h).unwrap(), Provider::Bitbucket);
}

// ------------------------------------------------------------- verification

#[test]
fn a_valid_signature_is_accepted_for_each_provider() {
    for (name, _) in SIGNED_FIXTURES {
        let event = Delivery::load(name).signed().receive();
        assert!(matches!(event, Ok(Event::Push(_))), "{name}: {event:?}");
    }
}

#[test]
fn the_previous_secret_is_accepted_during_rotation() {
    for (name, _) in SIGNED_FIXTURES {
        let d = Delivery::load(name).signed_with(SECRET);
        let event = receive(&d.headers(), &d.body, &[NEXT_SECRET, SECRET]);
        assert!(matches!(event, Ok(Event::Push(_))), "{name}: {event:?}");
        let d = Delivery::load(name).signed_with(NEXT_SECRET);
        let event = receive(&d.headers(), &d.body, &[NEXT_SECRET, SECRET]);
        assert!(matches!(event, Ok(Event::Push(_))), "{name}: {event:?}");
    }
}

#[test]
fn a_missing_signature_is_refused_naming_the_header() {
    for (name, header) in SIGNED_FIXTURES {
        let message = unauthorized(Delivery::load(name).receive());
        assert!(
            message.contains(&format!("{header} is missing")),
            "{name}: {message}"
        );
    }
}

#[test]
fn a_wrong_secret_is_refused_for_each_provider() {
    for (name, header) in SIGNED_FIXTURES {
        let message = unauthorized(Delivery::load(name).signed_with(b"guessed").receive());
        assert!(message.contains(header), "{name}: {message}");
        assert!(!message.contains("whsec"), "{name}: {message}");
    }
}

#[test]
fn a_signature_of_another_body_is_refused() {
    for (name, header) in SIGNED_FIXTURES {
        if name == "gitlab-push" {
            continue; // GitLab's token does not cover the body.
        }
        let d = Delivery::load(name);
        let mut other = d.body.clone();
        other.extend_from_slice(b" ");
        let message = unauthorized(d.signed_over(SECRET, &other).receive());
        assert!(
            message.contains(&format!("{header} does not match the body")),
            "{name}: {message}"
        );
    }
}

#[test]
fn a_signature_with_a_bad_prefix_or_length_is_refused() {
    let d = Delivery::load("github-push");
    let good = sign(SECRET, &d.body);
    let hex = good.trim_start_matches("sha256=");
    for (value, expected) in [
        (format!("sha1={hex}"), "must start with `sha256=`"),
        (hex.to_owned(), "must start with `sha256=`"),
        (format!("sha256={}", &hex[..40]), "not 40"),
        (format!("sha256={}", "x".repeat(64)), "not hexadecimal"),
    ] {
        let d = Delivery::load("github-push").with("X-Hub-Signature-256", &value);
        let message = unauthorized(d.receive());
        assert!(message.contains(expected), "{value}: {message}");
    }
}

#[test]
fn verification_comes_before_parsing() {
    let d = Delivery {
        headers: vec![("X-GitHub-Event".into(), "push".into())],
        body: b"not json".to_vec(),
    };
    unauthorized(d.receive());
}

// ------------------------------------------------------------- size limit

#[test]
fn a_body_over_the_limit_is_413_before_anything_else() {
    let body = vec![b' '; MAX_BODY_BYTES + 1];
    let err = receive(&Headers::new(), &body, &[SECRET]).unwrap_err();
    assert_eq!(err.status_code(), 413);
    assert_eq!(
        err,
        WebhookError::TooLarge {
            size: MAX_BODY_BYTES + 1,
            limit: MAX_BODY_BYTES
        }
    );
    assert!(check_size(&body[..MAX_BODY_BYTES]).is_ok());
}

// ------------------------------------------------------------------ GitHub

#[test]
fn a_github_push_gives_ref_commit_and_every_url() {
    let push = one_push("github-push");
    assert_eq!(push.provider, Provider::GitHub);
    assert_eq!(push.delivery_id, "9b2f4c30-1a7e-11ef-8d6f-7a1c2e3b4d5f");
    assert_eq!(push.reference, "refs/heads/main");
    assert_eq!(push.commit, GITHUB_COMMIT);
    assert_eq!(
        push.repository_urls,
        [
            "https://github.com/Acme/infra.git",
            "git@github.com:Acme/infra.git",
            "git://github.com/Acme/infra.git",
            "https://github.com/Acme/infra",
        ]
    );
    assert_eq!(push.source_keys(), ["github.com/acme/infra#main"]);
}

#[test]
fn a_form_encoded_github_push_is_read_from_its_payload_field() {
    let json = Delivery::load("github-push").body;
    let mut body = b"payload=".to_vec();
    for &b in &json {
        match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => body.push(b),
            b' ' => body.push(b'+'),
            _ => body.extend_from_slice(format!("%{b:02X}").as_bytes()),
        }
    }
    let mut d = Delivery::load("github-push").with(
        "Content-Type",
        "application/x-www-form-urlencoded; charset=utf-8",
    );
    d.body = body;
    let pushes = pushes(d.signed().receive().unwrap());
    assert_eq!(pushes, [one_push("github-push")]);
}

#[test]
fn a_form_encoded_delivery_without_payload_is_malformed() {
    let mut d =
        Delivery::load("github-push").with("Content-Type", "application/x-www-form-urlencoded");
    d.body = b"other=1".to_vec();
    let message = malformed(d.signed().receive());
    assert!(message.contains("`payload`"), "{message}");
}

#[test]
fn a_github_ping_is_a_ping() {
    let event = Delivery::load("github-ping").signed().receive().unwrap();
    assert_eq!(event, Event::Ping);
}

#[test]
fn other_github_events_are_ignored() {
    let event = Delivery::load("github-issues").signed().receive().unwrap();
    assert!(reason(event).contains("\"issues\" is not a push"));
}

#[test]
fn a_deleted_github_branch_is_ignored() {
    let event = Delivery::load("github-branch-deleted")
        .signed()
        .receive()
        .unwrap();
    assert_eq!(
        reason(event),
        "refs/heads/feature/wider-subnets was deleted"
    );
    // The null commit alone says it too.
    let d = Delivery::edited("github-branch-deleted", |b| b["deleted"] = false.into());
    assert!(reason(d.signed().receive().unwrap()).contains("was deleted"));
}

#[test]
fn an_annotated_github_tag_deploys_the_tagged_commit() {
    let push = one_push("github-tag-push");
    assert_eq!(push.reference, "refs/tags/v1.4.0");
    // `after` is the tag object; `head_commit.id` the commit.
    assert_eq!(push.commit, GITHUB_COMMIT);
    assert_eq!(push.source_keys(), ["github.com/acme/infra#v1.4.0"]);
}

#[test]
fn a_tag_without_head_commit_falls_back_to_after() {
    let d = Delivery::edited("github-tag-push", |b| {
        b["head_commit"] = serde_json::Value::Null
    });
    let push = pushes(d.signed().receive().unwrap()).remove(0);
    assert_eq!(push.commit, "c3a1f0e2b7d94a6e8f1d2c3b4a5968778695a4b3");
}

#[test]
fn a_github_push_to_another_kind_of_ref_is_ignored() {
    let d = Delivery::edited("github-push", |b| b["ref"] = "refs/notes/commits".into());
    assert!(reason(d.signed().receive().unwrap()).contains("neither a branch nor a tag"));
}

// ------------------------------------------------------------------ GitLab

#[test]
fn a_gitlab_push_gives_ref_commit_and_every_url() {
    let push = one_push("gitlab-push");
    assert_eq!(push.provider, Provider::GitLab);
    // Idempotency-Key: the id GitLab keeps across retries.
    assert_eq!(push.delivery_id, "f5e5f430-f57b-4e6e-9fac-d9128cd7232f");
    assert_eq!(push.reference, "refs/heads/main");
    assert_eq!(push.commit, GITLAB_COMMIT);
    assert_eq!(
        push.repository_urls,
        [
            "https://gitlab.com/acme-group/platform/infra.git",
            "git@gitlab.com:acme-group/platform/infra.git",
            "https://gitlab.com/acme-group/platform/infra",
        ]
    );
    assert_eq!(
        push.source_keys(),
        ["gitlab.com/acme-group/platform/infra#main"]
    );
}

#[test]
fn an_annotated_gitlab_tag_deploys_checkout_sha() {
    let push = one_push("gitlab-tag-push");
    assert_eq!(push.reference, "refs/tags/v2.0.0");
    assert_eq!(push.commit, GITLAB_COMMIT);
    // Before GitLab 17.4 there is no Idempotency-Key.
    assert_eq!(push.delivery_id, "8e1f0a6c-5b2d-4c3e-9f7a-1d2c3b4a5e6f");
}

#[test]
fn a_deleted_gitlab_branch_is_ignored() {
    let d = Delivery::edited("gitlab-push", |b| {
        b["after"] = "0000000000000000000000000000000000000000".into();
        b["checkout_sha"] = serde_json::Value::Null;
        b["commits"] = serde_json::json!([]);
    });
    assert_eq!(
        reason(d.signed().receive().unwrap()),
        "refs/heads/main was deleted"
    );
}

#[test]
fn gitlab_merge_requests_are_ignored() {
    let event = Delivery::load("gitlab-merge-request")
        .signed()
        .receive()
        .unwrap();
    assert!(reason(event).contains("\"Merge Request Hook\" is not a push"));
}

#[test]
fn gitlab_system_hooks_count_only_when_they_carry_a_push() {
    let push = Delivery::load("gitlab-push").with("X-Gitlab-Event", "System Hook");
    assert_eq!(
        pushes(push.signed().receive().unwrap()),
        [one_push("gitlab-push")]
    );
    let mut create = Delivery::load("gitlab-push").with("X-Gitlab-Event", "System Hook");
    create.body = br#"{"event_name":"project_create","name":"infra"}"#.to_vec();
    assert!(reason(create.signed().receive().unwrap()).contains("project_create"));
}

// --------------------------------------------------------------- Bitbucket

#[test]
fn a_bitbucket_push_gives_one_push_per_changed_ref_and_skips_deletions() {
    let pushes = pushes(Delivery::load("bitbucket-push").signed().receive().unwrap());
    let refs: Vec<_> = pushes
        .iter()
        .map(|p| (p.reference.as_str(), p.commit.as_str()))
        .collect();
    assert_eq!(
        refs,
        [
            ("refs/heads/main", BITBUCKET_COMMIT),
            ("refs/tags/v3.1.0", BITBUCKET_COMMIT)
        ]
    );
    for push in &pushes {
        assert_eq!(push.provider, Provider::Bitbucket);
        assert_eq!(push.delivery_id, "69c56047-577b-46f9-a1dd-9c4e27273bc1");
        assert_eq!(
            push.repository_urls,
            [
                "https://bitbucket.org/acme/infra.git",
                "git@bitbucket.org:acme/infra.git",
                "https://bitbucket.org/acme/infra",
            ]
        );
    }
}

#[test]
fn a_bitbucket_push_of_only_deletions_is_ignored() {
    let d = Delivery::edited("bitbucket-push", |b| {
        let changes = b["push"]["changes"].as_array_mut().unwrap();
        changes.retain(|c| c["new"].is_null());
    });
    assert_eq!(
        reason(d.signed().receive().unwrap()),
        "change 0 deletes a branch or tag"
    );
}

#[test]
fn other_bitbucket_events_are_ignored() {
    let d = Delivery::load("bitbucket-push").with("X-Event-Key", "pullrequest:created");
    assert!(reason(d.signed().receive().unwrap()).contains("is not a push"));
}

#[test]
fn bitbucket_deliveries_are_never_identified_by_the_hook_uuid() {
    let d = Delivery::load("bitbucket-push").without("X-Request-UUID");
    let id = pushes(d.signed().receive().unwrap()).remove(0).delivery_id;
    assert!(id.starts_with("body-"), "{id}");
    assert!(!id.contains("0302255c"), "{id}");
}

#[test]
fn a_bad_bitbucket_hash_is_reported_with_its_path() {
    let d = Delivery::edited("bitbucket-push", |b| {
        b["push"]["changes"][1]["new"]["target"]["hash"] = "v3.1.0".into();
    });
    let message = malformed(d.signed().receive());
    assert!(
        message.contains("at push.changes[1].new.target.hash"),
        "{message}"
    );
}

// ----------------------------------------------------------------- generic

#[test]
fn a_generic_push_is_read() {
    let push = one_push("generic-push");
    assert_eq!(
        push,
        Push {
            provider: Provider::Generic,
            delivery_id: "ci-build-4711".into(),
            repository_urls: vec!["https://git.acme.example/platform/infra.git".into()],
            reference: "refs/heads/main".into(),
            commit: "9fceb02d0ae598e95dc970b74767f19372d61af8".into(),
        }
    );
}

#[test]
fn a_generic_ping_is_a_ping_and_other_events_are_ignored() {
    let ping = Delivery::load("generic-push").with("X-Stacksync-Event", "ping");
    assert_eq!(ping.signed().receive().unwrap(), Event::Ping);
    let other = Delivery::load("generic-push").with("X-Stacksync-Event", "build");
    assert!(reason(other.signed().receive().unwrap()).contains("is not a push"));
}

#[test]
fn a_generic_push_needs_a_full_ref() {
    let d = Delivery::edited("generic-push", |b| b["ref"] = "main".into());
    let message = malformed(d.signed().receive());
    assert!(
        message.contains("at ref: expected refs/heads/"),
        "{message}"
    );
}

#[test]
fn a_generic_delivery_without_an_id_is_named_by_its_body() {
    let d = Delivery::load("generic-push").without("X-Stacksync-Delivery");
    let first = one_push_of(d.signed());
    let again = one_push_of(
        Delivery::load("generic-push")
            .without("X-Stacksync-Delivery")
            .signed(),
    );
    assert!(first.delivery_id.starts_with("body-"));
    assert_eq!(first.delivery_id.len(), "body-".len() + 40);
    assert_eq!(first.delivery_id, again.delivery_id);
}

fn one_push_of(d: Delivery) -> Push {
    pushes(d.receive().unwrap()).remove(0)
}

// ------------------------------------------------- URLs of one repository

#[test]
fn every_url_of_a_push_normalises_to_one_repository() {
    let expected = [
        ("github-push", "github.com/acme/infra"),
        ("github-tag-push", "github.com/acme/infra"),
        ("gitlab-push", "gitlab.com/acme-group/platform/infra"),
        ("gitlab-tag-push", "gitlab.com/acme-group/platform/infra"),
        ("bitbucket-push", "bitbucket.org/acme/infra"),
        ("generic-push", "git.acme.example/platform/infra"),
    ];
    for (name, normal) in expected {
        for push in pushes(Delivery::load(name).signed().receive().unwrap()) {
            let has_ssh = push
                .repository_urls
                .iter()
                .any(|u| u.starts_with("git@") || u.starts_with("ssh://"));
            let has_https = push
                .repository_urls
                .iter()
                .any(|u| u.starts_with("https://"));
            assert!(has_https, "{name}: {:?}", push.repository_urls);
            if name != "generic-push" {
                assert!(has_ssh, "{name}: {:?}", push.repository_urls);
            }
            for url in &push.repository_urls {
                assert_eq!(normalize_url(url), normal, "{name}: {url}");
            }
        }
    }
}

// -------------------------------------------------------- malformed bodies

#[test]
fn a_body_that_is_not_json_is_malformed() {
    let mut d = Delivery::load("github-push");
    d.body = b"{\"ref\": ".to_vec();
    let message = malformed(d.signed().receive());
    assert!(message.contains("EOF"), "{message}");
}

#[test]
fn trailing_bytes_after_the_json_are_malformed() {
    let mut d = Delivery::load("generic-push");
    d.body.extend_from_slice(b" {}");
    let message = malformed(d.signed().receive());
    assert!(message.contains("trailing"), "{message}");
}

#[test]
fn a_missing_or_mistyped_field_is_reported_with_its_path() {
    let cases: [(&str, Edit, &str); 6] = [
        (
            "github-push",
            |b| b["ref"] = 5.into(),
            "at ref: invalid type: integer `5`",
        ),
        (
            "github-push",
            |b| {
                b.as_object_mut().unwrap().remove("repository");
            },
            "missing field `repository`",
        ),
        (
            "github-push",
            |b| b["repository"]["clone_url"] = 1.into(),
            "at repository.clone_url",
        ),
        (
            "github-push",
            |b| b["repository"] = serde_json::json!({}),
            "at repository: the repository has no URL",
        ),
        (
            "gitlab-push",
            |b| b["checkout_sha"] = "HEAD".into(),
            "at checkout_sha: expected a commit id of 40 hex digits, got \"HEAD\"",
        ),
        (
            "bitbucket-push",
            |b| b["push"]["changes"][0]["new"]["name"] = serde_json::Value::Null,
            "at push.changes[0].new.name",
        ),
    ];
    for (name, edit, expected) in cases {
        let message = malformed(Delivery::edited(name, edit).signed().receive());
        assert!(message.contains(expected), "{name}: {message}");
    }
}

#[test]
fn a_non_hex_commit_is_malformed() {
    let d = Delivery::edited("github-push", |b| b["after"] = "not-a-sha".into());
    let message = malformed(d.signed().receive());
    assert!(
        message.contains("at after: expected a commit id"),
        "{message}"
    );
}

// ------------------------------------------------------------ delivery ids

#[test]
fn delivery_ids_fall_back_in_order_and_are_made_safe() {
    let gitlab = Delivery::load("gitlab-push");
    let body = gitlab.body.clone();
    let id = |d: &Delivery| delivery_id(Provider::GitLab, &d.headers(), &body);
    assert_eq!(id(&gitlab), "f5e5f430-f57b-4e6e-9fac-d9128cd7232f");
    let gitlab = gitlab.without("Idempotency-Key");
    assert_eq!(id(&gitlab), "13792a34-cac6-4fda-95a8-c58e00a3954e");
    let gitlab = gitlab.without("X-Gitlab-Event-UUID");
    assert!(id(&gitlab).starts_with("body-"));

    let long = "a".repeat(MAX_DELIVERY_ID_LEN + 1);
    for odd in [long.as_str(), "{4f0e…}", "a b", "x/../y"] {
        let d = Delivery::load("github-push").with("X-GitHub-Delivery", odd);
        let safe = delivery_id(Provider::GitHub, &d.headers(), b"");
        assert!(safe.starts_with("id-"), "{odd} → {safe}");
        assert!(safe.len() <= MAX_DELIVERY_ID_LEN);
        assert!(
            safe.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'),
            "{safe}"
        );
        // The same odd id always gives the same safe one.
        assert_eq!(safe, delivery_id(Provider::GitHub, &d.headers(), b"x"));
    }
    let exact = "a".repeat(MAX_DELIVERY_ID_LEN);
    let d = Delivery::load("github-push").with("X-GitHub-Delivery", &exact);
    assert_eq!(delivery_id(Provider::GitHub, &d.headers(), b""), exact);
}

// ------------------------------------------------------------------ errors

#[test]
fn errors_know_their_status_and_render_as_json() {
    let cases = [
        (WebhookError::Malformed("x".into()), 400, "Malformed"),
        (WebhookError::Unauthorized("y".into()), 401, "Unauthorized"),
        (
            WebhookError::TooLarge { size: 10, limit: 5 },
            413,
            "TooLarge",
        ),
    ];
    for (err, status, name) in cases {
        assert_eq!(err.status_code(), status);
        let json = err.to_json();
        assert_eq!(json["error"], name);
        assert_eq!(json["message"], err.to_string());
    }
}

// -------------------------------------------------------------- no panics

#[test]
fn arbitrary_bodies_never_panic() {
    let bodies: [&[u8]; 9] = [
        b"",
        b"null",
        b"[]",
        b"\xff\xfe",
        b"{\"ref\":\"refs/heads/\\u0000\"}",
        b"payload=%",
        b"payload=%7",
        br#"{"push":{"changes":[{"new":{"type":"branch","name":"","target":{"hash":""}}}]},"repository":{"full_name":"a/b"}}"#,
        br#"{"repository":"","ref":"refs/tags/x","after":"0"}"#,
    ];
    let forms = ["application/json", "application/x-www-form-urlencoded"];
    for (name, _) in SIGNED_FIXTURES {
        for body in bodies {
            for form in forms {
                let mut d = Delivery::load(name).with("Content-Type", form);
                d.body = body.to_vec();
                let _ = d.signed().receive();
            }
        }
    }
}
