//! What `apply` would do, decided without I/O: create, update, leave alone, prune.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::StackEntry;
pub use super::writer::Writer;
use super::writer::owned;
use crate::registry_source::Owner;
use crate::source::source_key;
use crate::spec::StackSpec;

/// What happens to one entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "action")]
pub enum Action {
    /// A new entry, at `specVersion` 1.
    Create,
    /// The spec changed: `specVersion` goes from `from` to `from + 1`.
    Update { from: u64, changed: Vec<String> },
    /// The spec is the same: nothing is written.
    Unchanged { version: u64 },
    /// The spec is the same, but the entry is indexed under a source key
    /// of an older form (one that dropped `refs/heads/` or `refs/tags/`):
    /// the key is rewritten and the entry made due (its run has the
    /// scheduler watch the source under the new key); the spec version
    /// stays.
    Rekey {
        version: u64,
        from: String,
        to: String,
    },
    /// The spec is the same, but it moved to another file of its registry
    /// source (or its source let it go, `to: None`): only the owner is
    /// rewritten; the stack is untouched.
    Move {
        version: u64,
        from: Option<String>,
        to: Option<String>,
    },
    /// Not in the file and `--prune`: marked for deletion. The stack is
    /// then deleted when the entry says `destroyOnDelete`, else kept.
    Prune {
        version: u64,
        stack_name: String,
        destroys_stack: bool,
    },
}

impl Action {
    /// The spec version the entry must still be at for this change to be
    /// written (`None`: a create, or nothing to write).
    pub fn expected_version(&self) -> Option<u64> {
        match self {
            Action::Update { from, .. } => Some(*from),
            Action::Prune { version, .. }
            | Action::Rekey { version, .. }
            | Action::Move { version, .. } => Some(*version),
            Action::Create | Action::Unchanged { .. } => None,
        }
    }
}

/// One planned change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Change {
    pub name: String,
    #[serde(flatten)]
    pub action: Action,
    /// The spec to write (create and update only).
    #[serde(skip)]
    pub spec: Option<StackSpec>,
    /// The spec it replaces (update only): the stack it drove is given up
    /// if the new spec drives another.
    #[serde(skip)]
    pub previous: Option<StackSpec>,
    /// A new entry's dependencies that are not `Ready` (or are new too): it
    /// is registered waiting for them, not due at once, and they make it
    /// due when they are (create only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub waiting_for: Vec<String>,
    /// The owner written with a create, an update or a move (`None`: the
    /// CLI's; a move to `None` lets the entry go to the CLI).
    #[serde(skip)]
    pub owner: Option<Owner>,
}

/// The changes `apply` makes, in name order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Plan {
    pub changes: Vec<Change>,
}

impl Plan {
    /// The changes that write something.
    pub fn writes(&self) -> impl Iterator<Item = &Change> {
        self.changes
            .iter()
            .filter(|c| !matches!(c.action, Action::Unchanged { .. }))
    }
}

/// Why a plan cannot be carried out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanConflict {
    pub name: String,
    pub field: &'static str,
    pub message: String,
}

/// The most entries a prune may mark for deletion without `--yes`, when it
/// does not take them all (and at most a fifth of the registry).
pub const PRUNE_WITHOUT_CONFIRMATION: usize = 5;

/// Why a plan needs `--yes` before it is written: it prunes every
/// registered entry (an empty or wrong file), or more than
/// [`PRUNE_WITHOUT_CONFIRMATION`] and more than a fifth of them. `None`
/// when it may go ahead. `registered`: the entries not being deleted.
pub fn prune_needs_confirmation(plan: &Plan, registered: usize) -> Option<String> {
    let pruned: Vec<&Change> = plan
        .changes
        .iter()
        .filter(|c| matches!(c.action, Action::Prune { .. }))
        .collect();
    let n = pruned.len();
    let all = n > 0 && n == registered;
    let many = n > PRUNE_WITHOUT_CONFIRMATION && n * 5 > registered;
    if !all && !many {
        return None;
    }
    let destroyed = pruned
        .iter()
        .filter(|c| {
            matches!(
                c.action,
                Action::Prune {
                    destroys_stack: true,
                    ..
                }
            )
        })
        .count();
    let what = if all {
        format!("every registered entry ({n})")
    } else {
        format!("{n} of the {registered} registered entries")
    };
    Some(format!(
        "this --prune would mark {what} for deletion, {destroyed} of them with destroyOnDelete \
         (their stacks would be deleted): check the file (--dry-run lists them), and run again \
         with --yes if that is what you mean"
    ))
}

