//! Reliability runs, shared by the tests (`tests/tests/reliability.rs`) and
//! the benchmark (`examples/bench_reliability.rs`): stacks taken through
//! their whole life (create, update, no-op, delete), each reconcile run again
//! until it converges, through the fault proxy ([`crate::faults`]); what
//! the emulator saw then says whether any change set ran twice.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use aws_config::SdkConfig;
use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use stacksync::adapters::cloudformation::SdkCloudFormationFactory;
use stacksync::asl::{Outcome, Progress};
use stacksync::clock::now_millis;
use stacksync::manifest::parse_manifest;
use stacksync::registry::plan::plan_apply;
use stacksync::registry::{Entries, Registry, Specs};
use stacksync::status::Phase;
use tokio::sync::Semaphore;

use crate::Emulator;
use crate::faults::{Exchange, FaultProxy};
use crate::git::GitRepo;
use crate::harness::Harness;

/// The SDK configuration through `proxy`: the emulator's, with the
/// production retry mode and an attempt timeout of `attempt` (shorter than
/// the installation's 30 s, so that a run with slow answers ends in
/// minutes; the proxy's slow answers take longer than it).
pub fn through_proxy(proxy: &FaultProxy, attempt: Duration) -> SdkConfig {
    Emulator::shared()
        .sdk_config_at(proxy.endpoint())
        .into_builder()
        .retry_config(RetryConfig::standard())
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(Duration::from_secs(2))
                .operation_attempt_timeout(attempt)
                .operation_timeout(attempt * 4)
                .build(),
        )
        .build()
}

/// The four moments of a stack's life this run takes it through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Moment {
    Create,
    Update,
    NoOp,
    Delete,
}

/// What one moment took, over every stack.
#[derive(Debug, Clone, Default)]
pub struct MomentReport {
    /// Reconciles asked for (one per stack).
    pub reconciles: usize,
    /// Executions it took them to converge (≥ `reconciles`).
    pub runs: usize,
    /// The most executions one stack needed.
    pub most_runs: usize,
    /// Executions that ended failed.
    pub failed_runs: usize,
    pub elapsed: Duration,
}

/// The whole life of a set of stacks.
#[derive(Debug, Default)]
pub struct LifeReport {
    pub moments: BTreeMap<Moment, MomentReport>,
    /// Retries made by the state machine (a Task's Retry), over all runs.
    pub machine_retries: usize,
    /// Why runs failed, by error: each run that did not converge.
    pub failures: BTreeMap<String, usize>,
    /// Stacks that did not converge within the runs allowed.
    pub stuck: Vec<String>,
}

/// Stacks on one repository, reconciled through a harness.
#[derive(Debug)]
pub struct Life<'a> {
    pub harness: &'a Harness<SdkCloudFormationFactory>,
    /// The registry straight to the emulator: what is checked, never faulted.
    pub direct: Registry,
    pub repo: GitRepo,
    pub names: Vec<String>,
    /// Stacks reconciled at once.
    pub parallel: usize,
    /// Executions allowed for one reconcile before the stack counts as stuck.
    pub max_runs: usize,
}

/// A queue's template; `retention` makes each version differ.
pub fn queue_template(retention: u32) -> Vec<u8> {
    format!(
        "Resources:\n  Queue:\n    Type: AWS::SQS::Queue\n    Properties:\n      MessageRetentionPeriod: {retention}\n"
    )
    .into_bytes()
}

