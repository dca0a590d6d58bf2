//! Stacks that depend on stacks: a run that waits for what it depends on
//! (`dependsOn`, `fromStack`), and a run that ends `Ready` making due the
//! entries that must run again because of it.

use std::collections::BTreeMap;

use tracing::info;

use super::{Ports, Steps, due, short};
use crate::clock::now_millis;
use crate::ports::{Trigger, TriggerKind};
use crate::reconcile::decide::{MAX_DEPENDENT_STARTS, start_dependent};
use crate::reconcile::run::{Execution, RunState, StepError};
use crate::registry::StackEntry;
use crate::registry::{Dependents as _, Entries as _, Schedule as _};
use crate::status::{StallReason, Status, Timestamp, transitions};

/// Why a stack this one depends on is not settled, if it is not: not
/// `Ready`, a run of it under way, due to run (a spec change, a mark), or
/// following this stack's source without having run at `revision` yet (a
/// push starts every follower at once: its run is coming). Its outputs may
/// be about to change, so a dependent run waits rather than deploy what
/// may be stale.
fn unsettled(
    upstream: &StackEntry,
    source: Option<(&str, &str)>,
    now: crate::clock::EpochMillis,
) -> Option<String> {
    let phase = upstream.display_phase();
    if !phase.is_ready() {
        return Some(phase.to_string());
    }
    if !crate::registry::graph::settled(upstream, now) {
        return Some("a run of it is under way, or due".into());
    }
    if let Some((key, revision)) = source
        && follows(&upstream.spec) == key
        && upstream
            .status
            .run
            .last_attempted_revision
            .as_deref()
            .is_none_or(|r| !r.eq_ignore_ascii_case(revision))
    {
        return Some(format!("not run at {} yet", short(revision)));
    }
    None
}

/// The source key a spec follows.
fn follows(spec: &crate::spec::StackSpec) -> String {
    crate::source::source_key(spec.source.url(), spec.effective_ref())
}

/// Whether `entry` read an output of `upstream` that is not what
/// `upstream` now records (or never read it): the outputs it names.
fn stale_reads<'a>(
    entry: &'a StackEntry,
    upstream: &'a str,
    outputs: &'a BTreeMap<String, String>,
) -> Vec<&'a str> {
    let read = entry.status.inputs.read_outputs.get(upstream);
    entry
        .spec
        .consumes(upstream)
        .filter(|o| read.and_then(|r| r.get(*o)) != outputs.get(*o))
        .collect()
}

impl<P: Ports> Steps<P> {
    /// Ends the run `Pending` while a stack this one depends on (`dependsOn`,
    /// `fromStack`) is not settled ([`unsettled`]): that stack's run makes
    /// this one due when it ends `Ready`. Due again after `interval` all
    /// the same. Each upstream stack records this entry among its
    /// dependents (`registry::dependents`). `revision`: the head this run
    /// resolved.
    pub(super) async fn wait_for_upstream(
        &self,
        state: &RunState,
        entry: &StackEntry,
        revision: &str,
    ) -> Result<Option<RunState>, StepError> {
        let mut waiting = Vec::new();
        let mut names = Vec::new();
        let key = follows(&entry.spec);
        for name in entry.spec.upstream() {
            let Some(upstream) = self.registry.get(name).await? else {
                return Err(StepError::stalled(
                    StallReason::MissingValue,
                    format!(
                        "{} depends on {name}, which is not registered: register it, or \
                         remove the dependency (dependsOn, fromStack)",
                        entry.name
                    ),
                ));
            };
            self.registry.add_dependent(name, &entry.name).await?;
            if let Some(why) = unsettled(&upstream, Some((&key, revision)), now_millis()) {
                waiting.push(format!("{name} ({why})"));
                names.push(name.to_owned());
            }
        }
        if waiting.is_empty() {
            return Ok(None);
        }
        let message = transitions::waiting_message(&waiting);
        info!(stack = %state.entry, %message, "waiting for what it depends on");
        let status = transitions::waiting(
            &entry.status,
            names.clone(),
            message.clone(),
            Timestamp(due(
                state.execution.started_at,
                entry.spec.interval.as_secs(),
            )),
        );
        let ended = self.finish(state.clone(), entry, status, &message).await?;
        // What it waits for may have settled while this run looked (its
        // word then found this stack still leased): look once more, now
        // that the lease is given back.
        let mut settled = true;
        for name in &names {
            settled &= matches!(
                self.registry.get(name).await,
                Ok(Some(upstream)) if unsettled(&upstream, Some((&key, revision)), now_millis()).is_none()
            );
        }
        if settled {
            match self.registry.mark_due(&entry.name, now_millis()).await {
                Ok(_) => {
                    info!(stack = %entry.name, "what it waited for settled meanwhile: due again")
                }
                Err(e) => {
                    tracing::warn!(stack = %entry.name, error = %e, "could not make the stack due again")
                }
            }
        }
        Ok(Some(ended))
    }

