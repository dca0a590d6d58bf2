//! Crashes: the process running a step killed at a step boundary (the step
//! did its work, its answer is lost) or in the middle of it (its work is cut
//! wherever it was), as a Lambda function's process dies. Step Functions then
//! sees the Task fail (`Lambda.Unknown`, which no Retry covers), the Catch
//! runs the finalizer; when the finalizer itself is the one killed, the
//! execution fails and the installation's `ExecutionEnded` rule ends the
//! hold ([`stacksync::registry::end_hold`]). The next run must converge, and
//! never run a second change set for one revision.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;
use stacksync::adapters::cloudformation::SdkCloudFormationFactory;
use stacksync::asl::{AslError, Outcome, TaskRunner};
use stacksync::clock::now_millis;
use stacksync::registry::{Entries, Registry, end_hold};
use stacksync::status::Phase;

use crate::faults::FaultProxy;
use crate::git::GitRepo;
use crate::harness::Harness;
use crate::reliability::{executed_change_sets, queue_template};

/// Where a run is killed: in its `task`-th Task (from 0), `after` into it;
/// `None`: once the step has done its work, before its answer is back.
/// With `finalizer`, the finalizer the Catch then runs is killed too (before
/// it does anything), and the execution fails.
#[derive(Debug, Clone, Copy)]
pub struct Kill {
    pub task: usize,
    pub after: Option<Duration>,
    pub finalizer: bool,
}

/// A task runner that kills one Task of the run.
#[derive(Debug)]
pub struct Killing<'a, R> {
    inner: &'a R,
    kill: Kill,
    tasks: AtomicUsize,
    /// The step that was killed, and whether it had finished.
    pub killed: Mutex<Option<(String, bool)>>,
}

impl<'a, R> Killing<'a, R> {
    pub fn new(inner: &'a R, kill: Kill) -> Self {
        Killing {
            inner,
            kill,
            tasks: AtomicUsize::new(0),
            killed: Mutex::new(None),
        }
    }
}

impl<R: TaskRunner> TaskRunner for Killing<'_, R> {
    async fn run(&self, resource: &str, input: Value) -> Result<Value, AslError> {
        let index = self.tasks.fetch_add(1, Ordering::SeqCst);
        let finalizer = resource.ends_with(":finalize");
        if self.kill.finalizer && finalizer && index > self.kill.task {
            return Err(AslError::new(
                "Lambda.Unknown",
                "the finalizer's process was killed",
            ));
        }
        if index != self.kill.task {
            return self.inner.run(resource, input).await;
        }
        let finished = match self.kill.after {
            None => {
                let _ = self.inner.run(resource, input).await;
                true
            }
            Some(after) => tokio::time::timeout(after, self.inner.run(resource, input))
                .await
                .is_ok(),
        };
        *self.killed.lock().expect("killed") = Some((resource.to_owned(), finished));
        Err(AslError::new(
            "Lambda.Unknown",
            "the function's process was killed",
        ))
    }
}

/// What the crash rounds found.
#[derive(Debug, Default)]
pub struct CrashReport {
    pub rounds: usize,
    /// Rounds whose kill fell at a boundary / in the middle of a step.
    pub at_boundary: usize,
    pub in_middle: usize,
    /// Kills by step (the function's resource name).
    pub by_step: std::collections::BTreeMap<String, usize>,
    /// Holds ended as the `ExecutionEnded` rule ends them (the finalizer
    /// itself was killed).
    pub holds_ended: usize,
    /// Leases the killed run took after its hold was ended: the kill
    /// dropped the lease request in flight, and it reached DynamoDB after
    /// the `ExecutionEnded` rule had looked (a Lambda stopped after it sent
    /// the request). Deployed, the lease runs out and the scheduler starts
    /// the stack again; here that expiry is played by ending the hold once
    /// more, and counted.
    pub late_leases: usize,
    /// Runs after the killed one until the stack converged, at most.
    pub most_recovery_runs: usize,
    /// Rounds whose stack did not converge within 3 runs.
    pub stuck: Vec<String>,
    /// Revisions applied by more than one change set.
    pub twice: Vec<String>,
    /// Revisions recorded applied that no change set carried.
    pub unapplied: Vec<String>,
    pub elapsed: Duration,
}