impl Life<'_> {
    /// Creates, updates, leaves alone and deletes every stack; each moment
    /// ends when every stack converged (or ran out of runs).
    pub async fn run(&self) -> LifeReport {
        let mut report = LifeReport::default();
        let entries: String = self
            .names
            .iter()
            .map(|n| {
                format!(
                    "  - name: {n}\n    source: {{git: '{}', path: {n}.yaml}}\n    destroyOnDelete: true\n",
                    self.repo.file_url()
                )
            })
            .collect();
        self.commit(345_600, "v1");
        apply(&self.direct, &format!("stacks:\n{entries}")).await;
        self.moment(Moment::Create, &mut report).await;
        self.commit(86_400, "v2");
        self.moment(Moment::Update, &mut report).await;
        self.moment(Moment::NoOp, &mut report).await;
        apply(&self.direct, "stacks: []\n").await;
        self.moment(Moment::Delete, &mut report).await;
        let events = std::mem::take(&mut *self.harness.events.lock().expect("events"));
        if std::env::var_os("STACKSYNC_RELIABILITY_VERBOSE").is_some() {
            for e in &events {
                if let Progress::TaskFailed {
                    name,
                    error,
                    retry_in,
                } = e
                {
                    eprintln!("TASKFAILED {name} {error} retry={retry_in:?}");
                }
                if let Progress::Caught { name, error, .. } = e {
                    eprintln!("CAUGHT {name} {error}");
                }
            }
        }
        report.machine_retries = events
            .iter()
            .filter(|e| {
                matches!(
                    e,
                    Progress::TaskFailed {
                        retry_in: Some(_),
                        ..
                    }
                )
            })
            .count();
        report
    }

    fn commit(&self, retention: u32, message: &str) {
        let template = queue_template(retention);
        let files: Vec<(String, &[u8])> = self
            .names
            .iter()
            .map(|n| (format!("{n}.yaml"), template.as_slice()))
            .collect();
        let refs: Vec<(&str, &[u8])> = files.iter().map(|(p, t)| (p.as_str(), *t)).collect();
        self.repo.commit(&refs, message);
    }

    async fn moment(&self, moment: Moment, report: &mut LifeReport) {
        let started = Instant::now();
        let head = self.repo.head();
        let gate = Semaphore::new(self.parallel.max(1));
        let results = futures_util::future::join_all(self.names.iter().map(|name| {
            let gate = &gate;
            let head = head.as_str();
            async move {
                let _slot = gate.acquire().await.expect("semaphore");
                self.converge(name, moment, head).await
            }
        }))
        .await;
        let entry = report.moments.entry(moment).or_default();
        for (name, runs, failures) in results {
            entry.reconciles += 1;
            entry.runs += runs;
            entry.most_runs = entry.most_runs.max(runs);
            entry.failed_runs += failures.len();
            for failure in failures {
                *report.failures.entry(failure).or_default() += 1;
            }
            if runs > self.max_runs {
                report.stuck.push(format!("{name} ({moment:?})"));
            }
        }
        entry.elapsed = started.elapsed();
    }

    /// Runs `name` until it is where `moment` wants it: the runs it took
    /// (more than `max_runs`: never), and why the failed ones failed.
    async fn converge(
        &self,
        name: &str,
        moment: Moment,
        head: &str,
    ) -> (String, usize, Vec<String>) {
        let mut failures = Vec::new();
        for run in 1..=self.max_runs {
            let outcome = self.harness.reconcile(name).await;
            let entry = self.direct.get(name).await.ok().flatten();
            let converged = match (&entry, moment) {
                (None, Moment::Delete) => true,
                (Some(e), Moment::Create | Moment::Update | Moment::NoOp) => {
                    e.status.phase == Phase::Ready
                        && e.status.applied.last_applied_revision.as_deref() == Some(head)
                        && e.lease.is_none()
                }
                _ => false,
            };
            if std::env::var_os("STACKSYNC_RELIABILITY_VERBOSE").is_some() {
                let shown = entry.as_ref().map(|e| {
                    (
                        e.status.phase,
                        e.status.message.clone(),
                        e.status.applied.last_applied_revision.clone(),
                    )
                });
                eprintln!(
                    "RUN {name} {moment:?} {run}: {outcome:?} converged={converged} {shown:?}"
                );
            }
            if !converged || matches!(outcome, Outcome::Failed(_)) {
                let status = entry.as_ref().map(|e| {
                    let reason = e.status.stall_reason.map(|r| format!("{r:?}"));
                    let message = e.status.message.clone().unwrap_or_default();
                    (
                        reason.unwrap_or_else(|| format!("{:?}", e.status.phase)),
                        message,
                    )
                });
                let (reason, message) = status.unwrap_or_default();
                let key = match &outcome {
                    Outcome::Failed(error) => format!("{} ({reason})", error.name),
                    Outcome::Succeeded(_) => format!("ended, not converged ({reason})"),
                };
                if std::env::var_os("STACKSYNC_RELIABILITY_VERBOSE").is_some() {
                    eprintln!("{name} {moment:?} run {run}: {key}: {message}");
                }
                failures.push(key);
            }
            if converged {
                return (name.to_owned(), run, failures);
            }
        }
        (name.to_owned(), self.max_runs + 1, failures)
    }
}

