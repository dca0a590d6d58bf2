//! The approval function (`answer`), behind an IAM-authorised Function URL:
//! approves or rejects a change set that waits for a person, for a caller
//! whose identity AWS verified (the Function URL's
//! `requestContext.authorizer.iam.userArn`, never a field of the request),
//! if that caller is among the entry's approvers (or the installation's).
//!
//! It alone reads the runs' task tokens (kept in the bucket, where its
//! policy lets no one else read them), and before it answers one it records
//! who approved which change set where only it may write
//! ([`crate::naming::approval_answer_key`]): the run executes an approved
//! change set only if that record says so, so a token answered by anyone
//! else (it is in the execution's history) is no approval. A caller who is
//! not an approver is refused, and the refusal recorded in the entry's
//! approval records; the change set still waits.
//!
//! The caller is AWS's word only for a call through the URL: a direct
//! `lambda:InvokeFunction` hands the function whatever event its caller
//! wrote. So an approver's policy allows `lambda:InvokeFunction` only with
//! `lambda:InvokedViaFunctionUrl` (README "Who may approve"), and nobody
//! else may invoke it.

use serde::Deserialize;
use serde_json::{Value, json};
use tracing::{info, warn};

use super::webhook::handler::Response;
use crate::approvers::{Rejection, VerifiedAnswer, may_answer};
use crate::clock::EpochMillis;
use crate::naming::{approval_answer_key, approval_token_key};
use crate::ports::{Answer, Blobs, TaskTokens};
use crate::registry::{ApprovalRecords, Entries, StackEntry};
use crate::status::{ApprovalRecord, AwaitingApproval, Decision, StallReason, Timestamp};

/// The largest request body read.
const MAX_BODY: usize = 16 * 1024;
/// The longest rejection reason kept.
const MAX_REASON: usize = 1024;

/// What a caller asks.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AnswerRequest {
    /// The entry whose change set waits.
    pub stack: String,
    pub decision: Verdict,
    /// The change set approved (required to approve: an approval names
    /// exactly what it approves).
    #[serde(default)]
    pub change_set: Option<String>,
    /// Why, for a rejection.
    #[serde(default)]
    pub reason: Option<String>,
}

/// Approve or reject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Approve,
    Reject,
}

/// The error a rejection fails the waiting task with: a stall the run
/// records as `Failed (Rejected)`.
pub fn rejection_error() -> String {
    format!("StackSync.Stalled.{}", StallReason::Rejected.as_str())
}

/// The approval function of one installation.
#[derive(Debug, Clone)]
pub struct AnswerHandler<R, B, T> {
    pub registry: R,
    pub blobs: B,
    pub tokens: T,
    /// The installation's approvers (`Approvers`), for entries that name
    /// none of their own.
    pub approvers: Vec<String>,
}

fn refused(status: u16, error: &str, message: String) -> Response {
    Response::new(status, json!({"error": error, "message": message}))
}

/// A service's failure, as the caller should take it: unavailable (503, try
/// again) only when it is worth trying again; else refused (500: the
/// installation's setup, which another try will not mend).
fn failed(service: &str, transient: bool, message: String) -> Response {
    if transient {
        refused(503, &format!("{service}Unavailable"), message)
    } else {
        refused(500, &format!("{service}Refused"), message)
    }
}

fn port_failed(service: &str) -> impl Fn(crate::ports::PortError) -> Response + '_ {
    move |e| {
        let transient = matches!(e, crate::ports::PortError::Transient(_));
        failed(service, transient, e.to_string())
    }
}

