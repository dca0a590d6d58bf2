//! The webhook function's work, behind its Function URL: verify, parse, find
//! the stacks that follow the pushed repository and ref, start one execution
//! per stack with the pushed commit.
//!
//! Idempotent twice over: executions are named from (stack, commit) (see
//! [`crate::naming::execution_name`]), so any number of deliveries of one
//! push start one execution per stack; and the delivery id is recorded with
//! a conditional put once its starts are done, so a replay is answered
//! "duplicate". The execution deploys the ref's head when it runs, never an
//! older commit. Each execution is counted as started by one delivery only
//! (`counted`), and every refusal writes one log line ([`Refusal`]).

use serde::Serialize;
use serde_json::{Value, json};

use super::parse::parse;
use super::verify::{stale, verify};
use super::{Delivery, Headers, Provider, Received, WebhookError, check_size};
use crate::clock::EpochMillis;
use crate::ports::{SecretStore, Starter, TriggerKind};
use crate::registry::{Deliveries, Entries, RegistrySources};
use crate::triggers::{Starts, TriggerError, start_ref_followers};

mod counted;
mod pull_request;
mod queued;
mod refusal;

pub use queued::{ConsumeError, Queued};

pub use refusal::{Caller, NOT_SIGNED, NOT_UNDERSTOOD, Refusal};

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
    /// A pull request's event, handed to the preview function.
    #[serde(rename = "relayed to the preview")]
    Previewing {
        #[serde(rename = "deliveryId")]
        delivery_id: String,
    },
    /// Counts, not names: whoever can sign a delivery learns nothing of
    /// the registry (the function's log names the stacks).
    #[serde(rename = "started")]
    Started {
        #[serde(rename = "deliveryId")]
        delivery_id: String,
        started: usize,
        skipped: usize,
    },
    /// The push moved a registry source: handed to the events function,
    /// which applies it and starts the push's stacks.
    #[serde(rename = "relayed")]
    Relayed {
        #[serde(rename = "deliveryId")]
        delivery_id: String,
        /// Refs relayed.
        relayed: usize,
    },
    /// Put on the queue: its consumer starts what follows the push (or
    /// hands the pull request to the preview function).
    #[serde(rename = "queued")]
    Queued {
        #[serde(rename = "deliveryId")]
        delivery_id: String,
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
    /// Where a push that moved a registry source is relayed (the events
    /// function applies the source, then starts the push's stacks: this
    /// function, behind a public URL, writes no spec); `None`: no relay,
    /// such a push's stacks are started here and the source is left to
    /// the scheduler.
    pub registry_sources: Option<Relay>,
    /// Where verified deliveries are queued for the consumer (answered at
    /// once); none: their stacks are started before the answer.
    pub queue: crate::ports::DeliveryQueue,
}

/// The bus a push that moved a registry source, and a pull request's
/// event, are put on, and the installation they are for (the events and
/// preview functions' rules match them).
#[derive(Debug, Clone)]
pub struct Relay {
    pub bus: crate::ports::Notifier,
    pub installation: String,
    /// Whether pull requests from forks are previewed (`PreviewForks`,
    /// default off).
    pub preview_forks: bool,
}

/// The refusal of a delivery whose repository the signing secret does not
/// allow (its `"repositories"`), or `None` when it is allowed. A delivery
/// names one repository (see [`super::parse`]): every URL of a ref moved is
/// a spelling of it, so any one listed allows it.
fn not_allowed(delivery: &Delivery, allowed: Option<&[String]>) -> Option<Refusal> {
    delivery
        .refs
        .iter()
        .find_map(|r| repository_not_allowed(&r.repository_urls, allowed))
}

/// The refusal of a repository (its URLs) the signing secret does not
/// allow, or `None` when it is allowed.
fn repository_not_allowed(urls: &[String], allowed: Option<&[String]>) -> Option<Refusal> {
    let allowed = allowed?;
    if urls
        .iter()
        .any(|url| allowed.contains(&crate::source::normalize_url(url)))
    {
        return None;
    }
    let repository = urls.first().map_or("", String::as_str);
    Some(Refusal::new(
        403,
        "Forbidden",
        "the secret that signed this delivery does not allow its repository",
        format!("the secret does not allow the repository {repository}"),
    ))
}

