//! A fleet's rollout in waves ([`crate::rollout`]) as runs see it: a
//! target's run that must wait for the waves before its own (or for a
//! halted rollout) ends at its start, `Pending (Rollout)` or `Pending
//! (Halted)`; a target's run that ends starts the next wave's targets.
//! Where each target stands is read from the registry (its followers'
//! index, and the fleet's record for the waves): nothing is recorded of
//! the rollout itself, so no record of it can be wrong.

use std::collections::BTreeMap;

use futures_util::future::join_all;
use tracing::info;

use super::{Ports, Steps, short};
use crate::clock::{EpochMillis, now_millis, rfc3339_millis};
use crate::ports::{Trigger, TriggerKind};
use crate::reconcile::run::{RunState, StepError};
use crate::registry::{Entries as _, FleetRecords as _, Schedule as _, StackEntry, follower_of};
use crate::rollout::{Gate, Peer, Plan, gate, next_starts, plan};
use crate::source::source_key;
use crate::status::{RolloutHold, Status, Timestamp, transitions};

/// How long a target waiting for a wave waits at most before it looks
/// again (the run that ends the wave before starts it sooner; this is for
/// a start that was lost).
const WAVE_RECHECK_MS: EpochMillis = 15 * 60 * 1000;
/// The most targets one run's end starts itself; the rest are made due
/// (the scheduler starts them).
const MAX_WAVE_STARTS: usize = 100;

/// A fleet target's rollout as the registry says it stands.
struct View {
    fleet: String,
    plan: Plan,
    peers: BTreeMap<String, Peer>,
    resumed: Option<String>,
}

impl View {
    fn resumed_at(&self, revision: &str) -> bool {
        self.resumed
            .as_deref()
            .is_some_and(|r| r.eq_ignore_ascii_case(revision))
    }
}

impl<P: Ports> Steps<P> {
    /// The rollout `entry` is a target of, if its fleet has one.
    async fn rollout_view(&self, entry: &StackEntry) -> Result<Option<View>, StepError> {
        let (Some(target), Some(_)) = (&entry.spec.target_of, &entry.spec.rollout) else {
            return Ok(None);
        };
        let Some(fleet) = self.registry.fleet(&target.fleet).await? else {
            return Ok(None);
        };
        let Some(plan) = plan(&fleet.spec, &fleet.read.units) else {
            return Ok(None);
        };
        let key = source_key(entry.spec.source.url(), entry.spec.effective_ref());
        let now = now_millis();
        let peers = self
            .registry
            .followers(&key)
            .await?
            .into_iter()
            .map(|f| (f.name.clone(), f.peer(now)))
            .collect();
        Ok(Some(View {
            fleet: target.fleet.clone(),
            plan,
            peers,
            resumed: fleet.resumed,
        }))
    }

    /// `Some`: the run ended here, its fleet's rollout holding it at
    /// `revision`. A forced run goes on, and says so.
    pub(super) async fn hold_for_rollout(
        &self,
        state: &mut RunState,
        entry: &StackEntry,
        revision: &str,
    ) -> Result<Option<RunState>, StepError> {
        let Some(mut view) = self.rollout_view(entry).await? else {
            return Ok(None);
        };
        let now = now_millis();
        let judge = |view: &View| {
            gate(
                &view.plan,
                &view.peers,
                &entry.name,
                revision,
                view.resumed_at(revision),
                now,
            )
        };
        let mut verdict = judge(&view);
        // Waiting only for the wave just before its own: the run that ended
        // it may be the one that started this (the index lags behind its
        // write). Those few are read again, consistently.
        if let Gate::Wait { wave, blocking, .. } = &verdict
            && *wave > 0
            && !blocking.is_empty()
            && blocking
                .iter()
                .all(|b| view.plan.waves[wave - 1].contains(b))
        {
            let blocking = blocking.clone();
            self.read_again(&mut view, &blocking, now).await;
            verdict = judge(&view);
        }
        let halted = matches!(verdict, Gate::Halted { .. });
        let (message, due) = match verdict {
            Gate::Go => return Ok(None),
            Gate::Wait {
                wave,
                waves,
                blocking,
                until,
            } => waiting_message(revision, wave, waves, &blocking, until, now),
            Gate::Halted { failed, tolerance } => {
                let interval = i64::try_from(entry.spec.interval.as_secs()).unwrap_or(3600);
                (
                    halted_message(&view.fleet, revision, &failed, tolerance),
                    now.saturating_add(interval.saturating_mul(1000)),
                )
            }
        };
        if state.trigger.force {
            state
                .execution
                .add_note(format!("forced through the rollout ({message})"));
            return Ok(None);
        }
        info!(stack = %state.entry, %message, "held by the fleet's rollout");
        let status = transitions::held_by_rollout(
            &entry.status,
            RolloutHold {
                revision: revision.to_owned(),
                halted,
            },
            message.clone(),
            Timestamp(due),
        );
        let outcome = format!("held: {message}");
        Ok(Some(
            self.finish(state.clone(), entry, status, &outcome).await?,
        ))
    }

