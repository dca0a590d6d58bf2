//! A deployed stacksync's state machine in Step Functions: starting a
//! reconcile, following it to its end, and reading past executions.

use std::time::{Duration, Instant};

use stacksync::adapters::cloudformation::SdkCloudFormationFactory;
use stacksync::adapters::stepfunctions::{ExecutionSummary, Executions, Step, is_finished};
use stacksync::clock::now_millis;
use stacksync::ports::{Started, Starter, Trigger, TriggerKind};
use stacksync::registry::Registry;

use crate::connect::{Resources, registered};
use crate::error::Result;
use crate::watch::StackEvents;

/// How many of the machine's newest executions `history` looks through:
/// Step Functions cannot filter them by name. (`stacksync history` names
/// this number when it finds none.)
const HISTORY_SCANNED: usize = 10_000;

/// The deployed state machine, and what following an execution needs.
pub struct Deployed {
    executions: Executions,
    cloudformation: SdkCloudFormationFactory,
}

impl Deployed {
    pub fn new(config: &aws_config::SdkConfig, resources: &Resources) -> Result<Self> {
        let arn = resources.state_machine_arn.as_deref().ok_or(
            "no deployed stacksync given: pass --installation STACK (the stack `sam deploy` made), \
             or --state-machine-arn ARN; or --local to run the state machine in-process",
        )?;
        Ok(Self {
            executions: Executions::new(aws_sdk_sfn::Client::new(config), arn),
            cloudformation: SdkCloudFormationFactory::new(config.clone())
                .for_installation(resources.table.clone()),
        })
    }

    pub fn state_machine_arn(&self) -> &str {
        self.executions.state_machine_arn()
    }

    /// Starts the reconcile of `name` (which must be registered; `force`: a
    /// change set even at the applied state); with `wait`, follows it to the
    /// end. Returns whether it succeeded (or was started), and what the run
    /// said it did (its outcome), when followed to a successful end.
    pub async fn reconcile(
        &self,
        registry: &Registry,
        name: &str,
        wait: bool,
        timeout: Duration,
        force: bool,
    ) -> Result<(bool, Option<String>)> {
        let entry = registered(registry, name).await?;
        let started = self.start(name, force).await?;
        say!("── reconcile {name} ({})", started.execution_name);
        if !wait {
            say!("   started {}", started.execution_arn);
            return Ok((true, None));
        }
        let events = StackEvents::start(&self.cloudformation, &entry.spec, 1.0).await?;
        let result = self.follow(&started.execution_arn, timeout).await;
        events.stop().await;
        let Some(summary) = result? else {
            return Err(format!(
                "{name}: still running after {}; stopped following it, the execution goes on \
                 (see `stacksync history {name}`): {}",
                humantime_secs(timeout),
                started.execution_arn
            ));
        };
        if summary.status == "SUCCEEDED" {
            match &summary.outcome {
                Some(outcome) => say!("   ✓ {name}: {}: {outcome}", summary.status),
                None => say!("   ✓ {name}: {}", summary.status),
            }
            Ok((true, summary.outcome))
        } else {
            say!("   ✗ {name}: {}", summary.status);
            Ok((false, None))
        }
    }

    async fn start(&self, name: &str, force: bool) -> Result<Started> {
        let trigger = Trigger {
            force,
            ..Trigger::of(TriggerKind::Manual)
        };
        // A manual start is its own request: unique, never a replay.
        let key = format!("{}-{}", now_millis(), std::process::id());
        self.executions
            .start(name, &trigger, &key)
            .await
            .map_err(|e| e.to_string())
    }

    /// Prints the states an execution enters until it ends; returns its
    /// status, or `None` when it is still running after `timeout`.
    async fn follow(
        &self,
        execution_arn: &str,
        timeout: Duration,
    ) -> Result<Option<ExecutionSummary>> {
        let deadline = Instant::now() + timeout;
        let mut last_event = 0;
        // A no-op run ends within a second or two: look often at first,
        // then once a second.
        let mut pause = Duration::from_millis(200);
        loop {
            // Described before its steps are read, so that a finished
            // execution's last steps are printed before it is reported done.
            let summary = self
                .executions
                .describe(execution_arn)
                .await
                .map_err(|e| e.to_string())?;
            let (steps, last) = self
                .executions
                .steps_since(execution_arn, last_event)
                .await
                .map_err(|e| e.to_string())?;
            last_event = last;
            for step in steps {
                match step {
                    Step::Entered(state) => say!("   ▸ {state}"),
                    Step::Failed { error, cause } => match (error.is_empty(), cause.is_empty()) {
                        (false, false) => say!("     {error}: {cause}"),
                        (false, true) => say!("     {error} (no cause given)"),
                        (true, false) => say!("     failed: {cause}"),
                        (true, true) => say!("     failed (no error or cause given)"),
                    },
                }
            }
            if is_finished(&summary.status) {
                return Ok(Some(summary));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(1));
        }
    }

    /// The newest executions of `name`, newest first.
    pub async fn history(&self, name: &str, limit: usize) -> Result<Vec<ExecutionSummary>> {
        self.executions
            .history(name, limit, HISTORY_SCANNED)
            .await
            .map_err(|e| e.to_string())
    }
}

/// A duration as people write it (`1h`, `90s`).
fn humantime_secs(d: Duration) -> String {
    stacksync::Duration::from_secs(d.as_secs()).to_string()
}
