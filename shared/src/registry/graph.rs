//! The dependencies between entries (`dependsOn`, `fromStack`) as a graph,
//! decided without I/O: what a plan would leave broken (a dependency on an
//! entry that is not there, a cycle), and who depends on an entry.

use std::collections::{BTreeMap, BTreeSet};

use super::StackEntry;
use super::plan::PlanConflict;
use crate::spec::StackSpec;

/// The specs the registry holds once a plan is written: the file's over
/// the registry's, without those being deleted (or pruned).
fn after_plan<'a>(
    desired: &'a [StackSpec],
    current: &'a [StackEntry],
    gone: &BTreeSet<&str>,
) -> BTreeMap<&'a str, &'a StackSpec> {
    let mut specs: BTreeMap<&str, &StackSpec> = current
        .iter()
        .filter(|e| e.deletion_requested_at.is_none() && !gone.contains(e.name.as_str()))
        .map(|e| (e.name.as_str(), &e.spec))
        .collect();
    specs.extend(desired.iter().map(|s| (s.name.as_str(), s)));
    specs
}

/// The dependencies (`dependsOn`, `fromStack`) a plan would break: an
/// entry of the file that depends on an entry neither in the file nor
/// registered (or being deleted), an entry that stays and depends on one
/// this plan prunes, and a cycle through an entry of the file. A registered
/// entry whose dependency was broken before (`delete --force`) does not
/// stop the apply of another file.
pub(super) fn dependency_conflicts(
    desired: &[StackSpec],
    current: &[StackEntry],
    gone: &BTreeSet<&str>,
) -> Vec<PlanConflict> {
    let specs = after_plan(desired, current, gone);
    let in_file: BTreeSet<&str> = desired.iter().map(|s| s.name.as_str()).collect();
    let mut conflicts = Vec::new();
    for (name, spec) in &specs {
        for upstream in spec.upstream() {
            if specs.contains_key(upstream) {
                continue;
            }
            let why = if gone.contains(upstream) {
                format!(
                    "{upstream} would be pruned (it is not in the file), and {name} depends on it: keep it in the file, or remove the dependency first"
                )
            } else if !in_file.contains(name) {
                continue;
            } else if current
                .iter()
                .any(|e| e.name == upstream && e.deletion_requested_at.is_some())
            {
                format!("depends on {upstream}, which is being deleted")
            } else {
                format!("depends on {upstream}, which is neither in the file nor registered")
            };
            conflicts.push(PlanConflict {
                name: (*name).to_owned(),
                field: "dependsOn",
                message: why,
            });
        }
    }
    if let Some(cycle) = crate::spec::find_cycle_through(&specs, &in_file) {
        conflicts.push(PlanConflict {
            name: cycle[0].clone(),
            field: "dependsOn",
            message: format!(
                "the dependencies form a cycle ({}): no stack of it could ever run first",
                cycle.join(" → ")
            ),
        });
    }
    conflicts
}

/// Whether a stack others depend on is settled: `Ready`, no run of it
/// under way, not due to run (a spec change, a mark). Its outputs are then
/// not about to change.
pub fn settled(entry: &StackEntry, now: crate::clock::EpochMillis) -> bool {
    entry.display_phase().is_ready()
        && entry.lease.as_ref().is_none_or(|l| l.expires_at.0 <= now)
        && entry
            .status
            .times
            .next_reconcile_at
            .is_none_or(|t| t.0 > now)
}

/// The registered entries (not being deleted) that depend on `name`.
pub fn dependents_of<'a>(name: &str, current: &'a [StackEntry]) -> Vec<&'a str> {
    current
        .iter()
        .filter(|e| e.deletion_requested_at.is_none() && e.spec.upstream().contains(&name))
        .map(|e| e.name.as_str())
        .collect()
}

/// The entries to run one after the other so that each runs after what it
/// depends on (names sorted within a level), then the entries being deleted
/// the other way round: what depends on a stack goes before it. Entries in
/// a cycle (which `apply` refuses) come last, in name order.
pub fn in_dependency_order(entries: &[StackEntry]) -> Vec<String> {
    let (deleting, live): (Vec<&StackEntry>, Vec<&StackEntry>) = entries
        .iter()
        .partition(|e| e.deletion_requested_at.is_some());
    let mut order = levels(&live);
    let mut gone = levels(&deleting);
    gone.reverse();
    order.extend(gone);
    order
}