/// The entries not in the file, and not being deleted already.
fn pruned<'a>(
    current: &'a [StackEntry],
    wanted: &'a BTreeSet<&str>,
) -> impl Iterator<Item = Change> + 'a {
    current
        .iter()
        .filter(|e| !wanted.contains(e.name.as_str()) && e.deletion_requested_at.is_none())
        .map(prune_of)
}

/// `entry` marked for deletion: its stack deleted by `destroyOnDelete`.
pub fn prune_of(entry: &StackEntry) -> Change {
    Change {
        name: entry.name.clone(),
        action: Action::Prune {
            version: entry.spec_version,
            stack_name: entry.spec.effective_stack_name().to_owned(),
            destroys_stack: entry.spec.destroy_on_delete,
        },
        spec: None,
        previous: None,
        waiting_for: Vec::new(),
        owner: None,
    }
}

/// [`plan_apply_at`] without the installation's region: a spec that names
/// no region and one that names the installation's are not known to be
/// the same stack.
pub fn plan_apply(
    desired: &[StackSpec],
    current: &[StackEntry],
    prune: bool,
) -> Result<Plan, Vec<PlanConflict>> {
    plan_apply_at(desired, current, prune, None)
}

/// Compares the desired specs with the registry's entries. `home`: the
/// installation's region, which a spec without `region` deploys to.
///
/// Refuses (all problems at once): re-applying an entry that is being
/// deleted, and an entry that would drive a CloudFormation stack (account,
/// region, name) another registry entry, or another entry of the file,
/// already drives.
pub fn plan_apply_at(
    desired: &[StackSpec],
    current: &[StackEntry],
    prune: bool,
    home: Option<&str>,
) -> Result<Plan, Vec<PlanConflict>> {
    plan_by(desired, current, prune, home, Writer::Cli)
}

/// A plan made by `writer` ([`plan_apply_at`] for the CLI): it creates,
/// changes and prunes only its own entries. An entry that another owns is
/// refused, naming both owners; an entry of a source that moved to another
/// of its files is a [`Action::Move`] (the stack is untouched).
pub fn plan_by(
    desired: &[StackSpec],
    current: &[StackEntry],
    prune: bool,
    home: Option<&str>,
    writer: Writer<'_>,
) -> Result<Plan, Vec<PlanConflict>> {
    let by_name: BTreeMap<&str, &StackEntry> =
        current.iter().map(|e| (e.name.as_str(), e)).collect();
    let wanted: BTreeSet<&str> = desired.iter().map(|s| s.name.as_str()).collect();
    let mut conflicts = Vec::new();
    let mut changes = Vec::new();

    for (index, spec) in desired.iter().enumerate() {
        if let Some(conflict) = drives_anothers_stack(spec, &desired[..index], current, home) {
            conflicts.push(conflict);
            continue;
        }
        let existing = by_name.get(spec.name.as_str()).copied();
        if let Some(entry) = existing.filter(|e| !writer.owns(e)) {
            let mine = writer.owner_of(index);
            conflicts.push(PlanConflict {
                name: spec.name.clone(),
                field: "name",
                message: format!(
                    "the entry {:?} is owned by {}: {} cannot change it (remove it there first, \
                     or change it there)",
                    spec.name,
                    Owner::describe(entry.owner.as_ref()),
                    Owner::describe(mine.as_ref()),
                ),
            });
            continue;
        }
        match planned(spec, existing) {
            Ok(change) => changes.push(owned(change, existing, writer.owner_of(index))),
            Err(conflict) => conflicts.push(conflict),
        }
    }
    if prune {
        let owned: Vec<StackEntry> = current.iter().filter(|e| writer.owns(e)).cloned().collect();
        changes.extend(pruned(&owned, &wanted).collect::<Vec<_>>());
    }
    let gone: BTreeSet<&str> = changes
        .iter()
        .filter(|c| matches!(c.action, Action::Prune { .. }))
        .map(|c| c.name.as_str())
        .collect();
    conflicts.extend(super::graph::dependency_conflicts(desired, current, &gone));
    for change in &mut changes {
        if let (Action::Create, Some(spec)) = (&change.action, &change.spec) {
            change.waiting_for = spec
                .upstream()
                .into_iter()
                .filter(|up| {
                    // New in this plan, or registered and not Ready.
                    by_name
                        .get(up)
                        .is_none_or(|e| !e.display_phase().is_ready())
                })
                .map(str::to_owned)
                .collect();
        }
    }
    if !conflicts.is_empty() {
        return Err(conflicts);
    }
    changes.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Plan { changes })
}

