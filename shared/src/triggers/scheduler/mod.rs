//! The scheduler: on every run (an EventBridge schedule), starts the
//! reconciles that something asks for, and nothing else.
//!
//! 0. **Registry sources** ([`crate::triggers::registry_source`]): each is
//!    listed with the template sources (one `ls-remote` per distinct
//!    repository and ref); one whose ref moved (or whose plan was left
//!    unfinished) is read and applied, so the entries a commit adds,
//!    changes or prunes are due before the queue is read, and started by
//!    this run. One whose ref has not moved costs no fetch and no write.
//!    Then the **fleets** ([`crate::triggers::fleets`]) whose units are due
//!    to be read again are read, and their targets' entries written.
//! 1. **Due entries**: the scheduler index (`nextReconcileAt` ≤ now, a query
//!    per shard, oldest first). An entry is due because it is new, its spec
//!    changed, it was removed or resumed, its retry interval after a failure
//!    passed, a CloudFormation event marked it, or a run stopped before its
//!    end. Each is started ([`judge::judge_due`]), unless a run holds it or
//!    it is suspended (then only its due time moves). A stack that is fine
//!    is in no queue at all.
//! 2. **Sources**: one `source#` item per normal URL and ref, with the head
//!    recorded last. Each distinct source is listed once (`ls-remote`, in
//!    parallel). Where the head moved, the source's followers are read through
//!    the source index and those not yet tried at the new head are started
//!    ([`judge::judge_follower`]); the head is recorded once every follower is
//!    started or settled. A source with no follower left is forgotten.
//! 3. **Health** ([`health`]): every stack, every run, compared with one
//!    listing per account and region; only a stack changed outside
//!    stacksync is started ([`judge::judge_watched`]).
//!
//! (Drift detection runs in a function of its own, with the read policy it
//! needs: [`crate::triggers::drift`]; a drift to revert makes its stack due
//! here.)
//!
//! At most `max_starts` executions are started per run, most urgent first;
//! the rest stay due (their `nextReconcileAt` is not moved, the source head
//! is not recorded, a changed stack is found again), so the next run starts
//! them: nothing is dropped, and CloudFormation never gets a flood. A stack
//! found fine is never a candidate, so it never takes a start from real work.
//! Execution names are deterministic (stack and due time, head, or change
//! seen), so a run retried after a crash cannot start anything twice.
//!
//! An idle run — nothing due, no source moved, every stack fine — makes a
//! query per shard of the due and watch indexes, one for the sources and
//! one for the registry sources, one for the fleets due (eleven in all; more only past 1 MB of an
//! index), one ref listing per source and one `ListStacks` per account and
//! region, and no write, no fetch, no start, no per-stack call.

mod fleets;
pub mod health;
pub mod judge;
mod registry_sources;
mod timing;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use futures_util::stream::{self, StreamExt};
use serde::Serialize;
use tracing::{info, warn};

use crate::clock::EpochMillis;
use crate::ports::{
    CloudFormationFactory, SourceFetcher, SourceLocation, Starter, Trigger, TriggerKind,
};
use crate::registry::{Due, Entries, LEASE_TTL, RegistryError, Schedule, SourceRecord, StackEntry};
use crate::seen::Change;
use crate::source::source_key;
use crate::triggers::TriggerError;
use judge::{Candidate, DueAction, FollowerAction, Reason, choose, judge_due, judge_follower};
pub use timing::Timing;

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
    /// How often the scheduler runs, when known (`STACKSYNC_SCHEDULE`): a
    /// stack whose `interval` is shorter is warned about.
    pub period: Option<Duration>,
    /// Where a registry source's failures are told (`Registry Source Failed`).
    pub notices: crate::ports::Notifier,
    /// What registry sources are applied under (region, policy, name).
    pub installation: crate::triggers::registry_source::Installation,
    /// Where fleets' organizational units are read (none: they cannot be).
    pub organizations: Option<std::sync::Arc<dyn crate::ports::Organizations>>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            max_starts: 50,
            due_reads_per_shard: 5000,
            start_guard: LEASE_TTL,
            probe_concurrency: 8,
            followers_check_every: Duration::from_secs(24 * 3600),
            period: None,
            notices: crate::ports::Notifier::none(),
            installation: Default::default(),
            organizations: None,
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
    /// Registry sources listed.
    pub registry_sources: usize,
    /// What reading each registry source whose ref moved did (applied,
    /// held, failed), by name: an idle source is not in it.
    pub registry_source_outcomes: Vec<(String, crate::triggers::registry_source::Outcome)>,
    /// What reading each due fleet's units did, by name.
    pub fleets_read: Vec<(String, crate::triggers::fleets::Reread)>,
    /// Source items forgotten (no follower left).
    pub sources_forgotten: usize,
    /// Due items that could not be read (their keys): skipped, never
    /// blocking the others; `stacksync status` lists them.
    pub unreadable: Vec<String>,
    /// Stacks read for the health check.
    pub stacks_watched: usize,
    /// Stacks the health check found as their last run left them.
    pub stacks_fine: usize,
    /// Account-and-region listings made (`ListStacks`, every page).
    pub listings: usize,
    /// Stacks not checked because their account and region could not be
    /// listed (they are checked on the next run).
    pub stacks_unchecked: usize,
    /// Fine stacks whose `interval` is shorter than the scheduler's period.
    pub interval_shorter_than_period: usize,
    /// What went wrong, per source or stack; the run itself went on.
    pub errors: Vec<String>,
    /// Where the run's time went.
    #[serde(skip)]
    pub timing: Timing,
}

