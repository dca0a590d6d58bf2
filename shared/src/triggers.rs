//! What a trigger does once it knows what moved: start the stacks that follow
//! a source (the webhook, CodeCommit and S3 events), or mark a stack changed
//! out of band for the scheduler (CloudFormation events).

use std::collections::BTreeSet;

use serde_json::{Value, json};
use tracing::info;

use crate::adapters::cloudformation::OWN_TOKEN_PREFIX;
use crate::adapters::stepfunctions::Executions;
use crate::clock::{EpochMillis, parse_rfc3339};
use crate::events::{AwsEvent, Detail, StackStatusChange};
use crate::reconcile::run::Trigger;
use crate::registry::{Registry, StackEntry};

/// The stacks started for a push, and the ones left alone (with why).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Starts {
    pub started: Vec<Value>,
    pub skipped: Vec<Value>,
}

/// Starts one execution per non-suspended stack that follows any of `keys`
/// (source-index keys), named by stack, `kind` and `revision`: a repeated
/// trigger for one revision starts nothing new. Fails on the first registry
/// or Step Functions error (what was started stays started; a retry of the
/// whole trigger starts only the rest).
pub async fn start_followers(
    registry: &Registry,
    executions: &Executions,
    keys: &[String],
    kind: &str,
    revision: &str,
    starts: &mut Starts,
) -> Result<(), String> {
    let mut seen = BTreeSet::new();
    for key in keys {
        let entries = registry.by_source(key).await.map_err(|e| e.to_string())?;
        for entry in entries {
            if !seen.insert(entry.name.clone()) {
                continue;
            }
            if entry.is_suspended() {
                starts
                    .skipped
                    .push(json!({"stack": entry.name, "reason": "suspended"}));
                continue;
            }
            let trigger = Trigger {
                kind: kind.into(),
                revision: Some(revision.to_owned()),
            };
            let s = executions
                .start(&entry.name, &trigger, revision)
                .await
                .map_err(|e| e.to_string())?;
            if s.new {
                starts.started.push(
                    json!({"stack": s.stack, "execution": s.execution_name, "revision": revision}),
                );
            } else {
                // Step Functions keeps a name for 90 days: this revision was
                // started before (a replay, or the same revision again).
                starts.skipped.push(json!({"stack": s.stack, "execution": s.execution_name, "reason": "already started for this revision"}));
            }
        }
    }
    Ok(())
}

