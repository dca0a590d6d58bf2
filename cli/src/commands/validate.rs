//! `stacksync validate -f FILE [--templates]`, and reading a stacks file for
//! `apply` and `sync`: every problem of the file at once, so one run shows
//! all to fix.
//!
//! With `--templates`, each entry's template and parameter file are read at
//! its ref as a run reads them (`reconcile::diff::desired`: the sources
//! only, never the registry nor CloudFormation; an S3 source, a CodeCommit
//! repository or a `credentialsSecret` with the caller's AWS credentials),
//! and checked as a run checks them before any change set
//! ([`stacksync::template::check`]): the same message, line for line.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;
use stacksync::StackSpec;
use stacksync::aws::{AwsOptions, check_endpoints, environment, load_config};
use stacksync::guard;
use stacksync::manifest::{oversize, parse_manifest};
use stacksync::ports::SourceFetcher;
use stacksync::reconcile::diff::desired;
use stacksync::reconcile::diff::policy::rule_set;
use stacksync::template;
use stacksync::wiring::sdk_sources;

use crate::error::Result;
use crate::output::print_structured;
use crate::{Cli, Output};

/// Checks `file` without touching AWS; prints its entries (JSON, YAML) or a
/// count (table).
pub fn validate(file: &Path, format: Output) -> Result {
    let specs = read_manifest(file, false)?;
    match format {
        Output::Table => {
            say!("{}: {} entries, all valid", file.display(), specs.len());
            Ok(())
        }
        _ => print_structured(format, &specs),
    }
}

/// One thing an entry's template makes certain to fail.
#[derive(Debug, Serialize)]
struct Problem {
    /// The entry's position in `stacks`, from 0.
    index: usize,
    entry: String,
    /// The template's path in the source, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    template: Option<String>,
    /// As a run's status would say it.
    message: String,
}

/// What `validate` checks beyond the file: the templates (`--templates`),
/// against a rule directory too (`--policy DIR`), read from a checkout
/// rather than their sources (`--checkout DIR`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Checks<'a> {
    pub policy: Option<&'a Path>,
    pub checkout: Option<&'a Path>,
}

/// `validate -f FILE --templates` (or `--policy DIR`): the file, then every
/// entry's template at its ref, checked as a run checks it before any change
/// set: what it makes certain to fail, and with `--policy` the Guard rules
/// of DIR and of the entry's own `policy:` (a reference's value is not read:
/// rules see `****`). Each problem on one line, naming the file, the entry
/// and the template (JSON, YAML: listed); an error (exit 1) if there is any.
/// Warnings are shown and do not fail.
pub async fn validate_templates(
    cli: &Cli,
    file: &Path,
    format: Output,
    checks: Checks<'_>,
) -> Result {
    let specs = read_manifest(file, false)?;
    let installation = match checks.policy {
        Some(dir) => {
            let set = rule_directory(dir)?;
            guard::parse_all(std::slice::from_ref(&set)).map_err(|e| e.to_string())?;
            Some(set)
        }
        None => None,
    };
    check_endpoints(cli.endpoint_url.as_deref(), environment())?;
    let config = load_config(&AwsOptions {
        region: cli.region.clone(),
        profile: cli.profile.clone(),
        endpoint_url: cli.endpoint_url.clone(),
    })
    .await;
    let workdir = std::env::temp_dir().join(format!("stacksync-validate-{}", std::process::id()));
    let sources = sdk_sources(&config, config.endpoint_url().is_some(), &workdir);
    let installation = installation.as_ref();
    let found = match checks.checkout {
        Some(dir) => {
            let checkout = crate::checkout::Checkout::new(dir)?;
            every_entry(&checkout, &sources, installation, &specs).await
        }
        None => every_entry(&sources, &sources, installation, &specs).await,
    };
    let _ = std::fs::remove_dir_all(&workdir);
    report(file, specs.len(), installation.is_some(), found, format)
}

/// What `validate` found, printed (warnings shown), and an error (exit 1)
/// naming every problem, if there is any.
fn report(file: &Path, entries: usize, policy: bool, found: Found, format: Output) -> Result {
    let shown = file.display().to_string();
    let Found { problems, warnings } = found;
    if format != Output::Table {
        print_structured(
            format,
            &serde_json::json!({
                "file": shown,
                "entries": entries,
                "problems": problems,
                "warnings": warnings,
            }),
        )?;
    }
    let line = |p: &Problem| format!("{shown}: stacks[{}] ({}): {}", p.index, p.entry, p.message);
    if format == Output::Table {
        for w in &warnings {
            say!("{}", line(w));
        }
    }
    let lines: Vec<String> = problems.iter().map(line).collect();
    let checked = if policy {
        "their templates too, and the policy"
    } else {
        "their templates too"
    };
    match (lines.len(), format) {
        (0, Output::Table) => {
            say!("{shown}: {entries} entries, all valid, {checked}");
            Ok(())
        }
        (0, _) => Ok(()),
        (n, Output::Json | Output::Yaml) => Err(format!(
            "{n} problem{} in the templates of {shown}",
            if n == 1 { "" } else { "s" }
        )),
        (1, _) => Err(lines.concat()),
        (n, _) => Err(format!(
            "{n} problems in the templates:\n{}",
            lines.join("\n")
        )),
    }
}

