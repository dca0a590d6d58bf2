//! Stacks that depend on stacks: a run that waits for what it depends on
//! (`dependsOn`, `fromStack`), and a run that ends `Ready` making due the
//! entries that must run again because of it.

use std::collections::BTreeMap;

use tracing::info;

use super::{Steps, due};
use crate::clock::now_millis;
use crate::ports::{Blobs, CloudFormationFactory, SourceFetcher};
use crate::reconcile::run::{RunState, StepError};
use crate::registry::{StackEntry, StepRegistry};
use crate::status::{Phase, StallReason, Status, Timestamp};

/// Why a stack this one depends on is not settled, if it is not: not
/// `Ready`, a run of it under way, or due to run (a push or a spec change
/// made it due): its outputs may be about to change, so a dependent run
/// waits for it rather than deploy what may be stale.
fn unsettled(upstream: &StackEntry, now: crate::clock::EpochMillis) -> Option<String> {
    let phase = upstream.display_phase();
    if phase != Phase::Ready {
        return Some(phase.to_string());
    }
    if upstream
        .lease
        .as_ref()
        .is_some_and(|l| l.expires_at.0 > now)
    {
        return Some("a run of it is under way".into());
    }
    if upstream
        .status
        .next_reconcile_at
        .is_some_and(|t| t.0 <= now)
    {
        return Some("due to run".into());
    }
    None
}

