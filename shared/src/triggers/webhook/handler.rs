//! The webhook function's work, behind its Function URL: verify, parse, find
//! the stacks that follow the pushed repository and ref, start one execution
//! per stack with the pushed commit.
//!
//! Idempotent twice over: executions are named from (stack, commit) (see
//! [`crate::naming::execution_name`]), so any number of deliveries of one
//! push start one execution per stack; and the delivery id is recorded with
//! a conditional put once its starts are done, so a replay is answered
//! "duplicate". The execution deploys the ref's head when it runs, never an
//! older commit.

use serde::Serialize;
use serde_json::{Value, json};

use super::{Delivery, Headers, Received, WebhookError, receive};
use crate::clock::EpochMillis;
use crate::ports::{SecretStore, Starter, TriggerKind};
use crate::registry::{Deliveries, Entries};
use crate::triggers::{Starts, TriggerError, start_followers};

/// How long a delivery id is remembered (GitHub redelivers for 3 days).
pub const DELIVERY_TTL_SECONDS: i64 = 7 * 24 * 3600;

/// An HTTP answer: status and JSON body (never a stack trace).
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    pub status: u16,
    pub body: Value,
}

impl Response {
    pub fn new(status: u16, body: Value) -> Self {
        Self { status, body }
    }

    /// A typed answer with its status.
    fn answer(status: u16, answer: &Answer) -> Self {
        Self::new(status, serde_json::to_value(answer).unwrap_or(Value::Null))
    }

    /// A refusal: `{"error": name, "message": text}`.
    fn error(status: u16, name: &str, message: &str) -> Self {
        Self::new(status, json!({"error": name, "message": message}))
    }
}

/// What the webhook did with a delivery it accepted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "result")]
pub enum Answer {
    #[serde(rename = "pong")]
    Pong,
    #[serde(rename = "ignored")]
    Ignored { reason: String },
    /// This delivery id was handled before.
    #[serde(rename = "duplicate")]
    Duplicate {
        #[serde(rename = "deliveryId")]
        delivery_id: String,
    },
    /// No stack follows the pushed repository and ref: the keys looked for.
    #[serde(rename = "no stack follows this repository and ref")]
    NoFollower { sources: Vec<String> },
    /// Counts, not names: whoever can sign a delivery learns nothing of
    /// the registry (the function's log names the stacks).
    #[serde(rename = "started")]
    Started {
        #[serde(rename = "deliveryId")]
        delivery_id: String,
        started: usize,
        skipped: usize,
    },
    /// Every follower was started for this revision before.
    #[serde(rename = "nothing new to start")]
    NothingNew {
        #[serde(rename = "deliveryId")]
        delivery_id: String,
        started: usize,
        skipped: usize,
    },
}

/// The webhook's collaborators.
#[derive(Debug)]
pub struct Webhook<R, X, K> {
    pub registry: R,
    pub starter: X,
    pub secrets: K,
}

/// The answer to a delivery whose repository the signing secret does not
/// allow (its `"repositories"`), or `None` when it is allowed: every ref
/// moved must be of a listed repository, under any of its spellings.
fn not_allowed(delivery: &Delivery, allowed: Option<&[String]>) -> Option<Response> {
    let allowed = allowed?;
    let refused = delivery.refs.iter().find(|r| {
        !r.repository_urls
            .iter()
            .any(|url| allowed.contains(&crate::source::normalize_url(url)))
    })?;
    tracing::warn!(repository = ?refused.repository_urls, "webhook delivery refused: the secret does not allow its repository");
    Some(Response::error(
        403,
        "Forbidden",
        "the secret that signed this delivery does not allow its repository",
    ))
}

impl<R: Entries + Deliveries, X: Starter, K: SecretStore> Webhook<R, X, K> {
    /// Answers one request.
    pub async fn handle(&self, headers: &Headers, body: &[u8], now: EpochMillis) -> Response {
        let (received, allowed) = match self.verified(headers, body).await {
            Ok(verified) => verified,
            Err(response) => return response,
        };
        // A signed time past the deduplication window: a replay.
        if let Some(detail) = super::verify::stale(headers, now, DELIVERY_TTL_SECONDS) {
            tracing::warn!(%detail, "webhook delivery refused");
            return Response::error(
                401,
                "Unauthorized",
                "the delivery's signature or token is missing or does not match",
            );
        }
        let delivery = match received {
            Received::Push(delivery) => delivery,
            Received::Ping => return Response::answer(200, &Answer::Pong),
            Received::Ignored { reason } => {
                return Response::answer(200, &Answer::Ignored { reason });
            }
        };
        if let Some(refused) = not_allowed(&delivery, allowed.as_deref()) {
            return refused;
        }
        match self.start(&delivery, now).await {
            Ok((status, answer)) => Response::answer(status, &answer),
            // Nothing is recorded: the sender's retry (or a redelivery)
            // tries again, and starts are idempotent by name.
            Err(e) => {
                tracing::error!("{e}");
                Response::error(
                    503,
                    "Unavailable",
                    "the registry or Step Functions could not be reached; retry the delivery",
                )
            }
        }
    }

