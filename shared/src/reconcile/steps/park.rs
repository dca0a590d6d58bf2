//! `poll-status` given a task token (state `WaitForEvent`): the run waits
//! for CloudFormation on a stack whose events reach this installation. It
//! polls; still waiting, it keeps its token and state where the events
//! function reads them (`naming::wait_token_key`), marks its lease parked
//! (`registry::Parked`), looks at the stack once more (an event that came
//! between the poll and the mark found nobody parked), and returns: the
//! execution then waits, no Lambda running, until the stack's event answers
//! the token (`triggers::events::wake`), or its `waitSeconds` pass and the
//! machine doubles them and comes back here. Done waiting, it answers its
//! own token with the state the run goes on with.
//!
//! Whatever wakes it, the run decides from what it sees: an early, late,
//! duplicated or reordered event only makes it poll once more.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tracing::info;

use super::{Port, Ports, StepName, Steps};
use crate::clock::now_millis;
use crate::naming::wait_token_key;
use crate::ports::ParkedToken;
use crate::ports::{Blobs as _, Stacks as _};
use crate::reconcile::run::{Next, RunState, StallReason, StepError, WaitOn};
use crate::registry::StackEntry;
use crate::registry::{LEASE_TTL, Leases as _, Parked};
use crate::spec::StackSpec;
use crate::status::Timestamp;

/// What the state machine gives the step: the run's state, and the token
/// its answer must bring back (`$$.Task.Token`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ParkInput {
    pub state: RunState,
    pub task_token: String,
}

impl<P: Ports> Steps<P> {
    /// Whether CloudFormation's events about `spec`'s stack reach this
    /// installation: its region is the one whose events the events function
    /// gets, and it is in the installation's own account (another account's
    /// events go to that account's bus).
    pub(super) fn events_reach(&self, spec: &StackSpec) -> bool {
        let Some(region) = &self.config.stack_events else {
            return false;
        };
        spec.assume_role_arn.is_none() && spec.region.as_deref().is_none_or(|r| r == region)
    }

    /// `next` = wait for `on` ([`super::waits::wait`]), parked until the
    /// stack's event where its events reach this installation.
    pub(super) fn wait(&self, state: RunState, on: WaitOn, spec: &StackSpec) -> super::StepResult {
        // Only on a definition that has `WaitForEvent` (`Execution::parks`).
        let parks = state.execution.parks && self.events_reach(spec);
        super::waits::wait(state, on, spec, parks)
    }

    /// The step on its JSON input (`{state, taskToken}`): the Lambda's
    /// answer is not the task's (the token's is), so it returns the state
    /// for the log only.
    pub(super) async fn park_step(&self, input: Value) -> Result<Value, StepError> {
        let input: ParkInput = serde_json::from_value(input).map_err(|e| {
            StepError::stalled(
                StallReason::ContractViolated,
                format!("poll-status: bad input: {e}"),
            )
        })?;
        let state = self.park(input).await?;
        serde_json::to_value(state)
            .map_err(|e| StepError::stalled(StallReason::ContractViolated, e.to_string()))
    }

