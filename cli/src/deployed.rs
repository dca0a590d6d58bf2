//! A deployed stacksync: where its resources are (its CloudFormation stack's
//! outputs), and `reconcile` / `sync` / `history` through its state machine.

use std::time::Duration;

use aws_smithy_types::error::display::DisplayErrorContext;
use stacksync::adapters::cloudformation::SdkCloudFormationFactory;
use stacksync::adapters::stepfunctions::{Executions, Step, is_finished};
use stacksync::clock::{now_millis, rfc3339};
use stacksync::ports::{Starter, Trigger, TriggerKind};
use stacksync::registry::{Entries, Registry};

use crate::Cli;
use crate::Output;
use crate::error::Result;
use crate::output::{Table, print_structured};
use crate::watch::StackEvents;

/// The outputs a stacksync installation stack has (template.yaml, infra/).
const TABLE_OUTPUT: &str = "RegistryTableName";
const BUCKET_OUTPUT: &str = "ArtifactBucketName";
const MACHINE_OUTPUT: &str = "StateMachineArn";

/// Table, bucket and state machine: given on their own, else the
/// installation's outputs, else the defaults (table and bucket only).
#[derive(Debug, Clone)]
pub struct Resources {
    pub table: String,
    pub bucket: String,
    pub state_machine_arn: Option<String>,
}

pub async fn resolve(cli: &Cli, config: &aws_config::SdkConfig) -> Result<Resources> {
    let mut outputs = std::collections::HashMap::new();
    if let Some(installation) = &cli.installation {
        let out = aws_sdk_cloudformation::Client::new(config)
            .describe_stacks()
            .stack_name(installation)
            .send()
            .await
            .map_err(|e| {
                format!(
                    "cannot read the installation stack {installation:?}: {}",
                    DisplayErrorContext(&e)
                )
            })?;
        let stack = out
            .stacks()
            .first()
            .ok_or_else(|| format!("no stack named {installation:?}"))?;
        for output in stack.outputs() {
            if let (Some(key), Some(value)) = (output.output_key(), output.output_value()) {
                outputs.insert(key.to_owned(), value.to_owned());
            }
        }
        for key in [TABLE_OUTPUT, BUCKET_OUTPUT, MACHINE_OUTPUT] {
            if !outputs.contains_key(key) {
                return Err(format!(
                    "the stack {installation:?} has no output {key}: is it a stacksync installation \
                     (template.yaml or infra/)?"
                ));
            }
        }
    }
    Ok(Resources {
        table: cli
            .table
            .clone()
            .or_else(|| outputs.remove(TABLE_OUTPUT))
            .unwrap_or_else(|| "stacksync".into()),
        bucket: cli
            .bucket
            .clone()
            .or_else(|| outputs.remove(BUCKET_OUTPUT))
            .unwrap_or_else(|| "stacksync-artifacts".into()),
        state_machine_arn: cli
            .state_machine_arn
            .clone()
            .or_else(|| outputs.remove(MACHINE_OUTPUT)),
    })
}

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
            cloudformation: SdkCloudFormationFactory::new(config.clone()),
        })
    }

    /// Starts the reconcile of `name` (which must be registered); with `wait`,
    /// follows it to the end. Returns whether it succeeded (or was started).
    pub async fn reconcile(
        &self,
        registry: &Registry,
        name: &str,
        wait: bool,
        timeout: Duration,
    ) -> Result<bool> {
        let entry = registry
            .get(name)
            .await
            .map_err(|e| e.to_string())?
            .ok_or_else(|| {
                format!(
                    "no stack named {name:?} in the registry {:?}",
                    registry.table()
                )
            })?;
        let trigger = Trigger {
            kind: TriggerKind::Manual,
            revision: None,
        };
        // A manual start is its own request: unique, never a replay.
        let key = format!("{}-{}", now_millis(), std::process::id());
        let started = self
            .executions
            .start(name, &trigger, &key)
            .await
            .map_err(|e| e.to_string())?;
        println!("── reconcile {name} ({})", started.execution_name);
        if !wait {
            println!("   started {}", started.execution_arn);
            return Ok(true);
        }
        let events = StackEvents::start(&self.cloudformation, &entry.spec, 1.0).await?;
        let result = self.follow(&started.execution_arn, timeout).await;
        events.stop().await;
        let Some(status) = result? else {
            return Err(format!(
                "{name}: still running after {}; stopped following it, the execution goes on \
                 (see `stacksync history {name}`): {}",
                humantime_secs(timeout),
                started.execution_arn
            ));
        };
        if status == "SUCCEEDED" {
            println!("   ✓ {name}: {status}");
            Ok(true)
        } else {
            println!("   ✗ {name}: {status}");
            Ok(false)
        }
    }

    /// Prints the states an execution enters until it ends; returns its
    /// status, or `None` when it is still running after `timeout`.
    async fn follow(&self, execution_arn: &str, timeout: Duration) -> Result<Option<String>> {
        let deadline = std::time::Instant::now() + timeout;
        let mut last_event = 0;
        loop {
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
                    Step::Entered(state) => println!("   ▸ {state}"),
                    Step::Failed { error, cause } => println!("     {error}: {cause}"),
                }
            }
            if is_finished(&summary.status) {
                return Ok(Some(summary.status));
            }
            if std::time::Instant::now() >= deadline {
                return Ok(None);
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    /// Prints the newest executions of `name`.
    pub async fn history(&self, name: &str, limit: usize, format: Output) -> Result {
        let found = self
            .executions
            .history(name, limit, 10_000)
            .await
            .map_err(|e| e.to_string())?;
        if format != Output::Table {
            return print_structured(format, &found);
        }
        if found.is_empty() {
            println!(
                "no executions of {name:?} in {} (among its newest 10,000)",
                self.executions.state_machine_arn()
            );
            return Ok(());
        }
        let mut table = Table::new(vec!["STARTED", "STATUS", "DURATION", "EXECUTION"]);
        for e in &found {
            let duration = e
                .stopped_at
                .map(|stop| format!("{:.1}s", (stop - e.started_at) as f64 / 1000.0))
                .unwrap_or_else(|| "running".into());
            table.row(vec![
                rfc3339(e.started_at),
                e.status.clone(),
                duration,
                e.name.clone(),
            ]);
        }
        print!("{}", table.render());
        Ok(())
    }
}

/// A duration as people write it (`1h`, `90s`).
fn humantime_secs(d: Duration) -> String {
    stacksync::Duration::from_secs(d.as_secs()).to_string()
}
