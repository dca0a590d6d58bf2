//! The steps as Task resources of the local interpreter (`crate::asl`):
//! `local:<function>`. The same handlers the Lambda functions run, called
//! in-process; errors carry the same names, so `Retry` and `Catch` behave
//! as in Step Functions.

use std::collections::BTreeMap;

use serde_json::Value;

use super::steps::{StepName, Steps};
use crate::asl::{AslError, StateMachine, TaskRunner};
use crate::ports::{Blobs, CloudFormationFactory, SourceFetcher};
use crate::registry::StepRegistry;

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

impl<R, B, F, S> TaskRunner for Steps<R, B, F, S>
where
    R: StepRegistry,
    B: Blobs,
    F: CloudFormationFactory,
    S: SourceFetcher,
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
}