impl<R, B, T> AnswerHandler<R, B, T>
where
    R: Entries + ApprovalRecords,
    B: Blobs,
    T: TaskTokens,
{
    /// Answers one request of `caller` (the verified principal ARN; `None`:
    /// the URL is not IAM-authorised, and nothing is done).
    pub async fn handle(&self, caller: Option<&str>, body: &[u8], now: EpochMillis) -> Response {
        let Some(caller) = caller.filter(|c| c.starts_with("arn:")) else {
            warn!("an answer without a verified caller: the URL must be IAM-authorised");
            return refused(
                403,
                "Unauthenticated",
                "the caller's identity is unknown: this URL must be IAM-authorised \
                 (AuthType AWS_IAM), and its requests signed (stacksync approve signs them)"
                    .into(),
            );
        };
        let request = match read_request(body) {
            Ok(request) => request,
            Err(message) => return refused(400, "Malformed", message),
        };
        match self.answer(caller, &request, now).await {
            Ok(response) | Err(response) => response,
        }
    }

    async fn answer(
        &self,
        caller: &str,
        request: &AnswerRequest,
        now: EpochMillis,
    ) -> Result<Response, Response> {
        let name = &request.stack;
        let entry = self
            .registry
            .get(name)
            .await
            .map_err(|e| failed("Registry", e.is_transient(), e.to_string()))?
            .ok_or_else(|| refused(404, "NotRegistered", format!("{name} is not registered")))?;
        // Who may answer first: someone else learns nothing of the wait.
        self.check_approver(caller, request, &entry, now).await?;
        let awaiting = entry.status.approval.awaiting.clone().ok_or_else(|| {
            refused(
                409,
                "NothingAwaits",
                format!("{name}: no change set awaits approval"),
            )
        })?;
        if request.decision == Verdict::Approve
            && request.change_set.as_deref() != Some(awaiting.change_set.as_str())
        {
            return Err(refused(
                409,
                "OtherChangeSet",
                format!(
                    "{name} awaits approval of the change set {}, not {}: review that one and \
                     approve it by its name",
                    awaiting.change_set,
                    request.change_set.as_deref().unwrap_or("(none named)")
                ),
            ));
        }
        self.record_and_answer(caller, request, &awaiting, now)
            .await
    }

    /// The verified answer recorded, then the run's token answered.
    async fn record_and_answer(
        &self,
        caller: &str,
        request: &AnswerRequest,
        awaiting: &AwaitingApproval,
        now: EpochMillis,
    ) -> Result<Response, Response> {
        let name = &request.stack;
        let token = self.token(name, awaiting).await?;
        let verified = VerifiedAnswer {
            change_set: awaiting.change_set.clone(),
            approved: request.decision == Verdict::Approve,
            by: caller.to_owned(),
            at: now,
            requested_at: awaiting.requested_at.0,
        };
        // Recorded before the token is answered: the run reads it when it
        // wakes, and trusts no answer without it.
        let record = serde_json::to_vec(&verified).unwrap_or_default();
        self.blobs
            .put(
                &approval_answer_key(name, &awaiting.run),
                record,
                "application/json",
            )
            .await
            .map_err(port_failed("Bucket"))?;
        let answer = match request.decision {
            Verdict::Approve => Answer::Success {
                output: json!({"changeSet": awaiting.change_set, "by": caller, "at": now}),
            },
            Verdict::Reject => Answer::Failure {
                error: rejection_error(),
                cause: Rejection::new(caller, request.reason.as_deref()).cause(),
            },
        };
        let answered = self
            .tokens
            .answer_token(&token, &answer)
            .await
            .map_err(port_failed("StepFunctions"))?;
        if !answered {
            return Err(refused(
                409,
                "NoLongerWaiting",
                format!(
                    "{name}: the change set {} is no longer waiting (answered already, timed \
                     out, or its run {} ended)",
                    awaiting.change_set, awaiting.run
                ),
            ));
        }
        let decision = match request.decision {
            Verdict::Approve => "approved",
            Verdict::Reject => "rejected",
        };
        info!(stack = %name, change_set = %awaiting.change_set, by = %caller, decision, "answered");
        Ok(Response::new(
            200,
            json!({"stack": name, "changeSet": awaiting.change_set, "decision": decision,
                   "by": caller, "run": awaiting.run}),
        ))
    }

    /// Refuses a caller who is not among the approvers (the entry's own,
    /// else the installation's), recording the refusal if a change set
    /// waits; the refusal tells nothing of the wait.
    async fn check_approver(
        &self,
        caller: &str,
        request: &AnswerRequest,
        entry: &StackEntry,
        now: EpochMillis,
    ) -> Result<(), Response> {
        let (approvers, whose) = if entry.spec.approvers.is_empty() {
            (&self.approvers, "the installation's Approvers")
        } else {
            (&entry.spec.approvers, "the entry's approvers")
        };
        if may_answer(approvers, caller) {
            return Ok(());
        }
        let name = &request.stack;
        let listed = if approvers.is_empty() {
            "none are set: name them in the entry's `approvers` or the installation's \
             Approvers parameter"
                .to_owned()
        } else {
            approvers.join(", ")
        };
        warn!(stack = %name, caller, "an answer refused: not an approver");
        if let Some(awaiting) = &entry.status.approval.awaiting {
            self.record_refusal(caller, request, entry, awaiting, whose, now)
                .await;
        }
        Err(refused(
            403,
            "NotAnApprover",
            format!("{caller} may not answer for {name}: not among {whose} ({listed})"),
        ))
    }

    /// A refusal, among the waiting run's approval records (a failure to
    /// record it is logged: the caller is refused all the same).
    async fn record_refusal(
        &self,
        caller: &str,
        request: &AnswerRequest,
        entry: &StackEntry,
        awaiting: &AwaitingApproval,
        whose: &str,
        now: EpochMillis,
    ) {
        let name = &request.stack;
        let record = ApprovalRecord {
            change_set: awaiting.change_set.clone(),
            decision: Decision::Refused,
            by: Some(caller.to_owned()),
            at: Timestamp(now),
            reason: Some(format!(
                "{} refused: not among {whose}",
                match request.decision {
                    Verdict::Approve => "an approval",
                    Verdict::Reject => "a rejection",
                }
            )),
            run: awaiting.run.clone(),
        };
        if let Err(e) = self
            .registry
            .record_refusal(name, &awaiting.run, &entry.status.approval.records, record)
            .await
        {
            warn!(stack = %name, error = %e, "the refusal was not recorded");
        }
    }

    /// The wait's task token: kept in the bucket (or, for a wait that spans
    /// an upgrade, where an older version left it).
    async fn token(&self, name: &str, awaiting: &AwaitingApproval) -> Result<String, Response> {
        let key = approval_token_key(name, &awaiting.run);
        let unavailable = port_failed("Bucket");
        if self.blobs.exists(&key).await.map_err(&unavailable)? {
            let bytes = self
                .blobs
                .get(&key, 16 * 1024)
                .await
                .map_err(&unavailable)?;
            return String::from_utf8(bytes)
                .map_err(|_| refused(500, "TokenUnreadable", format!("{key} is not text")));
        }
        awaiting.legacy_token.clone().ok_or_else(|| {
            refused(
                409,
                "NoToken",
                format!(
                    "{name}: the run {} keeps no task token stacksync can answer (its wait \
                     may have ended)",
                    awaiting.run
                ),
            )
        })
    }
}

