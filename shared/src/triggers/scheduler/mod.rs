//! The scheduler: on every run (an EventBridge schedule), starts the
//! reconciles that something asks for, and nothing else.
//!
//! 1. **Due entries**: the scheduler index (`nextReconcileAt` ≤ now, a query
//!    per shard, oldest first). An entry is due because it is new, its spec
//!    changed, it was removed or resumed, its retry interval after a failure
//!    passed, its full-reconcile `interval` passed, or a CloudFormation event
//!    marked it. Each is started ([`judge::judge_due`]), unless a run holds it
//!    or it is suspended (then only its due time moves).
//! 2. **Sources**: one `source#` item per normal URL and ref, with the head
//!    recorded last. Each distinct source is listed once (`ls-remote`, in
//!    parallel). Where the head moved, the source's followers are read through
//!    the source index and those not yet tried at the new head are started
//!    ([`judge::judge_follower`]); the head is recorded once every follower is
//!    started or settled. A source with no follower left is forgotten.
//!
//! At most `max_starts` executions are started per run, most urgent first;
//! the rest stay due (their `nextReconcileAt` is not moved, the source head
//! is not recorded), so the next run starts them: nothing is dropped, and
//! CloudFormation never gets a flood. Execution names are deterministic
//! (stack and due time, or stack and head), so a run retried after a crash
//! cannot start anything twice.
//!
//! An idle run — nothing due, no source moved — makes five DynamoDB queries
//! and one ref listing per source, and no write, no start, no CloudFormation
//! call.

pub mod judge;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde::Serialize;
use tracing::{info, warn};

use crate::clock::EpochMillis;
use crate::ports::{SourceFetcher, Starter, Trigger, TriggerKind};
use crate::registry::{Entries, LEASE_TTL, RegistryError, Schedule, SourceRecord, StackEntry};
use crate::source::source_key;
use crate::spec::SourceKind;
use crate::triggers::TriggerError;
use judge::{Candidate, DueAction, FollowerAction, Reason, choose, judge_due, judge_follower};

/// How the scheduler paces itself.
#[derive(Debug, Clone)]
pub struct Config {
    /// Most executions started per run (`STACKSYNC_MAX_STARTS`).
    pub max_starts: usize,
    /// Most due entries read per shard per run. All due entries are read
    /// (up to this bound) so that the most urgent are chosen among all of
    /// them: a spec change is never starved behind a backlog of re-checks.
    pub due_reads_per_shard: usize,
    /// How far a started entry's due time moves, so the next run does not
    /// start it again before the run has taken the lease; the run's own end
    /// moves it for real.
    pub start_guard: Duration,
    /// Sources listed at once.
    pub probe_concurrency: usize,
    /// How often the followers of a source that did not move are listed (to
    /// forget sources nobody follows any more).
    pub followers_check_every: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            max_starts: 50,
            due_reads_per_shard: 5000,
            start_guard: LEASE_TTL,
            probe_concurrency: 8,
            followers_check_every: Duration::from_secs(24 * 3600),
        }
    }
}

/// What one run did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// Due entries read.
    pub due: usize,
    /// Distinct sources listed.
    pub sources_checked: usize,
    /// Sources whose head moved (or that were new, or whose followers were
    /// due for a check).
    pub sources_examined: usize,
    /// Executions started, by stack.
    pub started: Vec<StartedRun>,
    /// Starts that found their execution already there (a retried run).
    pub already_started: usize,
    /// Due entries whose due time was moved without a start.
    pub postponed: usize,
    /// Candidates left for the next run (the cap, or a failed start).
    pub deferred: usize,
    /// Followers skipped because a run holds them.
    pub busy: usize,
    /// Source heads recorded.
    pub heads_recorded: usize,
    /// Source items forgotten (no follower left).
    pub sources_forgotten: usize,
    /// What went wrong, per source or stack; the run itself went on.
    pub errors: Vec<String>,
}

/// One execution started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StartedRun {
    pub stack: String,
    pub reason: Reason,
    pub execution: String,
}

/// A source looked at in this run.
#[derive(Debug)]
struct Examined {
    record: SourceRecord,
    head: String,
    /// Nothing keeps the head from being recorded (every follower started
    /// or settled).
    complete: bool,
    followers: Vec<String>,
}

/// The scheduler of one installation.
#[derive(Debug, Clone)]
pub struct Scheduler<R, X, S> {
    pub registry: R,
    pub starter: X,
    pub sources: S,
    pub config: Config,
}

