//! `stacksync reconcile NAME --local` and `stacksync sync -f FILE --local`:
//! the reconcile state machine (statemachine/reconcile.asl.json), run
//! in-process against whatever AWS endpoint is configured.

use serde_json::json;
use stacksync::asl::{Outcome, Progress, RunOptions, StateMachine};
use stacksync::clock::now_millis;
use stacksync::ports::{Trigger, TriggerKind};
use stacksync::reconcile::asl_runner::reconcile_machine;
use stacksync::reconcile::run::{CaughtError, FinalizeInput, RunState, error_names};
use stacksync::reconcile::steps::Steps;
use stacksync::registry::Registry;
use stacksync::wiring::{SdkSteps, event_bus, sdk_steps};

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
            // The local runner: http:// and git:// are the user's own call.
            steps: Steps {
                // STACKSYNC_EVENT_BUS: the local runner's events go there
                // too (none by default).
                notices: event_bus(
                    config,
                    &std::env::var("STACKSYNC_EVENT_BUS").unwrap_or_default(),
                ),
                ..sdk_steps(config, registry, bucket, endpoint, true)
                    .await
                    .map_err(|e| e.to_string())?
            },
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
    /// Runs one reconcile of `name`: whether it succeeded, and what it said
    /// it did (the run's outcome), if it did.
    pub async fn reconcile(&self, name: &str, force: bool) -> Result<(bool, Option<String>)> {
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
        say!("── reconcile {name} ({execution})");
        let speedup = self.options.speedup;
        // The run's state as of its latest state entered: what an
        // interruption hands the finalizer.
        let latest = std::sync::Mutex::new((String::new(), serde_json::Value::Null));
        let mut print = |event: &Progress, data: &serde_json::Value| {
            if let Progress::StateEntered { name, .. } = event
                && let Ok(mut latest) = latest.lock()
            {
                *latest = (name.clone(), data.clone());
            }
            print_progress(event, speedup);
        };
        let outcome = tokio::select! {
            outcome = self.machine.execute(&self.steps, &execution, input, &self.options, &mut print) => outcome,
            signal = interrupted() => {
                events.stop().await;
                let (state, data) = latest.lock().map(|l| l.clone()).unwrap_or_default();
                let released = self.record_interruption(name, &signal, &state, data).await;
                let hold = if released {
                    "the run's hold on the stack is released"
                } else {
                    "the run's hold on the stack could not be released (`stacksync unlock` ends it)"
                };
                return Err(format!(
                    "{name}: interrupted by {signal} in {state}: {hold}; \
                     CloudFormation goes on with what it was doing. Run it again to finish"
                ));
            }
        };
        events.stop().await;
        Ok(match outcome {
            Outcome::Succeeded(state) => {
                let outcome = state["outcome"].as_str().map(str::to_owned);
                say!("   ✓ {name}: {}", outcome.as_deref().unwrap_or("done"));
                (true, outcome)
            }
            Outcome::Failed(error) => {
                say!("   ✗ {name}: {error}");
                (false, None)
            }
        })
    }
}

impl LocalRunner {
    /// A run stopped by a signal: recorded `Failed (Interrupted)` by the
    /// finalizer, as a caught failure would be (the change set it made and
    /// never executed deleted, the lease released, due again). Returns
    /// whether the run's hold ended so.
    async fn record_interruption(
        &self,
        name: &str,
        signal: &str,
        state: &str,
        data: serde_json::Value,
    ) -> bool {
        let Ok(run) = serde_json::from_value::<RunState>(data) else {
            warn_user!(
                "   {name}: the interruption came before the run had a state to record \
                 (`stacksync unlock {name}` ends a hold, if it took one)"
            );
            return false;
        };
        let input = FinalizeInput {
            state: run,
            error: CaughtError {
                error: format!("{}.Interrupted", error_names::STALLED),
                cause: format!(
                    "interrupted: the local run was stopped by {signal} in state {state}; \
                     CloudFormation goes on with what it was doing; the next run takes over"
                ),
            },
        };
        match self.steps.finalize(input).await {
            Ok(_) => true,
            Err(e) => {
                warn_user!(
                    "   {name}: the interruption could not be recorded: {e} (`stacksync unlock {name}` ends the hold)"
                );
                false
            }
        }
    }
}

/// The first of SIGINT (Ctrl-C) and SIGTERM, by name.
async fn interrupted() -> String {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(term) => term,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            return "SIGINT".into();
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => "SIGINT".into(),
        _ = term.recv() => "SIGTERM".into(),
    }
}

/// One line per state entered, wait and failed or caught task; Choice states
/// only route, so they are left out.
fn print_progress(event: &Progress, speedup: f64) {
    match event {
        Progress::StateEntered { name, kind } if kind != "Choice" => say!("   ▸ {name}"),
        Progress::Waiting { seconds, .. } if speedup > 1.0 => {
            say!("     waiting {seconds}s (sped up ×{speedup})");
        }
        Progress::Waiting { seconds, .. } => say!("     waiting {seconds}s"),
        Progress::TaskFailed {
            name,
            error,
            retry_in: Some(delay),
        } => {
            say!(
                "     {name}: {error} — retrying in {:.1}s",
                delay.as_secs_f64()
            );
        }
        Progress::TaskFailed {
            name,
            error,
            retry_in: None,
        } => say!("     {name}: {error}"),
        Progress::Caught { next, .. } => say!("     → {next}"),
        _ => {}
    }
}