    /// After a run of `name` that ended `Ready` with `outputs`: makes due
    /// the entries that depend on it and must run again, and no other:
    /// those that wait for it (once nothing else they wait for is
    /// unsettled), and those that read an output of it that is not what
    /// they read. Compared with what each dependent read (not with this
    /// stack's outputs before), so a word lost here is given again by the
    /// next run that ends `Ready`. One dependent that cannot be read or
    /// marked stops none of the others (each is logged).
    pub(super) async fn wake_dependents(
        &self,
        name: &str,
        outputs: &BTreeMap<String, String>,
        by: Option<&Execution>,
    ) {
        let dependents = match self.registry.dependents(name).await {
            Ok(dependents) => dependents,
            Err(e) => {
                tracing::warn!(stack = name, error = %e, "could not read the stacks that depend on this one: they run at their own interval, or when this one ends Ready again");
                return;
            }
        };
        let mut started = 0;
        for dependent in dependents {
            match self.wake_one(name, outputs, &dependent).await {
                Ok(true) if started < MAX_DEPENDENT_STARTS => {
                    if let Some(by) = by
                        && self.start_dependent(name, &dependent, by).await
                    {
                        started += 1;
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(stack = name, dependent = %dependent, error = %e, "could not make a dependent stack due");
                }
            }
        }
    }

    /// Starts `dependent`, just made due, on the machine `by` runs on, as
    /// the scheduler would start it ([`start_dependent`]); whether a run
    /// was started. A start that fails is the scheduler's to make (the
    /// stack is due).
    async fn start_dependent(&self, name: &str, dependent: &str, by: &Execution) -> bool {
        let Some(arn) = by.arn.as_deref() else {
            return false;
        };
        let entry = match self.registry.get(dependent).await {
            Ok(Some(entry)) => entry,
            Ok(None) => return false,
            Err(e) => {
                tracing::warn!(stack = name, dependent, error = %e, "could not read a dependent stack; the scheduler starts it");
                return false;
            }
        };
        if let Err(why) = start_dependent(&entry, now_millis()) {
            info!(
                stack = name,
                dependent, why, "dependent left to the scheduler"
            );
            return false;
        }
        let trigger = Trigger::of(TriggerKind::Upstream);
        match self.starter.start(arn, dependent, &trigger, &by.name).await {
            Ok(Some(started)) => {
                info!(stack = name, dependent, execution = %started.execution_name, new = started.new, "started a dependent stack");
                started.new
            }
            Ok(None) => false,
            Err(e) => {
                tracing::warn!(stack = name, dependent, error = %e, "could not start a dependent stack; the scheduler starts it");
                false
            }
        }
    }

    async fn wake_one(
        &self,
        name: &str,
        outputs: &BTreeMap<String, String>,
        dependent: &str,
    ) -> Result<bool, crate::registry::RegistryError> {
        // Not there (yet: an apply registers its dependencies before the
        // entry; or no more): left for a later look.
        let Some(entry) = self.registry.get(dependent).await? else {
            return Ok(false);
        };
        if !entry.spec.upstream().contains(&name) {
            self.registry.remove_dependent(name, dependent).await?;
            return Ok(false);
        }
        let reads = stale_reads(&entry, name, outputs);
        let waits = entry.status.inputs.waiting_for.iter().any(|w| w == name)
            && self
                .settled(&entry.status.inputs.waiting_for, Some(name))
                .await?;
        if reads.is_empty() && !waits {
            return Ok(false);
        }
        let marked = self.registry.mark_due(dependent, now_millis()).await?;
        info!(stack = name, dependent = %dependent, outputs = ?reads, waited = waits, marked, "made a dependent stack due");
        Ok(true)
    }

    /// Whether every stack of `names` (but `except`) is settled now.
    async fn settled(
        &self,
        names: &[String],
        except: Option<&str>,
    ) -> Result<bool, crate::registry::RegistryError> {
        for other in names.iter().filter(|w| Some(w.as_str()) != except) {
            let settled = self
                .registry
                .get(other)
                .await?
                .is_some_and(|o| unsettled(&o, None, now_millis()).is_none());
            if !settled {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// After this entry's own run ended `Ready` ([`crate::reconcile::decide::Effect::RecheckUpstream`]:
    /// its final status written,
    /// its lease given back): makes it due at once if an output it read is
    /// no longer what that stack records. A stack that changed while this
    /// one held its lease could not make it due for good (this run's final
    /// write sets the due time); this look closes that gap. (A run that
    /// ends waiting looks itself: [`Steps::wait_for_upstream`].)
    pub(super) async fn recheck_upstream(
        &self,
        entry: &StackEntry,
        status: &Status,
        started_at: crate::clock::EpochMillis,
    ) {
        let ran = StackEntry {
            status: status.clone(),
            ..entry.clone()
        };
        let mut due_now = false;
        for name in entry.spec.upstream() {
            // Only a record that stack made while this one ran is newer than
            // what this run read from CloudFormation (an older one may lag
            // behind CloudFormation: a change outside stacksync, outputs
            // recorded by an earlier version).
            if let Ok(Some(upstream)) = self.registry.get(name).await
                && upstream.display_phase().is_ready()
                && upstream
                    .status
                    .times
                    .last_reconcile_at
                    .is_some_and(|t| t.0 >= started_at)
                && !stale_reads(&ran, name, &upstream.status.applied.outputs).is_empty()
            {
                due_now = true;
            }
        }
        if due_now {
            match self.registry.mark_due(&entry.name, now_millis()).await {
                Ok(marked) => {
                    info!(stack = %entry.name, marked, "an output it read changed while it ran: due again")
                }
                Err(e) => {
                    tracing::warn!(stack = %entry.name, error = %e, "could not make the stack due again")
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::reconcile::run::Next;
    use crate::status::Phase;

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
        assert_eq!(entry.status.inputs.waiting_for, vec!["net".to_owned()]);
        assert!(
            entry
                .status
                .message
                .unwrap()
                .starts_with("waiting for net (Reconciling)")
        );
        assert!(entry.lease.is_none(), "the lease is given back");
        assert!(
            entry.status.times.next_reconcile_at.is_some(),
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
                .times
                .next_reconcile_at
                .map(|t| t.0)
                .unwrap_or(i64::MAX)
                <= at
        };
        // net ends Ready with its first outputs: orders waits for it (and
        // has read nothing of it yet).
        let first = BTreeMap::from([("VpcId".to_owned(), "vpc-1".to_owned())]);
        t.steps.wake_dependents("net", &first, None).await;
        assert!(due(now_millis()).await);

        // orders runs, Ready, having read vpc-1; net changes an output
        // orders does not read: nothing.
        let mut ready = registry.get(NAME).await.unwrap().unwrap();
        ready.status.phase = Phase::Ready;
        ready.status.inputs.waiting_for.clear();
        ready.status.times.next_reconcile_at = None;
        ready.status.inputs.read_outputs = BTreeMap::from([("net".to_owned(), first.clone())]);
        registry.insert(ready.clone());
        let more = BTreeMap::from([
            ("VpcId".to_owned(), "vpc-1".to_owned()),
            ("Other".to_owned(), "x".to_owned()),
        ]);
        t.steps.wake_dependents("net", &more, None).await;
        assert!(
            !due(i64::MAX - 1).await,
            "an output nobody reads changed: nothing"
        );
        // VpcId changes: orders is due; and again at net's next Ready run
        // should this word be lost (orders has not read vpc-2 yet).
        let changed = BTreeMap::from([("VpcId".to_owned(), "vpc-2".to_owned())]);
        t.steps.wake_dependents("net", &changed, None).await;
        assert!(due(now_millis()).await);
        registry.insert(ready.clone());
        t.steps.wake_dependents("net", &changed, None).await;
        assert!(due(now_millis()).await, "compared with what orders read");

        // An entry that no longer depends on net is forgotten, not run.
        ready.spec.parameters.clear();
        registry.insert(ready);
        t.steps.wake_dependents("net", &first, None).await;
        assert!(registry.dependents("net").await.unwrap().is_empty());
    }
}
