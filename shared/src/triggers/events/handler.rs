//! The events function's work: start the stacks that follow a CodeCommit
//! ref or an S3 object; mark a stack that somebody else changed, so the
//! scheduler's next run brings it back to its spec.

use serde::Serialize;
use tracing::info;

use super::{AwsEvent, Detail, ExecutionEnded, StackStatusChange};
use crate::clock::{EpochMillis, parse_rfc3339};
use crate::naming::OWN_TOKEN_PREFIX;
use crate::ports::{Starter, TriggerKind};
use crate::registry::{Entries, Leases, Schedule, StackEntry, end_hold};

use crate::triggers::registry_source::apply_and_start;
use crate::triggers::{Starts, TriggerError, start_followers, start_ref_followers};

/// What the handler did with one event (its JSON is the function's answer,
/// and its log line).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "result")]
pub enum EventAnswer {
    /// A known event with nothing to do.
    #[serde(rename = "ignored")]
    Ignored { reason: String },
    /// Followers of the source, some started.
    #[serde(rename = "started")]
    Started(Starts),
    /// Followers of the source, none new to start.
    #[serde(rename = "nothing new to start")]
    NothingNew(Starts),
    /// No stack follows the source.
    #[serde(rename = "no stack follows this source")]
    NoFollower { sources: Vec<String> },
    /// Stacks changed out of band, marked due.
    #[serde(rename = "marked for reconcile")]
    Marked {
        marked: Vec<Marked>,
        ignored: Vec<Left>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        woken: Vec<String>,
    },
    /// Runs parked until the stack's event, woken.
    #[serde(rename = "woken")]
    Woken {
        woken: Vec<String>,
        ignored: Vec<Left>,
    },
    /// Managed stacks, nothing to mark.
    #[serde(rename = "nothing to do")]
    NothingToDo {
        marked: Vec<Marked>,
        ignored: Vec<Left>,
    },
    /// No entry manages the stack.
    #[serde(rename = "not managed by stacksync")]
    NotManaged {
        #[serde(rename = "stackName")]
        stack_name: String,
    },
    /// A drift detection's end, read.
    #[serde(rename = "drift detection read")]
    Drift {
        drift: crate::triggers::drift::DriftEventAnswer,
    },
    /// A reconcile execution ended without releasing its stack: released.
    #[serde(rename = "released")]
    Released { stack: String, execution: String },
}

impl EventAnswer {
    /// The answer for the followers of `sources`.
    fn of_starts(starts: Starts, sources: Vec<String>) -> EventAnswer {
        if starts.is_empty() {
            EventAnswer::NoFollower { sources }
        } else if starts.started.is_empty() {
            EventAnswer::NothingNew(starts)
        } else {
            EventAnswer::Started(starts)
        }
    }
}

/// A stack marked due.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Marked {
    pub stack: String,
    pub status: String,
    /// False when it was due already.
    #[serde(rename = "markedNow")]
    pub marked_now: bool,
}

/// A managed stack left alone, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Left {
    pub stack: String,
    pub reason: &'static str,
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
    if entry.lease.as_ref().is_some_and(|l| l.is_live(now)) {
        return StackEventVerdict::Own("a stacksync run drives the stack");
    }
    if change.in_progress() {
        return StackEventVerdict::Ignore("in progress: the final status decides");
    }
    // The last run ended after this happened: it saw the result.
    if let (Some(at), Some(last)) = (event_time, entry.status.times.last_reconcile_at)
        && at <= last.0
    {
        return StackEventVerdict::Own("seen by the last run");
    }
    StackEventVerdict::OutOfBand
}

