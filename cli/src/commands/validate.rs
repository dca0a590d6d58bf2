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
use stacksync::manifest::{oversize, parse_manifest};
use stacksync::ports::SourceFetcher;
use stacksync::reconcile::diff::desired;
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

/// `validate -f FILE --templates`: the file, then every entry's template at
/// its ref. Each problem on one line, naming the file, the entry and the
/// template (JSON, YAML: listed); an error (exit 1) if there is any.
pub async fn validate_templates(cli: &Cli, file: &Path, format: Output) -> Result {
    let specs = read_manifest(file, false)?;
    check_endpoints(cli.endpoint_url.as_deref(), environment())?;
    let config = load_config(&AwsOptions {
        region: cli.region.clone(),
        profile: cli.profile.clone(),
        endpoint_url: cli.endpoint_url.clone(),
    })
    .await;
    let workdir = std::env::temp_dir().join(format!("stacksync-validate-{}", std::process::id()));
    let sources = sdk_sources(&config, config.endpoint_url().is_some(), &workdir);
    let mut problems = Vec::new();
    for (index, spec) in specs.iter().enumerate() {
        problems.extend(entry_problems(&sources, index, spec).await);
    }
    let _ = std::fs::remove_dir_all(&workdir);
    let shown = file.display().to_string();
    if format != Output::Table {
        print_structured(
            format,
            &serde_json::json!({ "file": shown, "entries": specs.len(), "problems": problems }),
        )?;
    }
    let lines: Vec<String> = problems
        .iter()
        .map(|p| format!("{shown}: stacks[{}] ({}): {}", p.index, p.entry, p.message))
        .collect();
    match (lines.len(), format) {
        (0, Output::Table) => {
            say!(
                "{shown}: {} entries, all valid, their templates too",
                specs.len()
            );
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

/// What the template of `spec` at its ref makes certain to fail, or why it
/// could not be read (as a run would fail).
async fn entry_problems<S: SourceFetcher>(
    sources: &S,
    index: usize,
    spec: &StackSpec,
) -> Vec<Problem> {
    let problem = |template: Option<String>, message: String| Problem {
        index,
        entry: spec.name.clone(),
        template,
        message,
    };
    let named = Some(spec.source.path.clone()).filter(|p| !p.is_empty());
    let wanted = match desired(sources, spec, None).await {
        Ok(wanted) => wanted,
        Err(e) => return vec![problem(named, e)],
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
    template::check(spec, &path, &wanted.template, &from_file)
        .into_iter()
        .map(|message| problem(Some(path.clone()), message))
        .collect()
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
