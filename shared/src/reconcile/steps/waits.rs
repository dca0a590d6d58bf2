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

/// `next` = wait for `on`: the first poll interval, then longer; unless
/// the run is past its deadline or poll budget, which ends it.
pub(super) fn wait(
    mut state: RunState,
    on: WaitOn,
    spec: &StackSpec,
) -> Result<RunState, StepError> {
    within_budget(&state, spec, &waiting_for(&state, on))?;
    let first = spec.poll_interval.as_secs();
    state.wait.seconds = if state.wait.on == Some(on) {
        next_poll_seconds(state.wait.seconds, first)
    } else {
        first
    };
    state.wait.on = Some(on);
    state.next = Next::Wait;
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
