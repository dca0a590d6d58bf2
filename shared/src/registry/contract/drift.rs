//! The drift record's writes: only while no run holds the stack, only over
//! the record read; read back whole from the entry and narrow from the
//! health check's index; carried by a run's status writes.

use super::super::{DriftRecords, Entries, Leases, Schedule};
use super::{NOW, TTL};
use crate::drift::{Detection, DriftRecord, DriftedResource};
use crate::status::Timestamp;

fn record(rev: u64) -> DriftRecord {
    DriftRecord {
        checked_at: Some(Timestamp(NOW - 60_000)),
        stack_drift: Some("DRIFTED".into()),
        resources: vec![DriftedResource {
            logical_id: "Queue".into(),
            resource_type: "AWS::SQS::Queue".into(),
            physical_id: None,
            status: "MODIFIED".into(),
            differences: Vec::new(),
        }],
        detection: (rev == 1).then(|| Detection {
            id: "d-1".into(),
            started_at: Timestamp(NOW - 60_000),
        }),
        rev,
        ..DriftRecord::default()
    }
}

/// `beta` is `Ready`, held by no run (as `seen_and_out_of_the_queue` leaves it).
pub(super) async fn drift_records<R>(r: &R, label: &str)
where
    R: Entries + Leases + Schedule + DriftRecords,
{
    let write = |read: Option<u64>, rec: DriftRecord, at: i64| async move {
        r.record_drift("beta", read, &rec, at)
            .await
            .unwrap_or_else(|e| panic!("{label}: {e}"))
    };
    assert!(
        write(None, record(1), NOW).await,
        "{label}: the first record"
    );
    assert!(
        !write(None, record(2), NOW).await,
        "{label}: one exists now"
    );
    assert!(
        !write(Some(7), record(2), NOW).await,
        "{label}: not the one read"
    );
    assert!(
        write(Some(1), record(2), NOW).await,
        "{label}: over the one read"
    );
    let beta = r
        .get("beta")
        .await
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("{label}"));
    assert_eq!(beta.status.findings.drift, Some(record(2)), "{label}");
    let watched = r.watched().await.unwrap_or_else(|e| panic!("{label}: {e}"));
    let w = watched
        .iter()
        .find(|w| w.name == "beta")
        .unwrap_or_else(|| panic!("{label}"));
    assert_eq!(w.drift, Some(record(2).watch()), "{label}: in the index");
    assert!(
        !r.record_drift("nobody", None, &record(1), NOW)
            .await
            .unwrap_or_else(|e| panic!("{label}: {e}")),
        "{label}: no entry"
    );
    // A run holds it: no write; the run's own status write carries it.
    r.acquire_lease("beta", "run-3", TTL, NOW)
        .await
        .unwrap_or_else(|e| panic!("{label}: {e}"));
    assert!(
        !write(Some(2), record(3), NOW).await,
        "{label}: held by a run"
    );
    r.write_status_and_release("beta", "run-3", &beta.status)
        .await
        .unwrap_or_else(|e| panic!("{label}: {e}"));
    let beta = r
        .get("beta")
        .await
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("{label}"));
    assert_eq!(
        beta.status.findings.drift,
        Some(record(2)),
        "{label}: carried by the run"
    );
    assert!(write(Some(2), record(3), NOW).await, "{label}: free again");
}