impl<R, B, F, S> Steps<R, B, F, S>
where
    R: StepRegistry,
    B: Blobs,
    F: CloudFormationFactory,
    S: SourceFetcher,
{
    /// Ends the run `Pending` while a stack this one depends on (`dependsOn`,
    /// `fromStack`) is not `Ready`: that stack's run makes this one due when
    /// it ends `Ready`. Due again after `interval` all the same, should that
    /// word be lost. Each upstream stack records this entry among its
    /// dependents (`registry::dependents`).
    pub(super) async fn wait_for_upstream(
        &self,
        state: &RunState,
        entry: &StackEntry,
    ) -> Result<Option<RunState>, StepError> {
        let mut waiting = Vec::new();
        let mut names = Vec::new();
        for name in entry.spec.upstream() {
            let Some(upstream) = self.registry.get(name).await? else {
                return Err(StepError::stalled(
                    StallReason::MissingValue,
                    format!("{} depends on {name}, which is not registered", entry.name),
                ));
            };
            self.registry.add_dependent(name, &entry.name).await?;
            if let Some(why) = unsettled(&upstream, now_millis()) {
                waiting.push(format!("{name} ({why})"));
                names.push(name.to_owned());
            }
        }
        if waiting.is_empty() {
            return Ok(None);
        }
        let message = format!(
            "waiting for {}: this stack runs once {} Ready",
            waiting.join(", "),
            if waiting.len() == 1 {
                "it is"
            } else {
                "they are"
            }
        );
        info!(stack = %state.stack_id, %message, "waiting for what it depends on");
        let status = Status {
            phase: Phase::Pending,
            message: Some(message.clone()),
            waiting_for: names,
            next_reconcile_at: Some(Timestamp(due(
                state.started_at,
                entry.spec.interval.as_secs(),
            ))),
            ..entry.status.clone()
        };
        Ok(Some(
            self.finish(state.clone(), entry, status, &message).await?,
        ))
    }

    /// After a run that ended `Ready`: makes due the entries that depend on
    /// this stack and must run again — those that wait for it, and those
    /// that read an output that changed (`before` → `after`); no other.
    /// Best effort: a word lost here is made up by the waiting entry's own
    /// `interval` (logged as a warning).
    pub(super) async fn wake_dependents(
        &self,
        name: &str,
        before: &BTreeMap<String, String>,
        after: &BTreeMap<String, String>,
    ) {
        if let Err(e) = self.try_wake_dependents(name, before, after).await {
            tracing::warn!(stack = name, error = %e, "could not make the stacks that depend on this one due: they run at their own interval");
        }
    }

    pub(super) async fn try_wake_dependents(
        &self,
        name: &str,
        before: &BTreeMap<String, String>,
        after: &BTreeMap<String, String>,
    ) -> Result<(), crate::registry::RegistryError> {
        let dependents = self.registry.dependents(name).await?;
        if dependents.is_empty() {
            return Ok(());
        }
        let changed: Vec<&str> = before
            .keys()
            .chain(after.keys())
            .filter(|k| before.get(*k) != after.get(*k))
            .map(String::as_str)
            .collect();
        for dependent in dependents {
            let entry = self.registry.get(&dependent).await?;
            let Some(entry) = entry.filter(|e| e.spec.upstream().contains(&name)) else {
                // Gone, or depends on this stack no more.
                self.registry.remove_dependent(name, &dependent).await?;
                continue;
            };
            let reads: Vec<&str> = entry
                .spec
                .consumes(name)
                .filter(|o| changed.contains(o))
                .collect();
            let mut waits = entry.status.waiting_for.iter().any(|w| w == name);
            if waits && reads.is_empty() {
                // Waiting for another stack too: that one makes it due
                // once Ready (this one is Ready already, so it sees that).
                for other in entry.status.waiting_for.iter().filter(|w| *w != name) {
                    let ready = self
                        .registry
                        .get(other)
                        .await?
                        .is_some_and(|o| unsettled(&o, now_millis()).is_none());
                    if !ready {
                        waits = false;
                        break;
                    }
                }
            }
            if reads.is_empty() && !waits {
                continue;
            }
            let marked = self.registry.mark_due(&dependent, now_millis()).await?;
            info!(stack = name, dependent = %dependent, outputs = ?reads, waited = waits, marked, "made a dependent stack due");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::reconcile::run::Next;

    #[tokio::test]
    async fn a_stack_waits_for_what_it_depends_on_and_is_made_due_by_its_outputs_only() {
        use crate::registry::{Dependents, Entries, sample_entry};
        use crate::spec::{ParameterValue, ValueRef};
        use std::collections::BTreeMap;
        let t = Test::with_entry(|e| {
            e.spec.parameters.insert(
                "Vpc".into(),
                ParameterValue::From(ValueRef::FromStack {
                    from_stack: "net".into(),
                    output: "VpcId".into(),
                }),
            );
        })
        .await;
        let registry = &t.steps.registry.inner;
        let mut net = sample_entry("net", Status::default());
        net.status.phase = Phase::Reconciling;
        registry.insert(net.clone());
        let ended = t.steps.artifact_fetch(t.input("run-1")).await.unwrap();
        assert_eq!(ended.next, Next::Done);
        let entry = t.entry();
        assert_eq!(entry.status.phase, Phase::Pending);
        assert_eq!(entry.status.waiting_for, vec!["net".to_owned()]);
        assert!(
            entry
                .status
                .message
                .unwrap()
                .starts_with("waiting for net (Reconciling)")
        );
        assert!(entry.lease.is_none(), "the lease is given back");
        assert!(
            entry.status.next_reconcile_at.is_some(),
            "due at its interval all the same"
        );
        assert_eq!(
            registry.dependents("net").await.unwrap(),
            vec![NAME.to_owned()]
        );

        let due = |at: i64| async move {
            registry
                .get(NAME)
                .await
                .unwrap()
                .unwrap()
                .status
                .next_reconcile_at
                .map(|t| t.0)
                .unwrap_or(i64::MAX)
                <= at
        };
        // net ends Ready with its first outputs: orders waits for it, and reads VpcId.
        let before = BTreeMap::new();
        let after = BTreeMap::from([("VpcId".to_owned(), "vpc-1".to_owned())]);
        t.steps
            .try_wake_dependents("net", &before, &after)
            .await
            .unwrap();
        assert!(due(crate::clock::now_millis()).await);

        // orders runs, Ready; net changes an output orders does not read: nothing.
        let mut ready = registry.get(NAME).await.unwrap().unwrap();
        ready.status.phase = Phase::Ready;
        ready.status.waiting_for.clear();
        ready.status.next_reconcile_at = None;
        registry.insert(ready.clone());
        let more = BTreeMap::from([
            ("VpcId".to_owned(), "vpc-1".to_owned()),
            ("Other".to_owned(), "x".to_owned()),
        ]);
        t.steps
            .try_wake_dependents("net", &after, &more)
            .await
            .unwrap();
        assert!(
            !due(i64::MAX - 1).await,
            "an output nobody reads changed: nothing"
        );
        // VpcId changes: orders is due.
        let changed = BTreeMap::from([("VpcId".to_owned(), "vpc-2".to_owned())]);
        t.steps
            .try_wake_dependents("net", &more, &changed)
            .await
            .unwrap();
        assert!(due(crate::clock::now_millis()).await);

        // An entry that no longer depends on net is forgotten, not run.
        ready.spec.parameters.clear();
        registry.insert(ready);
        t.steps
            .try_wake_dependents("net", &changed, &before)
            .await
            .unwrap();
        assert!(registry.dependents("net").await.unwrap().is_empty());
    }
}
