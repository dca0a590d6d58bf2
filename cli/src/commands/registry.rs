//! The commands that read or change registry entries one at a time: `init`,
//! `list`, `get`, `delete`, `suspend` and `resume`.

use stacksync::clock::now_millis;
use stacksync::registry::{Entries, Registry, Specs, StackEntry};

use crate::Output;
use crate::connect::registered;
use crate::error::Result;
use crate::output::{Table, cell, print_structured};

pub async fn init(registry: &Registry, format: Output) -> Result {
    let created = registry.create_table().await.map_err(|e| e.to_string())?;
    let what = if created { "created" } else { "already exists" };
    match format {
        Output::Table => say!("registry table {:?} {what}", registry.table()),
        _ => print_structured(
            format,
            &serde_json::json!({"table": registry.table(), "created": created}),
        )?,
    }
    Ok(())
}

pub async fn list(registry: &Registry, format: Output) -> Result {
    let entries = registry.list().await.map_err(|e| e.to_string())?;
    if format != Output::Table {
        return print_structured(format, &entries);
    }
    let mut table = Table::new(vec![
        "NAME", "STACK", "REGION", "SOURCE", "REF", "PATH", "VERSION", "FLAGS",
    ]);
    for e in &entries {
        table.row(vec![
            e.name.clone(),
            e.spec.effective_stack_name().to_owned(),
            cell(e.spec.region.as_deref(), 20),
            cell(Some(e.spec.source.url()), 50),
            cell(e.spec.effective_ref(), 20),
            cell(Some(&e.spec.source.path), 40),
            e.spec_version.to_string(),
            cell(Some(&flags(e).join(",")), 40),
        ]);
    }
    put!("{}", table.render());
    Ok(())
}

/// What sets an entry apart from one being reconciled as usual.
fn flags(e: &StackEntry) -> Vec<&'static str> {
    let mut flags = Vec::new();
    if e.is_suspended() {
        flags.push("suspended");
    }
    if e.deletion_requested_at.is_some() {
        flags.push("deleting");
    }
    if e.spec.destroy_on_delete {
        flags.push("destroy-on-delete");
    }
    flags
}

pub async fn get(
    registry: &Registry,
    name: &str,
    target: Option<&str>,
    explain: bool,
    format: Output,
) -> Result {
    let name = &super::fleet::entry_name(name, target)?;
    let plain = registry
        .get(name)
        .await
        .map_err(|e| e.to_string())?
        .is_some();
    if target.is_none() && !plain {
        let all = registry.list().await.map_err(|e| e.to_string())?;
        let named = [name.clone()];
        if let Some((fleet, targets)) = super::fleet::fleets_named(registry, &named, &all)
            .await?
            .get(name)
        {
            let format = if format == Output::Json {
                format
            } else {
                Output::Yaml
            };
            return print_structured(format, &super::fleet::FleetView { fleet, targets });
        }
    }
    let entry = registered(registry, name).await?;
    if explain {
        let all = registry.list().await.map_err(|e| e.to_string())?;
        return explain_entry(&entry, &all, format);
    }
    // A single entry reads best as YAML, even in "table" mode.
    let format = if format == Output::Json {
        format
    } else {
        Output::Yaml
    };
    print_structured(format, &entry)
}

pub async fn delete(registry: &Registry, name: &str, force: bool, format: Output) -> Result {
    let entry = registered(registry, name).await?;
    if let (Some(owner), false) = (&entry.owner, force) {
        return Err(format!(
            "{name}: refused: it is owned by the registry source {:?} ({}, commit {}), which              would put it back at its next commit: remove it from that file, or delete it              anyway with --force",
            owner.source,
            owner.file,
            stacksync::registry_source::short(&owner.commit)
        ));
    }
    if !force {
        let all = registry.list().await.map_err(|e| e.to_string())?;
        let dependents = stacksync::registry::graph::dependents_of(name, &all);
        if !dependents.is_empty() {
            return Err(format!(
                "{name}: refused: {} depend{} on it (dependsOn or fromStack); change {} first, \
                 or delete it anyway with --force (they then wait, or fail, until it is back)",
                dependents.join(", "),
                if dependents.len() == 1 { "s" } else { "" },
                if dependents.len() == 1 { "it" } else { "them" },
            ));
        }
    }
    let requested = registry
        .request_deletion(name, now_millis())
        .await
        .map_err(|e| e.to_string())?;
    let stack = entry.spec.effective_stack_name();
    let fate = if entry.spec.destroy_on_delete {
        format!(
            "the stack {stack:?} will be deleted (destroyOnDelete: true) if it is this entry's; \
             a stack the entry did not make or adopt is left in place"
        )
    } else {
        format!(
            "the stack {stack:?} will be left in place (destroyOnDelete: false) and the entry dropped"
        )
    };
    let action = if requested {
        "deleting"
    } else {
        "already-deleting"
    };
    report(format, name, action, &fate)
}