/// The EventBridge handler's collaborators.
#[derive(Debug)]
pub struct EventHandler<R, X> {
    pub registry: R,
    pub starter: X,
    /// The installation's region: a spec with no `region` is in it.
    pub region: String,
    /// The registry sources a CodeCommit push or an S3 object may move,
    /// applied before the stacks that follow it are started; `None`: none
    /// read here.
    pub registry_sources:
        Option<std::sync::Arc<dyn crate::triggers::registry_source::AppliesPushes>>,
    /// Wakes the runs parked until their stack's event; `None`: runs here
    /// poll (they park only where someone wakes them).
    pub waker: Option<std::sync::Arc<dyn super::wake::WakeParked>>,
    /// Reads the findings of a drift detection that ended, and starts the
    /// revert they make due; `None`: the scheduled drift run reads them.
    pub drift: Option<std::sync::Arc<dyn crate::triggers::drift::DriftEvents>>,
}

impl<R: Entries + Schedule + Leases, X: Starter> EventHandler<R, X> {
    /// Handles one event. An error is worth retrying (EventBridge's
    /// asynchronous invoke tries twice more); a malformed event never gets
    /// here (the function answers it as rejected: a retry would not mend it).
    pub async fn handle(
        &self,
        event: &AwsEvent,
        now: EpochMillis,
    ) -> Result<EventAnswer, TriggerError> {
        let (keys, revision) = match &event.detail {
            Detail::Ignored { reason } => {
                return Ok(EventAnswer::Ignored {
                    reason: reason.clone(),
                });
            }
            Detail::StackStatusChange(change) => {
                return self.stack_changed(event, change, now).await;
            }
            Detail::ExecutionEnded(ended) => return self.execution_ended(ended, now).await,
            Detail::DriftDetectionChange(change) => {
                let Some(drift) = &self.drift else {
                    return Ok(EventAnswer::Ignored {
                        reason: "drift findings are read by the scheduled drift run here".into(),
                    });
                };
                let read = drift.on_event(change, &event.region, now).await?;
                return Ok(EventAnswer::Drift { drift: read });
            }
            Detail::CodeCommitPush(moved) | Detail::RegistrySourcePushed(moved) => {
                let mut starts = Starts::default();
                // A CodeCommit event is AWS's own; a relayed push only
                // announces its commit: the source's ref is read again.
                let exact = matches!(event.detail, Detail::CodeCommitPush(_));
                let applier = self.registry_sources.as_deref();
                let start = (TriggerKind::Event, now);
                apply_and_start(applier, &self.starter, moved, exact, start, &mut starts).await?;
                start_ref_followers(
                    &self.registry,
                    &self.starter,
                    moved,
                    TriggerKind::Event,
                    &mut starts,
                )
                .await?;
                return Ok(EventAnswer::of_starts(starts, moved.source_keys()));
            }
            // A version id names the new object exactly; an unversioned
            // bucket has only the ETag, and then the event id.
            Detail::ObjectCreated(object) => (
                vec![object.source_key()],
                object
                    .version_id
                    .clone()
                    .or_else(|| object.etag.clone())
                    .unwrap_or_else(|| event.id.clone()),
            ),
        };
        let mut starts = Starts::default();
        if let Detail::ObjectCreated(object) = &event.detail {
            // An S3 source's new object: its version id names it exactly.
            let moved = crate::triggers::RefMoved {
                repository_urls: vec![object.url()],
                reference: String::new(),
                commit: revision.clone(),
            };
            let exact = object.version_id.is_some();
            let applier = self.registry_sources.as_deref();
            let start = (TriggerKind::Event, now);
            apply_and_start(applier, &self.starter, &moved, exact, start, &mut starts).await?;
        }
        start_followers(
            &self.registry,
            &self.starter,
            &keys,
            TriggerKind::Event,
            &revision,
            &mut starts,
        )
        .await?;
        Ok(EventAnswer::of_starts(starts, keys))
    }

