//! The scheduler's fleet phase: the fleets whose organizational units are
//! due to be read again (every `targetsInterval`) are read, and their
//! targets brought to what the units hold (`crate::triggers::fleets`), so a
//! new account's entries are due before the queue is read, and started by
//! this run. With no fleet due, the phase is one query that finds nothing.

use tracing::info;

use super::{Report, Scheduler};
use crate::clock::EpochMillis;
use crate::ports::{CloudFormationFactory, SourceFetcher, Starter};
use crate::registry::{Entries, Fleets, RegistryError, RegistrySources, Schedule, Specs};
use crate::triggers::fleets::{Reread, reread_from};

impl<R, X, S, F> Scheduler<R, X, S, F>
where
    R: Entries + Schedule + Specs + RegistrySources + Fleets,
    X: Starter,
    S: SourceFetcher + Clone + 'static,
    F: CloudFormationFactory,
{
    /// Reads the due fleets' units again and applies what changed.
    pub(super) async fn reread_fleets(
        &self,
        now: EpochMillis,
        report: &mut Report,
    ) -> Result<(), RegistryError> {
        let due = self.registry.due_fleets(now).await?;
        if due.is_empty() {
            return Ok(());
        }
        // The entries, read once for every fleet due.
        let current = self.registry.list().await?;
        let home = self.config.installation.home.as_deref();
        for fleet in &due {
            let name = fleet.spec.name.clone();
            match reread_from(
                &self.registry,
                self.config.organizations.as_deref(),
                fleet,
                &current,
                home,
                now,
            )
            .await
            {
                Ok(outcome) => {
                    info!(fleet = %name, ?outcome, "fleet's units read");
                    if let Reread::Kept { why } = &outcome {
                        report.errors.push(format!("fleet {name:?}: {why}"));
                    }
                    report.fleets_read.push((name, outcome));
                }
                Err(e) => report.errors.push(format!("fleet {name:?}: {e}")),
            }
        }
        Ok(())
    }
}