/// The due entries to start, and the ones whose due time only moves
/// (suspended, or held by a run): (stack, from, to).
fn judge_due_entries(
    due: &[StackEntry],
    now: EpochMillis,
) -> (Vec<Candidate>, Vec<(String, EpochMillis, EpochMillis)>) {
    let mut candidates = Vec::new();
    let mut postpone = Vec::new();
    for entry in due {
        match judge_due(entry, now) {
            DueAction::Start(c) => candidates.push(c),
            DueAction::Postpone {
                stack, from, to, ..
            } => postpone.push((stack, from, to)),
        }
    }
    (candidates, postpone)
}

impl<R, X, S> Scheduler<R, X, S>
where
    R: Entries + Schedule,
    X: Starter,
    S: SourceFetcher + Clone + 'static,
{
    /// One run at `now`. Fails only when the registry cannot be read; every
    /// other problem (a source that does not answer, a start refused) is in
    /// [`Report::errors`] and leaves the affected work due for the next run.
    pub async fn run(&self, now: EpochMillis) -> Result<Report, RegistryError> {
        let mut report = Report::default();
        let due = self
            .registry
            .due(now, self.config.due_reads_per_shard)
            .await?;
        report.due = due.len();
        let mut records = self.registry.sources().await?;
        self.add_new_sources(&due, &mut records, &mut report).await;
        // Due entries first: they are started whatever their source says.
        let (mut candidates, postpone) = judge_due_entries(&due, now);
        let due_names: BTreeSet<String> = candidates.iter().map(|c| c.stack.clone()).collect();
        // Then every distinct source, listed once.
        let examined = self
            .examine_sources(records, now, &due_names, &mut candidates, &mut report)
            .await;
        let unfinished = self.start_chosen(candidates, now, &mut report).await;
        for (stack, from, to) in postpone {
            match self.registry.move_due(&stack, from, to).await {
                Ok(true) => report.postponed += 1,
                Ok(false) => {}
                Err(e) => report.errors.push(format!("{stack}: {e}")),
            }
        }
        for source in examined {
            self.settle_source(source, &unfinished, now, &mut report)
                .await;
        }
        self.log(&report);
        Ok(report)
    }

    /// Lists every source once; reads the followers of those whose head
    /// moved (or whose followers are due for a check) and adds the ones to
    /// start to `candidates`.
    async fn examine_sources(
        &self,
        records: Vec<SourceRecord>,
        now: EpochMillis,
        due_names: &BTreeSet<String>,
        candidates: &mut Vec<Candidate>,
        report: &mut Report,
    ) -> Vec<Examined> {
        let heads = self.probe(&records, report).await;
        let check_every =
            i64::try_from(self.config.followers_check_every.as_millis()).unwrap_or(i64::MAX);
        let mut examined = Vec::new();
        for record in records {
            let Some(head) = heads.get(&record.key).cloned() else {
                continue;
            };
            let moved = record.head.as_deref() != Some(head.as_str());
            let check_due = record
                .followers_checked_at
                .is_none_or(|at| now.saturating_sub(at) >= check_every);
            if !moved && !check_due {
                continue;
            }
            report.sources_examined += 1;
            let followers = match self.registry.by_source(&record.key).await {
                Ok(followers) => followers,
                Err(e) => {
                    // This source waits for the next run; the others go on.
                    report.errors.push(format!("source {}: {e}", record.key));
                    continue;
                }
            };
            let mut complete = true;
            for entry in &followers {
                match judge_follower(entry, &head, now, due_names) {
                    FollowerAction::Start(c) => candidates.push(c),
                    FollowerAction::Settled => {}
                    FollowerAction::Busy => {
                        report.busy += 1;
                        complete = false;
                    }
                }
            }
            examined.push(Examined {
                followers: followers.iter().map(|e| e.name.clone()).collect(),
                record,
                head,
                complete,
            });
        }
        examined
    }

    /// Starts the most urgent candidates, up to the cap; stops at the first
    /// failed start (throttled or refused: the rest wait for the next run).
    /// Returns the stacks left for later.
    async fn start_chosen(
        &self,
        candidates: Vec<Candidate>,
        now: EpochMillis,
        report: &mut Report,
    ) -> BTreeSet<String> {
        let (now_starts, deferred) = choose(candidates, self.config.max_starts);
        let mut unfinished: BTreeSet<String> = deferred.iter().map(|c| c.stack.clone()).collect();
        report.deferred = deferred.len();
        let mut stopped = false;
        for candidate in now_starts {
            if !stopped {
                match self.start(&candidate, now, report).await {
                    Ok(()) => continue,
                    Err(e) => {
                        warn!(stack = %candidate.stack, error = %e, "start failed; the rest wait for the next run");
                        report.errors.push(format!("{}: {e}", candidate.stack));
                        stopped = true;
                    }
                }
            }
            report.deferred += 1;
            unfinished.insert(candidate.stack.clone());
        }
        unfinished
    }

    fn log(&self, report: &Report) {
        if report.deferred > 0 {
            warn!(
                deferred = report.deferred,
                cap = self.config.max_starts,
                "more reconciles are asked for than one run may start; the rest wait for the next runs \
                 (if this lasts, raise MaxStartsPerRun or the stacks' interval)"
            );
        }
        info!(
            due = report.due,
            sources = report.sources_checked,
            examined = report.sources_examined,
            started = report.started.len(),
            deferred = report.deferred,
            errors = report.errors.len(),
            "scheduler run"
        );
    }

    /// Source items for the Git sources of due entries that have none yet
    /// (new stacks, or stacks registered before this scheduler).
    async fn add_new_sources(
        &self,
        due: &[StackEntry],
        records: &mut Vec<SourceRecord>,
        report: &mut Report,
    ) {
        let known: BTreeSet<String> = records.iter().map(|r| r.key.clone()).collect();
        let mut added = BTreeSet::new();
        for entry in due {
            let spec = &entry.spec;
            if spec.source.kind() != Some(SourceKind::Git) || entry.deletion_requested_at.is_some()
            {
                continue;
            }
            let key = source_key(spec.source.url(), spec.effective_ref());
            if known.contains(&key) || !added.insert(key.clone()) {
                continue;
            }
            let url = spec.source.url().to_owned();
            let reference = spec.effective_ref().unwrap_or("main").to_owned();
            match self.registry.add_source(&key, &url, &reference).await {
                Ok(_) => records.push(SourceRecord {
                    key,
                    url,
                    reference,
                    head: None,
                    followers_checked_at: None,
                }),
                Err(e) => report.errors.push(format!("source {key}: {e}")),
            }
        }
    }

    /// Lists every source once, `probe_concurrency` at a time: key → head.
    async fn probe(
        &self,
        records: &[SourceRecord],
        report: &mut Report,
    ) -> BTreeMap<String, String> {
        let mut heads = BTreeMap::new();
        let mut pending = records.iter();
        let mut tasks = tokio::task::JoinSet::new();
        let limit = self.config.probe_concurrency.max(1);
        loop {
            while tasks.len() < limit
                && let Some(record) = pending.next()
            {
                let sources = self.sources.clone();
                let (key, url, reference) = (
                    record.key.clone(),
                    record.url.clone(),
                    record.reference.clone(),
                );
                tasks.spawn(async move {
                    let head = sources.resolve(&url, &reference).await;
                    (key, head)
                });
            }
            let Some(done) = tasks.join_next().await else {
                break;
            };
            report.sources_checked += 1;
            match done {
                Ok((key, Ok(head))) => {
                    heads.insert(key, head);
                }
                Ok((key, Err(e))) => {
                    warn!(source = %key, error = %e, "source not listed");
                    report.errors.push(format!("source {key}: {e}"));
                }
                Err(e) => report.errors.push(format!("source listing: {e}")),
            }
        }
        heads
    }

    /// Starts one candidate; a due entry's due time then moves past the guard.
    async fn start(
        &self,
        candidate: &Candidate,
        now: EpochMillis,
        report: &mut Report,
    ) -> Result<(), TriggerError> {
        let trigger = Trigger {
            kind: TriggerKind::Schedule,
            revision: candidate.revision.clone(),
        };
        let started = self
            .starter
            .start(&candidate.stack, &trigger, &candidate.key)
            .await?;
        if started.new {
            info!(stack = %candidate.stack, reason = candidate.reason.as_str(), execution = %started.execution_name, "started");
            report.started.push(StartedRun {
                stack: candidate.stack.clone(),
                reason: candidate.reason,
                execution: started.execution_name,
            });
        } else {
            report.already_started += 1;
        }
        if let Some(from) = candidate.due_at {
            let guard = judge::after(now, self.config.start_guard.as_secs());
            // A run that already wrote its own due time wins (the condition).
            if let Err(e) = self.registry.move_due(&candidate.stack, from, guard).await {
                report.errors.push(format!("{}: {e}", candidate.stack));
            }
        }
        Ok(())
    }

    /// Records the new head of a source whose followers were all dealt
    /// with, or forgets a source nobody follows.
    async fn settle_source(
        &self,
        source: Examined,
        unfinished: &BTreeSet<String>,
        now: EpochMillis,
        report: &mut Report,
    ) {
        let key = &source.record.key;
        let seen = source.record.head.as_deref();
        let result = if source.followers.is_empty() {
            self.registry
                .forget_source(key, seen)
                .await
                .map(|gone| report.sources_forgotten += usize::from(gone))
        } else if source.complete && !source.followers.iter().any(|f| unfinished.contains(f)) {
            self.registry
                .record_source_head(key, seen, &source.head, now)
                .await
                .map(|done| report.heads_recorded += usize::from(done))
        } else {
            Ok(())
        };
        if let Err(e) = result {
            report.errors.push(format!("source {key}: {e}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fakes::{Failing, MemorySources, RecordingStarter};
    use crate::ports::PortError;
    use crate::registry::memory::MemoryRegistry;
    use crate::registry::sample_entry;
    use crate::status::{Phase, Status, Timestamp};

    const NOW: EpochMillis = 1_800_000_000_000;
    const URL: &str = "https://git.example/infra.git";

    /// `names` follow URL's `main`, `Ready` at `head`, due in an hour; the
    /// source is recorded at `head`.
    async fn scheduler(
        names: &[&str],
        head: &str,
    ) -> Scheduler<MemoryRegistry, Failing<RecordingStarter>, MemorySources> {
        let registry = MemoryRegistry::new();
        for name in names {
            let mut e = sample_entry(name, Status::default());
            e.status.observed_spec_version = 1;
            e.status.last_attempted_revision = Some(head.to_owned());
            e.status.next_reconcile_at = Some(Timestamp(NOW + 3_600_000));
            registry.insert(e);
        }
        let key = source_key(URL, Some("main"));
        registry.add_source(&key, URL, "main").await.unwrap();
        registry
            .record_source_head(&key, None, head, NOW - 1)
            .await
            .unwrap();
        let sources = MemorySources::new();
        sources.commit(URL, "main", head, &[]);
        Scheduler {
            registry,
            starter: Failing::new(RecordingStarter::new()),
            sources,
            config: Config {
                max_starts: 2,
                ..Config::default()
            },
        }
    }

    #[tokio::test]
    async fn an_idle_run_starts_nothing_and_writes_nothing() {
        let s = scheduler(&["a", "b"], "h1").await;
        let before = s.registry.entry("a");
        let report = s.run(NOW).await.unwrap();
        assert_eq!(
            (report.due, report.sources_checked, report.sources_examined),
            (0, 1, 0)
        );
        assert!(
            report.started.is_empty() && report.errors.is_empty(),
            "{report:?}"
        );
        assert_eq!(s.registry.entry("a"), before);
    }

    #[tokio::test]
    async fn a_moved_source_starts_its_followers_and_records_its_head() {
        let s = scheduler(&["a", "b"], "h1").await;
        s.sources.commit(URL, "main", "h2", &[]);
        let report = s.run(NOW).await.unwrap();
        let started: Vec<(&str, Reason)> = report
            .started
            .iter()
            .map(|r| (r.stack.as_str(), r.reason))
            .collect();
        assert_eq!(started, [("a", Reason::Pushed), ("b", Reason::Pushed)]);
        assert_eq!(report.heads_recorded, 1);
        let source = s.registry.source(&source_key(URL, Some("main"))).unwrap();
        assert_eq!(source.head.as_deref(), Some("h2"));
        assert!(
            s.run(NOW + 1).await.unwrap().started.is_empty(),
            "the next run is idle"
        );
    }

    #[tokio::test]
    async fn the_cap_and_a_refused_start_leave_the_rest_due_and_nothing_is_lost() {
        let s = scheduler(&["a", "b", "c"], "h1").await;
        for name in ["a", "b", "c"] {
            let mut e = s.registry.entry(name).unwrap();
            e.status.phase = Phase::Failed;
            e.status.next_reconcile_at = Some(Timestamp(NOW - 10));
            s.registry.insert(e);
        }
        s.starter.fail(
            "StartExecution",
            2,
            PortError::Transient("throttled".into()),
        );
        let first = s.run(NOW).await.unwrap();
        assert_eq!(first.started.len(), 1, "{first:?}");
        assert_eq!(first.deferred, 2, "one over the cap, one refused");
        assert_eq!(first.errors.len(), 1);
        let mut all = s.starter.inner.stacks();
        for later in 1..5 {
            s.run(NOW + later).await.unwrap();
            all = s.starter.inner.stacks();
        }
        all.sort();
        assert_eq!(all, ["a", "b", "c"], "each started once in the end");
    }

    #[tokio::test]
    async fn a_registry_that_cannot_be_read_fails_the_run() {
        let s = scheduler(&["a"], "h1").await;
        let failing = Scheduler {
            registry: Failing::new(s.registry),
            starter: s.starter,
            sources: s.sources,
            config: s.config,
        };
        failing
            .registry
            .fail("Query", 1, PortError::Transient("throttled".into()));
        assert!(failing.run(NOW).await.is_err());
    }
}