    /// After a fleet target's run at `revision` ended with `status`
    /// (written): starts the targets of the rollout's next wave, if it is
    /// their turn, or makes them due when the pause ends. Best effort: a
    /// start lost here is made by the scheduler when the waiting targets
    /// are due again.
    pub(super) async fn advance_rollout(
        &self,
        state: &RunState,
        entry: &StackEntry,
        status: &Status,
        revision: &str,
    ) {
        if status.inputs.held_by_rollout.is_some() || entry.deletion_requested_at.is_some() {
            return;
        }
        let mut view = match self.rollout_view(entry).await {
            Ok(Some(view)) => view,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(stack = %entry.name, error = %e, "could not read the fleet's rollout; the scheduler starts the next wave");
                return;
            }
        };
        let now = now_millis();
        view.peers.insert(
            entry.name.clone(),
            follower_of(&StackEntry {
                status: status.clone(),
                lease: None,
                ..entry.clone()
            })
            .peer(now),
        );
        self.read_own_wave_again(&mut view, &entry.name, revision, now)
            .await;
        let Some((names, at)) =
            next_starts(&view.plan, &view.peers, revision, view.resumed_at(revision))
        else {
            return;
        };
        info!(stack = %entry.name, fleet = %view.fleet, targets = names.len(), at, "the rollout's next wave");
        let trigger = Trigger::of(TriggerKind::Rollout);
        for (index, name) in names.iter().enumerate() {
            let started = match (&state.execution.arn, at <= now && index < MAX_WAVE_STARTS) {
                (Some(arn), true) => self
                    .starter
                    .start(arn, name, &trigger, revision)
                    .await
                    .inspect_err(|e| tracing::warn!(stack = %name, error = %e, "could not start a target of the next wave; it is made due"))
                    .ok()
                    .flatten()
                    .is_some(),
                _ => false,
            };
            if !started && let Err(e) = self.registry.mark_due(name, at.max(now)).await {
                tracing::warn!(stack = %name, error = %e, "could not make a target of the next wave due");
            }
        }
    }

    /// The index lags behind the items: the other targets of this run's
    /// wave that it shows unfinished are read again, consistently, so the
    /// wave's last run to end sees that it is the last.
    async fn read_own_wave_again(
        &self,
        view: &mut View,
        me: &str,
        revision: &str,
        now: EpochMillis,
    ) {
        let Some(wave) = view.plan.waves.iter().find(|w| w.iter().any(|n| n == me)) else {
            return;
        };
        let unfinished: Vec<&String> = wave
            .iter()
            .filter(|n| n.as_str() != me)
            .filter(|n| {
                view.peers.get(*n).is_some_and(|p| {
                    p.running
                        || !p
                            .revision
                            .as_deref()
                            .is_some_and(|r| r.eq_ignore_ascii_case(revision))
                })
            })
            .collect();
        let unfinished: Vec<String> = unfinished.into_iter().cloned().collect();
        self.read_again(view, &unfinished, now).await;
    }

    /// `names`' items read again, consistently, over what the index said.
    async fn read_again(&self, view: &mut View, names: &[String], now: EpochMillis) {
        let read = join_all(names.iter().map(|n| self.registry.get(n))).await;
        for (name, got) in names.iter().zip(read) {
            if let Ok(Some(entry)) = got {
                view.peers
                    .insert(name.clone(), follower_of(&entry).peer(now));
            }
        }
    }
}

fn waiting_message(
    revision: &str,
    wave: usize,
    waves: usize,
    blocking: &[String],
    until: Option<EpochMillis>,
    now: EpochMillis,
) -> (String, EpochMillis) {
    let head = format!(
        "waits for its turn in the rollout of {}: wave {} of {waves}",
        short(revision),
        wave + 1
    );
    match until {
        Some(until) => (
            format!(
                "{head}, after the pause that follows the wave before (until {})",
                rfc3339_millis(until)
            ),
            until,
        ),
        None => {
            let named: Vec<&str> = blocking.iter().take(3).map(String::as_str).collect();
            let more = blocking.len().saturating_sub(named.len());
            (
                format!(
                    "{head}; {} target(s) of the waves before have not ended at it yet ({}{})",
                    blocking.len(),
                    named.join(", "),
                    if more > 0 {
                        format!(" and {more} more")
                    } else {
                        String::new()
                    }
                ),
                now.saturating_add(WAVE_RECHECK_MS),
            )
        }
    }
}

