//! A drift detection's end, read on CloudFormation's event (`CloudFormation
//! Drift Detection Status Change`, taken by the events function: the drift
//! function, whose role reads every resource, starts no execution) rather
//! than at the next scheduled run: the detection must be the
//! one stacksync started for the stack (its id recorded); it is asked about
//! by its id (the event only says that something changed), its findings are
//! read and recorded as the scheduled run would, and a revert it makes due
//! (`drift.action: revert`) is started at once. A detection someone else
//! ran, one still in progress, a stack of another region or account: left
//! to the scheduled run, which still polls every detection it started.

use serde::Serialize;
use tracing::info;

use super::{DriftPass, DriftReport, drift_listed_in, watched_now};
use crate::clock::EpochMillis;
use crate::ports::{CloudFormationFactory, Trigger, TriggerKind};
use crate::registry::{DriftRecords, Entries, RegistryError, Schedule, StackEntry, Watched};
use crate::triggers::events::DriftDetectionChange;

/// What the drift function did with a detection's event (its answer, and
/// its log line).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "result", rename_all = "camelCase")]
pub enum DriftEventAnswer {
    /// The detection's findings were read (see the report), and the revert
    /// they made due started (its execution's name), if any.
    #[serde(rename = "read")]
    Read {
        stack: String,
        report: DriftReport,
        #[serde(rename = "revertStarted", skip_serializing_if = "Option::is_none")]
        revert_started: Option<String>,
    },
    /// Nothing to do, and why.
    #[serde(rename = "ignored")]
    Ignored { reason: String },
}

fn ignored(reason: &str) -> DriftEventAnswer {
    DriftEventAnswer::Ignored {
        reason: reason.to_owned(),
    }
}

impl<R, F> DriftPass<R, F>
where
    R: Entries + Schedule + DriftRecords,
    F: CloudFormationFactory,
{
    /// Reads the findings of the detection `change` ended, in `region`, at
    /// `now`. Fails only when the registry cannot be read (worth a retry:
    /// EventBridge tries again); any other problem is in the report, and
    /// the scheduled run tries again.
    pub async fn on_detection_event(
        &self,
        change: &DriftDetectionChange,
        region: &str,
        now: EpochMillis,
    ) -> Result<DriftEventAnswer, RegistryError> {
        if !change.ended() {
            return Ok(ignored("the detection is still in progress"));
        }
        let home = self.cloudformation.home_region();
        let entries = self.registry.by_stack_name(&change.stack_name).await?;
        let ours = entries.into_iter().find(|e| {
            e.spec.assume_role_arn.is_none()
                && e.spec.region.as_deref().or(home.as_deref()) == Some(region)
                && e.status
                    .findings
                    .drift
                    .as_ref()
                    .and_then(|d| d.detection.as_ref())
                    .is_some_and(|d| d.id == change.detection_id)
        });
        let Some(entry) = ours else {
            return Ok(ignored(
                "not a detection stacksync started, or its findings are recorded already",
            ));
        };
        let Some(detection) = entry
            .status
            .findings
            .drift
            .as_ref()
            .and_then(|d| d.detection.clone())
        else {
            return Ok(ignored("no detection recorded"));
        };
        // As the scheduled run judges it: not while a run holds the stack
        // or is about to (that run's end asks again).
        let w = watched_of(&entry);
        let Some((listed_region, _)) = drift_listed_in(&w, now).filter(|_| watched_now(&w, now))
        else {
            return Ok(ignored(
                "a run holds the stack, or is due: the scheduled run reads it",
            ));
        };
        let target = (listed_region.map(str::to_owned).or(home), None);
        let mut report = DriftReport::default();
        let started_at = detection.started_at.0;
        self.poll(
            &w,
            &target,
            &detection.id,
            started_at,
            None,
            now,
            &mut report,
        )
        .await;
        let revert_started = if report.reverts > 0 {
            self.start_revert(&entry.name, &detection.id).await
        } else {
            None
        };
        info!(stack = %entry.name, detection = %detection.id, ?report, "drift detection read on its event");
        Ok(DriftEventAnswer::Read {
            stack: entry.name,
            report,
            revert_started,
        })
    }

    /// Starts the run that reverts `stack`'s drift (due already: the
    /// scheduler starts it if this cannot), named by the detection, so an
    /// event delivered again starts nothing twice.
    async fn start_revert(&self, stack: &str, detection: &str) -> Option<String> {
        let (machine, starter) = self.config.reverts.as_ref()?;
        let trigger = Trigger::of(TriggerKind::Event);
        match starter
            .start_on(machine, stack, &trigger, &format!("drift-{detection}"))
            .await
        {
            Ok(started) => started.map(|s| s.execution_name),
            Err(e) => {
                tracing::warn!(stack, error = %e, "the revert was not started; the scheduler starts it");
                None
            }
        }
    }
}

/// What the drift pass reads of an entry, from the entry itself.
fn watched_of(entry: &StackEntry) -> Watched {
    Watched {
        name: entry.name.clone(),
        stack_name: entry.spec.effective_stack_name().to_owned(),
        phase: Some(entry.status.phase),
        seen: entry.status.applied.seen.clone(),
        suspended: entry.is_suspended(),
        deleting: entry.deletion_requested_at.is_some(),
        lease_expires_at: entry.lease.as_ref().map(|l| l.expires_at.0),
        next_reconcile_at: entry.status.times.next_reconcile_at.map(|t| t.0),
        drift: entry.status.findings.drift.as_ref().map(|d| d.watch()),
    }
}

/// A drift detection's event read, as an object (the events handler's).
pub trait DriftEvents: Send + Sync + std::fmt::Debug {
    /// [`DriftPass::on_detection_event`].
    fn on_event<'a>(
        &'a self,
        change: &'a DriftDetectionChange,
        region: &'a str,
        now: EpochMillis,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<DriftEventAnswer, RegistryError>> + Send + 'a>,
    >;
}

impl<R, F> DriftEvents for DriftPass<R, F>
where
    R: Entries + Schedule + DriftRecords + std::fmt::Debug,
    F: CloudFormationFactory + std::fmt::Debug,
{
    fn on_event<'a>(
        &'a self,
        change: &'a DriftDetectionChange,
        region: &'a str,
        now: EpochMillis,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<DriftEventAnswer, RegistryError>> + Send + 'a>,
    > {
        Box::pin(self.on_detection_event(change, region, now))
    }
}
