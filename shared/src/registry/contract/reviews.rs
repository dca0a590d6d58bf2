//! The `reviewed` record (`approval: pullRequest`): written on an entry
//! only, replaced by the next preview, marked merged only for the pull
//! request and head it names, and kept by the entry's other writes.

use super::plan;
use crate::pull_request::Reviewed;
use crate::registry::{Entries, Reviews, Specs};

fn record(pr: &str, head: &str) -> Reviewed {
    Reviewed {
        pull_request: pr.into(),
        head: head.into(),
        desired_hash: "d".repeat(64),
        rows_hash: "r".repeat(64),
        merged: false,
        at: super::NOW,
    }
}

fn ok<T>(label: &str, result: crate::registry::Result<T>) -> T {
    result.unwrap_or_else(|e| panic!("{label}: {e}"))
}

pub async fn reviews<R: Entries + Specs + Reviews>(r: &R, label: &str) {
    let name = "reviewed-one";
    let (a, b) = ("a".repeat(40), "b".repeat(40));
    let first = record("github x/y#1", &a);
    let missing = ok(label, r.record_review("no-such-entry", &first).await);
    assert!(!missing, "{label}: no entry, no record");
    let made = ok(label, r.get("no-such-entry").await);
    assert!(made.is_none(), "{label}: nothing made");

    let current = ok(label, r.list().await);
    ok(
        label,
        r.apply(&plan(&current, &[name], false), super::NOW).await,
    );
    assert!(ok(
        label,
        r.record_review(name, &record("github x/y#1", &a)).await
    ));
    assert!(ok(
        label,
        r.record_review(name, &record("github x/y#2", &b)).await
    ));
    let read = ok(label, r.get(name).await).and_then(|e| e.reviewed);
    assert_eq!(
        read,
        Some(record("github x/y#2", &b)),
        "{label}: the last preview"
    );

    for (pr, head) in [("github x/y#1", b.as_str()), ("github x/y#2", a.as_str())] {
        let marked = ok(label, r.mark_merged(name, pr, head).await);
        assert!(!marked, "{label}: {pr} at {head} is not the record");
    }
    assert!(ok(label, r.mark_merged(name, "github x/y#2", &b).await));
    let read = ok(label, r.get(name).await).and_then(|e| e.reviewed);
    assert!(read.is_some_and(|rv| rv.merged), "{label}: merged");
    let missing = ok(
        label,
        r.mark_merged("no-such-entry", "github x/y#2", &b).await,
    );
    assert!(!missing, "{label}: no entry");

    // Another apply of the entry keeps it.
    let current = ok(label, r.list().await);
    ok(
        label,
        r.apply(&plan(&current, &[name], false), super::NOW).await,
    );
    let read = ok(label, r.get(name).await).and_then(|e| e.reviewed);
    assert!(
        read.is_some_and(|rv| rv.merged),
        "{label}: kept by an apply"
    );
}