    /// Polls; answers its own token when the wait is over, else parks.
    pub async fn park(&self, input: ParkInput) -> Result<RunState, StepError> {
        let ParkInput { state, task_token } = input;
        let (polled, entry, cfn) = match self.poll_keeping(state.clone()).await {
            Ok(kept) => kept,
            // This run's end, written by an earlier attempt: it is over.
            Err(StepError::Ended { outcome }) => {
                let mut over = state;
                over.next = Next::Done;
                over.execution.outcome = Some(outcome);
                self.answer_own(&task_token, &over).await?;
                return Ok(over);
            }
            Err(e) => return Err(self.retrying(StepName::PollStatus, &state, e).await),
        };
        if polled.next != Next::WaitEvent {
            self.answer_own(&task_token, &polled).await?;
            return Ok(polled);
        }
        let stack_id = polled.change_set.as_ref().and_then(|c| c.stack_id.clone());
        let kept = ParkedToken {
            token: task_token.clone(),
            state: to_json(&polled)?,
        };
        let body = serde_json::to_vec(&kept)
            .map_err(|e| StepError::stalled(StallReason::ContractViolated, e.to_string()))?;
        let key = wait_token_key(&polled.entry, &polled.execution.name);
        self.blobs.put(&key, body, "application/json").await?;
        let now = now_millis();
        let parked = Parked {
            execution: polled.execution.name.clone(),
            since: Timestamp(now),
            on: polled
                .wait
                .on
                .map(|on| on.as_str().to_owned())
                .unwrap_or_default(),
            stack_id: stack_id.clone(),
        };
        // Held through the longest fallback wait (300 s), as for the
        // longest `pollInterval`.
        self.registry
            .park(&polled.entry, &parked, LEASE_TTL, now)
            .await?;
        // An event between the poll and the park found nobody parked.
        let target = stack_id
            .as_deref()
            .unwrap_or(entry.spec.effective_stack_name());
        let settled = cfn
            .describe_stack(target)
            .await?
            .is_none_or(|s| !s.status.in_progress());
        if settled {
            info!(stack = %polled.entry, "the stack settled as the run parked; polling again");
            self.answer_own(&task_token, &polled).await?;
        } else {
            info!(stack = %polled.entry, seconds = polled.wait.seconds, "parked until the stack's event");
        }
        Ok(polled)
    }

    /// Polls as poll-status does, keeping the entry it read and its port for
    /// the park (one read of each).
    async fn poll_keeping(
        &self,
        state: RunState,
    ) -> Result<(RunState, StackEntry, Port<P>), StepError> {
        let entry = self.resume(&state).await?;
        let cfn = self.port(&entry.spec).await?;
        let polled = self.poll(state, &entry, &cfn).await?;
        Ok((polled, entry, cfn))
    }

    /// Ends the run's own wait with `state`. A token no longer awaited
    /// (answered by an event meanwhile) is fine.
    async fn answer_own(&self, token: &str, state: &RunState) -> Result<(), StepError> {
        let answered = self.wakes.wake(token, &to_json(state)?).await?;
        if !answered {
            info!(stack = %state.entry, "the wait had ended already");
        }
        Ok(())
    }
}

