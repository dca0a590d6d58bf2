//! Who writes a plan (the CLI, or a registry source at a commit), and what
//! that writer owns: a plan creates, changes and prunes only its writer's
//! entries, and records its writer as each entry's owner.

use super::StackEntry;
use super::plan::{Action, Change};
use crate::registry_source::Owner;

/// Who writes a plan: the CLI, or a registry source at a commit, each
/// desired entry from one of its files (`files[i]` for `desired[i]`).
#[derive(Debug, Clone, Copy)]
pub enum Writer<'a> {
    Cli,
    Source {
        name: &'a str,
        commit: &'a str,
        files: &'a [String],
    },
}

impl Writer<'_> {
    /// Whether `entry` is this writer's to change and prune.
    pub fn owns(&self, entry: &StackEntry) -> bool {
        match self {
            Writer::Cli => entry.owner.is_none(),
            Writer::Source { name, .. } => entry.owner.as_ref().is_some_and(|o| o.source == *name),
        }
    }

    /// The owner written with the `index`th desired entry.
    pub(super) fn owner_of(&self, index: usize) -> Option<Owner> {
        match self {
            Writer::Cli => None,
            Writer::Source {
                name,
                commit,
                files,
            } => Some(Owner {
                source: (*name).to_owned(),
                file: files.get(index).cloned().unwrap_or_default(),
                commit: (*commit).to_owned(),
            }),
        }
    }
}

/// A planned change with the owner it writes: an entry unchanged but from
/// another file of its source is moved.
pub(super) fn owned(
    mut change: Change,
    existing: Option<&StackEntry>,
    owner: Option<Owner>,
) -> Change {
    if let (Action::Unchanged { version }, Some(entry), Some(new)) =
        (&change.action, existing, &owner)
    {
        let from = entry.owner.as_ref().map(|o| o.file.clone());
        if from.as_deref() != Some(new.file.as_str()) {
            change.action = Action::Move {
                version: *version,
                from,
                to: Some(new.file.clone()),
            };
        }
    }
    change.owner = owner;
    change
}
