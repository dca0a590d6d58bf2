//! The registry contract's source items, and holds ended from outside.

use super::{NOW, SECRET, TTL, URL};
use crate::registry::{Entries, Leases, Schedule, SourceRecord, end_hold};
use crate::status::{Phase, StallReason, Timestamp};

pub(super) async fn sources<R: Schedule>(r: &R, label: &str) {
    let key = "git.example/contract#main";
    assert!(
        r.add_source(key, URL, "main", None)
            .await
            .unwrap_or_default(),
        "{label}"
    );
    assert!(
        !r.add_source(key, URL, "main", Some(SECRET))
            .await
            .unwrap_or(true),
        "{label}: added twice"
    );
    source_credentials(r, key, label).await;
    assert!(
        r.record_source_head(key, None, "h1", NOW)
            .await
            .unwrap_or_default(),
        "{label}"
    );
    assert!(
        !r.record_source_head(key, None, "h2", NOW)
            .await
            .unwrap_or(true),
        "{label}: a head was recorded meanwhile"
    );
    assert!(
        r.record_source_head(key, Some("h1"), "h2", NOW + 1)
            .await
            .unwrap_or_default(),
        "{label}"
    );
    let all = r.sources().await.unwrap_or_else(|e| panic!("{label}: {e}"));
    assert_eq!(all.len(), 1, "{label}");
    assert_eq!(
        (all[0].head.as_deref(), all[0].followers_checked_at),
        (Some("h2"), Some(NOW + 1)),
        "{label}"
    );
    assert_eq!(
        (all[0].url.as_str(), all[0].reference.as_str()),
        (URL, "main"),
        "{label}"
    );
    assert!(
        !r.forget_source(key, Some("h1")).await.unwrap_or(true),
        "{label}: moved since"
    );
    assert!(
        r.forget_source(key, Some("h2")).await.unwrap_or_default(),
        "{label}"
    );
    assert!(r.sources().await.unwrap_or_default().is_empty(), "{label}");
}

/// The secret a source is listed with: none at first, then as set; a
/// source item that is not there gets none.
async fn source_credentials<R: Schedule>(r: &R, key: &str, label: &str) {
    let listed = |records: Vec<SourceRecord>| {
        records
            .into_iter()
            .find(|s| s.key == key)
            .and_then(|s| s.credentials)
    };
    assert_eq!(
        listed(r.sources().await.unwrap_or_default()),
        None,
        "{label}"
    );
    assert!(
        r.set_source_credentials(key, Some(SECRET))
            .await
            .unwrap_or_default(),
        "{label}"
    );
    assert_eq!(
        listed(r.sources().await.unwrap_or_default()).as_deref(),
        Some(SECRET),
        "{label}: the secret a source is listed with"
    );
    assert!(
        !r.set_source_credentials("nobody#main", None)
            .await
            .unwrap_or(true),
        "{label}: no item, nothing set"
    );
}

/// A run stopped from outside: its hold ended, recorded as interrupted,
/// due at once; another run's hold, or none, is left alone.
pub(super) async fn ended_holds<R: Entries + Leases>(r: &R, label: &str) {
    r.acquire_lease("alpha", "run-9", TTL, NOW)
        .await
        .unwrap_or_else(|e| panic!("{label}: {e}"));
    let other = end_hold(r, "alpha", "run-8", "stopped", NOW + 5).await;
    assert!(!other.unwrap_or(true), "{label}: not the holder");
    let ended = end_hold(r, "alpha", "run-9", "stopped by hand", NOW + 5).await;
    assert!(ended.unwrap_or(false), "{label}: the holder's hold ended");
    let alpha = r
        .get("alpha")
        .await
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("{label}"));
    assert!(alpha.lease.is_none(), "{label}");
    assert_eq!(
        (
            alpha.status.phase,
            alpha.status.stall_reason,
            alpha.status.message.as_deref()
        ),
        (
            Phase::Failed,
            Some(StallReason::Interrupted),
            Some("stopped by hand")
        ),
        "{label}"
    );
    assert_eq!(
        alpha.status.times.next_reconcile_at,
        Some(Timestamp(NOW + 5)),
        "{label}: due at once"
    );
    let again = end_hold(r, "alpha", "run-9", "stopped", NOW + 6).await;
    assert!(!again.unwrap_or(true), "{label}: nothing held any more");
}