fn to_json(state: &RunState) -> Result<Value, StepError> {
    serde_json::to_value(state)
        .map_err(|e| StepError::stalled(StallReason::ContractViolated, e.to_string()))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::testing::*;
    use super::*;
    use crate::fakes::{RecordingTokens, ScriptedCloudFormation, ready};
    use crate::ports::{Answer, Wakes};
    use crate::reconcile::run::WaitOn;
    use crate::stack_status::StackStatus as S;

    /// A run of `orders` whose change set was just executed, waiting on
    /// the stack, with events on and its own token answers recorded.
    async fn executing(after: &[Option<S>]) -> (Test, Arc<RecordingTokens>, RunState) {
        let cfn = ScriptedCloudFormation::with_stack(&[None]);
        cfn.script().change_set = [ready()].into_iter().collect();
        cfn.script().after_execute = after.to_vec();
        let mut t = Test::with(cfn, |_| {}).await;
        let tokens = Arc::new(RecordingTokens::default());
        t.steps.config.stack_events = Some("us-east-1".into());
        t.steps.wakes = Wakes::by(tokens.clone());
        let mut input = t.input("run-1");
        input.execution.parks = true;
        let state = t.steps.artifact_fetch(input).await.unwrap();
        let state = t.steps.template_upload(state).await.unwrap();
        let state = t.steps.change_set(state).await.unwrap();
        let state = t.steps.poll_status(state).await.unwrap();
        assert!(state.executes(), "{state:?}");
        let state = t.steps.change_set(state).await.unwrap();
        (t, tokens, state)
    }

    /// A run of a definition without `WaitForEvent` (an execution a deploy
    /// left running on the one before): it polls, events or not.
    #[tokio::test]
    async fn an_execution_of_an_older_definition_polls() {
        let (t, _, mut state) = executing(&[Some(S::CreateInProgress)]).await;
        state.execution.parks = false;
        state.next = Next::Wait;
        let state = t.steps.poll_status(state).await.unwrap();
        assert_eq!(
            (state.next, state.wait.on),
            (Next::Wait, Some(WaitOn::Execution))
        );
        let wire = serde_json::to_value(&state).unwrap();
        assert!(wire.get("parks").is_none(), "{wire}");
    }

    fn input(state: &RunState, token: &str) -> Value {
        serde_json::to_value(ParkInput {
            state: state.clone(),
            task_token: token.into(),
        })
        .unwrap()
    }

    #[tokio::test]
    async fn a_run_waiting_on_its_stack_parks_for_the_first_fallback_wait() {
        let (t, tokens, state) = executing(&[Some(S::CreateInProgress)]).await;
        assert_eq!(
            (state.next, state.wait.on, state.wait.seconds),
            (Next::WaitEvent, Some(WaitOn::Execution), 30),
            "six poll intervals of 5 s"
        );
        t.steps
            .run(StepName::PollStatus, input(&state, "tok-1"))
            .await
            .unwrap();
        assert!(tokens.answered().is_empty(), "parked, not answered");
        let parked = t.entry().lease.unwrap().parked.unwrap();
        assert_eq!(
            (parked.execution.as_str(), parked.on.as_str()),
            ("run-1", "execution")
        );
        let kept: ParkedToken = serde_json::from_slice(
            &t.blob(&wait_token_key(NAME, "run-1"))
                .expect("the token is kept"),
        )
        .unwrap();
        assert_eq!(kept.token, "tok-1");
        assert_eq!(kept.state["next"], "wait-event");
    }

    #[tokio::test]
    async fn a_stack_that_settled_before_the_park_ends_the_wait_at_once() {
        // Settled at the poll: the run answers its own token with what it found.
        let (t, tokens, state) = executing(&[Some(S::CreateComplete)]).await;
        t.steps
            .park(ParkInput {
                state,
                task_token: "tok-1".into(),
            })
            .await
            .unwrap();
        let answered = tokens.answered();
        assert_eq!(answered.len(), 1);
        let Answer::Success { output } = &answered[0].1 else {
            panic!("{answered:?}")
        };
        assert_eq!(
            (answered[0].0.as_str(), output["next"].as_str()),
            ("tok-1", Some("done"))
        );
        assert!(t.entry().lease.is_none(), "the run ended and let go");
    }

    #[tokio::test]
    async fn a_stack_that_settles_between_the_poll_and_the_park_is_polled_again() {
        // In progress at the poll, settled when looked at once parked: the
        // event came when nobody was parked, so the run wakes itself.
        let (t, tokens, state) =
            executing(&[Some(S::CreateInProgress), Some(S::CreateComplete)]).await;
        t.steps
            .park(ParkInput {
                state,
                task_token: "tok-1".into(),
            })
            .await
            .unwrap();
        let answered = tokens.answered();
        let Answer::Success { output } = &answered[0].1 else {
            panic!("{answered:?}")
        };
        assert_eq!(
            output["next"], "wait-event",
            "it polls again, and then ends"
        );
        assert!(t.entry().lease.unwrap().parked.is_some());
    }

    #[tokio::test]
    async fn without_events_a_run_polls_as_before() {
        let (mut t, _, _) = executing(&[Some(S::CreateInProgress)]).await;
        t.steps.config.stack_events = None;
        let state = t.input("run-2");
        t.release("run-1").await;
        t.steps
            .registry
            .acquire_lease(
                NAME,
                "run-2",
                std::time::Duration::from_secs(60),
                now_millis(),
            )
            .await
            .unwrap();
        let state = t.steps.poll_status(state).await.unwrap();
        assert_eq!((state.next, state.wait.seconds), (Next::Wait, 5));
        // A stack in another region: its events go to that region's bus.
        t.steps.config.stack_events = Some("us-east-1".into());
        let mut entry = t.entry();
        entry.spec.region = Some("eu-west-1".into());
        t.steps.registry.inner.insert(entry);
        let state = t.steps.poll_status(state).await.unwrap();
        assert_eq!((state.next, state.wait.seconds), (Next::Wait, 8));
    }
}
