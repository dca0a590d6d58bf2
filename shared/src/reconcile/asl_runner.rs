//! The steps as Task resources of the local interpreter (`crate::asl`):
//! `local:<function>`. The same handlers the Lambda functions run, called
//! in-process; errors carry the same names, so `Retry` and `Catch` behave
//! as in Step Functions.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use super::steps::{Ports, StepName, Steps};
use crate::asl::{AslError, StateMachine, TaskRunner};
use crate::registry::{Answer, Answers};

/// The reconcile state machine, built in, so the CLI runs the very file
/// that is deployed.
pub const RECONCILE_ASL: &str = include_str!("../../../statemachine/reconcile.asl.json");

/// The reconcile definition, every Task bound to its in-process handler.
pub fn reconcile_machine() -> Result<StateMachine, AslError> {
    StateMachine::load(RECONCILE_ASL, &local_substitutions())
}

/// The substitutions that point every Task at the in-process handlers.
pub fn local_substitutions() -> BTreeMap<String, String> {
    StepName::ALL
        .iter()
        .map(|s| {
            (
                s.placeholder().to_owned(),
                format!("local:{}", s.function()),
            )
        })
        .collect()
}

impl<P: Ports> TaskRunner for Steps<P>
where
    P::Registry: Answers,
{
    async fn run(&self, resource: &str, input: Value) -> Result<Value, AslError> {
        let function = resource.strip_prefix("local:").unwrap_or(resource);
        let step = StepName::of_function(function).ok_or_else(|| {
            AslError::new("States.TaskFailed", format!("no function named {function}"))
        })?;
        Steps::run(self, step, input)
            .await
            .map_err(|e| AslError::new(e.name(), e.message()))
    }

    /// The answer `stacksync approve` or `reject` writes to the registry
    /// (the local runner has no Step Functions to send it to), looked for
    /// every [`ANSWER_POLL`] until `timeout`.
    async fn wait_for_token(&self, token: &str, timeout: Duration) -> Result<Value, AslError> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            match self.registry.answer_of(token).await {
                Ok(Some(Answer::Success { output })) => return Ok(output),
                Ok(Some(Answer::Failure { error, cause })) => {
                    return Err(AslError::new(error, cause));
                }
                Ok(None) => {}
                // A registry that does not answer now may later.
                Err(e) => tracing::warn!(error = %e, "reading the task token's answer"),
            }
            let now = tokio::time::Instant::now();
            if now >= deadline {
                return Err(AslError::new(
                    "States.Timeout",
                    format!("no answer to the task token within {} s", timeout.as_secs()),
                ));
            }
            tokio::time::sleep(ANSWER_POLL.min(deadline - now)).await;
        }
    }
}

/// How often the local runner looks for a task token's answer.
pub const ANSWER_POLL: Duration = Duration::from_millis(250);

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::RECONCILE_ASL;
    use crate::reconcile::steps::MAX_EVENT_WAIT_SECONDS;
    use crate::registry::LEASE_TTL;

    #[test]
    fn the_machines_cap_on_the_fallback_wait_is_the_steps_and_the_lease_outlasts_it() {
        let asl: Value = serde_json::from_str(RECONCILE_ASL).unwrap();
        let states = &asl["States"];
        let cap = &states["CapWait"]["Choices"][0];
        assert_eq!(cap["Variable"], "$.longer.seconds");
        assert_eq!(cap["NumericGreaterThan"], MAX_EVENT_WAIT_SECONDS);
        assert_eq!(states["LongestWait"]["Result"], MAX_EVENT_WAIT_SECONDS);
        assert_eq!(
            states["WaitForEvent"]["TimeoutSecondsPath"],
            "$.waitSeconds"
        );
        // A parked run's lease: a step, a retry's backoff, a margin, and the wait.
        assert!(LEASE_TTL.as_secs() >= 420 + MAX_EVENT_WAIT_SECONDS);
    }
}