/// The stack `spec` drives is driven by another entry: of the registry, or
/// of the file before it (`earlier`).
fn drives_anothers_stack(
    spec: &StackSpec,
    earlier: &[StackSpec],
    current: &[StackEntry],
    home: Option<&str>,
) -> Option<PlanConflict> {
    let stack = spec.stack_key(home);
    let in_registry = current
        .iter()
        .find(|e| e.name != spec.name && e.spec.stack_key(home) == stack)
        .map(|e| format!("the registry entry {:?}", e.name));
    let in_file = earlier
        .iter()
        .find(|s| s.name != spec.name && s.stack_key(home) == stack)
        .map(|s| format!("the entry {:?} of the file", s.name));
    let other = in_registry.or(in_file)?;
    Some(PlanConflict {
        name: spec.name.clone(),
        field: "stackName",
        message: format!(
            "{other} already manages the CloudFormation stack {:?}{}{}",
            stack.2,
            stack.1.map(|r| format!(" in {r}")).unwrap_or_default(),
            stack
                .0
                .map(|a| format!(" of account {a}"))
                .unwrap_or_default()
        ),
    })
}

/// What applying `spec` does to its entry (`entry`, if registered).
fn planned(spec: &StackSpec, entry: Option<&StackEntry>) -> Result<Change, PlanConflict> {
    let (action, previous) = match entry {
        None => (Action::Create, None),
        Some(entry) if entry.deletion_requested_at.is_some() => {
            return Err(PlanConflict {
                name: spec.name.clone(),
                field: "name",
                message: "this entry is being deleted; apply it again once `stacksync get` \
                          no longer finds it"
                    .into(),
            });
        }
        Some(entry) if entry.spec_hash == spec.content_hash() => {
            let key = source_key(spec.source.url(), spec.effective_ref());
            let action = match &entry.stored_source_key {
                Some(stored) if *stored != key => Action::Rekey {
                    version: entry.spec_version,
                    from: stored.clone(),
                    to: key,
                },
                _ => Action::Unchanged {
                    version: entry.spec_version,
                },
            };
            return Ok(Change {
                name: spec.name.clone(),
                action,
                spec: None,
                previous: None,
                waiting_for: Vec::new(),
                owner: None,
            });
        }
        Some(entry) => (
            Action::Update {
                from: entry.spec_version,
                changed: changed_fields(&entry.spec, spec),
            },
            Some(entry.spec.clone()),
        ),
    };
    Ok(Change {
        name: spec.name.clone(),
        action,
        spec: Some(spec.clone()),
        previous,
        waiting_for: Vec::new(),
        owner: None,
    })
}

