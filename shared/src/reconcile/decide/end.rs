//! What a run's end sets going once its status is written: the decision is
//! here, as a value (`finish` carries it out, tests assert on it).

use crate::clock::EpochMillis;
use crate::notice::NoticeKind;
use crate::registry::StackEntry;
use crate::status::Phase;

/// The most dependents one run's end starts itself; the others it made due
/// are the scheduler's next run's (the cap of a trigger's parallel starts).
pub const MAX_DEPENDENT_STARTS: usize = 32;

/// Whether a dependent the end of its upstream's run made due is started by
/// that run at once, as the scheduler would start it; else why not (it is
/// due: the scheduler looks at it again). Not while a run holds it (that
/// run looks again as it ends), nor while it is suspended.
pub fn start_dependent(entry: &StackEntry, now: EpochMillis) -> Result<(), &'static str> {
    if entry.lease.as_ref().is_some_and(|l| l.is_live(now)) {
        return Err("a run holds it");
    }
    if entry.is_suspended() && entry.deletion_requested_at.is_none() {
        return Err("suspended");
    }
    if entry.unsupported.is_some() {
        return Err("written by a later version of stacksync");
    }
    Ok(())
}

/// One thing a run's end sets going, after its final write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// The stacks that depend on this one are made due where what they
    /// read of it changed (its outputs), or where they waited for it.
    WakeDependents,
    /// This stack is made due again at once if an output it read changed
    /// while it ran (the stack that changed could not make it due then).
    RecheckUpstream,
    /// The bus is told how the run ended.
    Notify(NoticeKind),
}

/// The effects of a run that ends in `after`, the stack having been in
/// `before` when the run took it: a stack that ends `Ready` wakes its
/// dependents and looks again at what it read; a change of phase is told
/// (not one that ends as it found the stack, suspended still or given up
/// still; and waiting for another stack is no end).
pub fn effects_of_end(before: Phase, after: Phase) -> Vec<Effect> {
    let mut effects = Vec::new();
    if after == Phase::Ready {
        effects.push(Effect::WakeDependents);
        effects.push(Effect::RecheckUpstream);
    }
    if after != before && after != Phase::Pending {
        effects.push(Effect::Notify(NoticeKind::of_end(after)));
    }
    effects
}

#[cfg(test)]
mod tests {
    use super::*;
    use Effect::{Notify, RecheckUpstream, WakeDependents};

    #[test]
    fn each_end_sets_going_what_its_row_says() {
        let rows = [
            (
                Phase::Reconciling,
                Phase::Ready,
                vec![
                    WakeDependents,
                    RecheckUpstream,
                    Notify(NoticeKind::Succeeded),
                ],
            ),
            (
                Phase::Ready,
                Phase::Ready,
                vec![WakeDependents, RecheckUpstream],
            ),
            (
                Phase::Reconciling,
                Phase::Failed,
                vec![Notify(NoticeKind::Failed)],
            ),
            (Phase::Failed, Phase::Failed, vec![]),
            (Phase::Reconciling, Phase::Pending, vec![]),
            (
                Phase::Reconciling,
                Phase::Suspended,
                vec![Notify(NoticeKind::Succeeded)],
            ),
            (Phase::Suspended, Phase::Suspended, vec![]),
        ];
        for (before, after, wanted) in rows {
            assert_eq!(effects_of_end(before, after), wanted, "{before} -> {after}");
        }
    }
}
