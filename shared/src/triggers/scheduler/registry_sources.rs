//! The scheduler's first phase: the registry sources whose ref moved are
//! read and applied, so the entries a commit adds or changes are due
//! before the queue is read (`crate::triggers::registry_source`).

use std::collections::BTreeMap;

use tracing::info;

use super::{Report, Scheduler};
use crate::clock::EpochMillis;
use crate::ports::{CloudFormationFactory, SourceFetcher, Starter};
use crate::registry::{Entries, RegistryError, RegistrySources, Schedule, SourceRecord, Specs};
use crate::triggers::registry_source::{Outcome, sync_source};

impl<R, X, S, F> Scheduler<R, X, S, F>
where
    R: Entries + Schedule + Specs + RegistrySources + crate::registry::Fleets,
    X: Starter,
    S: SourceFetcher + Clone + 'static,
    F: CloudFormationFactory,
{
    /// Lists the refs of every registry source, with the template sources'
    /// (each distinct source once: a repository that holds both stacks
    /// files and templates is listed once), and applies the sources whose
    /// ref moved. Returns the heads listed, by source key, and the
    /// template sources' records when it read them.
    pub(super) async fn apply_registry_sources(
        &self,
        now: EpochMillis,
        report: &mut Report,
    ) -> Result<(BTreeMap<String, String>, Option<Vec<SourceRecord>>), RegistryError> {
        let sources = self.registry.registry_sources().await?;
        if sources.is_empty() {
            return Ok((BTreeMap::new(), None));
        }
        report.registry_sources = sources.len();
        let records = self.registry.sources().await?;
        let mut to_list: Vec<SourceRecord> = records.clone();
        for source in &sources {
            let key = source.spec.key();
            if !to_list.iter().any(|r| r.key == key) {
                to_list.push(SourceRecord {
                    key,
                    url: source.spec.url.clone(),
                    reference: source.spec.reference.clone(),
                    head: None,
                    followers_checked_at: None,
                    credentials: source.spec.credentials_secret.clone(),
                });
            }
        }
        let heads = self.probe(&to_list, report).await;
        for source in &sources {
            let Some(head) = heads.get(&source.spec.key()) else {
                continue;
            };
            let outcome = sync_source(
                &self.registry,
                &self.sources,
                &self.config.notices,
                &self.config.installation,
                source,
                Some(head),
                now,
            )
            .await;
            match outcome {
                Ok(Outcome::Unchanged { .. }) => {}
                Ok(outcome) => {
                    info!(source = %source.spec.name, ?outcome, "registry source read");
                    report
                        .registry_source_outcomes
                        .push((source.spec.name.clone(), outcome));
                }
                Err(e) => report.errors.push(e.to_string()),
            }
        }
        Ok((heads, Some(records)))
    }
}