/// One execution started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StartedRun {
    pub stack: String,
    pub reason: Reason,
    /// What the health check found, for [`Reason::Changed`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change: Option<Change>,
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
pub struct Scheduler<R, X, S, F> {
    pub registry: R,
    pub starter: X,
    pub sources: S,
    /// CloudFormation, per account and region, for the health check.
    pub cloudformation: F,
    pub config: Config,
}

/// A due entry whose due time only moves: (stack, from, to; `None`: out of
/// the queue).
type Postponed = (String, EpochMillis, Option<EpochMillis>);

/// The due entries to start, and the ones whose due time only moves
/// (suspended, or held by a run).
fn judge_due_entries(due: &[StackEntry], now: EpochMillis) -> (Vec<Candidate>, Vec<Postponed>) {
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

impl<R, X, S, F> Scheduler<R, X, S, F>
where
    R: Entries
        + Schedule
        + crate::registry::Specs
        + crate::registry::RegistrySources
        + crate::registry::Fleets,
    X: Starter,
    S: SourceFetcher + Clone + 'static,
    F: CloudFormationFactory,
{
    /// One run at `now`. Fails only when the registry cannot be read; every
    /// other problem (a source that does not answer, a start refused) is in
    /// [`Report::errors`] and leaves the affected work due for the next run.
    pub async fn run(&self, now: EpochMillis) -> Result<Report, RegistryError> {
        let mut report = Report::default();
        let started_at = Instant::now();
        // Registry sources first: the entries a commit adds or changes are
        // written (and due) before the queue is read, so this run starts them.
        let (mut heads, listed) = self.apply_registry_sources(now, &mut report).await?;
        self.reread_fleets(now, &mut report).await?;
        let Due {
            entries: due,
            unreadable,
        } = self
            .registry
            .due(now, self.config.due_reads_per_shard)
            .await?;
        report.due = due.len();
        // Skipped (each logged by the registry); the others go on.
        report.unreadable = unreadable.into_iter().map(|u| u.key).collect();
        // The sources listed with the registry sources (each once a run,
        // answered or not); those added below are listed after.
        let probed: BTreeSet<String> = listed.iter().flatten().map(|r| r.key.clone()).collect();
        let mut records = match listed {
            Some(records) => records,
            None => self.registry.sources().await?,
        };
        report.timing.queue = started_at.elapsed();
        let at = Instant::now();
        self.add_new_sources(&due, &mut records, &mut report).await;
        // Due entries first: they are started whatever their source says.
        let (mut candidates, postpone) = judge_due_entries(&due, now);
        let due_names: BTreeSet<String> = candidates.iter().map(|c| c.stack.clone()).collect();
        // Then every distinct source, listed once.
        let unlisted: Vec<SourceRecord> = records
            .iter()
            .filter(|r| !probed.contains(&r.key))
            .cloned()
            .collect();
        heads.extend(self.probe(&unlisted, &mut report).await);
        let examined = self
            .examine_sources(
                records,
                &heads,
                now,
                &due_names,
                &mut candidates,
                &mut report,
            )
            .await;
        report.timing.sources = at.elapsed();
        // Then every stack's health, against one listing per account and region.
        let taken: BTreeSet<String> = candidates.iter().map(|c| c.stack.clone()).collect();
        self.check_health(now, &taken, &mut candidates, &mut report)
            .await?;
        let at = Instant::now();
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
        report.timing.starting = at.elapsed();
        report.timing.total = started_at.elapsed();
        self.log(&report);
        Ok(report)
    }

    /// Lists every source once; reads the followers of those whose head
    /// moved (or whose followers are due for a check) and adds the ones to
    /// start to `candidates`.
    async fn examine_sources(
        &self,
        records: Vec<SourceRecord>,
        heads: &BTreeMap<String, String>,
        now: EpochMillis,
        due_names: &BTreeSet<String>,
        candidates: &mut Vec<Candidate>,
        report: &mut Report,
    ) -> Vec<Examined> {
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
            let followers = match self.registry.followers(&record.key).await {
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
            stacks = report.stacks_watched,
            fine = report.stacks_fine,
            listings = report.listings,
            unchecked = report.stacks_unchecked,
            started = report.started.len(),
            deferred = report.deferred,
            errors = report.errors.len(),
            unreadable = report.unreadable.len(),
            "scheduler run"
        );
    }

    /// Source items for the sources of due entries that have none yet (new
    /// stacks, or stacks registered before this scheduler), and the secret
    /// a source is listed with when a follower's spec changed it.
    async fn add_new_sources(
        &self,
        due: &[StackEntry],
        records: &mut Vec<SourceRecord>,
        report: &mut Report,
    ) {
        let mut seen = BTreeSet::new();
        for entry in due {
            let spec = &entry.spec;
            if spec.source.kind().is_none() || entry.deletion_requested_at.is_some() {
                continue;
            }
            let key = source_key(spec.source.url(), spec.effective_ref());
            if !seen.insert(key.clone()) {
                continue;
            }
            let credentials = spec.source.credentials_secret.clone();
            if let Some(known) = records.iter_mut().find(|r| r.key == key) {
                if known.credentials != credentials {
                    match self
                        .registry
                        .set_source_credentials(&key, credentials.as_deref())
                        .await
                    {
                        Ok(_) => known.credentials = credentials,
                        Err(e) => report.errors.push(format!("source {key}: {e}")),
                    }
                }
                continue;
            }
            let url = spec.source.url().to_owned();
            let reference = spec.effective_ref().unwrap_or_default().to_owned();
            match self
                .registry
                .add_source(&key, &url, &reference, credentials.as_deref())
                .await
            {
                Ok(_) => records.push(SourceRecord {
                    key,
                    url,
                    reference,
                    head: None,
                    followers_checked_at: None,
                    credentials,
                }),
                Err(e) => report.errors.push(format!("source {key}: {e}")),
            }
        }
    }

    /// Lists every source once, `probe_concurrency` at a time: key → head.
    /// The listings run concurrently within this task, not as tasks of their
    /// own: what one invocation does stays in its task (its log span, and
    /// the tests' record of which function made a call).
    async fn probe(
        &self,
        records: &[SourceRecord],
        report: &mut Report,
    ) -> BTreeMap<String, String> {
        let mut heads = BTreeMap::new();
        let mut listed = stream::iter(records)
            .map(|record| async move {
                let location = SourceLocation {
                    url: record.url.clone(),
                    credentials: record.credentials.clone(),
                };
                let head = self.sources.resolve(&location, &record.reference).await;
                (&record.key, head)
            })
            .buffer_unordered(self.config.probe_concurrency.max(1));
        while let Some((key, head)) = listed.next().await {
            report.sources_checked += 1;
            match head {
                Ok(head) => {
                    heads.insert(key.clone(), head);
                }
                Err(e) => {
                    warn!(source = %key, error = %e, "source not listed");
                    report.errors.push(format!("source {key}: {e}"));
                }
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
            revision: candidate.revision.clone(),
            ..Trigger::of(TriggerKind::Schedule)
        };
        let guard = judge::after(now, self.config.start_guard.as_secs());
        if candidate.due_at.is_none() && candidate.reason == Reason::Changed {
            // In the queue first: should the run never start or never end,
            // the scheduler starts it again once the guard has passed.
            self.registry.mark_due(&candidate.stack, guard).await?;
        }
        let started = self
            .starter
            .start(&candidate.stack, &trigger, &candidate.key)
            .await?;
        if started.new {
            info!(stack = %candidate.stack, reason = candidate.reason.as_str(), execution = %started.execution_name, "started");
            report.started.push(StartedRun {
                stack: candidate.stack.clone(),
                reason: candidate.reason,
                change: candidate.change,
                execution: started.execution_name,
            });
        } else {
            report.already_started += 1;
        }
        if let Some(from) = candidate.due_at {
            // A run that already wrote its own due time wins (the condition).
            if let Err(e) = self
                .registry
                .move_due(&candidate.stack, from, Some(guard))
                .await
            {
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
mod tests;