    /// Releases the stack a reconcile execution still holds after it ended
    /// `ABORTED` or `TIMED_OUT` (or `FAILED` with its own failure unrecorded),
    /// recording it `Failed (Interrupted)`; a run that released its stack, or
    /// whose stack another run holds now, is left alone.
    async fn execution_ended(
        &self,
        ended: &ExecutionEnded,
        now: EpochMillis,
    ) -> Result<EventAnswer, TriggerError> {
        let why = format!(
            "interrupted: execution {} ended {} without giving the stack back; the stack is due again",
            ended.name, ended.status
        );
        if end_hold(&self.registry, &ended.stack, &ended.name, &why, now).await? {
            info!(stack = %ended.stack, execution = %ended.name, status = %ended.status, "stack released");
            return Ok(EventAnswer::Released {
                stack: ended.stack.clone(),
                execution: ended.name.clone(),
            });
        }
        Ok(EventAnswer::Ignored {
            reason: format!("{} does not hold {}", ended.name, ended.stack),
        })
    }

    /// Marks the managed stacks (in the event's region and account) that
    /// somebody else changed.
    async fn stack_changed(
        &self,
        event: &AwsEvent,
        change: &StackStatusChange,
        now: EpochMillis,
    ) -> Result<EventAnswer, TriggerError> {
        let entries = self.registry.by_stack_name(&change.stack_name).await?;
        let event_time = parse_rfc3339(&event.time);
        let (mut marked, mut ignored) = (Vec::new(), Vec::new());
        let here: Vec<&StackEntry> = entries
            .iter()
            .filter(|e| {
                e.spec.region.as_deref().unwrap_or(&self.region) == event.region
                    && e.spec.assume_role_arn.is_none()
            })
            .collect();
        let woken = self.wake_parked(&here, change, event_time).await?;
        for entry in here {
            match judge_stack_event(entry, change, event_time, now) {
                StackEventVerdict::OutOfBand => {
                    let marked_now = self.registry.mark_due(&entry.name, now).await?;
                    info!(stack = %entry.name, status = %change.status, "changed out of band; marked for reconcile");
                    marked.push(Marked {
                        stack: entry.name.clone(),
                        status: change.status.clone(),
                        marked_now,
                    });
                }
                StackEventVerdict::Own(reason) | StackEventVerdict::Ignore(reason) => {
                    ignored.push(Left {
                        stack: entry.name.clone(),
                        reason,
                    })
                }
            }
        }
        Ok(match (marked.is_empty(), ignored.is_empty()) {
            (true, true) => EventAnswer::NotManaged {
                stack_name: change.stack_name.clone(),
            },
            _ if marked.is_empty() && !woken.is_empty() => EventAnswer::Woken { woken, ignored },
            (true, false) => EventAnswer::NothingToDo { marked, ignored },
            (false, _) => EventAnswer::Marked {
                marked,
                ignored,
                woken,
            },
        })
    }

    /// Wakes the runs parked on `entries`' stack that `change` concerns
    /// (`wake::wakes`); their names. The index the entries came from may
    /// lag: a held entry is read again, consistently.
    async fn wake_parked(
        &self,
        entries: &[&StackEntry],
        change: &StackStatusChange,
        event_time: Option<EpochMillis>,
    ) -> Result<Vec<String>, TriggerError> {
        let mut woken = Vec::new();
        let Some(waker) = &self.waker else {
            return Ok(woken);
        };
        if change.in_progress() {
            return Ok(woken);
        }
        for listed in entries.iter().filter(|e| e.lease.is_some()) {
            let Some(entry) = self.registry.get(&listed.name).await? else {
                continue;
            };
            let Some(parked) = entry.lease.as_ref().and_then(|l| l.parked_run()) else {
                continue;
            };
            if let Err(why) = super::wake::wakes(parked, change, event_time) {
                info!(stack = %entry.name, execution = %parked.execution, why, "parked run left waiting");
                continue;
            }
            if waker.wake(&entry.name, &parked.execution).await? {
                info!(stack = %entry.name, execution = %parked.execution, status = %change.status, "parked run woken");
                woken.push(entry.name.clone());
            }
        }
        Ok(woken)
    }
}

#[cfg(test)]
mod tests;