/// Every entry's problems and warnings, in file order.
async fn every_entry<S: SourceFetcher, R: SourceFetcher>(
    sources: &S,
    remote: &R,
    installation: Option<&guard::RuleSet>,
    specs: &[StackSpec],
) -> Found {
    let mut found = Found::default();
    for (index, spec) in specs.iter().enumerate() {
        entry_problems(sources, remote, installation, index, spec, &mut found).await;
    }
    found
}

/// The problems and the policy's warnings found so far.
#[derive(Debug, Default)]
struct Found {
    problems: Vec<Problem>,
    warnings: Vec<Problem>,
}

/// The `.guard` files under `dir` (every folder), as one rule set.
pub fn rule_directory(dir: &Path) -> Result<guard::RuleSet> {
    fn walk(dir: &Path, prefix: &str, files: &mut Vec<(String, Vec<u8>)>) -> std::io::Result<()> {
        let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<std::io::Result<_>>()?;
        entries.sort_by_key(std::fs::DirEntry::file_name);
        for entry in entries {
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = if prefix.is_empty() {
                name.clone()
            } else {
                format!("{prefix}/{name}")
            };
            if entry.file_type()?.is_dir() {
                if name != ".git" {
                    walk(&entry.path(), &path, files)?;
                }
            } else if name.ends_with(".guard") {
                files.push((path, std::fs::read(entry.path())?));
            }
        }
        Ok(())
    }
    let origin = dir.display().to_string();
    let mut files = Vec::new();
    walk(dir, "", &mut files).map_err(|e| format!("--policy {origin}: {e}"))?;
    let files = guard::rule_files(&origin, files)?;
    Ok(guard::RuleSet { origin, files })
}

/// What the template of `spec` at its ref makes certain to fail, or why it
/// could not be read (as a run would fail); with `installation` rules, what
/// the policy finds. `sources`: where the entry's files are read (its source
/// or a checkout); `remote`: a `policy:` with its own `git` or `s3`.
async fn entry_problems<S: SourceFetcher, R: SourceFetcher>(
    sources: &S,
    remote: &R,
    installation: Option<&guard::RuleSet>,
    index: usize,
    spec: &StackSpec,
    found: &mut Found,
) {
    let problem = |template: Option<String>, message: String| Problem {
        index,
        entry: spec.name.clone(),
        template,
        message,
    };
    let named = Some(spec.source.path.clone()).filter(|p| !p.is_empty());
    let wanted = match desired(sources, spec, None).await {
        Ok(wanted) => wanted,
        Err(e) => return found.problems.push(problem(named, e)),
    };
    let path = wanted.template_path.clone();
    // What the entry's parameter (or deployment) file gives: the values the
    // entry does not give itself.
    let from_file: BTreeMap<String, String> = wanted
        .from_file
        .iter()
        .filter(|(name, _)| !spec.parameters.contains_key(*name))
        .map(|(name, v)| (name.clone(), v.clone()))
        .collect();
    let certain = template::check(spec, &path, &wanted.template, &from_file);
    if !certain.is_empty() {
        found.problems.extend(
            certain
                .into_iter()
                .map(|message| problem(Some(path.clone()), message)),
        );
        return;
    }
    // What a run packages, packaged here too (nothing stored: the keys are
    // the content's), so the rules see the template a run checks.
    let mut wanted = wanted;
    let packaged = wanted.package(&stacksync::package::Destination {
        bucket: "stacksync-artifacts".into(),
        url_base: "https://stacksync-artifacts.s3.amazonaws.com".into(),
        prefix: "templates/".into(),
    });
    if let Err(e) = packaged {
        return found.problems.push(problem(Some(path), e));
    }
    let Some(installation) = installation else {
        return;
    };
    let mut sets = vec![installation.clone()];
    if let Some((source, same)) = guard::entry_policy(spec) {
        let own = if same {
            rule_set(sources, &source, Some(&wanted.revision)).await
        } else {
            rule_set(remote, &source, None).await
        };
        match own {
            Ok(set) => sets.push(set),
            Err(e) => return found.problems.push(problem(Some(path), e)),
        }
    }
    match wanted.with_literal_values().policy_report(spec, &sets) {
        Ok(report) => {
            if !report.passes() {
                found
                    .problems
                    .push(problem(Some(path.clone()), report.violation_message()));
            }
            found.warnings.extend(
                report
                    .warnings
                    .iter()
                    .map(|w| problem(Some(path.clone()), format!("policy warning: {}", w.line()))),
            );
        }
        Err(e) => found.problems.push(problem(Some(path), e.to_string())),
    }
}

/// The specs of a stacks file, or every problem found in it. `applying`
/// says whether the caller was about to write them (the message then says
/// that nothing was).
pub fn read_manifest(file: &Path, applying: bool) -> Result<Vec<StackSpec>> {
    let cannot = |e: std::io::Error| format!("cannot read {}: {e}", file.display());
    let bytes = std::fs::metadata(file).map_err(cannot)?.len();
    if let Some(problem) = oversize(bytes) {
        return Err(format!("{}: {problem}", file.display()));
    }
    let text = std::fs::read_to_string(file).map_err(cannot)?;
    parse_manifest(&file.display().to_string(), &text).map_err(|e| {
        let n = e.problems.len();
        let outcome = if applying {
            ", nothing was applied"
        } else {
            ""
        };
        match n {
            1 if applying => format!("{e}; nothing was applied"),
            1 => e.to_string(),
            _ => format!("{n} problems{outcome}:\n{e}"),
        }
    })
}
