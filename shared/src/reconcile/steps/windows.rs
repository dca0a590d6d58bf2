//! Sync windows at the start of a run: a run that may not change its stack
//! now (outside the allowed windows, inside a denied one: the
//! installation's and the entry's, [`crate::window`]) ends `Pending
//! (Window)`, due when they open. `reconcile --force` goes on, and says so
//! in its outcome and its status.

use tracing::info;

use super::{Ports, Steps};
use crate::reconcile::run::{RunState, StepError};
use crate::registry::StackEntry;
use crate::status::{StallReason, Timestamp, transitions};
use crate::window::{Verdict, describe, judge, parse_all};

/// How long a run held by windows that never open waits before it looks
/// again (the windows may have changed by then).
const NO_OPENING_RECHECK_MS: i64 = 86_400_000;

impl<P: Ports> Steps<P> {
    /// `Some`: the run ended here, held by a window (or its windows cannot
    /// be read). A forced run goes on; the note it carries says which
    /// window it went through.
    pub(super) async fn hold_for_windows(
        &self,
        state: &mut RunState,
        entry: &StackEntry,
    ) -> Result<Option<RunState>, StepError> {
        let releases_only = entry.deletion_requested_at.is_some() && !entry.spec.destroy_on_delete;
        if releases_only || entry.is_suspended() {
            return Ok(None);
        }
        if self.config.windows.is_empty() && entry.spec.windows.is_empty() {
            return Ok(None);
        }
        let now = self.config.clock.now();
        let own = parse_all(&entry.spec.windows, now)
            .map_err(|why| StepError::stalled(StallReason::Unsupported, why))?;
        let Verdict::Closed { why, opens } = judge(&[&self.config.windows, &own], now) else {
            return Ok(None);
        };
        if state.trigger.force {
            let note = format!("forced through a closed sync window ({why})");
            info!(stack = %state.entry, %note, "forced");
            state.execution.add_note(note);
            return Ok(None);
        }
        let message = describe(&why, opens);
        info!(stack = %state.entry, %message, "held by a sync window");
        let due = opens.unwrap_or_else(|| now.saturating_add(NO_OPENING_RECHECK_MS));
        let status = transitions::held_by_window(&entry.status, message.clone(), Timestamp(due));
        let outcome = format!("held: {message}");
        Ok(Some(
            self.finish(state.clone(), entry, status, &outcome).await?,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use crate::clock::{Clock, parse_rfc3339};
    use crate::reconcile::run::Next;
    use crate::spec::WindowSpec;
    use crate::status::Phase;

    fn at(text: &str) -> i64 {
        parse_rfc3339(text).unwrap_or_else(|| panic!("{text}"))
    }

    fn deny_noon() -> WindowSpec {
        serde_yaml_ng::from_str("{deny: '0 12 * * *', duration: 2h}").expect("a window")
    }

    /// `orders` with `windows`, the clock at `now`.
    async fn test_at(now: &str, windows: Vec<WindowSpec>) -> Test {
        let mut t = Test::with_entry(|e| e.spec.windows = windows).await;
        t.steps.config.clock = Clock::manual(at(now));
        t
    }

    #[tokio::test]
    async fn a_run_inside_a_denied_window_waits_pending_until_it_ends() {
        let t = test_at("2026-11-27T12:30:00Z", vec![deny_noon()]).await;
        let ended = t
            .steps
            .artifact_fetch(t.input("run-1"))
            .await
            .expect("ends");
        assert_eq!(ended.next, Next::Done);
        let outcome = ended.execution.outcome.unwrap_or_default();
        assert!(
            outcome.starts_with(
                "held: inside the denied sync window deny \"0 12 * * *\" for 2h (UTC)"
            ),
            "{outcome}"
        );
        let entry = t.entry();
        assert_eq!(entry.status.phase, Phase::Pending);
        assert!(entry.status.inputs.held_by_window);
        assert_eq!(
            entry.status.times.next_reconcile_at.map(|t| t.0),
            Some(at("2026-11-27T14:00:00Z"))
        );
        assert!(
            entry
                .status
                .message
                .as_deref()
                .is_some_and(|m| m.ends_with("waits until 2026-11-27T14:00:00Z")),
            "{:?}",
            entry.status.message
        );
        assert_eq!(entry.lease, None, "the lease is given back");
        assert_eq!(
            t.steps.sources.calls(),
            (0, 0),
            "the source is not even read"
        );

        // At the window's end the run goes on, and says nothing of windows.
        t.steps.config.clock.set(at("2026-11-27T14:00:00Z"));
        let went_on = t
            .steps
            .artifact_fetch(t.input("run-2"))
            .await
            .expect("goes on");
        assert_eq!(went_on.next, Next::Upload);
        assert_eq!(went_on.execution.note, None);
        assert!(!t.entry().status.inputs.held_by_window);
    }

    #[tokio::test]
    async fn a_forced_run_goes_through_a_closed_window_and_carries_a_note() {
        let t = test_at("2026-11-27T12:30:00Z", vec![deny_noon()]).await;
        let mut input = t.input("run-1");
        input.trigger.force = true;
        let went_on = t.steps.artifact_fetch(input).await.expect("goes on");
        assert_eq!(went_on.next, Next::Upload);
        assert_eq!(
            went_on.execution.note.as_deref(),
            Some(
                "forced through a closed sync window (inside the denied sync window \
                 deny \"0 12 * * *\" for 2h (UTC))"
            )
        );
    }

    #[tokio::test]
    async fn the_installations_windows_hold_every_entry_and_a_release_is_never_held() {
        let mut t = test_at("2026-11-27T18:30:00Z", Vec::new()).await;
        let allow: WindowSpec =
            serde_yaml_ng::from_str("{allow: '0 8 * * MON-FRI', duration: 10h}").expect("window");
        t.steps.config.windows =
            crate::window::parse_all(&[allow], at("2026-11-27T00:00:00Z")).expect("parsed");
        let ended = t
            .steps
            .artifact_fetch(t.input("run-1"))
            .await
            .expect("ends");
        assert_eq!(ended.next, Next::Done);
        assert_eq!(
            t.entry().status.times.next_reconcile_at.map(|t| t.0),
            Some(at("2026-11-30T08:00:00Z")),
            "Friday evening: Monday morning"
        );
        // A removed entry whose stack stays (no destroyOnDelete) changes no
        // stack: it is dropped at once.
        let mut entry = t.entry();
        entry.deletion_requested_at = Some(crate::status::Timestamp(at("2026-11-27T18:00:00Z")));
        t.steps.registry.inner.insert(entry);
        let released = t
            .steps
            .artifact_fetch(t.input("run-2"))
            .await
            .expect("goes on");
        assert_eq!(released.next, Next::Delete);
    }
}