/// Kahn's algorithm over `entries` (dependencies outside them ignored).
fn levels(entries: &[&StackEntry]) -> Vec<String> {
    let names: BTreeSet<&str> = entries.iter().map(|e| e.name.as_str()).collect();
    let mut left: BTreeMap<&str, BTreeSet<&str>> = entries
        .iter()
        .map(|e| {
            let ups = e
                .spec
                .upstream()
                .into_iter()
                .filter(|u| names.contains(u) && *u != e.name)
                .collect();
            (e.name.as_str(), ups)
        })
        .collect();
    let mut order = Vec::new();
    loop {
        let ready: Vec<&str> = left
            .iter()
            .filter(|(_, ups)| ups.is_empty())
            .map(|(n, _)| *n)
            .collect();
        if ready.is_empty() {
            break;
        }
        for name in &ready {
            left.remove(name);
        }
        for ups in left.values_mut() {
            for name in &ready {
                ups.remove(name);
            }
        }
        order.extend(ready.into_iter().map(str::to_owned));
    }
    order.extend(left.into_keys().map(str::to_owned));
    order
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::plan::plan_apply;
    use crate::spec::fixtures::spec;
    use crate::status::Timestamp;

    fn entry(spec: StackSpec, _version: u64) -> StackEntry {
        StackEntry::registered(&spec.name.clone(), &spec, 0)
    }

    fn depends(name: &str, on: &[&str]) -> StackSpec {
        let mut s = spec(name);
        s.source.path = format!("{name}.yaml");
        s.stack_name = Some(format!("s-{name}"));
        s.depends_on = on.iter().map(|n| (*n).to_owned()).collect();
        s
    }

    #[test]
    fn a_dependency_cycle_is_refused_before_anything_is_written_naming_it() {
        let mut app = depends("app", &["db"]);
        app.parameters.insert(
            "Vpc".into(),
            crate::spec::ParameterValue::From(crate::spec::ValueRef::FromStack {
                from_stack: "net".into(),
                output: "VpcId".into(),
            }),
        );
        let ok = [depends("net", &[]), depends("db", &["net"]), app.clone()];
        assert!(plan_apply(&ok, &[], false).is_ok());
        // net reads app's output: net → app → net (fromStack counts too).
        let mut net = depends("net", &["app"]);
        net.depends_on.clear();
        net.parameters.insert(
            "X".into(),
            crate::spec::ParameterValue::From(crate::spec::ValueRef::FromStack {
                from_stack: "app".into(),
                output: "Url".into(),
            }),
        );
        let err = plan_apply(&[net, depends("db", &["net"]), app], &[], false).unwrap_err();
        assert_eq!(err.len(), 1, "{err:?}");
        assert!(err[0].message.contains("cycle"), "{err:?}");
        assert!(
            err[0].message.contains("cycle (app → net → app)"),
            "{err:?}"
        );
    }

    #[test]
    fn a_cycle_the_file_makes_is_found_past_one_already_registered() {
        // x ⇄ y, registered (two applies at once could leave it): an
        // unrelated file is not refused for it, a file that makes its own
        // cycle is.
        let current = vec![
            entry(depends("x", &["y"]), 1),
            entry(depends("y", &["x"]), 1),
        ];
        assert!(plan_apply(&[depends("other", &[])], &current, false).is_ok());
        let err = plan_apply(
            &[depends("a", &["b"]), depends("b", &["a"])],
            &current,
            false,
        )
        .unwrap_err();
        assert!(
            err.iter().any(|c| c.message.contains("a → b → a")),
            "{err:?}"
        );
    }

    #[test]
    fn runs_go_upstream_first_and_deletions_downstream_first() {
        let mut gone_app = entry(depends("gone-app", &["gone-db"]), 1);
        gone_app.deletion_requested_at = Some(Timestamp(1));
        let mut gone_db = entry(depends("gone-db", &[]), 1);
        gone_db.deletion_requested_at = Some(Timestamp(1));
        let entries = vec![
            entry(depends("app", &["db", "net"]), 1),
            gone_app,
            entry(depends("db", &["net"]), 1),
            gone_db,
            entry(depends("lone", &[]), 1),
            entry(depends("net", &[]), 1),
        ];
        assert_eq!(
            in_dependency_order(&entries),
            ["lone", "net", "db", "app", "gone-app", "gone-db"]
        );
    }

    #[test]
    fn a_dependency_on_an_unknown_or_pruned_stack_is_refused_naming_both() {
        let err = plan_apply(&[depends("db", &["net"])], &[], false).unwrap_err();
        assert!(
            err[0]
                .message
                .contains("neither in the file nor registered"),
            "{err:?}"
        );
        let current = vec![
            entry(depends("net", &[]), 1),
            entry(depends("db", &["net"]), 1),
        ];
        // db stays (in the file), net is pruned: refused.
        let err = plan_apply(&[depends("db", &["net"])], &current, true).unwrap_err();
        assert!(err[0].message.contains("net would be pruned"), "{err:?}");
        assert_eq!(dependents_of("net", &current), vec!["db"]);
        // db's dependency broken before (net deleted with --force): another
        // file's apply is not refused for it.
        let broken = vec![entry(depends("db", &["net"]), 1)];
        assert!(plan_apply(&[depends("other", &[])], &broken, false).is_ok());
        assert!(dependents_of("db", &current).is_empty());
    }
}
