//! The webhook function's work, behind its Function URL: verify, parse, find
//! the stacks that follow the pushed repository and ref, start one execution
//! per stack with the pushed commit.
//!
//! Idempotent twice over: executions are named from (stack, commit) (see
//! [`execution_name`]), so any number of deliveries of one push start one
//! execution per stack; and the delivery id is recorded with a conditional
//! put once its starts are done, so a replay is answered "duplicate".
//! The execution deploys the ref's head when it runs, never an older commit.
//!
//! [`execution_name`]: crate::adapters::stepfunctions::execution_name

use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Event, Headers, Push, WebhookError, receive};
use crate::adapters::stepfunctions::Executions;
use crate::clock::EpochMillis;
use crate::registry::Registry;
use crate::triggers::Starts;

/// How long a delivery id is remembered (GitHub redelivers for 3 days).
pub const DELIVERY_TTL_SECONDS: i64 = 7 * 24 * 3600;
/// How long fetched secrets are trusted before they are read again.
pub const SECRET_CACHE: Duration = Duration::from_secs(300);

/// An HTTP answer: status and JSON body (never a stack trace).
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    pub status: u16,
    pub body: Value,
}

impl Response {
    fn new(status: u16, body: Value) -> Self {
        Self { status, body }
    }
}

/// Where the webhook secret lives.
#[derive(Debug, Clone)]
pub enum SecretLocation {
    /// A Secrets Manager secret (ARN or name).
    SecretsManager(String),
    /// An SSM parameter (SecureString), by name.
    Parameter(String),
    /// Given directly (tests, the local runner).
    Fixed(Vec<String>),
}

/// The accepted secrets, read from their store and cached across invocations.
///
/// The stored value is either the secret itself, or JSON `{"current": ...,
/// "previous": ...}` so a rotation can accept both while senders switch.
#[derive(Debug)]
pub struct Secrets {
    location: SecretLocation,
    secretsmanager: Option<aws_sdk_secretsmanager::Client>,
    ssm: Option<aws_sdk_ssm::Client>,
    cache: Mutex<Option<(Instant, Vec<String>)>>,
    /// When a bad signature last forced a read: at most one per
    /// [`FORCED_REFRESH_EVERY`], so unsigned floods cannot drive reads.
    forced: Mutex<Option<Instant>>,
    forced_every: Duration,
}

/// The least time between two reads of the store forced by bad signatures.
pub const FORCED_REFRESH_EVERY: Duration = Duration::from_secs(30);

impl Secrets {
    pub fn new(location: SecretLocation, config: &aws_config::SdkConfig) -> Self {
        Self {
            secretsmanager: matches!(location, SecretLocation::SecretsManager(_))
                .then(|| aws_sdk_secretsmanager::Client::new(config)),
            ssm: matches!(location, SecretLocation::Parameter(_))
                .then(|| aws_sdk_ssm::Client::new(config)),
            location,
            cache: Mutex::new(None),
            forced: Mutex::new(None),
            forced_every: FORCED_REFRESH_EVERY,
        }
    }

    /// Another least time between forced reads (tests).
    pub fn with_forced_refresh_every(mut self, every: Duration) -> Self {
        self.forced_every = every;
        self
    }

    /// The accepted secrets; `fresh` reads the store even if the cache is
    /// recent (at most once per [`FORCED_REFRESH_EVERY`]). Returns whether
    /// they came from the cache.
    pub async fn get(&self, fresh: bool) -> Result<(Vec<String>, bool), String> {
        let fresh = fresh
            && match self.forced.lock() {
                Ok(mut last) if last.is_none_or(|at| at.elapsed() >= self.forced_every) => {
                    *last = Some(Instant::now());
                    true
                }
                _ => false,
            };
        if !fresh
            && let Ok(cache) = self.cache.lock()
            && let Some((at, secrets)) = cache.as_ref()
            && at.elapsed() < SECRET_CACHE
        {
            return Ok((secrets.clone(), true));
        }
        let raw = match (&self.location, &self.secretsmanager, &self.ssm) {
            (SecretLocation::Fixed(secrets), _, _) => return Ok((secrets.clone(), false)),
            (SecretLocation::SecretsManager(id), Some(client), _) => client
                .get_secret_value()
                .secret_id(id)
                .send()
                .await
                .map_err(|e| {
                    format!(
                        "cannot read the webhook secret {id}: {}",
                        aws_sdk_secretsmanager::error::DisplayErrorContext(&e)
                    )
                })?
                .secret_string
                .ok_or_else(|| format!("the webhook secret {id} has no string value"))?,
            (SecretLocation::Parameter(name), _, Some(client)) => client
                .get_parameter()
                .name(name)
                .with_decryption(true)
                .send()
                .await
                .map_err(|e| {
                    format!(
                        "cannot read the webhook secret parameter {name}: {}",
                        aws_sdk_ssm::error::DisplayErrorContext(&e)
                    )
                })?
                .parameter
                .and_then(|p| p.value)
                .ok_or_else(|| format!("the parameter {name} has no value"))?,
            _ => return Err("the webhook secret's client is missing".into()),
        };
        let secrets = parse_secret(&raw)?;
        if let Ok(mut cache) = self.cache.lock() {
            *cache = Some((Instant::now(), secrets.clone()));
        }
        Ok((secrets, false))
    }
}

