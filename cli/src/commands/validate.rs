//! `stacksync validate -f FILE`, and reading a stacks file for `apply` and
//! `sync`: every problem of the file at once, so one run shows all to fix.

use std::path::Path;

use stacksync::StackSpec;
use stacksync::manifest::parse_manifest;

use crate::Output;
use crate::error::Result;
use crate::output::print_structured;

/// Checks `file` without touching AWS; prints its entries (JSON, YAML) or a
/// count (table).
pub fn validate(file: &Path, format: Output) -> Result {
    let specs = read_manifest(file)?;
    match format {
        Output::Table => {
            println!("{}: {} entries, all valid", file.display(), specs.len());
            Ok(())
        }
        _ => print_structured(format, &specs),
    }
}

/// The specs of a stacks file, or every problem found in it.
pub fn read_manifest(file: &Path) -> Result<Vec<StackSpec>> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    parse_manifest(&file.display().to_string(), &text).map_err(|e| {
        let n = e.problems.len();
        if n > 1 {
            format!("{n} problems, nothing was applied:\n{e}")
        } else {
            e.to_string()
        }
    })
}
