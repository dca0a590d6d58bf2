//! Drift detection, in a function of its own (`drift`, on the scheduler's
//! schedule): CloudFormation reads each resource of a stack with the
//! permissions of whoever asks for a detection, so the function that asks
//! carries a read policy (`DriftReadPolicy`); it is not the scheduler,
//! which reaches every Git server and holds the source secrets. This one
//! reaches no source and starts no execution.
//!
//! Each run reads the watch index (what the health check reads) and lists
//! the stacks of each account and region once (`ListStacks`, which also
//! reports each stack's drift status and its last detection's start). For
//! each `Ready` stack not held by a run, not due to run, suspended or being
//! deleted, and whose `drift.action` is not `off` ([`judge_drift`]):
//! - a detection stacksync started is asked about by its id
//!   (`DescribeStackDriftDetectionStatus`) until it ends;
//! - ended, or a drift status in the listing other than the one recorded (a
//!   detection someone else ran), its findings are read
//!   (`DescribeStackResourceDrifts`), less `drift.ignore`, and recorded
//!   ([`crate::drift::apply_findings`]); a new drift is told (`Drift
//!   Detected`), and with `action: revert` the stack is made due for a run
//!   that reverts it (the scheduler starts it);
//! - otherwise a detection is started when the stack's slot comes
//!   ([`crate::drift::next_detection`]), at most
//!   [`Config::max_detections`] running at once per account and region,
//!   oldest due first; a refused start (throttled) stops the starts of that
//!   account and region until the next run.
//!
//! A stack with nothing due costs nothing: no call, no read, no write. An
//! idle run is one read of the watch index and one listing per account and
//! region with a stack to watch.

use std::collections::{BTreeMap, BTreeSet};

use tracing::{info, warn};

use crate::clock::{EpochMillis, rfc3339_millis};
use crate::drift::ignore::reportable;
use crate::drift::{
    DETECTION_PATIENCE_MS, Detection, DriftRecord, Findings, Outcome, apply_findings,
    next_detection, recorded,
};
use crate::notice::{Notice, NoticeDrift, NoticeKind};
use crate::ports::drift::{DetectionStatus, DriftDetection};
use crate::ports::{CloudFormationFactory, DriftDetections, Notifier, StackSummary};
use crate::registry::{DriftRecords, Entries, RegistryError, Schedule, StackEntry, Watched};
use crate::spec::{DEFAULT_DRIFT_INTERVAL, DriftAction};
use crate::stack_status::StackStatus;
use crate::status::{Phase, Timestamp};
use crate::triggers::scheduler::health::{Target, describe_target, list_stacks};

mod event;
pub use event::{DriftEventAnswer, DriftEvents};

/// Every listing made, by account and region.
pub type Listings = BTreeMap<Target, BTreeMap<String, StackSummary>>;

/// How the drift function paces itself, and where it tells what it found.
#[derive(Debug, Clone)]
pub struct Config {
    /// Most drift detections running at once per account and region
    /// (`STACKSYNC_MAX_DETECTIONS`); the due ones wait for a free place.
    pub max_detections: usize,
    /// The installation, as notices name it (its registry table).
    pub installation: String,
    /// Where drift notices go.
    pub notices: Notifier,
    /// The reconcile machine (its ARN), and who starts runs on it: a
    /// detection's end read on its event starts the revert it makes due
    /// at once; `None`: the scheduler starts it.
    pub reverts: Option<(String, crate::ports::RunStarter)>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            max_detections: 10,
            installation: String::new(),
            notices: Notifier::none(),
            reverts: None,
        }
    }
}

/// The drift function of one installation.
#[derive(Debug, Clone)]
pub struct DriftPass<R, F> {
    pub registry: R,
    /// CloudFormation, per account and region.
    pub cloudformation: F,
    pub config: Config,
}

/// What drift detection does with one stack this run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DriftStep {
    /// Ask how the detection stacksync started is going.
    Poll { id: String, started_at: EpochMillis },
    /// Read and record the findings of a detection someone else ran.
    Read,
    /// Start a detection; due since then.
    Start { due: EpochMillis },
}