/// A verified delivery's event, and the repositories its secret may sign for.
type Verified = (Received, Option<Vec<String>>);

impl<R: Entries + Deliveries + RegistrySources, X: Starter, K: SecretStore> Webhook<R, X, K> {
    /// Whether `moved` moved a registry source and was relayed to the events
    /// function (a `Registry Source Pushed` event). A relay that fails is
    /// logged, and the push's stacks are started here (the source is then
    /// read by the scheduler).
    async fn relayed(&self, moved: &crate::triggers::RefMoved) -> Result<bool, TriggerError> {
        let Some(relay) = &self.registry_sources else {
            return Ok(false);
        };
        let keys = moved.source_keys();
        let sources = self.registry.registry_sources().await?;
        if !sources.iter().any(|s| keys.contains(&s.spec.key())) {
            return Ok(false);
        }
        let notice = crate::notice::Notice {
            kind: Some(crate::notice::NoticeKind::RegistrySourcePushed),
            installation: relay.installation.clone(),
            revision: Some(moved.commit.clone()),
            push: Some(crate::notice::NoticePush {
                repository_urls: moved.repository_urls.clone(),
                reference: moved.reference.clone(),
                commit: moved.commit.clone(),
            }),
            ..crate::notice::Notice::default()
        };
        match relay.bus.try_send(&notice).await {
            Ok(sent) => Ok(sent),
            Err(e) => {
                tracing::warn!(error = %e, "the push could not be relayed to the events function: its stacks are started here, its registry source read by the scheduler");
                Ok(false)
            }
        }
    }
}

impl<R: Entries + Deliveries + RegistrySources, X: Starter, K: SecretStore> Webhook<R, X, K> {
    /// Answers one request.
    pub async fn handle(&self, headers: &Headers, body: &[u8], now: EpochMillis) -> Response {
        let caller = Caller::of(headers);
        let (received, allowed) = match self.verified(headers, body, now).await {
            Ok(verified) => verified,
            Err(refusal) => return caller.refuse(refusal),
        };
        let delivery = match received {
            Received::Push(delivery) => delivery,
            Received::PullRequest(delivery) => {
                return self
                    .pull_request(&delivery, allowed.as_deref(), caller, now)
                    .await;
            }
            Received::Ping => return Response::answer(200, &Answer::Pong),
            Received::Ignored { reason } => {
                return Response::answer(200, &Answer::Ignored { reason });
            }
        };
        if let Some(refusal) = not_allowed(&delivery, allowed.as_deref()) {
            let caller = Caller {
                delivery: delivery.delivery_id.clone(),
                ..caller
            };
            return caller.refuse(refusal);
        }
        if let Some(queue) = self.queue.get() {
            return self.queue_push(queue, &delivery, now).await;
        }
        match self.start(&delivery, now).await {
            Ok((status, answer)) => Response::answer(status, &answer),
            // Nothing is recorded: the sender's retry (or a redelivery)
            // tries again, and starts are idempotent by name.
            // Worth the sender's retry only when trying again can help; a
            // refusal (access denied, no such table or state machine) is
            // the installation's to mend, and its log says which.
            Err(e) if e.is_transient() => {
                tracing::error!("{e}");
                Response::error(
                    503,
                    "Unavailable",
                    "the registry or Step Functions could not be reached; retry the delivery",
                )
            }
            Err(e) => {
                tracing::error!("{e}");
                Response::error(
                    500,
                    "Refused",
                    "the registry or Step Functions refused the request: see the function's log",
                )
            }
        }
    }