/// How a CloudFormation status change of a managed stack is taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StackEventVerdict {
    /// stacksync made it (or is making it): nothing to do.
    Own(&'static str),
    /// Nothing to do for another reason.
    Ignore(&'static str),
    /// Somebody else changed the stack: reconcile it.
    OutOfBand,
}

/// Tells stacksync's own changes from out-of-band ones, for an event that
/// happened at `event_time` (CloudFormation's clock) seen at `now`.
pub fn judge_stack_event(
    entry: &StackEntry,
    change: &StackStatusChange,
    event_time: Option<EpochMillis>,
    now: EpochMillis,
) -> StackEventVerdict {
    if change
        .client_request_token
        .as_deref()
        .is_some_and(|t| t.starts_with(OWN_TOKEN_PREFIX))
    {
        return StackEventVerdict::Own("stacksync's request token");
    }
    if entry.deletion_requested_at.is_some() {
        return StackEventVerdict::Own("stacksync is deleting the entry");
    }
    if entry.is_suspended() {
        return StackEventVerdict::Ignore("suspended: stacksync leaves the stack alone");
    }
    if entry.lease.as_ref().is_some_and(|l| l.expires_at.0 > now) {
        return StackEventVerdict::Own("a stacksync run drives the stack");
    }
    if change.in_progress() {
        return StackEventVerdict::Ignore("in progress: the final status decides");
    }
    // The last run ended after this happened: it saw the result.
    if let (Some(at), Some(last)) = (event_time, entry.status.last_reconcile_at)
        && at <= last.0
    {
        return StackEventVerdict::Own("seen by the last run");
    }
    StackEventVerdict::OutOfBand
}

/// The EventBridge handler's collaborators.
#[derive(Debug)]
pub struct EventHandler {
    pub registry: Registry,
    pub executions: Executions,
    /// The installation's region: a spec with no `region` is in it.
    pub region: String,
}

impl EventHandler {
    /// Handles one event; the answer says what was done (for the log and
    /// the tests). An error is worth retrying (EventBridge's asynchronous
    /// invoke tries twice more); a malformed event is not an error but an
    /// answer with `result: rejected`, since a retry would not mend it.
    pub async fn handle(&self, event: &AwsEvent, now: EpochMillis) -> Result<Value, String> {
        let mut starts = Starts::default();
        match &event.detail {
            Detail::Ignored { reason } => Ok(json!({"result": "ignored", "reason": reason})),
            Detail::CodeCommitPush(push) => {
                start_followers(
                    &self.registry,
                    &self.executions,
                    &push.source_keys(),
                    "event",
                    &push.commit,
                    &mut starts,
                )
                .await?;
                Ok(answer(starts, &push.source_keys()))
            }
            Detail::ObjectCreated(object) => {
                // A version id names the new object exactly; an unversioned
                // bucket has only the ETag, and then the event id.
                let revision = object
                    .version_id
                    .clone()
                    .or_else(|| object.etag.clone())
                    .unwrap_or_else(|| event.id.clone());
                let keys = [object.source_key()];
                start_followers(
                    &self.registry,
                    &self.executions,
                    &keys,
                    "event",
                    &revision,
                    &mut starts,
                )
                .await?;
                Ok(answer(starts, &keys))
            }
            Detail::StackStatusChange(change) => self.stack_changed(event, change, now).await,
        }
    }

    async fn stack_changed(
        &self,
        event: &AwsEvent,
        change: &StackStatusChange,
        now: EpochMillis,
    ) -> Result<Value, String> {
        let entries = self
            .registry
            .by_stack_name(&change.stack_name)
            .await
            .map_err(|e| e.to_string())?;
        let event_time = parse_rfc3339(&event.time);
        let mut marked = Vec::new();
        let mut left = Vec::new();
        for entry in entries.iter().filter(|e| {
            e.spec.region.as_deref().unwrap_or(&self.region) == event.region
                && e.spec.assume_role_arn.is_none()
        }) {
            match judge_stack_event(entry, change, event_time, now) {
                StackEventVerdict::OutOfBand => {
                    let changed = self
                        .registry
                        .mark_due(&entry.name, now)
                        .await
                        .map_err(|e| e.to_string())?;
                    info!(stack = %entry.name, status = %change.status, "changed out of band; marked for reconcile");
                    marked.push(
                        json!({"stack": entry.name, "status": change.status, "markedNow": changed}),
                    );
                }
                StackEventVerdict::Own(why) | StackEventVerdict::Ignore(why) => {
                    left.push(json!({"stack": entry.name, "reason": why}));
                }
            }
        }
        if marked.is_empty() && left.is_empty() {
            return Ok(
                json!({"result": "not managed by stacksync", "stackName": change.stack_name}),
            );
        }
        let result = if marked.is_empty() {
            "nothing to do"
        } else {
            "marked for reconcile"
        };
        Ok(json!({"result": result, "marked": marked, "ignored": left}))
    }
}

fn answer(starts: Starts, keys: &[String]) -> Value {
    if starts.started.is_empty() && starts.skipped.is_empty() {
        return json!({"result": "no stack follows this source", "sources": keys});
    }
    let result = if starts.started.is_empty() {
        "nothing new to start"
    } else {
        "started"
    };
    json!({"result": result, "started": starts.started, "skipped": starts.skipped})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Lease;
    use crate::status::{Status, Timestamp};

    const NOW: EpochMillis = 1_800_000_000_000;

    fn entry() -> StackEntry {
        crate::registry::sample_entry(
            "orders",
            Status {
                last_reconcile_at: Some(Timestamp(NOW - 60_000)),
                ..Status::default()
            },
        )
    }

    fn change(status: &str, token: Option<&str>) -> StackStatusChange {
        StackStatusChange {
            stack_id: "arn:aws:cloudformation:us-east-1:1:stack/orders/x".into(),
            stack_name: "orders".into(),
            status: status.into(),
            status_reason: None,
            client_request_token: token.map(str::to_owned),
        }
    }

    #[test]
    fn an_update_by_somebody_else_after_the_last_run_is_out_of_band() {
        let verdict = judge_stack_event(
            &entry(),
            &change("UPDATE_COMPLETE", Some("Console-UpdateStack-1")),
            Some(NOW - 1_000),
            NOW,
        );
        assert_eq!(verdict, StackEventVerdict::OutOfBand);
        // A deletion by hand too (the run re-creates the stack).
        let verdict = judge_stack_event(
            &entry(),
            &change("DELETE_COMPLETE", None),
            Some(NOW - 1_000),
            NOW,
        );
        assert_eq!(verdict, StackEventVerdict::OutOfBand);
    }

    #[test]
    fn stacksyncs_own_changes_are_recognised() {
        let own = change("UPDATE_COMPLETE", Some("stacksync-cs-1234"));
        assert!(matches!(
            judge_stack_event(&entry(), &own, Some(NOW), NOW),
            StackEventVerdict::Own(_)
        ));
        // No token, but a run holds the stack.
        let mut held = entry();
        held.lease = Some(Lease {
            owner: "exec".into(),
            expires_at: Timestamp(NOW + 1),
        });
        assert_eq!(
            judge_stack_event(&held, &change("UPDATE_COMPLETE", None), Some(NOW), NOW),
            StackEventVerdict::Own("a stacksync run drives the stack")
        );
        // A late event of the last run.
        assert_eq!(
            judge_stack_event(
                &entry(),
                &change("UPDATE_COMPLETE", None),
                Some(NOW - 90_000),
                NOW
            ),
            StackEventVerdict::Own("seen by the last run")
        );
    }

    #[test]
    fn in_progress_suspended_and_deleting_stacks_are_left_alone() {
        assert!(matches!(
            judge_stack_event(
                &entry(),
                &change("UPDATE_IN_PROGRESS", None),
                Some(NOW),
                NOW
            ),
            StackEventVerdict::Ignore(_)
        ));
        let mut suspended = entry();
        suspended.suspended = true;
        assert!(matches!(
            judge_stack_event(&suspended, &change("UPDATE_COMPLETE", None), Some(NOW), NOW),
            StackEventVerdict::Ignore(_)
        ));
        let mut deleting = entry();
        deleting.deletion_requested_at = Some(Timestamp(NOW));
        assert!(matches!(
            judge_stack_event(&deleting, &change("DELETE_COMPLETE", None), Some(NOW), NOW),
            StackEventVerdict::Own(_)
        ));
    }
}
