//! Waiting: how long the next poll waits, and the budget (`maxPolls`,
//! `timeout`) past which a run stops waiting and ends `TimedOut`.

use super::MAX_POLL_SECONDS;
use crate::clock::now_millis;
use crate::reconcile::run::{Next, RunState, StepError, WaitOn};
use crate::spec::StackSpec;
use crate::status::StallReason;

/// The next, longer poll interval: ×1.5, capped.
pub fn next_poll_seconds(current: u64, first: u64) -> u64 {
    let base = current.max(first).max(1);
    (base + base.div_ceil(2)).min(MAX_POLL_SECONDS.max(first))
}

/// The longest wait of a run parked for CloudFormation's event before it
/// polls anyway (the fallback, for an event lost or late).
pub const MAX_EVENT_WAIT_SECONDS: u64 = 300;

/// The first fallback wait of a parked run, in poll intervals: an event
/// normally ends the wait long before; polling sooner would cost more
/// Lambda invocations than the polling it replaces (BENCHMARKS.md).
pub const EVENT_WAIT_POLL_INTERVALS: u64 = 6;

/// The first fallback wait of a run parked for `spec`'s stack.
pub fn first_event_wait(spec: &StackSpec) -> u64 {
    let poll = spec.poll_interval.as_secs().max(1);
    (poll * EVENT_WAIT_POLL_INTERVALS).clamp(poll, MAX_EVENT_WAIT_SECONDS.max(poll))
}

/// `next` = wait for `on`: the first poll interval, then longer; unless
/// the run is past its deadline or poll budget, which ends it. `events`:
/// CloudFormation's events about the stack reach this installation, so a
/// wait on the stack (not on a change set being made: CloudFormation sends
/// no event for that) parks the run until one comes ([`Next::WaitEvent`]).
pub(super) fn wait(
    mut state: RunState,
    on: WaitOn,
    spec: &StackSpec,
    events: bool,
) -> Result<RunState, StepError> {
    within_budget(&state, spec, &waiting_for(&state, on))?;
    let first = spec.poll_interval.as_secs();
    let same = state.wait.on == Some(on);
    if events && on != WaitOn::ChangeSet {
        // The machine doubles the wait each time it runs out; a run woken
        // early (an event about something else) keeps the one it had.
        let first = first_event_wait(spec);
        state.wait.seconds = if same && state.next == Next::WaitEvent {
            state
                .wait
                .seconds
                .clamp(first, MAX_EVENT_WAIT_SECONDS.max(first))
        } else {
            first
        };
        state.next = Next::WaitEvent;
    } else {
        state.wait.seconds = if same {
            next_poll_seconds(state.wait.seconds, first)
        } else {
            first
        };
        state.next = Next::Wait;
    }
    state.wait.on = Some(on);
    state.wait.polls += 1;
    Ok(state)
}

/// What a wait is for, in words.
fn waiting_for(state: &RunState, on: WaitOn) -> String {
    let change_set = state.change_set_name().unwrap_or("?");
    match on {
        WaitOn::ChangeSet => format!("change set {change_set} to be made"),
        WaitOn::Execution => format!("change set {change_set} to be executed"),
        WaitOn::Stack => "another operation on the stack to end".to_owned(),
        WaitOn::Rollback => "the stack's rollback to be continued".to_owned(),
        WaitOn::Slot => "a run slot of the stack's account and region".to_owned(),
    }
}

/// Ends the run (`TimedOut`) when it is past its `timeout` or has waited
/// `maxPolls` times: nothing waits forever, whatever CloudFormation (or an
/// emulator) answers.
pub(super) fn within_budget(
    state: &RunState,
    spec: &StackSpec,
    waiting_for: &str,
) -> Result<(), StepError> {
    let elapsed_ms = now_millis()
        .saturating_sub(state.execution.started_at)
        .max(0);
    let elapsed = crate::Duration::from_secs(u64::try_from(elapsed_ms / 1000).unwrap_or(0));
    let over = if state.wait.polls >= spec.max_polls {
        format!("its poll budget (maxPolls {})", spec.max_polls)
    } else if state.execution.started_at > 0 && elapsed > spec.timeout {
        format!("its deadline (timeout {})", spec.timeout)
    } else {
        return Ok(());
    };
    Err(StepError::stalled(
        StallReason::TimedOut,
        format!(
            "gave up after {} polls in {elapsed}, past {over}: still waiting for {waiting_for}",
            state.wait.polls
        ),
    ))
}
