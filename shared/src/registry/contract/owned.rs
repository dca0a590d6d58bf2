//! Registry sources and the entries they own: a source item's conditional
//! status writes, and an owner written, moved and let go with its entry.

use super::{NOW, URL};
use crate::manifest::parse_manifest;
use crate::registry::plan::{Action, Plan, Writer, plan_by};
use crate::registry::{Entries, RegistrySources, Specs};
use crate::registry_source::{SourceSpec, SourceState, SourceStatus};

fn spec() -> SourceSpec {
    SourceSpec {
        name: "contract-source".into(),
        url: URL.into(),
        reference: "main".into(),
        path: "stacks/".into(),
        credentials_secret: None,
        signed_by: vec![],
        insecure: false,
    }
}

fn owned_plan(current: &[crate::registry::StackEntry], files: &[&str], commit: &str) -> Plan {
    let text = "stacks:\n  - name: owned-one\n    source: {git: 'https://git.example/contract.git', path: o.yaml}\n";
    let specs = parse_manifest("stacks/a.yaml", text).unwrap_or_else(|e| panic!("{e:?}"));
    let files: Vec<String> = files.iter().map(|f| (*f).to_owned()).collect();
    let writer = Writer::Source {
        name: "contract-source",
        commit,
        files: &files,
    };
    plan_by(&specs, current, true, None, writer).unwrap_or_else(|e| panic!("{e:?}"))
}

pub async fn registry_sources<R: Entries + Specs + RegistrySources>(r: &R, label: &str) {
    let source = spec();
    assert!(
        r.add_registry_source(&source)
            .await
            .unwrap_or_else(|e| panic!("{label}: {e}")),
        "{label}: added"
    );
    assert!(
        !r.add_registry_source(&source)
            .await
            .unwrap_or_else(|e| panic!("{label}: {e}")),
        "{label}: once"
    );
    let read = r
        .registry_source(&source.name)
        .await
        .map(|o| o.unwrap_or_else(|| panic!("{label}: not found")))
        .unwrap_or_else(|e| panic!("{label}: {e}"));
    assert_eq!(
        (read.spec.clone(), read.version),
        (source.clone(), 1),
        "{label}"
    );
    assert_eq!(read.status, SourceStatus::default(), "{label}");
    let listed = r
        .registry_sources()
        .await
        .unwrap_or_else(|e| panic!("{label}: {e}"));
    assert!(listed.iter().any(|s| s.spec == source), "{label}: listed");

    let status = SourceStatus {
        state: SourceState::Ready,
        applied_revision: Some("c1".into()),
        entries: 1,
        ..SourceStatus::default()
    };
    assert!(
        r.write_source_status(&source.name, 1, &status)
            .await
            .unwrap_or_else(|e| panic!("{label}: {e}")),
        "{label}"
    );
    assert!(
        !r.write_source_status(&source.name, 1, &status)
            .await
            .unwrap_or_else(|e| panic!("{label}: {e}")),
        "{label}: a write from the version read before loses"
    );
    let read = r
        .registry_source(&source.name)
        .await
        .map(|o| o.unwrap_or_else(|| panic!("{label}: not found")))
        .unwrap_or_else(|e| panic!("{label}: {e}"));
    assert_eq!((read.status, read.version), (status, 2), "{label}");

    owners(r, label).await;
    assert!(
        r.remove_registry_source(&source.name)
            .await
            .unwrap_or_else(|e| panic!("{label}: {e}")),
        "{label}"
    );
    assert!(
        r.registry_source(&source.name)
            .await
            .unwrap_or_else(|e| panic!("{label}: {e}"))
            .is_none(),
        "{label}"
    );
    assert!(
        !r.remove_registry_source(&source.name)
            .await
            .unwrap_or_else(|e| panic!("{label}: {e}")),
        "{label}"
    );
}

/// An owned entry: created with its owner, moved, then let go to the CLI.
async fn owners<R: Entries + Specs>(r: &R, label: &str) {
    // An owned entry: created with its owner, moved, then let go.
    let plan = owned_plan(
        &r.list().await.unwrap_or_else(|e| panic!("{label}: {e}")),
        &["stacks/a.yaml"],
        "c1",
    );
    r.apply(&plan, NOW)
        .await
        .unwrap_or_else(|e| panic!("{label}: {e}"));
    let entry = r
        .get("owned-one")
        .await
        .map(|o| o.unwrap_or_else(|| panic!("{label}: not found")))
        .unwrap_or_else(|e| panic!("{label}: {e}"));
    let owner = entry
        .owner
        .clone()
        .unwrap_or_else(|| panic!("{label}: no owner"));
    assert_eq!(
        (owner.file.as_str(), owner.commit.as_str()),
        ("stacks/a.yaml", "c1"),
        "{label}"
    );
    let moved = owned_plan(
        &r.list().await.unwrap_or_else(|e| panic!("{label}: {e}")),
        &["stacks/b.yaml"],
        "c2",
    );
    assert!(
        moved
            .changes
            .iter()
            .any(|c| matches!(c.action, Action::Move { .. })),
        "{label}: {moved:?}"
    );
    r.apply(&moved, NOW)
        .await
        .unwrap_or_else(|e| panic!("{label}: {e}"));
    let after = r
        .get("owned-one")
        .await
        .map(|o| o.unwrap_or_else(|| panic!("{label}: not found")))
        .unwrap_or_else(|e| panic!("{label}: {e}"));
    assert_eq!(
        after.owner.as_ref().map(|o| o.file.as_str()),
        Some("stacks/b.yaml"),
        "{label}"
    );
    assert_eq!(
        after.spec_version, entry.spec_version,
        "{label}: a move is not a change"
    );
    let release = Plan {
        changes: vec![crate::registry::plan::Change {
            name: "owned-one".into(),
            action: Action::Move {
                version: after.spec_version,
                from: Some("stacks/b.yaml".into()),
                to: None,
            },
            spec: None,
            previous: None,
            waiting_for: Vec::new(),
            owner: None,
        }],
    };
    r.apply(&release, NOW)
        .await
        .unwrap_or_else(|e| panic!("{label}: {e}"));
    assert_eq!(
        r.get("owned-one")
            .await
            .map(|o| o.unwrap_or_else(|| panic!("{label}: not found")))
            .unwrap_or_else(|e| panic!("{label}: {e}"))
            .owner,
        None,
        "{label}: the CLI's now"
    );
}
