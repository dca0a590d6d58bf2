//! What reading a source records: its plan, then the commit applied; or
//! the commit failed or held, and the event that tells it.

use super::{Outcome, Sync, SyncError};
use crate::notice::{Notice, NoticeKind, NoticeSource};
use crate::registry::plan::{Action, Plan};
use crate::registry::{RegistrySources, Specs, apply_plan};
use crate::registry_source::{SourceState, SourceStatus};
use crate::status::{Phase, Timestamp};

impl<R: RegistrySources> Sync<'_, R> {
    /// Writes the source's status, if it is still at `version`.
    async fn write_status(&self, version: u64, status: &SourceStatus) -> Result<(), SyncError> {
        let name = &self.source.spec.name;
        match self
            .registry
            .write_source_status(name, version, status)
            .await
        {
            Ok(true) => Ok(()),
            Ok(false) => Err(SyncError::Raced(name.clone())),
            Err(error) => Err(self.registry_error(error)),
        }
    }

    /// Records the commit failed (once: the same problems at the same
    /// commit are not written or told again) and tells the bus.
    pub(super) async fn fail(
        &self,
        revision: &str,
        problems: Vec<String>,
    ) -> Result<Outcome, SyncError> {
        let source = self.source;
        let known = source
            .status
            .failure
            .as_ref()
            .is_some_and(|f| f.commit == revision && f.problems == problems);
        if !known {
            tracing::warn!(source = %source.spec.name, commit = %revision, ?problems, "registry source: commit not applied");
            let status = source
                .status
                .failed(revision, problems.clone(), Timestamp(self.now));
            self.write_status(source.version, &status).await?;
            self.tell(revision, "Failed", problems.clone()).await;
        }
        Ok(Outcome::Failed {
            revision: revision.to_owned(),
            problems,
        })
    }

    /// Records the commit held by the prune guard and tells the bus.
    pub(super) async fn hold(
        &self,
        revision: &str,
        entries: Vec<String>,
        of: usize,
    ) -> Result<Outcome, SyncError> {
        let status = self.source.status.held(revision, entries.clone(), of);
        self.write_status(self.source.version, &status).await?;
        self.tell(revision, SourceState::Held.as_str(), vec![status.summary()])
            .await;
        Ok(Outcome::Held {
            revision: revision.to_owned(),
            entries,
        })
    }

    /// `Registry Source Failed` on the bus (best effort).
    async fn tell(&self, revision: &str, state: &str, problems: Vec<String>) {
        let notice = Notice {
            kind: Some(NoticeKind::RegistrySourceFailed),
            installation: self.installation.name.clone(),
            phase: Phase::Failed,
            revision: Some(revision.to_owned()).filter(|r| !r.is_empty()),
            message: problems.first().cloned(),
            registry_source: Some(NoticeSource {
                name: self.source.spec.name.clone(),
                commit: revision.to_owned(),
                state: state.to_owned(),
                problems,
            }),
            ..Notice::default()
        };
        self.notices.send(&notice).await;
    }
}

impl<R: Specs + RegistrySources> Sync<'_, R> {
    /// Records the plan, writes it batch by batch, records the commit applied.
    pub(super) async fn write_plan(&self, plan: &Plan, revision: &str) -> Result<(), SyncError> {
        let name = &self.source.spec.name;
        let mut version = self.source.version;
        let writes = plan.writes().count();
        if writes > 0 {
            let status = self
                .source
                .status
                .applying(revision, writes, Timestamp(self.now));
            self.write_status(version, &status).await?;
            version += 1;
            apply_plan(self.registry, plan, self.now, |applied| {
                tracing::info!(source = %name, written = applied.written, total = applied.total, "registry source: batch written");
            })
            .await
            .map_err(|stopped| self.registry_error(stopped.error))?;
        }
        let entries = plan
            .changes
            .iter()
            .filter(|c| !matches!(c.action, Action::Prune { .. }))
            .count();
        let status = self
            .source
            .status
            .applied(revision, entries, Timestamp(self.now));
        self.write_status(version, &status).await
    }
}