/// The account and region a stack must be listed in for drift detection
/// (as [`crate::triggers::scheduler::judge::listed_in`]), or `None` when it
/// is not looked at.
pub fn drift_listed_in(w: &Watched, now: EpochMillis) -> Option<(Option<&str>, Option<&str>)> {
    let seen = w.seen.as_ref()?;
    let held = w.lease_expires_at.is_some_and(|t| t > now);
    let off = seen.drift_seconds == Some(0);
    (w.phase == Some(Phase::Ready) && !held && !w.suspended && !w.deleting && !off)
        .then_some((seen.region.as_deref(), seen.assume_role_arn.as_deref()))
}

/// Whether drift detection looks at `w` now: not while it is due, since
/// the scheduler is about to start its run (a detection then would read a
/// stack about to change).
fn watched_now(w: &Watched, now: EpochMillis) -> bool {
    w.next_reconcile_at.is_none_or(|at| at > now)
}

/// What to do about one stack's drift, given its summary in the listing.
pub fn judge_drift(
    w: &Watched,
    listed: Option<&StackSummary>,
    now: EpochMillis,
) -> Option<DriftStep> {
    drift_listed_in(w, now)?;
    let seen = w.seen.as_ref()?;
    // Gone or replaced: the health check starts a run; drift waits for it.
    let listed = listed.filter(|l| l.stack_id == seen.stack_id)?;
    let record = w.drift.clone().unwrap_or_default();
    if let (Some(id), Some(started_at)) = (record.detection, record.started_at) {
        return Some(DriftStep::Poll { id, started_at });
    }
    let reported = listed.drift.as_deref().filter(|d| *d != "NOT_CHECKED");
    if reported.is_some() && reported != record.stack_drift.as_deref() {
        return Some(DriftStep::Read);
    }
    let interval = seen
        .drift_seconds
        .unwrap_or(DEFAULT_DRIFT_INTERVAL.as_secs())
        .saturating_mul(1000);
    let last = match (record.checked_at, listed.drift_checked_at) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    };
    let due = if record.verify {
        0
    } else {
        next_detection(&w.name, last, i64::try_from(interval).unwrap_or(i64::MAX))
    };
    (due <= now && detectable(&listed.status)).then_some(DriftStep::Start { due })
}

/// The statuses CloudFormation detects drift in: an operation that ended
/// (not one under way, nor a failed create or delete).
fn detectable(status: &StackStatus) -> bool {
    status.is_success()
        || matches!(
            status,
            StackStatus::UpdateRollbackComplete | StackStatus::UpdateRollbackFailed
        )
}

/// What the drift pass did in one run.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DriftReport {
    /// Detections started.
    pub started: usize,
    /// Detections due and not started: the cap of detections at once, or a
    /// start refused (they are started on later runs).
    pub deferred: usize,
    /// Detections asked about.
    pub polled: usize,
    /// Findings read and recorded.
    pub recorded: usize,
    /// Stacks found drifted (a drift not reported before).
    pub detected: usize,
    /// Stacks made due to revert their drift.
    pub reverts: usize,
    /// Stacks read from the watch index.
    pub stacks_watched: usize,
    /// Account-and-region listings made (`ListStacks`, every page).
    pub listings: usize,
    /// What went wrong, per stack or listing; the run itself went on.
    pub errors: Vec<String>,
}