fn halted_message(fleet: &str, revision: &str, failed: &[String], tolerance: usize) -> String {
    let named: Vec<&str> = failed.iter().take(5).map(String::as_str).collect();
    let more = failed.len().saturating_sub(named.len());
    format!(
        "the rollout of {} is halted: {} target(s) failed at it ({}{}), failureTolerance is \
         {tolerance}: push a fix, or `stacksync rollout resume {fleet}`",
        short(revision),
        failed.len(),
        named.join(", "),
        if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        }
    )
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use crate::fleet::expand;
    use crate::reconcile::run::Next;
    use crate::registry::{Fleet, Fleets as _, Leases as _, UnitsRead};
    use crate::status::Phase;

    const FIRST: &str = "fl-111111111111-us-east-1";
    const SECOND: &str = "fl-222222222222-us-east-1";

    /// A fleet `fl` of two targets, one a wave, both registered from
    /// `orders`'s source; its record says `resumed`.
    async fn fleet(pause: &str, resumed: Option<&str>) -> Test {
        let t = Test::new().await;
        let base = t.entry();
        let mut spec = base.spec.clone();
        spec.name = "fl".into();
        spec.assume_role_arn = Some("arn:aws:iam::{account}:role/deploy".into());
        spec.targets = Some(
            serde_yaml_ng::from_str(
                "{accounts: ['111111111111', '222222222222'], regions: [us-east-1]}",
            )
            .expect("targets"),
        );
        spec.rollout = Some(
            serde_yaml_ng::from_str(&format!("{{maxConcurrent: 1{pause}}}")).expect("rollout"),
        );
        let registry = &t.steps.registry.inner;
        let record = Fleet {
            spec: spec.clone(),
            owner: None,
            read: UnitsRead::default(),
            resumed: resumed.map(str::to_owned),
            version: 0,
        };
        assert!(registry.put_fleet(&record, None).await.expect("put"));
        for target in expand(&spec, &Default::default()).expect("targets") {
            let mut entry = base.clone();
            entry.name = target.name.clone();
            entry.spec = target;
            registry.insert(entry);
        }
        t
    }

    fn input(t: &Test, name: &str, execution: &str) -> crate::reconcile::run::RunState {
        let mut input = t.input(execution);
        input.entry = name.into();
        input
    }

    fn entry(t: &Test, name: &str) -> crate::registry::StackEntry {
        t.steps.registry.inner.entry(name).expect("registered")
    }

    /// `name` as a run at HEAD that ended in `phase` left it, `ago` ms ago.
    fn ended(t: &Test, name: &str, phase: Phase, ago: i64) {
        let mut e = entry(t, name);
        e.status.phase = phase;
        e.status.run.last_attempted_revision = Some(HEAD.into());
        e.status.times.last_reconcile_at =
            Some(crate::status::Timestamp(crate::clock::now_millis() - ago));
        e.status.message = Some("Resource handler returned message: \"bucket exists\"".into());
        t.steps.registry.inner.insert(e);
    }

    #[tokio::test]
    async fn a_target_waits_for_the_wave_before_then_goes() {
        let t = fleet("", None).await;
        let held = t
            .steps
            .artifact_fetch(input(&t, SECOND, "run-1"))
            .await
            .expect("ends");
        assert_eq!(held.next, Next::Done);
        let second = entry(&t, SECOND);
        assert_eq!(second.status.phase, Phase::Pending);
        assert_eq!(
            second.status.inputs.held_by_rollout,
            Some(crate::status::RolloutHold {
                revision: HEAD.into(),
                halted: false
            })
        );
        assert_eq!(second.lease, None, "the lease is given back");
        let message = second.status.message.unwrap_or_default();
        assert!(
            message.starts_with("waits for its turn in the rollout of 0123456789ab: wave 2 of 2; 1 target(s) of the waves before have not ended at it yet (fl-111111111111-us-east-1)"),
            "{message}"
        );
        // The first wave never waits.
        let first = t
            .steps
            .artifact_fetch(input(&t, FIRST, "run-2"))
            .await
            .expect("goes on");
        assert_eq!(first.next, Next::Upload);
        t.steps
            .registry
            .release_lease(FIRST, "run-2")
            .await
            .expect("released");
        ended(&t, FIRST, Phase::Ready, 1000);
        let goes = t
            .steps
            .artifact_fetch(input(&t, SECOND, "run-3"))
            .await
            .expect("goes on");
        assert_eq!(goes.next, Next::Upload);
        assert_eq!(entry(&t, SECOND).status.inputs.held_by_rollout, None);
    }

    #[tokio::test]
    async fn a_target_started_by_the_wave_before_goes_though_the_index_lags_behind() {
        let t = fleet("", None).await;
        // The index still shows the first target's run under way...
        let mut running = entry(&t, FIRST);
        running.status.phase = Phase::Reconciling;
        running.status.run.last_attempted_revision = Some(HEAD.into());
        running.lease = Some(crate::registry::Lease {
            owner: "run-0".into(),
            expires_at: crate::status::Timestamp(crate::clock::now_millis() + 60_000),
            taken_at: None,
            parked: Default::default(),
        });
        let stale = vec![
            crate::registry::follower_of(&running),
            crate::registry::follower_of(&entry(&t, SECOND)),
        ];
        // ...that has ended Ready, and started the second.
        ended(&t, FIRST, Phase::Ready, 0);
        t.steps.registry.lag_followers(stale);
        let goes = t
            .steps
            .artifact_fetch(input(&t, SECOND, "run-1"))
            .await
            .expect("goes on");
        assert_eq!(
            goes.next,
            Next::Upload,
            "{:?}",
            entry(&t, SECOND).status.message
        );
    }

    #[tokio::test]
    async fn past_the_tolerance_the_rollout_halts_until_resumed() {
        let t = fleet("", None).await;
        ended(&t, FIRST, Phase::Failed, 1000);
        t.steps
            .artifact_fetch(input(&t, SECOND, "run-1"))
            .await
            .expect("ends");
        let message = entry(&t, SECOND).status.message.unwrap_or_default();
        assert_eq!(
            message,
            "the rollout of 0123456789ab is halted: 1 target(s) failed at it \
             (fl-111111111111-us-east-1), failureTolerance is 0: push a fix, or \
             `stacksync rollout resume fl`"
        );
        // A forced run goes through, and says so.
        let mut forced = input(&t, SECOND, "run-2");
        forced.trigger.force = true;
        let went = t.steps.artifact_fetch(forced).await.expect("goes on");
        assert_eq!(went.next, Next::Upload);
        assert!(
            went.execution
                .note
                .is_some_and(|n| n.starts_with("forced through the rollout (the rollout of")),
        );
        // Resumed at that revision: the rollout goes on past the failure.
        let resumed = fleet("", Some(HEAD)).await;
        ended(&resumed, FIRST, Phase::Failed, 1000);
        let goes = resumed
            .steps
            .artifact_fetch(input(&resumed, SECOND, "run-3"))
            .await
            .expect("goes on");
        assert_eq!(goes.next, Next::Upload);
    }

    #[tokio::test]
    async fn a_run_that_ends_its_wave_makes_the_next_one_due_after_the_pause() {
        let t = fleet(", pauseBetweenWaves: 10m", None).await;
        t.steps
            .artifact_fetch(input(&t, SECOND, "run-1"))
            .await
            .expect("held");
        let due_held = entry(&t, SECOND).status.times.next_reconcile_at;
        ended(&t, FIRST, Phase::Ready, 0);
        let first = entry(&t, FIRST);
        let mut state = input(&t, FIRST, "run-2");
        state.fetched = Some(crate::reconcile::run::Fetched {
            revision: HEAD.into(),
            artifact_key: None,
            policies: Vec::new(),
        });
        t.steps
            .advance_rollout(&state, &first, &first.status, HEAD)
            .await;
        let due = entry(&t, SECOND).status.times.next_reconcile_at;
        let ended_at = first.status.times.last_reconcile_at.expect("ended").0;
        assert_eq!(
            due.map(|d| d.0),
            Some(ended_at + 600_000),
            "was {due_held:?}"
        );
        // Before the pause ends, the second target still waits, and says until when.
        t.steps
            .artifact_fetch(input(&t, SECOND, "run-3"))
            .await
            .expect("held");
        let message = entry(&t, SECOND).status.message.unwrap_or_default();
        assert!(
            message.contains("after the pause that follows the wave before (until "),
            "{message}"
        );
    }
}