/// The accepted secrets of a stored value: JSON `{"current", "previous"}` or
/// the plain secret (surrounding whitespace and newlines dropped). A JSON
/// object without a non-empty `current` is an error, not "no secret".
pub fn parse_secret(raw: &str) -> Result<Vec<String>, String> {
    if let Ok(Value::Object(map)) = serde_json::from_str::<Value>(raw) {
        let current = map.get("current").and_then(Value::as_str).map(str::trim);
        if current.is_none_or(str::is_empty) {
            let keys: Vec<&String> = map.keys().collect();
            return Err(format!(
                "the webhook secret is JSON without a \"current\" value (keys: {keys:?}); \
                 store the plain secret, or {{\"current\": ..., \"previous\": ...}}"
            ));
        }
        return Ok(["current", "previous"]
            .iter()
            .filter_map(|k| map.get(*k).and_then(Value::as_str))
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect());
    }
    let secret = raw.trim();
    if secret.is_empty() {
        return Err("the webhook secret is empty".into());
    }
    Ok(vec![secret.to_owned()])
}

/// The webhook's collaborators.
#[derive(Debug)]
pub struct Webhook {
    pub registry: Registry,
    pub executions: Executions,
    pub secrets: Secrets,
}

impl Webhook {
    /// Answers one request.
    pub async fn handle(&self, headers: &Headers, body: &[u8], now: EpochMillis) -> Response {
        let (secrets, cached) = match self.secrets.get(false).await {
            Ok(s) => s,
            Err(e) => {
                tracing::error!("{e}");
                return Response::new(
                    500,
                    json!({"error": "SecretUnavailable", "message": "the webhook secret cannot be read; see the function's log"}),
                );
            }
        };
        let mut event = receive(headers, body, &secrets);
        // A rotated secret: read the store again once before refusing.
        if cached
            && matches!(event, Err(WebhookError::Unauthorized(_)))
            && let Ok((fresh, _)) = self.secrets.get(true).await
        {
            event = receive(headers, body, &fresh);
        }
        let pushes = match event {
            Err(e) => return Response::new(e.status_code(), e.to_json()),
            Ok(Event::Ping) => return Response::new(200, json!({"result": "pong"})),
            Ok(Event::Ignored { reason }) => {
                return Response::new(200, json!({"result": "ignored", "reason": reason}));
            }
            Ok(Event::Push(pushes)) => pushes,
        };
        let Some(first) = pushes.first() else {
            return Response::new(200, json!({"result": "ignored", "reason": "no push"}));
        };
        let mut starts = Starts::default();
        for push in &pushes {
            if let Err(e) = self.start_for(push, &mut starts).await {
                // Nothing is recorded: the sender's retry (or a redelivery)
                // tries again, and starts are idempotent by name.
                return unavailable(&e);
            }
        }
        // Recorded only once every start is done, so a crash or a timeout in
        // between cannot turn the retry into a "duplicate" that starts nothing.
        let delivery = format!("{}#{}", first.provider.as_str(), first.delivery_id);
        match self
            .registry
            .record_delivery(&delivery, now, DELIVERY_TTL_SECONDS)
            .await
        {
            Ok(true) => {}
            Ok(false) => {
                return Response::new(
                    200,
                    json!({"result": "duplicate", "deliveryId": first.delivery_id}),
                );
            }
            Err(e) => return unavailable(&e.to_string()),
        }
        let Starts { started, skipped } = starts;
        if started.is_empty() && skipped.is_empty() {
            let followed: Vec<String> = pushes.iter().flat_map(Push::source_keys).collect();
            return Response::new(
                200,
                json!({"result": "no stack follows this repository and ref", "sources": followed}),
            );
        }
        let result = if started.is_empty() {
            "nothing new to start"
        } else {
            "started"
        };
        Response::new(
            202,
            json!({"result": result, "deliveryId": first.delivery_id, "started": started, "skipped": skipped}),
        )
    }

    async fn start_for(&self, push: &Push, starts: &mut Starts) -> Result<(), String> {
        crate::triggers::start_followers(
            &self.registry,
            &self.executions,
            &push.source_keys(),
            "webhook",
            &push.commit,
            starts,
        )
        .await
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

fn unavailable(detail: &str) -> Response {
    tracing::error!("{detail}");
    Response::new(
        503,
        json!({"error": "Unavailable", "message": "the registry or Step Functions could not be reached; retry the delivery"}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_secrets_are_plain_or_current_and_previous() {
        assert_eq!(parse_secret("s3cret\n").unwrap(), vec!["s3cret"]);
        assert_eq!(
            parse_secret(r#"{"current": "new", "previous": "old"}"#).unwrap(),
            vec!["new", "old"]
        );
        assert_eq!(
            parse_secret(r#"{"current": "new", "previous": ""}"#).unwrap(),
            vec!["new"]
        );
        // The console's default key/value JSON: an error that names the keys, never the value.
        let console_default = parse_secret(r#"{"secret": "hunter2"}"#).unwrap_err();
        assert!(console_default.contains("\"current\""), "{console_default}");
        assert!(!console_default.contains("hunter2"), "{console_default}");
        assert!(parse_secret("  ").is_err());
    }

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
}
