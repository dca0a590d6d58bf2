//! The stack-events follower: while a reconcile runs, locally or in Step
//! Functions, it prints the new events of the stack being reconciled.

use std::collections::BTreeSet;
use std::time::Duration;

use stacksync::StackSpec;
use stacksync::adapters::cloudformation::{SdkCloudFormation, SdkCloudFormationFactory};
use stacksync::clock::now_millis;
use stacksync::ports::{CloudFormationFactory, Stacks};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::error::Result;

/// A running follower; [`StackEvents::stop`] ends it at once (no waiting
/// out its poll interval).
#[derive(Debug)]
pub struct StackEvents {
    stop: oneshot::Sender<()>,
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
            .for_stack(
                spec.region.as_deref(),
                spec.assume_role_arn.as_deref(),
                Some(&spec.name),
            )
            .await
            .map_err(|e| e.to_string())?;
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(print_events(
            cfn,
            spec.effective_stack_name().to_owned(),
            now_millis(),
            stopped,
            speedup,
        ));
        Ok(Self { stop, task })
    }

    /// Stops following, once the events up to now are printed.
    pub async fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
    }
}

/// Prints the stack's new events until told to stop, then looks once more:
/// the run's last events come in just before it ends. A stop during the
/// pause between two looks ends the pause at once.
async fn print_events(
    cfn: SdkCloudFormation,
    stack: String,
    since: i64,
    mut stopped: oneshot::Receiver<()>,
    speedup: f64,
) {
    // CloudFormation returns every event since `since` each time: the seen
    // ones are skipped by id.
    let mut seen = BTreeSet::new();
    let every = Duration::from_secs_f64((2.0 / speedup.max(1.0)).max(0.05));
    loop {
        let last = !matches!(stopped.try_recv(), Err(oneshot::error::TryRecvError::Empty));
        print_new(&cfn, &stack, since, &mut seen).await;
        if last {
            return;
        }
        tokio::select! {
            _ = &mut stopped => {
                print_new(&cfn, &stack, since, &mut seen).await;
                return;
            }
            () = tokio::time::sleep(every) => {}
        }
    }
}

/// Prints the events not printed yet.
async fn print_new(cfn: &SdkCloudFormation, stack: &str, since: i64, seen: &mut BTreeSet<String>) {
    if let Ok(events) = cfn.events_since(stack, since).await {
        for e in events {
            if seen.insert(e.event_id.clone()) {
                let reason = e.reason.map(|r| format!(" — {r}")).unwrap_or_default();
                crate::say!(
                    "     [{}] {} {}{}",
                    e.resource_type,
                    e.logical_id,
                    e.status,
                    reason
                );
            }
        }
    }
}