/// The request body, bounded and checked.
fn read_request(body: &[u8]) -> Result<AnswerRequest, String> {
    if body.len() > MAX_BODY {
        return Err(format!(
            "the body is {} bytes; at most {MAX_BODY}",
            body.len()
        ));
    }
    let mut request: AnswerRequest = serde_json::from_slice(body).map_err(|e| {
        format!(
            "the body is not an answer ({e}): send {{\"stack\": NAME, \"decision\": \
             \"approve\"|\"reject\", \"changeSet\": NAME, \"reason\": TEXT}}"
        )
    })?;
    if request.stack.trim().is_empty() {
        return Err("`stack` is empty".into());
    }
    if let Some(reason) = &mut request.reason
        && reason.len() > MAX_REASON
    {
        let mut end = MAX_REASON;
        while !reason.is_char_boundary(end) {
            end -= 1;
        }
        reason.truncate(end);
    }
    Ok(request)
}

/// The verified caller of a Function URL event (`AuthType AWS_IAM`):
/// `requestContext.authorizer.iam.userArn`, put there by Lambda; `None`
/// when the URL is not IAM-authorised.
pub fn caller_of(event: &Value) -> Option<&str> {
    event
        .pointer("/requestContext/authorizer/iam/userArn")
        .and_then(Value::as_str)
}

#[cfg(test)]
mod tests;
