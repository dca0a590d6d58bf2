//! A commit's stacks files, fetched and read as a whole.

use std::collections::BTreeMap;

use super::Installation;
use crate::manifest::parse_manifest_in;
use crate::ports::SourceFetcher;
use crate::ports::source::FetchError;
use crate::registry::Fleet;
use crate::registry::plan::PlanConflict;
use crate::registry::targets::Units;
use crate::registry_source::{Pattern, RegistrySource, RelativeBase};
use crate::spec::StackSpec;

/// The stacks files of one commit, read: every spec with its file, or
/// every problem.
pub(super) struct Read {
    pub(super) specs: Vec<StackSpec>,
    pub(super) files: Vec<String>,
    /// Each spec's index in its file, for messages.
    pub(super) indexes: Vec<usize>,
}

/// Fetches the commit's stacks files and reads them all: the specs, or
/// every problem (`Ok(Err)`); a source that could not be reached is `Err`.
pub(super) async fn read_files<S: SourceFetcher>(
    fetcher: &S,
    source: &RegistrySource,
    revision: &str,
) -> Result<Result<Read, Vec<String>>, FetchError> {
    let spec = &source.spec;
    let pattern = match Pattern::parse(&spec.path) {
        Ok(p) => p,
        Err(e) => return Ok(Err(vec![format!("path: {e}")])),
    };
    let files = match fetcher
        .fetch(&location(spec), revision, &pattern.wanted(&spec.signed_by))
        .await
    {
        Ok(files) => files,
        Err(e) if e.is_transient() => return Err(e),
        Err(e) => return Ok(Err(vec![e.to_string()])),
    };
    let mut read = Read {
        specs: Vec::new(),
        files: Vec::new(),
        indexes: Vec::new(),
    };
    let mut problems = Vec::new();
    let mut first_file: BTreeMap<String, String> = BTreeMap::new();
    let stacks_files: Vec<&(String, Vec<u8>)> = files
        .iter()
        .filter(|(path, _)| pattern.matches(path))
        .collect();
    if stacks_files.is_empty() {
        problems.push(format!(
            "{}: no stacks file matches it at this commit",
            pattern.as_str()
        ));
    }
    for (path, bytes) in stacks_files {
        let Ok(text) = std::str::from_utf8(bytes) else {
            problems.push(format!("{path}: the file is not UTF-8 text"));
            continue;
        };
        let base = RelativeBase::of(spec, path);
        match parse_manifest_in(path, text, Some(&base)) {
            Ok(specs) => {
                for (index, stack) in specs.into_iter().enumerate() {
                    if let Some(other) = first_file.insert(stack.name.clone(), path.clone()) {
                        problems.push(format!(
                            "{path}: stacks[{index}] ({}): field name: also an entry of {other}: \
                             names must be unique across a source's files",
                            stack.name
                        ));
                    }
                    read.specs.push(stack);
                    read.files.push(path.clone());
                    read.indexes.push(index);
                }
            }
            Err(e) => problems.extend(e.to_string().lines().map(str::to_owned)),
        }
    }
    Ok(if problems.is_empty() {
        Ok(read)
    } else {
        Err(problems)
    })
}

/// The accounts each of the commit's fleets' units held at its last read,
/// as `recorded` (every fleet, one query: a commit is applied without
/// reading the organization; a unit not read yet adds its accounts when the
/// scheduler reads it, `triggers::fleets`).
pub(super) fn recorded_units(recorded: &[Fleet], read: &Read) -> Units {
    read.specs
        .iter()
        .filter(|s| s.targets.is_some())
        .filter_map(|s| recorded.iter().find(|f| f.spec.name == s.name))
        .flat_map(|f| f.read.units.clone())
        .collect()
}

/// The commit's specs with each fleet's targets in its place, each from
/// its fleet's file; a fleet that cannot be expanded is a problem of its
/// file.
pub(super) fn expanded(read: &Read, units: &Units) -> Result<Read, Vec<String>> {
    let mut out = Read {
        specs: Vec::new(),
        files: Vec::new(),
        indexes: Vec::new(),
    };
    let mut problems = Vec::new();
    for ((spec, file), index) in read.specs.iter().zip(&read.files).zip(&read.indexes) {
        let specs = if spec.targets.is_some() {
            match crate::fleet::expand(spec, units) {
                Ok(targets) => targets,
                Err(e) => {
                    problems.push(format!(
                        "{file}: stacks[{index}] ({}): field targets: {e}",
                        spec.name
                    ));
                    continue;
                }
            }
        } else {
            vec![spec.clone()]
        };
        for s in specs {
            out.specs.push(s);
            out.files.push(file.clone());
            out.indexes.push(*index);
        }
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

/// A plan's conflicts, in the form of the files' own problems.
pub(super) fn conflict_lines(read: &Read, conflicts: &[PlanConflict]) -> Vec<String> {
    conflicts
        .iter()
        .map(|c| match read.specs.iter().position(|s| s.name == c.name) {
            Some(i) => format!(
                "{}: stacks[{}] ({}): field {}: {}",
                read.files[i], read.indexes[i], c.name, c.field, c.message
            ),
            None => format!("{}: field {}: {}", c.name, c.field, c.message),
        })
        .collect()
}

/// What the installation refuses of the specs (a stack name outside its
/// prefix, a role it does not list), one line per entry.
pub(super) fn check_policy(installation: &Installation, read: &Read) -> Vec<String> {
    read.specs
        .iter()
        .zip(&read.files)
        .filter_map(|(spec, file)| {
            let why = installation.policy.refuses_spec(spec)?;
            Some(format!("{file}: {}: {why}", spec.name))
        })
        .collect()
}

/// Where the adapters reach a source.
pub(super) fn location(spec: &crate::registry_source::SourceSpec) -> crate::ports::SourceLocation {
    crate::ports::SourceLocation {
        url: spec.url.clone(),
        credentials: spec.credentials_secret.clone(),
    }
}
