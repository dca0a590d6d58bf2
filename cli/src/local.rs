//! `stacksync reconcile NAME --local` and `stacksync sync -f FILE --local`:
//! the reconcile state machine (statemachine/reconcile.asl.json), run
//! in-process against whatever AWS endpoint is configured.

use serde_json::json;
use stacksync::asl::{Outcome, Progress, RunOptions, StateMachine};
use stacksync::clock::now_millis;
use stacksync::ports::{Trigger, TriggerKind};
use stacksync::reconcile::asl_runner::reconcile_machine;
use stacksync::registry::Registry;
use stacksync::wiring::{SdkSteps, sdk_steps};

use crate::connect::registered;
use crate::error::Result;
use crate::watch::StackEvents;

/// Everything a local run needs, built once.
pub struct LocalRunner {
    pub steps: SdkSteps,
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

    /// Runs one reconcile of `name` (`force`: a change set even at the
    /// applied state), printing states and stack events as they come.
    /// Returns whether the execution succeeded.
    pub async fn reconcile(&self, name: &str, force: bool) -> Result<bool> {
        let entry = registered(&self.steps.registry, name).await?;
        let execution = format!("local-{name}-{}", now_millis());
        let trigger = Trigger {
            force,
            ..Trigger::of(TriggerKind::Manual)
        };
        let input = json!({"stackId": name, "trigger": trigger});
        let events = StackEvents::start(
            &self.steps.cloudformation,
            &entry.spec,
            self.options.speedup,
        )
        .await?;
        println!("── reconcile {name} ({execution})");
        let speedup = self.options.speedup;
        let mut print =
            move |event: &Progress, _: &serde_json::Value| print_progress(event, speedup);
        let outcome = self
            .machine
            .execute(&self.steps, &execution, input, &self.options, &mut print)
            .await;
        events.stop().await;
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

/// One line per state entered, wait and failed or caught task; Choice states
/// only route, so they are left out.
fn print_progress(event: &Progress, speedup: f64) {
    match event {
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
    }
}