/// Normal runs of `name` after the killed `execution`, until it is `Ready`
/// at `head` with no lease: how many it took (at most 3), or `None`. A
/// lease the killed run took after its hold was ended is ended again
/// (counted in `late_leases`), as its expiry would be.
async fn recover(
    harness: &Harness<SdkCloudFormationFactory>,
    direct: &Registry,
    name: &str,
    execution: &str,
    head: &str,
    report: &mut CrashReport,
) -> Option<usize> {
    for run in 1..=3 {
        if let Ok(Some(entry)) = direct.get(name).await
            && entry.lease.is_some_and(|l| l.owner == execution)
            && end_hold(
                direct,
                name,
                execution,
                "the lease outlived its execution",
                now_millis(),
            )
            .await
            .unwrap_or(false)
        {
            report.late_leases += 1;
        }
        harness.reconcile(name).await;
        let entry = direct.get(name).await.ok().flatten();
        if entry.is_some_and(|e| {
            e.status.phase == Phase::Ready
                && e.status.applied.last_applied_revision.as_deref() == Some(head)
                && e.lease.is_none()
        }) {
            return Some(run);
        }
    }
    None
}

/// `rounds` rounds over `names` (each registered, created, on `repo`, one
/// template per name): a new revision, a run killed per `kills(round)`,
/// then normal runs until it converges.
pub async fn crash_rounds(
    harness: &Harness<SdkCloudFormationFactory>,
    direct: &Registry,
    proxy: &FaultProxy,
    repo: &GitRepo,
    names: &[String],
    kills: impl Fn(usize) -> Kill,
    rounds: usize,
) -> CrashReport {
    let started = Instant::now();
    let mut report = CrashReport::default();
    for round in 0..rounds {
        let name = &names[round % names.len()];
        let before = executed_change_sets(&proxy.log())
            .get(name)
            .map_or(0, |s| s.len());
        let retention = 60 + u32::try_from(round).unwrap_or(0) * 60;
        repo.commit(
            &[(&format!("{name}.yaml"), &queue_template(retention))],
            &format!("round {round}"),
        );
        let head = repo.head();
        let kill = kills(round);
        let functions = harness.functions();
        let killing = Killing::new(&functions, kill);
        let (execution, outcome) = harness.reconcile_by(&killing, name).await;
        let killed = killing.killed.lock().expect("killed").clone();
        report.rounds += 1;
        if let Some((step, finished)) = &killed {
            *report.by_step.entry(step.clone()).or_default() += 1;
            if *finished {
                report.at_boundary += 1;
            } else {
                report.in_middle += 1;
            }
        }
        // The installation's ExecutionEnded rule, for a failed execution.
        if matches!(outcome, Outcome::Failed(_))
            && end_hold(
                direct,
                name,
                &execution,
                "the execution failed",
                now_millis(),
            )
            .await
            .unwrap_or(false)
        {
            report.holds_ended += 1;
        }
        let recovered = recover(harness, direct, name, &execution, &head, &mut report).await;
        match recovered {
            Some(runs) => report.most_recovery_runs = report.most_recovery_runs.max(runs),
            None => {
                // How it was left: what to look at first.
                let left = direct.get(name).await.ok().flatten().map(|e| {
                    format!(
                        "{} at {:?}, lease {:?}: {:?}",
                        e.status.phase,
                        e.status.applied.last_applied_revision,
                        e.lease.map(|l| l.owner),
                        e.status.message
                    )
                });
                report.stuck.push(format!(
                    "round {round} ({name}, {kill:?}, {killed:?}; head {head}): {left:?}"
                ));
            }
        }
        let after = executed_change_sets(&proxy.log())
            .get(name)
            .map_or(0, |s| s.len());
        if recovered.is_some() && after == before {
            report
                .unapplied
                .push(format!("round {round} ({name}, {kill:?}, {killed:?})"));
        }
        if after > before + 1 {
            if std::env::var_os("STACKSYNC_RELIABILITY_VERBOSE").is_some() {
                let log = proxy.log();
                for e in log.iter().filter(|e| {
                    e.service == "cloudformation" && e.stack.as_deref() == Some(name.as_str())
                }) {
                    eprintln!("  round {round}: {e:?}");
                }
            }
            report.twice.push(format!(
                "round {round} ({name}, {kill:?}, {killed:?}): {} change sets",
                after - before
            ));
        }
    }
    report.elapsed = started.elapsed();
    report
}
