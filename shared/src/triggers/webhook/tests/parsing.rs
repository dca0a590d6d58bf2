//! Each host's payloads, read into pushes, pings and ignored events.

use super::*;
use crate::source::normalize_url;

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
    assert_eq!(
        push.source_keys(),
        [
            "github.com/acme/infra#refs/heads/main",
            "github.com/acme/infra#main"
        ]
    );
}

#[test]
fn a_form_encoded_github_push_is_read_from_its_payload_field() {
    let json = Fixture::load("github-push").body;
    let mut body = b"payload=".to_vec();
    for &b in &json {
        match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => body.push(b),
            b' ' => body.push(b'+'),
            _ => body.extend_from_slice(format!("%{b:02X}").as_bytes()),
        }
    }
    let mut d = Fixture::load("github-push").with(
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
        Fixture::load("github-push").with("Content-Type", "application/x-www-form-urlencoded");
    d.body = b"other=1".to_vec();
    let message = malformed(d.signed().receive());
    assert!(message.contains("`payload`"), "{message}");
}

#[test]
fn a_github_ping_is_a_ping() {
    let event = Fixture::load("github-ping").signed().receive().unwrap();
    assert_eq!(event, Received::Ping);
}

#[test]
fn other_github_events_are_ignored() {
    let event = Fixture::load("github-issues").signed().receive().unwrap();
    assert!(reason(event).contains("\"issues\" is not a push"));
}

#[test]
fn a_deleted_github_branch_is_ignored() {
    let event = Fixture::load("github-branch-deleted")
        .signed()
        .receive()
        .unwrap();
    assert_eq!(
        reason(event),
        "refs/heads/feature/wider-subnets was deleted"
    );
    // The null commit alone says it too.
    let d = Fixture::edited("github-branch-deleted", |b| b["deleted"] = false.into());
    assert!(reason(d.signed().receive().unwrap()).contains("was deleted"));
}

#[test]
fn an_annotated_github_tag_deploys_the_tagged_commit() {
    let push = one_push("github-tag-push");
    assert_eq!(push.reference, "refs/tags/v1.4.0");
    // `after` is the tag object; `head_commit.id` the commit.
    assert_eq!(push.commit, GITHUB_COMMIT);
    assert_eq!(
        push.source_keys(),
        [
            "github.com/acme/infra#refs/tags/v1.4.0",
            "github.com/acme/infra#v1.4.0"
        ]
    );
}

#[test]
fn a_tag_without_head_commit_falls_back_to_after() {
    let d = Fixture::edited("github-tag-push", |b| {
        b["head_commit"] = serde_json::Value::Null
    });
    let push = pushes(d.signed().receive().unwrap()).remove(0);
    assert_eq!(push.commit, "c3a1f0e2b7d94a6e8f1d2c3b4a5968778695a4b3");
}

