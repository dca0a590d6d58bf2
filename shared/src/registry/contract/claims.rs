//! The registry contract's claims: one CloudFormation stack, one entry,
//! however many applies run at once and whatever each planned from.

use super::{NOW, TTL, URL};
use crate::manifest::parse_manifest;
use crate::registry::plan::{Plan, plan_apply_at};
use crate::registry::{Entries, Leases, RegistryError, Specs, StackEntry};

/// The region the contract's registries take for a spec that names none
/// (the DynamoDB registry's client region in the tests).
pub const HOME: &str = "us-east-1";

/// A plan for `(entry, stack name, region)`s, made from `current`.
fn plan_of(current: &[StackEntry], entries: &[(&str, &str, Option<&str>)]) -> Plan {
    let yaml: String = entries
        .iter()
        .map(|(name, stack, region)| {
            let region = region.map(|r| format!("    region: {r}\n")).unwrap_or_default();
            format!(
                "  - name: {name}\n    stackName: {stack}\n{region}    source: {{git: '{URL}', path: {name}.yaml}}\n"
            )
        })
        .collect();
    let specs = parse_manifest("claims.yaml", &format!("stacks:\n{yaml}"))
        .unwrap_or_else(|e| panic!("claims manifest: {e:?}"));
    plan_apply_at(&specs, current, false, Some(HOME))
        .unwrap_or_else(|e| panic!("claims plan: {e:?}"))
}

/// Refused, naming `name` and the entry that holds the stack.
fn assert_claimed(result: Result<(), RegistryError>, name: &str, holder: &str, label: &str) {
    match result {
        Err(RegistryError::Conflict {
            name: refused,
            detail,
        }) => {
            assert_eq!(refused, name, "{label}");
            assert!(
                detail.contains(&format!("{holder:?} already manages")),
                "{label}: {detail}"
            );
        }
        other => panic!("{label}: {name} should be refused: {other:?}"),
    }
}

pub(super) async fn claims<R: Entries + Specs + Leases>(r: &R, label: &str) {
    let current = || async { r.list().await.unwrap_or_default() };
    // Planned apart (two applies that each saw no other): the second loses.
    let first = plan_of(&current().await, &[("claim-a", "shared-stack", None)]);
    let second = plan_of(&current().await, &[("claim-b", "shared-stack", None)]);
    r.apply(&first, NOW)
        .await
        .unwrap_or_else(|e| panic!("{label}: {e}"));
    assert_claimed(r.apply(&second, NOW).await, "claim-b", "claim-a", label);
    assert!(
        r.get("claim-b").await.unwrap_or_default().is_none(),
        "{label}"
    );

    // At the same time: one wins.
    let before = current().await;
    let c = plan_of(&before, &[("claim-c", "race-stack", None)]);
    let d = plan_of(&before, &[("claim-d", "race-stack", None)]);
    let (c, d) = tokio::join!(r.apply(&c, NOW), r.apply(&d, NOW));
    assert_eq!(
        [c.is_ok(), d.is_ok()].iter().filter(|ok| **ok).count(),
        1,
        "{label}: {c:?} {d:?}"
    );

    // Leaving the region out is the registry's region: the same stack.
    let named = plan_of(&[], &[("claim-e", "shared-stack", Some(HOME))]);
    assert_claimed(r.apply(&named, NOW).await, "claim-e", "claim-a", label);
    let elsewhere = plan_of(
        &current().await,
        &[("claim-e", "shared-stack", Some("eu-west-1"))],
    );
    r.apply(&elsewhere, NOW)
        .await
        .unwrap_or_else(|e| panic!("{label}: another region is another stack: {e}"));

    // An entry moved to another stack gives the old one up.
    let moved = plan_of(&current().await, &[("claim-a", "moved-stack", None)]);
    r.apply(&moved, NOW)
        .await
        .unwrap_or_else(|e| panic!("{label}: {e}"));
    let taken = plan_of(&current().await, &[("claim-b", "shared-stack", None)]);
    r.apply(&taken, NOW)
        .await
        .unwrap_or_else(|e| panic!("{label}: the stack was given up: {e}"));

    // A removed entry gives its stack up.
    r.request_deletion("claim-b", NOW)
        .await
        .unwrap_or_else(|e| panic!("{label}: {e}"));
    r.acquire_lease("claim-b", "run-claims", TTL, NOW)
        .await
        .unwrap_or_else(|e| panic!("{label}: {e}"));
    // (Planned from before: a plan from now refuses it itself.)
    let while_deleting = plan_of(&[], &[("claim-f", "shared-stack", None)]);
    assert_claimed(
        r.apply(&while_deleting, NOW).await,
        "claim-f",
        "claim-b",
        &format!("{label}: held until the entry is gone"),
    );
    r.remove("claim-b", "run-claims")
        .await
        .unwrap_or_else(|e| panic!("{label}: {e}"));
    let after = plan_of(&current().await, &[("claim-f", "shared-stack", None)]);
    r.apply(&after, NOW)
        .await
        .unwrap_or_else(|e| panic!("{label}: the removed entry's stack is free: {e}"));
}
