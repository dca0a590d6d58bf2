//! Run slots (`MaxRunsPerAccount`): a run takes one of its stack's account
//! and region at its start, before it reads its source, and gives it back
//! at its end, whichever way it ends (and while it waits for a person).
//! With every slot held, it waits (`WaitForSlot`, the lease kept, polled
//! with growing waits up to a minute) and tries again; its status says so.

use tracing::{info, warn};

use super::{Ports, Steps, next_poll_seconds};
use crate::clock::now_millis;
use crate::reconcile::run::{Next, RunState, StepError, Wait, WaitOn};
use crate::registry::{LEASE_TTL, Slots as _, StackEntry, Taken, slots::slots_key};
use crate::spec::StackSpec;
use crate::status::{Timestamp, transitions};

/// The first wait for a slot; the waits grow to a minute.
const FIRST_SLOT_WAIT_SECONDS: u64 = 5;
/// How long past its `timeout` a slot outlives a run that died holding it.
const SLOT_MARGIN_MS: i64 = 15 * 60_000;

/// The account and region whose slots a spec's runs take: the account
/// `assumeRoleArn` names (the installation's own without one) and the
/// region (the installation's, `home`, without one).
pub fn slot_of(spec: &StackSpec, home: Option<&str>) -> String {
    let account = spec
        .assume_role_arn
        .as_deref()
        .and_then(|arn| arn.split(':').nth(4))
        .filter(|a| !a.is_empty())
        .unwrap_or("installation");
    let region = spec.region.as_deref().or(home).unwrap_or("default");
    slots_key(account, region)
}

impl<P: Ports> Steps<P> {
    /// Takes the run's slot: `Some(state)` to wait for one (or the run
    /// ended, past its wait budget).
    pub(super) async fn take_slot(
        &self,
        state: &mut RunState,
        entry: &StackEntry,
    ) -> Result<Option<RunState>, StepError> {
        let Some(cap) = self.config.max_runs_per_account else {
            return Ok(None);
        };
        let releases_only = entry.deletion_requested_at.is_some() && !entry.spec.destroy_on_delete;
        if releases_only || entry.is_suspended() {
            return Ok(None);
        }
        let key = slot_of(&entry.spec, self.config.home_region.as_deref());
        // Held only once taken here (one given back while the run waited
        // for a person is taken again).
        state.execution.slot = None;
        let now = now_millis();
        let timeout =
            i64::try_from(entry.spec.timeout.as_secs().saturating_mul(1000)).unwrap_or(i64::MAX);
        let expires = now.saturating_add(timeout).saturating_add(SLOT_MARGIN_MS);
        let taken = self
            .registry
            .take_slot(&key, &state.execution.name, cap, expires, now)
            .await?;
        let holders = match taken {
            Taken::Yes => {
                state.execution.slot = Some(key);
                if state.wait.on == Some(WaitOn::Slot) {
                    state.wait = Wait::default();
                }
                return Ok(None);
            }
            Taken::Full { holders } => holders,
        };
        if !state.execution.waits_for_slots {
            // An execution of a definition older than `WaitForSlot` (one
            // back from an approval across an upgrade): it cannot wait
            // there, so it goes on without a slot, once.
            warn!(stack = %state.entry, slot = %key, "every run slot held, and this execution's definition cannot wait for one: going on");
            return Ok(None);
        }
        super::within_budget(
            state,
            &entry.spec,
            "a run slot of the stack's account and region",
        )?;
        let first_wait = state.wait.on != Some(WaitOn::Slot);
        let account_region = key.trim_start_matches(crate::registry::slots::SLOTS_PREFIX);
        let message = format!(
            "waiting for a run slot in {account_region}: {holders} held, \
             MaxRunsPerAccount is {cap}"
        );
        if first_wait {
            info!(stack = %state.entry, %message, "waiting for a run slot");
            // Due when the lease would run out: a run that dies waiting is
            // started again by the scheduler.
            let due = now.saturating_add(i64::try_from(LEASE_TTL.as_millis()).unwrap_or(0));
            let status = transitions::waiting(&entry.status, Vec::new(), message, Timestamp(due));
            self.record(state, entry, status).await?;
        }
        let mut waiting = state.clone();
        waiting.wait.seconds = if first_wait {
            FIRST_SLOT_WAIT_SECONDS
        } else {
            next_poll_seconds(state.wait.seconds, FIRST_SLOT_WAIT_SECONDS)
        };
        waiting.wait.on = Some(WaitOn::Slot);
        waiting.wait.polls += 1;
        waiting.next = Next::WaitSlot;
        Ok(Some(waiting))
    }