#[test]
fn a_github_push_to_another_kind_of_ref_is_ignored() {
    let d = Fixture::edited("github-push", |b| b["ref"] = "refs/notes/commits".into());
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
        [
            "gitlab.com/acme-group/platform/infra#refs/heads/main",
            "gitlab.com/acme-group/platform/infra#main"
        ]
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
    let d = Fixture::edited("gitlab-push", |b| {
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
fn gitlab_merge_requests_are_read_as_pull_requests() {
    let event = Fixture::load("gitlab-merge-request")
        .signed()
        .receive()
        .unwrap();
    let Received::PullRequest(d) = event else {
        panic!("{event:?}")
    };
    assert_eq!(d.provider, Provider::GitLab);
    assert_eq!(d.pull_request.number, 7);
    let note = Fixture::load("gitlab-merge-request").with("X-Gitlab-Event", "Note Hook");
    assert!(reason(note.signed().receive().unwrap()).contains("\"Note Hook\" is not a push"));
}

#[test]
fn gitlab_system_hooks_count_only_when_they_carry_a_push() {
    let push = Fixture::load("gitlab-push").with("X-Gitlab-Event", "System Hook");
    assert_eq!(
        pushes(push.signed().receive().unwrap()),
        [one_push("gitlab-push")]
    );
    let mut create = Fixture::load("gitlab-push").with("X-Gitlab-Event", "System Hook");
    create.body = br#"{"event_name":"project_create","name":"infra"}"#.to_vec();
    assert!(reason(create.signed().receive().unwrap()).contains("project_create"));
}

// --------------------------------------------------------------- Bitbucket

#[test]
fn a_bitbucket_push_gives_one_push_per_changed_ref_and_skips_deletions() {
    let pushes = pushes(Fixture::load("bitbucket-push").signed().receive().unwrap());
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
    let d = Fixture::edited("bitbucket-push", |b| {
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
    let d = Fixture::load("bitbucket-push").with("X-Event-Key", "issue:created");
    assert!(reason(d.signed().receive().unwrap()).contains("is not a push"));
    let d = Fixture::load("bitbucket-push").with("X-Event-Key", "pullrequest:approved");
    assert!(reason(d.signed().receive().unwrap()).contains("changes no commit"));
}

#[test]
fn bitbucket_deliveries_are_never_identified_by_the_hook_uuid() {
    let d = Fixture::load("bitbucket-push").without("X-Request-UUID");
    let id = pushes(d.signed().receive().unwrap()).remove(0).delivery_id;
    assert!(id.starts_with("body-"), "{id}");
    assert!(!id.contains("0302255c"), "{id}");
}

#[test]
fn a_bad_bitbucket_hash_is_reported_with_its_path() {
    let d = Fixture::edited("bitbucket-push", |b| {
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
    let ping = Fixture::load("generic-push").with("X-Stacksync-Event", "ping");
    assert_eq!(ping.signed().receive().unwrap(), Received::Ping);
    let other = Fixture::load("generic-push").with("X-Stacksync-Event", "build");
    assert!(reason(other.signed().receive().unwrap()).contains("is not a push"));
}

#[test]
fn a_generic_push_needs_a_full_ref() {
    let d = Fixture::edited("generic-push", |b| b["ref"] = "main".into());
    let message = malformed(d.signed().receive());
    assert!(
        message.contains("at ref: expected refs/heads/"),
        "{message}"
    );
}

#[test]
fn a_generic_delivery_without_an_id_is_named_by_its_body() {
    let d = Fixture::load("generic-push").without("X-Stacksync-Delivery");
    let first = one_push_of(d.signed());
    let again = one_push_of(
        Fixture::load("generic-push")
            .without("X-Stacksync-Delivery")
            .signed(),
    );
    assert!(first.delivery_id.starts_with("body-"));
    assert_eq!(first.delivery_id.len(), "body-".len() + 40);
    assert_eq!(first.delivery_id, again.delivery_id);
}

fn one_push_of(d: Fixture) -> Push {
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
        for push in pushes(Fixture::load(name).signed().receive().unwrap()) {
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
    let mut d = Fixture::load("github-push");
    d.body = b"{\"ref\": ".to_vec();
    let message = malformed(d.signed().receive());
    assert!(message.contains("EOF"), "{message}");
}

#[test]
fn trailing_bytes_after_the_json_are_malformed() {
    let mut d = Fixture::load("generic-push");
    d.body.extend_from_slice(b" {}");
    let message = malformed(d.signed().receive());
    assert!(message.contains("trailing"), "{message}");
}

#[test]
fn a_missing_or_mistyped_field_is_reported_with_its_path() {
    let cases: [(&str, Edit, &str); 9] = [
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
            "at repository: missing field `full_name`",
        ),
        (
            "github-push",
            |b| b["repository"] = serde_json::json!({"full_name": "acme/infra"}),
            "at repository: the repository has no URL",
        ),
        (
            "github-push",
            |b| b["repository"]["full_name"] = "acme/../infra".into(),
            "at repository.full_name: expected <owner>/<repository>",
        ),
        (
            "gitlab-push",
            |b| {
                b["project"]
                    .as_object_mut()
                    .unwrap()
                    .remove("path_with_namespace");
            },
            "at project: missing field `path_with_namespace`",
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
        let message = malformed(Fixture::edited(name, edit).signed().receive());
        assert!(message.contains(expected), "{name}: {message}");
    }
}

#[test]
fn a_non_hex_commit_is_malformed() {
    let d = Fixture::edited("github-push", |b| b["after"] = "not-a-sha".into());
    let message = malformed(d.signed().receive());
    assert!(
        message.contains("at after: expected a commit id"),
        "{message}"
    );
}

// ------------------------------------------------------------ delivery ids

#[test]
fn delivery_ids_fall_back_in_order_and_are_made_safe() {
    let gitlab = Fixture::load("gitlab-push");
    let body = gitlab.body.clone();
    let id = |d: &Fixture| delivery_id(Provider::GitLab, &d.headers(), &body);
    assert_eq!(id(&gitlab), "f5e5f430-f57b-4e6e-9fac-d9128cd7232f");
    let gitlab = gitlab.without("Idempotency-Key");
    assert_eq!(id(&gitlab), "13792a34-cac6-4fda-95a8-c58e00a3954e");
    let gitlab = gitlab.without("X-Gitlab-Event-UUID");
    assert!(id(&gitlab).starts_with("body-"));

    let long = "a".repeat(MAX_DELIVERY_ID_LEN + 1);
    for odd in [long.as_str(), "{4f0e…}", "a b", "x/../y"] {
        let d = Fixture::load("github-push").with("X-GitHub-Delivery", odd);
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
    let d = Fixture::load("github-push").with("X-GitHub-Delivery", &exact);
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
                let mut d = Fixture::load(name).with("Content-Type", form);
                d.body = body.to_vec();
                let _ = d.signed().receive();
            }
        }
    }
}