impl<R, F> DriftPass<R, F>
where
    R: Entries + Schedule + DriftRecords,
    F: CloudFormationFactory,
{
    /// One run at `now`. Fails only when the registry's watch index cannot
    /// be read; every other problem is in [`DriftReport::errors`] and waits
    /// for the next run.
    pub async fn run(&self, now: EpochMillis) -> Result<DriftReport, RegistryError> {
        let mut report = DriftReport::default();
        let watched = self.registry.watched().await?;
        report.stacks_watched = watched.len();
        let home = self.cloudformation.home_region();
        let mut targets: BTreeSet<Target> = BTreeSet::new();
        for w in watched.iter().filter(|w| watched_now(w, now)) {
            if let Some((region, role)) = drift_listed_in(w, now) {
                targets.insert((
                    region.map(str::to_owned).or_else(|| home.clone()),
                    role.map(str::to_owned),
                ));
            }
        }
        let mut listings = Listings::new();
        for target in targets {
            match list_stacks(&self.cloudformation, &target).await {
                Ok(listing) => {
                    report.listings += 1;
                    listings.insert(target, listing);
                }
                // Not listed is not missing: these wait for the next run.
                Err(e) => {
                    warn!(region = ?target.0, role = ?target.1, error = %e, "stacks not listed");
                    report.errors.push(format!(
                        "listing the stacks of {}: {e}",
                        describe_target(&target)
                    ));
                }
            }
        }
        self.check_drift(now, &watched, &listings, &mut report)
            .await;
        Ok(report)
    }

    /// The drift pass: every stack against `listings`.
    async fn check_drift(
        &self,
        now: EpochMillis,
        watched: &[Watched],
        listings: &Listings,
        report: &mut DriftReport,
    ) {
        let home = self.cloudformation.home_region();
        let mut running: BTreeMap<Target, usize> = BTreeMap::new();
        let mut due: BTreeMap<Target, Vec<(EpochMillis, &Watched)>> = BTreeMap::new();
        for w in watched.iter().filter(|w| watched_now(w, now)) {
            let Some((region, role)) = drift_listed_in(w, now) else {
                continue;
            };
            let target = (
                region.map(str::to_owned).or_else(|| home.clone()),
                role.map(str::to_owned),
            );
            let Some(listing) = listings.get(&target) else {
                continue;
            };
            let listed = listing.get(w.stack_name.as_str());
            match judge_drift(w, listed, now) {
                Some(DriftStep::Poll { id, started_at }) => {
                    let ended = self
                        .poll(w, &target, &id, started_at, listed, now, report)
                        .await;
                    if !ended {
                        *running.entry(target).or_default() += 1;
                    }
                }
                Some(DriftStep::Read) => {
                    self.read_findings(w, &target, None, listed, now, report)
                        .await;
                }
                Some(DriftStep::Start { due: at }) => due.entry(target).or_default().push((at, w)),
                None => {}
            }
        }
        for (target, mut stacks) in due {
            stacks.sort_by_key(|(at, w)| (*at, w.name.clone()));
            let free = self
                .config
                .max_detections
                .saturating_sub(running.get(&target).copied().unwrap_or(0));
            report.deferred += stacks.len().saturating_sub(free);
            for (i, (_, w)) in stacks.iter().take(free).enumerate() {
                if let Err(e) = self.start_detection(w, &target, now, report).await {
                    warn!(stack = %w.name, error = %e, "drift detection not started; the rest of its account and region wait for the next run");
                    report
                        .errors
                        .push(format!("{}: drift detection: {e}", w.name));
                    report.deferred += free.min(stacks.len()) - i;
                    break;
                }
            }
        }
        info!(drift = ?report, "drift detection");
    }

    async fn port(&self, target: &Target) -> Result<F::Port, String> {
        self.cloudformation
            .for_stack(target.0.as_deref(), target.1.as_deref(), None)
            .await
            .map_err(|e| e.to_string())
    }

    async fn start_detection(
        &self,
        w: &Watched,
        target: &Target,
        now: EpochMillis,
        report: &mut DriftReport,
    ) -> Result<(), String> {
        let id = self
            .port(target)
            .await?
            .detect_drift(&w.stack_name)
            .await
            .map_err(|e| e.to_string())?;
        report.started += 1;
        let entry = self
            .registry
            .get(&w.name)
            .await
            .map_err(|e| e.to_string())?;
        let Some(entry) = entry else { return Ok(()) };
        let read = entry.status.findings.drift.clone().unwrap_or_default();
        let record = DriftRecord {
            detection: Some(Detection {
                id,
                started_at: Timestamp(now),
            }),
            rev: read.rev + 1,
            ..read
        };
        // Not written (a run took the stack): the listing's drift status
        // brings the findings in once the detection ends.
        let rev = entry.status.findings.drift.as_ref().map(|d| d.rev);
        self.registry
            .record_drift(&w.name, rev, &record, now)
            .await
            .map_err(|e| e.to_string())?;
        Ok(())
    }

    /// Asks about a detection stacksync started; records its findings once
    /// it ended. Returns whether it ended (or was given up).
    #[allow(clippy::too_many_arguments)]
    async fn poll(
        &self,
        w: &Watched,
        target: &Target,
        id: &str,
        started_at: EpochMillis,
        listed: Option<&StackSummary>,
        now: EpochMillis,
        report: &mut DriftReport,
    ) -> bool {
        report.polled += 1;
        let asked = match self.port(target).await {
            Ok(port) => port.drift_detection(id).await.map_err(|e| e.to_string()),
            Err(e) => Err(e),
        };
        let late = now.saturating_sub(started_at) > DETECTION_PATIENCE_MS;
        let detection = match asked {
            Ok(d) if d.status != DetectionStatus::InProgress => d,
            Ok(_) if !late => return false,
            Ok(_) => failed_detection("the detection took longer than an hour"),
            Err(e) if !late => {
                report
                    .errors
                    .push(format!("{}: drift detection: {e}", w.name));
                return false;
            }
            Err(e) => failed_detection(&e),
        };
        self.read_findings(
            w,
            target,
            Some((detection, started_at)),
            listed,
            now,
            report,
        )
        .await;
        true
    }

    /// Reads the findings of the stack's last detection (`detection`: the
    /// one stacksync started, ended) and records them.
    async fn read_findings(
        &self,
        w: &Watched,
        target: &Target,
        detection: Option<(DriftDetection, EpochMillis)>,
        listed: Option<&StackSummary>,
        now: EpochMillis,
        report: &mut DriftReport,
    ) {
        if let Err(e) = self
            .record_findings(w, target, detection, listed, now, report)
            .await
        {
            warn!(stack = %w.name, error = %e, "drift findings not recorded; the next run reads them again");
            report
                .errors
                .push(format!("{}: drift findings: {e}", w.name));
        }
    }

    async fn record_findings(
        &self,
        w: &Watched,
        target: &Target,
        detection: Option<(DriftDetection, EpochMillis)>,
        listed: Option<&StackSummary>,
        now: EpochMillis,
        report: &mut DriftReport,
    ) -> Result<(), String> {
        let Some(entry) = self
            .registry
            .get(&w.name)
            .await
            .map_err(|e| e.to_string())?
        else {
            return Ok(());
        };
        let previous = entry.status.findings.drift.clone().unwrap_or_default();
        let checked_at = detection
            .as_ref()
            .map(|(_, at)| *at)
            .or(listed.and_then(|l| l.drift_checked_at))
            .unwrap_or(now);
        let (record, outcome, due) = match detection {
            Some((d, _)) if d.status == DetectionStatus::Failed => {
                // Nothing read: the findings before stand, with the reason.
                let record = DriftRecord {
                    checked_at: Some(Timestamp(checked_at)),
                    detection: None,
                    reason: crate::drift::reason_kept(d.reason),
                    rev: previous.rev + 1,
                    ..previous.clone()
                };
                (record, Outcome::Quiet, false)
            }
            detection => {
                let (stack_drift, reason) = match detection {
                    Some((d, _)) => (d.stack_drift, d.reason),
                    None => (listed.and_then(|l| l.drift.clone()), None),
                };
                let mut findings = self.findings(&entry, w, target).await?;
                findings.checked_at = checked_at;
                findings.stack_drift = stack_drift;
                findings.reason = reason;
                let revert = entry.spec.drift.action == DriftAction::Revert;
                apply_findings(&previous, findings, revert, now)
            }
        };
        let read = entry.status.findings.drift.as_ref().map(|d| d.rev);
        if !self
            .registry
            .record_drift(&w.name, read, &record, now)
            .await
            .map_err(|e| e.to_string())?
        {
            return Ok(());
        }
        report.recorded += 1;
        if due {
            self.registry
                .mark_due(&w.name, now)
                .await
                .map_err(|e| e.to_string())?;
            report.reverts += 1;
        }
        if let Some(notice) = self.notice(w, &entry, &record, outcome, listed) {
            if outcome == Outcome::Detected {
                report.detected += 1;
            }
            self.config.notices.send(&notice).await;
        }
        Ok(())
    }

    /// The stack's drifted resources, less `drift.ignore`, bounded (values
    /// masked for a stack that reads secrets).
    async fn findings(
        &self,
        entry: &StackEntry,
        w: &Watched,
        target: &Target,
    ) -> Result<Findings, String> {
        let found = self
            .port(target)
            .await?
            .resource_drifts(&w.stack_name)
            .await
            .map_err(|e| e.to_string())?;
        let differences = |r: &[crate::ports::drift::ResourceDrift]| {
            r.iter().map(|d| d.differences.len().max(1)).sum::<usize>()
        };
        let all = differences(&found);
        let kept = reportable(found, &entry.spec.drift.ignore_rules());
        let ignored = u32::try_from(all - differences(&kept)).unwrap_or(u32::MAX);
        let (resources, omitted) = recorded(kept, entry.spec.reads_secrets());
        Ok(Findings {
            checked_at: 0,
            stack_drift: None,
            resources,
            ignored,
            omitted,
            reason: None,
        })
    }

    /// What to tell of `outcome` (logged, and put on the bus), if anything.
    fn notice(
        &self,
        w: &Watched,
        entry: &StackEntry,
        record: &DriftRecord,
        outcome: Outcome,
        listed: Option<&StackSummary>,
    ) -> Option<Notice> {
        let kind = match outcome {
            Outcome::Quiet => return None,
            Outcome::Detected => NoticeKind::DriftDetected,
            Outcome::Cleared => NoticeKind::DriftCleared,
            Outcome::NotCleared => NoticeKind::DriftNotCleared,
        };
        let ids: Vec<String> = record
            .resources
            .iter()
            .map(|r| r.logical_id.clone())
            .collect();
        info!(stack = %w.name, event = kind.detail_type(), resources = ?ids, "drift");
        Some(Notice {
            installation: self.config.installation.clone(),
            stack: w.name.clone(),
            stack_name: w.stack_name.clone(),
            region: entry.spec.region.clone(),
            stack_id: listed.map(|l| l.stack_id.clone()),
            execution: String::new(),
            trigger: "drift".into(),
            phase: if record.drifted() {
                Phase::Drifted
            } else {
                Phase::Ready
            },
            message: Some(describe(record, outcome)),
            drift: Some(NoticeDrift {
                count: ids.len(),
                resources: ids,
                action: format!("{:?}", entry.spec.drift.action).to_lowercase(),
                checked_at: record.checked_at.map(|t| rfc3339_millis(t.0)),
            }),
            kind: Some(kind),
            ..Notice::default()
        })
    }
}

fn failed_detection(reason: &str) -> DriftDetection {
    DriftDetection {
        status: DetectionStatus::Failed,
        stack_drift: None,
        reason: Some(reason.to_owned()),
        drifted_resources: None,
    }
}

/// The record in words, for notices and the CLI.
pub fn describe(record: &DriftRecord, outcome: Outcome) -> String {
    let count = record.resources.len();
    let names = record
        .resources
        .iter()
        .map(|r| r.logical_id.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    match outcome {
        Outcome::Cleared => "drift cleared: every resource is as the template says".to_owned(),
        Outcome::NotCleared => format!(
            "the revert did not clear the drift of {count} resource(s) ({names}): \
             reported once, not reverted again until the drift changes"
        ),
        _ if count == 0 => "no drift".to_owned(),
        _ => format!("{count} resource(s) drifted: {names}"),
    }
}

#[cfg(test)]
mod tests;