    /// Gives the run's slot back, if it holds one (best effort: a slot not
    /// given back runs out by itself). The state names it, unless it is the
    /// input of a step that failed after taking it (the finalizer's): then
    /// the slot of `spec`'s account and region is given back, if this run
    /// holds it.
    pub(super) async fn give_back_slot(&self, state: &mut RunState, spec: Option<&StackSpec>) {
        let held = state.execution.slot.take();
        let Some(key) = held.or_else(|| {
            self.config.max_runs_per_account?;
            Some(slot_of(spec?, self.config.home_region.as_deref()))
        }) else {
            return;
        };
        if let Err(e) = self
            .registry
            .release_slot(&key, &state.execution.name)
            .await
        {
            warn!(stack = %state.entry, slot = %key, error = %e, "run slot not given back: it runs out by itself");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::registry::Leases as _;
    use crate::spec::fixtures::spec;
    use crate::status::Phase;

    const KEY: &str = "slots#installation/eu-west-1";

    #[tokio::test]
    async fn a_run_waits_for_a_slot_keeps_its_lease_and_gives_the_slot_back_at_its_end() {
        let mut t = Test::new().await;
        t.steps.config.max_runs_per_account = Some(1);
        t.steps.config.home_region = Some("eu-west-1".into());
        let registry = &t.steps.registry.inner;
        let far = now_millis() + 3_600_000;
        registry
            .take_slot(KEY, "other-run", 1, far, now_millis())
            .await
            .expect("taken");

        let mut input = t.input("run-1");
        input.execution.waits_for_slots = true;
        let waiting = t.steps.artifact_fetch(input).await.expect("waits");
        assert_eq!(waiting.next, Next::WaitSlot);
        assert_eq!(
            (waiting.wait.on, waiting.wait.seconds),
            (Some(WaitOn::Slot), 5)
        );
        assert_eq!(waiting.execution.slot, None);
        assert_eq!(
            t.steps.sources.calls(),
            (0, 0),
            "the source is not read yet"
        );
        let entry = t.entry();
        assert_eq!(entry.status.phase, Phase::Pending);
        assert_eq!(
            entry.status.message.as_deref(),
            Some(
                "waiting for a run slot in installation/eu-west-1: 1 held, \
                 MaxRunsPerAccount is 1"
            )
        );
        assert_eq!(entry.lease.map(|l| l.owner).as_deref(), Some("run-1"));

        // Still full: a longer wait, and its start kept.
        let again = t
            .steps
            .artifact_fetch(waiting.clone())
            .await
            .expect("waits");
        assert_eq!(
            (again.next, again.wait.seconds, again.wait.polls),
            (Next::WaitSlot, 8, 2)
        );
        assert_eq!(again.execution.started_at, waiting.execution.started_at);

        // Freed: it takes the slot and goes on, its waits forgotten.
        registry
            .release_slot(KEY, "other-run")
            .await
            .expect("released");
        let going = t.steps.artifact_fetch(again).await.expect("goes on");
        assert_eq!(going.next, Next::Upload);
        assert_eq!(going.execution.slot.as_deref(), Some(KEY));
        assert_eq!(going.wait.on, None);
        let holders = registry.slot_holders(KEY).await.expect("read");
        assert!(holders.contains_key("run-1"), "{holders:?}");

        // Its end gives it back.
        let entry = t.entry();
        let ended = t
            .steps
            .finish(going, &entry, entry.status.clone(), "done")
            .await
            .expect("ends");
        assert_eq!(ended.execution.slot, None);
        assert!(registry.slot_holders(KEY).await.expect("read").is_empty());
        assert!(t.entry().lease.is_none());
        t.steps
            .registry
            .release_lease(NAME, "run-1")
            .await
            .expect("nothing held");
    }

    /// A failure caught by the state machine reaches the finalizer with the
    /// failed step's input, which never held the slot that step took.
    #[tokio::test]
    async fn a_run_that_fails_in_its_first_step_gives_its_slot_back() {
        let mut t = Test::new().await;
        t.steps.config.max_runs_per_account = Some(1);
        t.steps.config.home_region = Some("eu-west-1".into());
        t.steps.sources.deny(URL);
        let input = t.input("run-1");
        let error = t
            .steps
            .artifact_fetch(input.clone())
            .await
            .expect_err("fails");
        let registry = &t.steps.registry.inner;
        assert!(
            registry
                .slot_holders(KEY)
                .await
                .expect("read")
                .contains_key("run-1")
        );
        let caught = crate::reconcile::run::FinalizeInput {
            state: input,
            error: crate::reconcile::run::CaughtError {
                error: error.name(),
                cause:
                    serde_json::json!({"errorType": error.name(), "errorMessage": error.message()})
                        .to_string(),
            },
        };
        t.steps.finalize(caught).await.expect("recorded");
        assert!(
            registry.slot_holders(KEY).await.expect("read").is_empty(),
            "the slot is given back"
        );
    }

    #[tokio::test]
    async fn an_execution_of_an_older_definition_goes_on_rather_than_wait() {
        let mut t = Test::new().await;
        t.steps.config.max_runs_per_account = Some(1);
        t.steps.config.home_region = Some("eu-west-1".into());
        let registry = &t.steps.registry.inner;
        let far = now_millis() + 3_600_000;
        registry
            .take_slot(KEY, "other-run", 1, far, now_millis())
            .await
            .expect("taken");
        let going = t
            .steps
            .artifact_fetch(t.input("run-1"))
            .await
            .expect("goes on");
        assert_eq!(going.next, Next::Upload, "its machine knows no wait-slot");
        assert_eq!(going.execution.slot, None);
    }

    #[test]
    fn a_slot_is_the_account_the_role_names_and_the_region() {
        let mut s = spec("a");
        assert_eq!(
            slot_of(&s, Some("eu-west-1")),
            "slots#installation/eu-west-1"
        );
        assert_eq!(slot_of(&s, None), "slots#installation/default");
        s.assume_role_arn = Some("arn:aws:iam::111122223333:role/deploy".into());
        s.region = Some("us-east-1".into());
        assert_eq!(
            slot_of(&s, Some("eu-west-1")),
            "slots#111122223333/us-east-1"
        );
    }
}
