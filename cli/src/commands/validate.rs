//! `stacksync validate -f FILE`, and reading a stacks file for `apply` and
//! `sync`: every problem of the file at once, so one run shows all to fix.

use std::path::Path;

use stacksync::StackSpec;
use stacksync::manifest::{oversize, parse_manifest};

use crate::Output;
use crate::error::Result;
use crate::output::print_structured;

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
