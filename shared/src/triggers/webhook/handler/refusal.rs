//! Refusals: what the sender is answered, and the one log line each writes.
//!
//! Every refused request (400, 401, 403, 405, 413) logs one line,
//! `webhook delivery refused`, with `status`, `reason`, `sender` (`github`,
//! `gitlab`, `bitbucket`, `generic`, or `unknown`) and `delivery` (the id
//! from the sender's header, made safe, or `none`): never the body, never a
//! secret. The `WebhookRejectionsAlarm` counts the answers themselves
//! (the Function URL's `Url4xxCount`); the line says why each was given. A
//! refusal the installation causes (its secret cannot be read) is logged as
//! an error, the others as warnings.
//!
//! Before a signature is checked the answer is generic: it says neither
//! which senders or headers are accepted nor any limit, so a prober learns
//! nothing of what the endpoint is; the reason is in the log.

use super::Response;
use crate::triggers::webhook::{Headers, Provider, WebhookError, header_delivery_id};

/// The answer to every request that is not signed by an accepted secret,
/// whatever is wrong (no signature, a wrong one, no readable secret).
pub const NOT_SIGNED: &str = "the delivery's signature or token is missing or does not match";
/// The answer to a request that is not a delivery of a known sender (and
/// to a body the Function URL could not decode), before any signature.
pub const NOT_UNDERSTOOD: &str = "the request is not understood";

/// A request refused: its answer, and why (for the log only).
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub answer: Response,
    pub reason: String,
    /// The installation's fault, not the request's: logged as an error.
    pub error: bool,
}

impl Refusal {
    pub fn new(status: u16, name: &str, message: &str, reason: impl Into<String>) -> Self {
        Self {
            answer: Response::error(status, name, message),
            reason: reason.into(),
            error: false,
        }
    }

    /// 401, [`NOT_SIGNED`].
    pub fn unauthorized(reason: impl Into<String>) -> Self {
        Self::new(401, "Unauthorized", NOT_SIGNED, reason)
    }

    /// 400, [`NOT_UNDERSTOOD`]: before a signature is checked.
    pub fn not_understood(reason: impl Into<String>) -> Self {
        Self::new(400, "Malformed", NOT_UNDERSTOOD, reason)
    }

    /// 413, without the size or the limit: before a signature is checked.
    pub fn too_large(reason: impl Into<String>) -> Self {
        Self::new(413, "TooLarge", "the request body is too large", reason)
    }

    /// 405.
    pub fn method(method: &str) -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            "the method is not allowed",
            format!("{method}: webhooks are POSTed"),
        )
    }

    /// A signed delivery's error, answered as it is: the sender holds the
    /// secret, and its delivery log should say what is wrong.
    pub fn signed(e: &WebhookError) -> Self {
        Self {
            answer: Response::new(e.status_code(), e.to_json()),
            reason: e.to_string(),
            error: false,
        }
    }

    /// Logged as an error.
    pub fn alarming(self) -> Self {
        Self {
            error: true,
            ..self
        }
    }
}

/// Who a request says it is, from its headers only: for the log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub sender: &'static str,
    pub delivery: String,
}

impl Caller {
    pub fn of(headers: &Headers) -> Self {
        let provider = Provider::detect(headers).ok();
        Self {
            sender: provider.map_or("unknown", Provider::as_str),
            delivery: provider
                .and_then(|p| header_delivery_id(p, headers))
                .unwrap_or_else(|| "none".to_owned()),
        }
    }

    /// Logs `refusal`'s line and gives its answer.
    pub fn refuse(&self, refusal: Refusal) -> Response {
        let (status, reason) = (refusal.answer.status, refusal.reason.as_str());
        let (sender, delivery) = (self.sender, self.delivery.as_str());
        if refusal.error {
            tracing::error!(status, reason, sender, delivery, "webhook delivery refused");
        } else {
            tracing::warn!(status, reason, sender, delivery, "webhook delivery refused");
        }
        refusal.answer
    }
}
