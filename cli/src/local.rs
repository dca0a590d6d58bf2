//! `stacksync reconcile NAME --local` and `stacksync sync -f FILE --local`:
//! the reconcile state machine (statemachine/reconcile.asl.json), run
//! in-process against whatever AWS endpoint is configured.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::json;
use stacksync::adapters::cloudformation::SdkCloudFormation;
use stacksync::asl::{Outcome, Progress, RunOptions, StateMachine};
use stacksync::clock::now_millis;
use stacksync::ports::{CloudFormation, CloudFormationFactory};
use stacksync::reconcile::asl_runner::reconcile_machine;
use stacksync::registry::{Entries, Registry};
use stacksync::wiring::{SdkSteps, sdk_steps};

use crate::error::Result;

pub type LocalSteps = SdkSteps;

/// Everything a local run needs, built once.
pub struct LocalRunner {
    pub steps: LocalSteps,
    machine: StateMachine,
    options: RunOptions,
}

impl LocalRunner {
    pub async fn new(
        config: &aws_config::SdkConfig,
        registry: Registry,
        bucket: &str,
        speedup: f64,
    ) -> Result<Self> {
        // An endpoint override means a local emulator (see `sdk_steps`).
        let endpoint = config.endpoint_url();
        Ok(Self {
            steps: sdk_steps(config, registry, bucket, endpoint)
                .await
                .map_err(|e| e.to_string())?,
            machine: reconcile_machine().map_err(|e| e.to_string())?,
            options: RunOptions {
                speedup,
                ..RunOptions::default()
            },
        })
    }

    /// Runs one reconcile of `name`, printing states and stack events as they
    /// come. Returns whether the execution succeeded.
    pub async fn reconcile(&self, name: &str) -> Result<bool> {
        let entry = self
            .steps
            .registry
            .get(name)
            .await
            .map_err(|e| e.to_string())?
            .ok_or_else(|| {
                format!(
                    "no stack named {name:?} in the registry {:?}",
                    self.steps.registry.table()
                )
            })?;
        let execution = format!("local-{name}-{}", now_millis());
        let input = json!({"stackId": name, "trigger": {"kind": "manual"}});
        let cfn = self
            .steps
            .cloudformation
            .for_stack(
                entry.spec.region.as_deref(),
                entry.spec.assume_role_arn.as_deref(),
            )
            .await
            .map_err(|e| e.to_string())?;
        let watching = Arc::new(AtomicBool::new(true));
        let watcher = tokio::spawn(watch_events(
            cfn,
            entry.spec.effective_stack_name().to_owned(),
            now_millis(),
            watching.clone(),
            self.options.speedup,
        ));
        let speedup = self.options.speedup;
        println!("── reconcile {name} ({execution})");
        let mut print = move |event: &Progress, _: &serde_json::Value| match event {
            Progress::StateEntered { name, kind } if kind != "Choice" => println!("   ▸ {name}"),
            Progress::Waiting { seconds, .. } if speedup > 1.0 => {
                println!("     waiting {seconds}s (sped up ×{speedup})");
            }
            Progress::Waiting { seconds, .. } => println!("     waiting {seconds}s"),
            Progress::TaskFailed {
                name,
                error,
                retry_in: Some(delay),
            } => {
                println!(
                    "     {name}: {error} — retrying in {:.1}s",
                    delay.as_secs_f64()
                );
            }
            Progress::TaskFailed {
                name,
                error,
                retry_in: None,
            } => println!("     {name}: {error}"),
            Progress::Caught { next, .. } => println!("     → {next}"),
            _ => {}
        };
        let outcome = self
            .machine
            .execute(&self.steps, &execution, input, &self.options, &mut print)
            .await;
        watching.store(false, Ordering::Relaxed);
        let _ = watcher.await;
        Ok(match outcome {
            Outcome::Succeeded(state) => {
                let outcome = state["outcome"].as_str().unwrap_or("done");
                println!("   ✓ {name}: {outcome}");
                true
            }
            Outcome::Failed(error) => {
                println!("   ✗ {name}: {error}");
                false
            }
        })
    }
}

/// Prints the stack's new events until told to stop (then once more).
pub(crate) async fn watch_events(
    cfn: SdkCloudFormation,
    stack: String,
    since: i64,
    running: Arc<AtomicBool>,
    speedup: f64,
) {
    let mut seen = std::collections::BTreeSet::new();
    let every = Duration::from_secs_f64((2.0 / speedup.max(1.0)).max(0.05));
    loop {
        let last = !running.load(Ordering::Relaxed);
        if let Ok(events) = cfn.events_since(&stack, since).await {
            for e in events {
                if seen.insert(e.event_id.clone()) {
                    let reason = e.reason.map(|r| format!(" — {r}")).unwrap_or_default();
                    println!(
                        "     [{}] {} {}{}",
                        e.resource_type, e.logical_id, e.status, reason
                    );
                }
            }
        }
        if last {
            return;
        }
        tokio::time::sleep(every).await;
    }
}