/// The fields that differ (`tags`, `source.path`), for people to read.
pub fn changed_fields(old: &StackSpec, new: &StackSpec) -> Vec<String> {
    let old = serde_json::to_value(old).unwrap_or_default();
    let new = serde_json::to_value(new).unwrap_or_default();
    let empty = serde_json::Map::new();
    let old = old.as_object().unwrap_or(&empty);
    let new = new.as_object().unwrap_or(&empty);
    let keys: BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    let mut changed = Vec::new();
    for key in keys {
        match (old.get(key), new.get(key)) {
            (Some(a), Some(b)) if a == b => {}
            (Some(serde_json::Value::Object(a)), Some(serde_json::Value::Object(b)))
                if key == "source" =>
            {
                let inner: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
                changed.extend(
                    inner
                        .into_iter()
                        .filter(|k| a.get(*k) != b.get(*k))
                        .map(|k| format!("source.{k}")),
                );
            }
            _ => changed.push(key.clone()),
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::fixtures::spec;
    use crate::status::{Status, Timestamp};

    fn entry(spec: StackSpec, version: u64) -> StackEntry {
        StackEntry {
            name: spec.name.clone(),
            spec_version: version,
            spec_hash: spec.content_hash(),
            spec,
            suspended: false,
            deletion_requested_at: None,
            created_at: Timestamp(0),
            updated_at: Timestamp(0),
            status: Status::default(),
            lease: None,
            unsupported: None,
            stored_source_key: None,
            owner: None,
            reviewed: None,
        }
    }

    #[test]
    fn new_changed_same_and_missing_entries_are_told_apart() {
        let mut changed = spec("b");
        changed.source.path = "other.yaml".into();
        changed.tags.insert("team".into(), "x".into());
        let current = vec![
            entry(spec("b"), 3),
            entry(spec("c"), 1),
            entry(spec("d"), 7),
        ];
        let plan = plan_apply(&[spec("a"), changed, spec("c")], &current, true).unwrap();
        let actions: Vec<(&str, &Action)> = plan
            .changes
            .iter()
            .map(|c| (c.name.as_str(), &c.action))
            .collect();
        assert_eq!(
            actions,
            vec![
                ("a", &Action::Create),
                (
                    "b",
                    &Action::Update {
                        from: 3,
                        changed: vec!["source.path".into(), "tags".into()]
                    }
                ),
                ("c", &Action::Unchanged { version: 1 }),
                (
                    "d",
                    &Action::Prune {
                        version: 7,
                        stack_name: "d".into(),
                        destroys_stack: false,
                    }
                ),
            ]
        );
        assert_eq!(plan.writes().count(), 3);
    }

    #[test]
    fn without_prune_missing_entries_are_left_alone() {
        let plan = plan_apply(&[], &[entry(spec("d"), 7)], false).unwrap();
        assert_eq!(plan.changes, vec![]);
    }

    #[test]
    fn an_entry_being_deleted_cannot_be_reapplied_or_pruned_again() {
        let mut gone = entry(spec("a"), 2);
        gone.deletion_requested_at = Some(Timestamp(1));
        let err = plan_apply(&[spec("a")], std::slice::from_ref(&gone), false).unwrap_err();
        assert_eq!(err[0].name, "a");
        assert!(err[0].message.contains("being deleted"));
        assert_eq!(plan_apply(&[], &[gone], true).unwrap().changes, vec![]);
    }

    #[test]
    fn two_entries_cannot_drive_one_cloudformation_stack() {
        let mut twin = spec("new-name");
        twin.stack_name = Some("existing".into());
        let err = plan_apply(&[twin], &[entry(spec("existing"), 1)], true).unwrap_err();
        assert_eq!(err[0].field, "stackName");
        assert!(
            err[0].message.contains("\"existing\" already manages"),
            "{}",
            err[0].message
        );
    }

    #[test]
    fn pruning_everything_or_many_needs_confirmation_and_a_few_do_not() {
        let registry = |n: usize| -> Vec<StackEntry> {
            (0..n)
                .map(|i| entry(spec(&format!("s{i:02}")), 1))
                .collect()
        };
        let keep =
            |n: usize| -> Vec<StackSpec> { (0..n).map(|i| spec(&format!("s{i:02}"))).collect() };
        // An empty file prunes everything: refused, however few there are.
        let plan = plan_apply(&[], &registry(2), true).unwrap();
        let why = prune_needs_confirmation(&plan, 2).unwrap();
        assert!(why.contains("every registered entry (2)"), "{why}");
        // Five of 40: fine. Six of 40 (15%): fine. Six of 20 (30%): confirm.
        for (registered, kept, confirm) in [
            (40, 35, false),
            (40, 34, false),
            (20, 14, true),
            (3, 2, false),
        ] {
            let plan = plan_apply(&keep(kept), &registry(registered), true).unwrap();
            assert_eq!(
                prune_needs_confirmation(&plan, registered).is_some(),
                confirm,
                "{kept} kept of {registered}"
            );
        }
        // Nothing pruned, nothing registered: nothing to confirm.
        let plan = plan_apply(&[], &[], true).unwrap();
        assert_eq!(prune_needs_confirmation(&plan, 0), None);
    }

    #[test]
    fn one_stack_is_one_account_region_and_name_whatever_the_spec_leaves_out() {
        let mut implicit = spec("a");
        implicit.stack_name = Some("shared".into());
        let mut explicit = spec("b");
        explicit.stack_name = Some("shared".into());
        explicit.region = Some("eu-west-1".into());
        // The registry has `a` (no region); `b` names the installation's.
        let current = [entry(implicit.clone(), 1)];
        let err =
            plan_apply_at(&[explicit.clone()], &current, false, Some("eu-west-1")).unwrap_err();
        assert!(
            err[0].message.contains("the registry entry \"a\" already manages the CloudFormation stack \"shared\" in eu-west-1"),
            "{}",
            err[0].message
        );
        // Another region: another stack.
        assert!(plan_apply_at(&[explicit.clone()], &current, false, Some("us-east-1")).is_ok());
        // Both in one file.
        let err = plan_apply_at(
            &[implicit.clone(), explicit.clone()],
            &[],
            false,
            Some("eu-west-1"),
        )
        .unwrap_err();
        assert!(
            err[0].message.contains("the entry \"a\" of the file"),
            "{}",
            err[0].message
        );
        // The same name in another account (assumeRoleArn) is another stack.
        let mut elsewhere = explicit;
        elsewhere.assume_role_arn = Some("arn:aws:iam::111122223333:role/stacksync".into());
        assert!(plan_apply_at(&[elsewhere.clone()], &current, false, Some("eu-west-1")).is_ok());
        let mut twin = elsewhere.clone();
        twin.name = "c".into();
        let err = plan_apply_at(&[elsewhere, twin], &[], false, Some("eu-west-1")).unwrap_err();
        assert!(
            err[0].message.ends_with("of account 111122223333"),
            "{}",
            err[0].message
        );
    }
}
