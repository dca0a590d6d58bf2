//! The stack-events follower: while a reconcile runs, locally or in Step
//! Functions, it prints the new events of the stack being reconciled.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use stacksync::StackSpec;
use stacksync::adapters::cloudformation::{SdkCloudFormation, SdkCloudFormationFactory};
use stacksync::clock::now_millis;
use stacksync::ports::{CloudFormation, CloudFormationFactory};
use tokio::task::JoinHandle;

use crate::error::Result;

/// A running follower; [`StackEvents::stop`] ends it.
#[derive(Debug)]
pub struct StackEvents {
    running: Arc<AtomicBool>,
    task: JoinHandle<()>,
}

impl StackEvents {
    /// Starts printing the events of `spec`'s stack from now on, in its
    /// region and account. `speedup` polls faster, for sped-up runs.
    pub async fn start(
        cloudformation: &SdkCloudFormationFactory,
        spec: &StackSpec,
        speedup: f64,
    ) -> Result<Self> {
        let cfn = cloudformation
            .for_stack(spec.region.as_deref(), spec.assume_role_arn.as_deref())
            .await
            .map_err(|e| e.to_string())?;
        let running = Arc::new(AtomicBool::new(true));
        let task = tokio::spawn(print_events(
            cfn,
            spec.effective_stack_name().to_owned(),
            now_millis(),
            running.clone(),
            speedup,
        ));
        Ok(Self { running, task })
    }

    /// Stops following, once the events up to now are printed.
    pub async fn stop(self) {
        self.running.store(false, Ordering::Relaxed);
        let _ = self.task.await;
    }
}

/// Prints the stack's new events until told to stop, then looks once more:
/// the run's last events come in just before it ends.
async fn print_events(
    cfn: SdkCloudFormation,
    stack: String,
    since: i64,
    running: Arc<AtomicBool>,
    speedup: f64,
) {
    // CloudFormation returns every event since `since` each time: the seen
    // ones are skipped by id.
    let mut seen = BTreeSet::new();
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
