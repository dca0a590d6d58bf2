//! Each execution counted as started by one delivery only.
//!
//! Step Functions answers a start of a *running* execution (same name, same
//! input) with that execution, as if it were new, and the adapter can only
//! guess from its start time: two copies of one push a moment apart (two
//! webhooks on one repository, a redelivery) would both count the one
//! execution as started. So each execution a delivery counts as started is
//! claimed once, `run#<execution name>` with the same conditional put as a
//! delivery id (and the same expiry): the copy that loses the claim counts
//! it as skipped, "already started for this revision".

use futures_util::stream::{self, StreamExt};

use super::DELIVERY_TTL_SECONDS;
use crate::clock::EpochMillis;
use crate::registry::Deliveries;
use crate::triggers::{START_CONCURRENCY, SkipReason, Skipped, Starts};

/// The claim of one execution started.
pub fn claim_id(execution: &str) -> String {
    format!("run#{execution}")
}

/// Moves to `skipped` the starts another delivery claimed first. A claim
/// that cannot be made leaves the start counted (a count, never a start,
/// is what could be wrong), with a warning.
pub async fn count_each_start_once<R: Deliveries>(
    registry: &R,
    starts: &mut Starts,
    now: EpochMillis,
) {
    let ids: Vec<String> = starts
        .started
        .iter()
        .map(|s| claim_id(&s.execution))
        .collect();
    // The futures made first, then run `START_CONCURRENCY` at a time (as
    // `start_followers` does: the handler's future stays `Send`).
    let pending: Vec<_> = ids
        .iter()
        .map(|id| registry.record_delivery(id, now, DELIVERY_TTL_SECONDS))
        .collect();
    let claims: Vec<_> = stream::iter(pending)
        .buffered(START_CONCURRENCY)
        .collect()
        .await;
    let started = std::mem::take(&mut starts.started);
    for (start, claim) in started.into_iter().zip(claims) {
        match claim {
            Ok(false) => starts.skipped.push(Skipped {
                stack: start.stack,
                execution: Some(start.execution),
                reason: SkipReason::AlreadyStarted,
            }),
            Ok(true) => starts.started.push(start),
            Err(e) => {
                tracing::warn!(execution = %start.execution, "counting a start: {e}");
                starts.started.push(start);
            }
        }
    }
    starts.skipped.sort_by(|a, b| a.stack.cmp(&b.stack));
}