    /// The delivery, in order: its size and sender (refused generically:
    /// nothing is known of the caller yet), its signature against the
    /// accepted secrets (read again once when a cached secret does not
    /// match: it may have been rotated), its signed time, then its body
    /// (a signed sender is told what is wrong with it).
    async fn verified(
        &self,
        headers: &Headers,
        body: &[u8],
        now: EpochMillis,
    ) -> Result<Verified, Refusal> {
        check_size(body).map_err(|e| Refusal::too_large(e.to_string()))?;
        let provider =
            Provider::detect(headers).map_err(|e| Refusal::not_understood(e.to_string()))?;
        // A secret that cannot be read is answered as a bad signature: the
        // answer never says whether a secret is configured. Logged as an
        // error, for the installation to be fixed.
        let (accepted, cached) = self.secrets.get(false).await.map_err(|e| {
            Refusal::unauthorized(format!("the webhook secret cannot be read: {e}")).alarming()
        })?;
        let mut verdict = verify(provider, headers, body, &accepted.secrets);
        let mut repositories = accepted.repositories;
        if cached
            && verdict.is_err()
            && let Ok((fresh, _)) = self.secrets.get(true).await
        {
            verdict = verify(provider, headers, body, &fresh.secrets);
            repositories = fresh.repositories;
        }
        verdict.map_err(|e| match e {
            WebhookError::Unauthorized(detail) => Refusal::unauthorized(detail),
            other => Refusal::unauthorized(other.to_string()),
        })?;
        // A signed time past the deduplication window: a replay.
        if let Some(detail) = stale(headers, now, DELIVERY_TTL_SECONDS) {
            return Err(Refusal::unauthorized(detail));
        }
        let received = parse(provider, headers, body).map_err(|e| Refusal::signed(&e))?;
        Ok((received, repositories))
    }

    /// Starts the followers of every pushed ref, then claims the delivery id.
    async fn start(
        &self,
        delivery: &Delivery,
        now: EpochMillis,
    ) -> Result<(u16, Answer), TriggerError> {
        let mut starts = Starts::default();
        let mut relayed = 0;
        for moved in &delivery.refs {
            if self.relayed(moved).await? {
                relayed += 1;
                continue;
            }
            start_ref_followers(
                &self.registry,
                &self.starter,
                moved,
                TriggerKind::Webhook,
                &mut starts,
            )
            .await?;
        }
        counted::count_each_start_once(&self.registry, &mut starts, now).await;
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
        tracing::info!(
            delivery = %delivery_id,
            started = ?starts.started.iter().map(|s| s.stack.as_str()).collect::<Vec<_>>(),
            skipped = ?starts.skipped.iter().map(|s| (s.stack.as_str(), s.reason)).collect::<Vec<_>>(),
            "webhook delivery handled"
        );
        Ok(answer_of(
            &starts,
            relayed,
            delivery_id,
            delivery.source_keys(),
        ))
    }
}

/// The answer (and its status) for the starts made for a delivery, and the
/// refs relayed to the events function.
pub(super) fn answer_of(
    starts: &Starts,
    relayed: usize,
    delivery_id: String,
    sources: Vec<String>,
) -> (u16, Answer) {
    let (started, skipped) = (starts.started.len(), starts.skipped.len());
    if starts.is_empty() && relayed > 0 {
        (
            202,
            Answer::Relayed {
                delivery_id,
                relayed,
            },
        )
    } else if starts.is_empty() {
        (200, Answer::NoFollower { sources })
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
    }
}

/// The request of a Lambda Function URL event: headers and the raw body
/// (base64-decoded when the event says so); or the answer to give at once.
pub fn function_url_request(event: &Value) -> Result<(Headers, Vec<u8>), Response> {
    let headers: Headers = event
        .get("headers")
        .and_then(Value::as_object)
        .map(|h| {
            h.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
                .collect()
        })
        .unwrap_or_default();
    let method = event
        .pointer("/requestContext/http/method")
        .and_then(Value::as_str)
        .unwrap_or("POST");
    if !method.eq_ignore_ascii_case("POST") {
        return Err(refuse_request(event, &headers, Refusal::method(method)));
    }
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
                let reason = format!("the body is not valid base64: {e}");
                refuse_request(event, &headers, Refusal::not_understood(reason))
            })?
    } else {
        body.as_bytes().to_vec()
    };
    Ok((headers, body))
}

/// The answer to a Function URL request refused before its handler, with
/// its log line. The answer function's IAM-authorised URL shares
/// [`function_url_request`]: its refusals are no webhook delivery's.
fn refuse_request(event: &Value, headers: &Headers, refusal: Refusal) -> Response {
    if event.pointer("/requestContext/authorizer/iam").is_some() {
        let (status, reason) = (refusal.answer.status, refusal.reason.as_str());
        tracing::warn!(status, reason, "function URL request refused");
        return refusal.answer;
    }
    Caller::of(headers).refuse(refusal)
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
mod tests;
