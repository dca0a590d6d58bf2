//! The registry contract's plans larger than one transaction.

use super::{NOW, plan};
use crate::registry::{Entries, RegistryError, Specs, apply_plan};

/// A plan larger than one transaction: written batch by batch, in order,
/// with progress after each; a batch that conflicts stops the plan with what
/// was written, and applying the same entries again finishes it.
pub(super) async fn large_apply<R: Entries + Specs>(r: &R, label: &str) {
    let names: Vec<String> = (0..230).map(|i| format!("bulk-{i:03}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let before = r.list().await.unwrap_or_default();
    let stale = plan(&before, &refs, false);
    // Someone else registers one entry of the second batch meanwhile.
    r.apply(&plan(&before, &["bulk-150"], false), NOW)
        .await
        .unwrap_or_else(|e| panic!("{label}: the other apply: {e}"));

    // A new entry is two items (the entry and its stack's claim): 50 a
    // transaction, so bulk-150 is in the fourth.
    let mut seen = Vec::new();
    let stopped = apply_plan(r, &stale, NOW, |a| seen.push(a.written))
        .await
        .expect_err("the fourth batch conflicts");
    assert_eq!(
        (stopped.applied.written, stopped.applied.total, seen),
        (150, 230, vec![50, 100, 150]),
        "{label}: the first three batches written, the fourth not"
    );
    assert!(
        matches!(&stopped.error, RegistryError::Conflict { name, .. } if name == "bulk-150"),
        "{label}: {:?}",
        stopped.error
    );
    for (name, present) in [("bulk-149", true), ("bulk-151", false), ("bulk-229", false)] {
        let found = r.get(name).await.unwrap_or_default().is_some();
        assert_eq!(found, present, "{label}: {name} after the stopped apply");
    }

    // Again, from what is there now: only the rest is written.
    let now = r.list().await.unwrap_or_default();
    let rest = plan(&now, &refs, false);
    let mut seen = Vec::new();
    let written = apply_plan(r, &rest, NOW + 1, |a| seen.push((a.written, a.total)))
        .await
        .unwrap_or_else(|s| panic!("{label}: the second apply: {}", s.error));
    assert_eq!((written, seen), (79, vec![(50, 79), (79, 79)]), "{label}");
    let all = r.list().await.unwrap_or_default();
    let bulk = all.iter().filter(|e| e.name.starts_with("bulk-")).count();
    assert_eq!(bulk, 230, "{label}: every entry once");
    assert!(
        all.iter()
            .filter(|e| e.name.starts_with("bulk-"))
            .all(|e| e.spec_version == 1),
        "{label}: none written twice"
    );
}

/// A plan that prunes writes its prunes last: stopped part-way, it has
/// marked nothing for deletion (whatever the names' order).
pub(super) async fn prunes_last<R: Entries + Specs>(r: &R, label: &str) {
    let names: Vec<String> = (0..150).map(|i| format!("zz-{i:03}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let before = r.list().await.unwrap_or_default();
    let stale = plan(&before, &refs, true);
    r.apply(&plan(&before, &["zz-120"], false), NOW)
        .await
        .unwrap_or_else(|e| panic!("{label}: the other apply: {e}"));
    let stopped = apply_plan(r, &stale, NOW, |_| {})
        .await
        .expect_err("the second batch conflicts");
    assert_eq!(stopped.applied.written, 100, "{label}");
    let kept = r.get("bulk-000").await.ok().flatten();
    assert!(
        kept.is_some_and(|e| e.deletion_requested_at.is_none()),
        "{label}: nothing pruned before the creates were all written"
    );
}
