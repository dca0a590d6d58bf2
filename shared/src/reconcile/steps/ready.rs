//! The status of a run that ends `Ready`.

use std::collections::BTreeMap;

use super::due;
use crate::clock::now_millis;
use crate::reconcile::run::RunState;
use crate::registry::StackEntry;
use crate::seen::Seen;
use crate::status::{Status, Timestamp, transitions};

/// `Ready` at the run's revision and desired hash, with the stack as seen
/// now; out of the scheduler's queue (its health check watches the stack),
/// unless a parameter reads a secret store (due again after `interval`).
/// `outputs`: the stack's, as CloudFormation reports them now (`None`: not
/// described, the last recorded stay).
pub(super) fn ready_status(
    state: &RunState,
    entry: &StackEntry,
    seen: Option<Seen>,
    outputs: Option<BTreeMap<String, String>>,
    message: &str,
) -> Status {
    let now = now_millis();
    let message = match state.revert().map(|r| r.reapplied) {
        None => message.to_owned(),
        Some(false) => format!(
            "{message}; drift put back by a drift-aware change set (REVERT_DRIFT), \
             checked by a detection at once"
        ),
        Some(true) => format!(
            "{message}; drift-aware change sets are refused here: the template was \
             applied as it is, which puts back only what it changes (checked by a \
             detection at once)"
        ),
    };
    transitions::ready(
        &entry.status,
        transitions::Success {
            spec_version: state.execution.spec_version,
            revision: state.revision().map(str::to_owned),
            desired_hash: state.desired_hash().map(str::to_owned),
            change_set: state.change_set_name().map(str::to_owned),
            seen,
            outputs,
            message,
            // Back in the queue after `interval` when a parameter reads a
            // secret store: its new versions (rotations) announce themselves
            // nowhere else.
            next_reconcile_at: entry
                .spec
                .reads_secrets()
                .then(|| Timestamp(due(now, entry.spec.interval.as_secs()))),
            out_of_band: state.out_of_band().cloned(),
            revert: state.revert().map(|r| (r.drift.clone(), r.reapplied)),
            now,
        },
    )
}