    /// The delivery, verified against the accepted secrets (read again once
    /// when a cached secret does not match: it may have been rotated).
    async fn verified(
        &self,
        headers: &Headers,
        body: &[u8],
    ) -> Result<(Received, Option<Vec<String>>), Response> {
        let (accepted, cached) = self.secrets.get(false).await.map_err(|e| {
            tracing::error!("{e}");
            Response::error(
                500,
                "SecretUnavailable",
                "the webhook secret cannot be read; see the function's log",
            )
        })?;
        let mut event = receive(headers, body, &accepted.secrets);
        let mut repositories = accepted.repositories;
        if cached
            && matches!(event, Err(WebhookError::Unauthorized(_)))
            && let Ok((fresh, _)) = self.secrets.get(true).await
        {
            event = receive(headers, body, &fresh.secrets);
            repositories = fresh.repositories;
        }
        let event = event.map(|received| (received, repositories));
        event.map_err(|e| match e {
            // The answer says nothing of what was wrong, nor whether a
            // secret is configured at all: the log does.
            WebhookError::Unauthorized(detail) => {
                tracing::warn!(%detail, "webhook delivery refused");
                Response::error(
                    401,
                    "Unauthorized",
                    "the delivery's signature or token is missing or does not match",
                )
            }
            other => Response::new(other.status_code(), other.to_json()),
        })
    }

    /// Starts the followers of every pushed ref, then claims the delivery id.
    async fn start(
        &self,
        delivery: &Delivery,
        now: EpochMillis,
    ) -> Result<(u16, Answer), TriggerError> {
        let mut starts = Starts::default();
        for moved in &delivery.refs {
            let keys = moved.source_keys();
            start_followers(
                &self.registry,
                &self.starter,
                &keys,
                TriggerKind::Webhook,
                &moved.commit,
                &mut starts,
            )
            .await?;
        }
        // Recorded only once every start is done, so a crash or a timeout in
        // between cannot turn the retry into a "duplicate" that starts nothing.
        let id = format!("{}#{}", delivery.provider.as_str(), delivery.delivery_id);
        let delivery_id = delivery.delivery_id.clone();
        if !self
            .registry
            .record_delivery(&id, now, DELIVERY_TTL_SECONDS)
            .await?
        {
            return Ok((200, Answer::Duplicate { delivery_id }));
        }
        let (started, skipped) = (starts.started.len(), starts.skipped.len());
        tracing::info!(
            delivery = %delivery_id,
            started = ?starts.started.iter().map(|s| s.stack.as_str()).collect::<Vec<_>>(),
            skipped = ?starts.skipped.iter().map(|s| (s.stack.as_str(), s.reason)).collect::<Vec<_>>(),
            "webhook delivery handled"
        );
        Ok(if starts.is_empty() {
            (
                200,
                Answer::NoFollower {
                    sources: delivery.source_keys(),
                },
            )
        } else if started == 0 {
            (
                202,
                Answer::NothingNew {
                    delivery_id,
                    started,
                    skipped,
                },
            )
        } else {
            (
                202,
                Answer::Started {
                    delivery_id,
                    started,
                    skipped,
                },
            )
        })
    }
}

/// The request of a Lambda Function URL event: headers and the raw body
/// (base64-decoded when the event says so); or the answer to give at once.
pub fn function_url_request(event: &Value) -> Result<(Headers, Vec<u8>), Response> {
    let method = event
        .pointer("/requestContext/http/method")
        .and_then(Value::as_str)
        .unwrap_or("POST");
    if !method.eq_ignore_ascii_case("POST") {
        return Err(Response::new(
            405,
            json!({"error": "MethodNotAllowed", "message": format!("{method}: webhooks are POSTed")}),
        ));
    }
    let headers: Headers = event
        .get("headers")
        .and_then(Value::as_object)
        .map(|h| {
            h.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
                .collect()
        })
        .unwrap_or_default();
    let body = event.get("body").and_then(Value::as_str).unwrap_or("");
    let base64 = event
        .get("isBase64Encoded")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let body = if base64 {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD
            .decode(body)
            .map_err(|e| {
                Response::new(
                    400,
                    json!({"error": "Malformed", "message": format!("the body is not valid base64: {e}")}),
                )
            })?
    } else {
        body.as_bytes().to_vec()
    };
    Ok((headers, body))
}

/// A Function URL response for `response`.
pub fn function_url_response(response: &Response) -> Value {
    json!({
        "statusCode": response.status,
        "headers": {"content-type": "application/json"},
        "body": response.body.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
                registry,
                starter: RecordingStarter::new(),
                secrets: FixedSecrets(vec![SECRET.into()]),
            }
        }

        fn delivery(id: &str, repository: &str, secret: &str) -> (Headers, Vec<u8>) {
            let body = json!({"repository": repository, "ref": "refs/heads/main", "after": "a".repeat(40)})
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
                registry: registry(),
                starter: RecordingStarter::new(),
                secrets: Limited(vec!["https://git.example/other.git".into()]),
            };
            let (headers, body) = delivery("d-1", "https://git.example/infra.git", SECRET);
            let refused = w.handle(&headers, &body, NOW).await;
            assert_eq!(refused.status, 403, "{:?}", refused.body);
            assert!(w.starter.started().is_empty());
            let w = Webhook {
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
    }
}