pub async fn suspend(registry: &Registry, name: &str, format: Output) -> Result {
    let changed = registry
        .set_suspended(name, true, now_millis())
        .await
        .map_err(|e| e.to_string())?;
    let detail = if changed {
        "reconciles stop until `stacksync resume`"
    } else {
        "was already suspended"
    };
    report(format, name, "suspended", detail)
}

pub async fn resume(registry: &Registry, name: &str, format: Output) -> Result {
    let changed = registry
        .set_suspended(name, false, now_millis())
        .await
        .map_err(|e| e.to_string())?;
    // The operator's switch is off now, but the spec's own `suspend` still
    // holds the stack: say so, or `resume` would seem to do nothing.
    let entry = registry.get(name).await.map_err(|e| e.to_string())?;
    let detail = match (entry.is_some_and(|e| e.spec.suspend), changed) {
        (true, _) => {
            "the operator's switch is off, but the spec says `suspend: true`: still suspended \
             (change stacks.yaml and apply it to reconcile)"
        }
        (false, true) => "due for reconcile now",
        (false, false) => "was not suspended",
    };
    report(format, name, "resumed", detail)
}

/// The outcome of a change to one entry: a line, or an object.
fn report(format: Output, name: &str, action: &str, detail: &str) -> Result {
    match format {
        Output::Table => {
            say!("{name}: {action}: {detail}");
            Ok(())
        }
        _ => print_structured(
            format,
            &serde_json::json!({"name": name, "action": action, "detail": detail}),
        ),
    }
}

/// What `get --explain` prints: where each parameter and tag of the last
/// run came from (values masked where they are secrets or `NoEcho`), the
/// stack's outputs, what it depends on and what depends on it, and the
/// local files its templates named, packaged.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Explained<'a> {
    name: &'a str,
    phase: String,
    parameters: Vec<Origin<'a>>,
    tags: Vec<Origin<'a>>,
    outputs: &'a std::collections::BTreeMap<String, String>,
    depends_on: Vec<&'a str>,
    dependents: Vec<&'a str>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    waiting_for: &'a [String],
    /// The local files the last run's templates named, packaged.
    #[serde(skip_serializing_if = "<[stacksync::package::Artifact]>::is_empty")]
    packaged: &'a [stacksync::package::Artifact],
}

#[derive(serde::Serialize)]
struct Origin<'a> {
    name: &'a str,
    from: &'a str,
    value: &'a str,
}

fn explain_entry(entry: &StackEntry, all: &[StackEntry], format: Output) -> Result {
    use stacksync::parameters::Kind;
    let origins = |kind: Kind| -> Vec<Origin<'_>> {
        entry
            .status
            .inputs
            .provenance
            .iter()
            .filter(|p| p.kind == kind)
            .map(|p| Origin {
                name: &p.name,
                from: &p.from,
                value: p.value.as_deref().unwrap_or("****"),
            })
            .collect()
    };
    let explained = Explained {
        name: &entry.name,
        phase: entry.display_phase().to_string(),
        parameters: origins(Kind::Parameter),
        tags: origins(Kind::Tag),
        outputs: &entry.status.applied.outputs,
        depends_on: entry.spec.upstream(),
        dependents: stacksync::registry::graph::dependents_of(&entry.name, all),
        waiting_for: &entry.status.inputs.waiting_for,
        packaged: &entry.status.inputs.packaged,
    };
    if format != Output::Table {
        return print_structured(format, &explained);
    }
    println!("{} ({})", explained.name, explained.phase);
    if entry.status.inputs.provenance.is_empty() {
        println!("  no run has recorded where its values came from yet");
    }
    for (title, rows) in [
        ("parameters", &explained.parameters),
        ("tags", &explained.tags),
    ] {
        if rows.is_empty() {
            continue;
        }
        println!("{title}:");
        for o in rows {
            println!("  {:<24} {:<40} {}", o.name, o.value, o.from);
        }
    }
    if !explained.outputs.is_empty() {
        println!("outputs:");
        for (k, v) in explained.outputs {
            println!("  {k:<24} {v}");
        }
    }
    if !explained.depends_on.is_empty() {
        println!("depends on: {}", explained.depends_on.join(", "));
    }
    if !explained.dependents.is_empty() {
        println!("depended on by: {}", explained.dependents.join(", "));
    }
    if !explained.waiting_for.is_empty() {
        println!("waiting for: {}", explained.waiting_for.join(", "));
    }
    if !explained.packaged.is_empty() {
        println!("packaged (local files the templates name, stored by content):");
        for a in explained.packaged {
            println!("  {:<32} {:<48} {}", a.path, a.at, a.key);
        }
    }
    Ok(())
}