/// The change sets the emulator executed, by stack, in order: each call that
/// reached it and was answered 200, whether or not the answer reached the
/// caller (a change set executed twice is there twice).
pub fn executed_change_sets(log: &[Exchange]) -> BTreeMap<String, Vec<String>> {
    let mut executed: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for e in log {
        if e.action == "ExecuteChangeSet" && e.status == Some(200) && !e.replayed {
            let stack = e.stack.clone().unwrap_or_default();
            executed
                .entry(stack)
                .or_default()
                .push(e.change_set.clone().unwrap_or_default());
        }
    }
    executed
}

/// Calls the SDK sent again after their answer was lost, answered from
/// their idempotency token (as AWS does) rather than run twice.
pub fn replayed_calls(log: &[Exchange]) -> usize {
    log.iter().filter(|e| e.replayed).count()
}

/// What a storm of concurrent runs left.
#[derive(Debug, Default)]
pub struct StormReport {
    pub runs: usize,
    /// Runs that ended succeeded / failed.
    pub succeeded: usize,
    pub failed: usize,
    /// Stacks not Ready at their head, or with a lease left.
    pub wrong: Vec<String>,
    pub elapsed: Duration,
}

/// `runs_each` concurrent runs of every stack of `names` (registered on
/// `repo`, one template each, all reconciled at once): each must end Ready
/// at the repository's head, its lease given back.
pub async fn storm(
    harness: &Harness<SdkCloudFormationFactory>,
    direct: &Registry,
    repo: &GitRepo,
    names: &[String],
    runs_each: usize,
) -> StormReport {
    let started = Instant::now();
    let head = repo.head();
    let outcomes = futures_util::future::join_all(
        names
            .iter()
            .flat_map(|n| std::iter::repeat_n(n, runs_each))
            .map(|name| harness.reconcile(name)),
    )
    .await;
    let mut report = StormReport {
        runs: outcomes.len(),
        ..StormReport::default()
    };
    for outcome in &outcomes {
        match outcome {
            Outcome::Succeeded(_) => report.succeeded += 1,
            Outcome::Failed(_) => report.failed += 1,
        }
    }
    for name in names {
        let entry = direct.get(name).await.ok().flatten();
        let fine = entry.as_ref().is_some_and(|e| {
            e.status.phase == Phase::Ready
                && e.status.applied.last_applied_revision.as_deref() == Some(head.as_str())
                && e.lease.is_none()
        });
        if !fine {
            let shown = entry.map(|e| (e.status.phase, e.status.message, e.lease.map(|l| l.owner)));
            report.wrong.push(format!("{name}: {shown:?}"));
        }
    }
    report.elapsed = started.elapsed();
    report
}

/// `count` stack names no other test uses, starting `prefix`.
pub fn stack_names(prefix: &str, count: usize) -> Vec<String> {
    (0..count)
        .map(|i| crate::unique_name(&format!("{prefix}{i}")).replace('-', "x"))
        .collect()
}

/// Applies a stacks file (with prune) straight to the registry: what the
/// CLI does, kept out of the faults (the emulator ignores DynamoDB's
/// `ClientRequestToken`, so a transaction retried after a lost answer would
/// conflict with itself there, where AWS answers it from the first).
pub async fn apply(direct: &Registry, yaml: &str) {
    let specs = parse_manifest("test.yaml", yaml).expect("valid stacks file");
    let current = direct.list().await.expect("list");
    let plan = plan_apply(&specs, &current, true).expect("no conflicts");
    direct.apply(&plan, now_millis()).await.expect("applied");
}

/// Registers `names` on `repo`, one template each (`<name>.yaml`), not
/// reconciled yet.
pub async fn register(direct: &Registry, repo: &GitRepo, names: &[String]) {
    let template = queue_template(30);
    let files: Vec<(String, &[u8])> = names
        .iter()
        .map(|n| (format!("{n}.yaml"), template.as_slice()))
        .collect();
    let refs: Vec<(&str, &[u8])> = files.iter().map(|(p, t)| (p.as_str(), *t)).collect();
    repo.commit(&refs, "v1");
    let entries: String = names
        .iter()
        .map(|n| {
            format!(
                "  - name: {n}\n    source: {{git: '{}', path: {n}.yaml}}\n",
                repo.file_url()
            )
        })
        .collect();
    apply(direct, &format!("stacks:\n{entries}")).await;
}
