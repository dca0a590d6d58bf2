//! The handler on the fakes: answers, claims and logs.

use super::*;

mod capture;
mod pull_requests;
mod queued;
mod refusals;

#[test]
fn function_url_events_give_headers_and_the_raw_body() {
    let event = json!({
        "headers": {"x-github-event": "push", "content-type": "application/json"},
        "body": "eyJhIjoxfQ==",
        "isBase64Encoded": true,
        "requestContext": {"http": {"method": "POST"}}
    });
    let (headers, body) = function_url_request(&event).unwrap();
    assert_eq!(headers.get("X-GitHub-Event"), Some("push"));
    assert_eq!(body, br#"{"a":1}"#);
    let plain = json!({"headers": {}, "body": "{}", "isBase64Encoded": false});
    assert_eq!(function_url_request(&plain).unwrap().1, b"{}");
    let get = json!({"requestContext": {"http": {"method": "GET"}}});
    assert_eq!(function_url_request(&get).unwrap_err().status, 405);
    let bad = json!({"body": "***", "isBase64Encoded": true});
    assert_eq!(function_url_request(&bad).unwrap_err().status, 400);
    let out = function_url_response(&Response::new(202, json!({"result": "started"})));
    assert_eq!(out["statusCode"], 202);
    assert_eq!(out["body"], r#"{"result":"started"}"#);
}

mod on_fakes {
    use super::*;
    use crate::fakes::{Failing, FixedSecrets, RecordingStarter};
    use crate::registry::memory::MemoryRegistry;
    use crate::registry::sample_entry;
    use crate::status::Status;
    use crate::triggers::webhook::verify::sign;

    const SECRET: &str = "whsec-unit";
    const NOW: EpochMillis = 1_800_000_000_000;

    fn webhook<R>(registry: R) -> Webhook<R, RecordingStarter, FixedSecrets> {
        Webhook {
            queue: Default::default(),
            registry,
            starter: RecordingStarter::new(),
            secrets: FixedSecrets(vec![SECRET.into()]),
            registry_sources: None,
        }
    }

    fn delivery(id: &str, repository: &str, secret: &str) -> (Headers, Vec<u8>) {
        let body =
            json!({"repository": repository, "ref": "refs/heads/main", "after": "a".repeat(40)})
                .to_string()
                .into_bytes();
        let headers: Headers = [
            ("X-Stacksync-Event", "push".to_owned()),
            ("X-Stacksync-Delivery", id.to_owned()),
            ("X-Stacksync-Signature-256", sign(secret.as_bytes(), &body)),
        ]
        .into_iter()
        .collect();
        (headers, body)
    }

    fn registry() -> MemoryRegistry {
        let registry = MemoryRegistry::new();
        registry.insert(sample_entry("orders", Status::default()));
        registry
    }

    #[tokio::test]
    async fn a_signed_push_starts_the_followers_and_its_replay_is_a_duplicate() {
        let w = webhook(registry());
        let (headers, body) = delivery("d-1", "https://git.example/infra.git", SECRET);
        let first = w.handle(&headers, &body, NOW).await;
        assert_eq!(first.status, 202, "{:?}", first.body);
        assert_eq!(first.body["result"], "started");
        // Counts, never the registry's stack names.
        assert_eq!(
            (
                first.body["started"].as_u64(),
                first.body["skipped"].as_u64()
            ),
            (Some(1), Some(0))
        );
        assert!(
            !first.body.to_string().contains("orders"),
            "{:?}",
            first.body
        );
        assert_eq!(w.starter.started()[0].1, "orders");
        let replay = w.handle(&headers, &body, NOW).await;
        assert_eq!(
            (replay.status, replay.body["result"].as_str()),
            (200, Some("duplicate"))
        );
        // A redelivery under a new id starts nothing new either.
        let (headers, body) = delivery("d-2", "https://git.example/infra.git", SECRET);
        let again = w.handle(&headers, &body, NOW).await;
        assert_eq!(again.body["result"], "nothing new to start");
        assert_eq!(w.starter.started().len(), 1);
    }

    /// A push that moves a registry source is relayed to the events
    /// function (which applies the source, then starts the push's stacks):
    /// the webhook writes no spec and starts nothing for it. With no bus to
    /// relay on, its stacks are started here, as before.
    #[tokio::test]
    async fn a_push_that_moves_a_registry_source_is_relayed_and_its_stacks_left_to_the_relay() {
        use crate::registry::RegistrySources;
        let registry = registry();
        let source = crate::registry_source::SourceSpec {
            name: "platform".into(),
            url: "https://git.example/infra.git".into(),
            reference: "main".into(),
            path: "stacks.yaml".into(),
            credentials_secret: None,
            signed_by: vec![],
            insecure: false,
        };
        registry.add_registry_source(&source).await.unwrap();
        let bus = std::sync::Arc::new(crate::fakes::MemoryNotices::default());
        let mut w = webhook(registry);
        w.registry_sources = Some(super::super::Relay {
            bus: crate::ports::Notifier::to(bus.clone()),
            installation: "stacksync".into(),
            preview_forks: false,
        });
        let (headers, body) = delivery("d-relay", "https://git.example/infra.git", SECRET);
        let answer = w.handle(&headers, &body, NOW).await;
        assert_eq!(
            (answer.status, answer.body["result"].as_str()),
            (202, Some("relayed")),
            "{:?}",
            answer.body
        );
        assert!(
            w.starter.started().is_empty(),
            "its stacks are the events function's to start"
        );
        let sent = bus.all();
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].detail_type(), "Registry Source Pushed");
        let push = sent[0].push.clone().unwrap();
        assert_eq!(
            (push.reference.as_str(), push.commit.len()),
            ("refs/heads/main", 40)
        );
        // The event the events function reads back is the same push.
        let event = json!({
            "version": "0", "id": "e-1", "detail-type": sent[0].detail_type(), "source": "stacksync",
            "account": "123456789012", "time": "2026-11-26T00:00:00Z", "region": "us-east-1",
            "resources": [], "detail": serde_json::from_str::<serde_json::Value>(&sent[0].detail()).unwrap()
        });
        let parsed = crate::triggers::events::from_value(event).unwrap();
        assert!(
            matches!(parsed.detail, crate::triggers::events::Detail::RegistrySourcePushed(ref m) if m.reference == "refs/heads/main")
        );

        // No bus: the push's stacks start here.
        w.registry_sources = Some(super::super::Relay {
            bus: crate::ports::Notifier::none(),
            installation: "stacksync".into(),
            preview_forks: false,
        });
        let (headers, body) = delivery("d-norelay", "https://git.example/infra.git", SECRET);
        let answer = w.handle(&headers, &body, NOW).await;
        assert_eq!(answer.body["result"], "started", "{:?}", answer.body);
    }

    /// A generic delivery that signs its time (`X-Stacksync-Timestamp`,
    /// the signature over `TIMESTAMP.BODY`) is refused once older than
    /// the window deliveries are deduplicated in (a replay after its id
    /// is forgotten would otherwise start runs again), or from too far
    /// ahead; a fresh one is taken.
    #[tokio::test]
    async fn a_signed_timestamp_older_than_the_dedup_window_is_refused() {
        let timed = |id: &str, at_secs: i64| {
            let body = json!({"repository": "https://git.example/infra.git", "ref": "refs/heads/main", "after": "a".repeat(40)})
                .to_string()
                .into_bytes();
            let signed = [at_secs.to_string().as_bytes(), b".", &body].concat();
            let headers: Headers = [
                ("X-Stacksync-Event", "push".to_owned()),
                ("X-Stacksync-Delivery", id.to_owned()),
                ("X-Stacksync-Timestamp", at_secs.to_string()),
                (
                    "X-Stacksync-Signature-256",
                    sign(SECRET.as_bytes(), &signed),
                ),
            ]
            .into_iter()
            .collect();
            (headers, body)
        };
        let w = webhook(registry());
        let now_secs = NOW / 1000;
        for (id, at, status) in [
            ("old", now_secs - DELIVERY_TTL_SECONDS - 60, 401),
            ("ahead", now_secs + 3600, 401),
            ("fresh", now_secs - 30, 202),
        ] {
            let (headers, body) = timed(id, at);
            let answer = w.handle(&headers, &body, NOW).await;
            assert_eq!(answer.status, status, "{id}: {:?}", answer.body);
        }
        // The time is signed: moved, the signature no longer matches.
        let (mut headers, body) = timed("moved", now_secs - DELIVERY_TTL_SECONDS - 60);
        headers.insert("X-Stacksync-Timestamp", (now_secs - 30).to_string());
        assert_eq!(w.handle(&headers, &body, NOW).await.status, 401);
        assert_eq!(w.starter.started().len(), 1, "only the fresh one");
    }

    /// A secret that may sign only for `repositories`.
    struct Limited(Vec<String>);

    impl crate::ports::SecretStore for Limited {
        async fn get(&self, _fresh: bool) -> Result<(crate::ports::Accepted, bool), String> {
            let accepted = crate::ports::Accepted {
                secrets: vec![SECRET.into()],
                repositories: Some(
                    self.0
                        .iter()
                        .map(|u| crate::source::normalize_url(u))
                        .collect(),
                ),
            };
            Ok((accepted, false))
        }
    }

    #[tokio::test]
    async fn a_secret_limited_to_some_repositories_signs_for_no_other() {
        let w = Webhook {
            queue: Default::default(),
            registry: registry(),
            starter: RecordingStarter::new(),
            secrets: Limited(vec!["https://git.example/other.git".into()]),
            registry_sources: None,
        };
        let (headers, body) = delivery("d-1", "https://git.example/infra.git", SECRET);
        let refused = w.handle(&headers, &body, NOW).await;
        assert_eq!(refused.status, 403, "{:?}", refused.body);
        assert!(w.starter.started().is_empty());
        let w = Webhook {
            queue: Default::default(),
            secrets: Limited(vec!["https://git.example/INFRA".into()]),
            ..w
        };
        let (headers, body) = delivery("d-2", "https://git.example/infra.git", SECRET);
        assert_eq!(w.handle(&headers, &body, NOW).await.status, 202);
    }

    #[tokio::test]
    async fn a_bad_signature_is_401_and_a_repository_nobody_follows_is_200() {
        let w = webhook(registry());
        let (headers, body) = delivery("d-1", "https://git.example/infra.git", "wrong");
        let refused = w.handle(&headers, &body, NOW).await;
        assert_eq!(refused.status, 401);
        // Generic: nothing of which header, or whether a secret is set.
        assert_eq!(
            refused.body["message"],
            "the delivery's signature or token is missing or does not match"
        );
        let (headers, body) = delivery("d-2", "https://git.example/other.git", SECRET);
        let answer = w.handle(&headers, &body, NOW).await;
        assert_eq!(
            (answer.status, answer.body["result"].as_str()),
            (200, Some("no stack follows this repository and ref"))
        );
        assert!(w.starter.started().is_empty());
        assert!(
            !w.registry.has_delivery("generic#d-1"),
            "a refused delivery is not claimed"
        );
    }

    #[tokio::test]
    async fn a_registry_that_cannot_be_reached_is_a_503_and_claims_nothing() {
        let registry = Failing::new(registry());
        registry.fail(
            "Query",
            1,
            crate::ports::PortError::Transient("throttled".into()),
        );
        let w = webhook(registry);
        let (headers, body) = delivery("d-1", "https://git.example/infra.git", SECRET);
        assert_eq!(w.handle(&headers, &body, NOW).await.status, 503);
        assert!(
            !w.registry.inner.has_delivery("generic#d-1"),
            "the sender's retry must start it"
        );
        assert_eq!(w.handle(&headers, &body, NOW).await.status, 202, "and does");
    }

    /// Issue "Every message true": a refusal (access denied) was answered
    /// 503 "could not be reached; retry the delivery", a retry that fails
    /// the same way.
    #[tokio::test]
    async fn a_registry_that_refuses_is_a_500_and_not_a_call_to_retry() {
        let registry = Failing::new(registry());
        registry.fail(
            "Query",
            1,
            crate::ports::PortError::Refused("AccessDeniedException: not allowed".into()),
        );
        let w = webhook(registry);
        let (headers, body) = delivery("d-1", "https://git.example/infra.git", SECRET);
        let answer = w.handle(&headers, &body, NOW).await;
        assert_eq!(answer.status, 500, "{:?}", answer.body);
        assert!(
            !answer.body.to_string().contains("retry"),
            "{:?}",
            answer.body
        );
        assert!(!w.registry.inner.has_delivery("generic#d-1"));
    }
}
