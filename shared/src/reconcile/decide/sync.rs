//! Whether a stack is in sync: what the steps observe, and the decisions
//! made of it, all here. Three moments decide it:
//! - template-upload, at the applied hash ([`needs_a_look`],
//!   [`at_applied_hash`]): in sync when the stack is as the last run left
//!   it and healthy, unless the run is forced;
//! - change-set, by the stack's status ([`super::decide_stack`]'s
//!   `InSync`), with [`hash_matches`];
//! - poll-status, by the change set ([`super::decide_change_set`]'s
//!   `Empty`): only one CloudFormation failed as holding nothing (a ready
//!   one is executed, even when it lists no resource change).

use crate::seen::Change;
use crate::stack_status::StackStatus;

/// Whether the desired hash is the one last applied (both known), and the
/// run is not asked to apply it all the same (forced, a drift to put
/// back, a change found outside stacksync).
pub fn hash_matches(applied: Option<&str>, desired: Option<&str>, must_apply: bool) -> bool {
    applied.is_some() && applied == desired && !must_apply
}

/// Whether template-upload looks at the stack at all: only at the applied
/// hash, and not when a person answered an approval (change-set judges
/// that change set, in sync or not).
pub fn needs_a_look(hash_matches: bool, approval_answered: bool) -> bool {
    hash_matches && !approval_answered
}

/// What template-upload found of the stack, compared with what the last
/// run left (`seen`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found<'a> {
    /// The same stack (StackId, `LastUpdatedTime`, status, template and
    /// parameters), in this status.
    AsLeft(&'a StackStatus),
    /// Changed outside stacksync.
    Changed(Change),
    /// Nothing recorded to compare with (an entry from before `seen`).
    Unknown,
}

/// What template-upload does at the applied hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtAppliedHash {
    /// Nothing to deploy: the run ends `Ready`.
    InSync,
    /// On to the change set: applied whatever its status says
    /// (`must_apply`), or as the stack's status decides.
    ChangeSet { must_apply: bool },
}

/// At the applied hash: in sync if the stack is as left and healthy and
/// the run is not forced; else Git wins (a change outside stacksync, or
/// nothing to compare with, is applied).
pub fn at_applied_hash(found: Found<'_>, forced: bool) -> AtAppliedHash {
    match found {
        Found::AsLeft(status) if super::up_to_date(true, Some(status)) && !forced => {
            AtAppliedHash::InSync
        }
        Found::AsLeft(_) => AtAppliedHash::ChangeSet { must_apply: forced },
        Found::Changed(_) | Found::Unknown => AtAppliedHash::ChangeSet { must_apply: true },
    }
}

/// The stack's tags that are not the entry's, as `key: now → wanted`
/// (`(none)` for a side without it), in key order: what CloudFormation
/// left as it was when it found a change set empty.
pub fn tags_differing(
    stack: &std::collections::BTreeMap<String, String>,
    desired: &std::collections::BTreeMap<String, String>,
) -> Vec<String> {
    let keys: std::collections::BTreeSet<&String> = stack.keys().chain(desired.keys()).collect();
    let shown = |v: Option<&String>| v.map_or("(none)".to_owned(), Clone::clone);
    keys.into_iter()
        .filter(|k| stack.get(*k) != desired.get(*k))
        .map(|k| format!("{k}: {} → {}", shown(stack.get(k)), shown(desired.get(k))))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_matches_only_when_both_are_known_and_equal_and_nothing_forces() {
        assert!(hash_matches(Some("h"), Some("h"), false));
        assert!(!hash_matches(Some("h"), Some("h"), true));
        assert!(!hash_matches(Some("h"), Some("g"), false));
        assert!(!hash_matches(None, None, false), "nothing applied yet");
        assert!(needs_a_look(true, false));
        assert!(!needs_a_look(true, true), "an answered approval");
        assert!(!needs_a_look(false, false));
    }

    #[test]
    fn at_the_applied_hash_each_finding_decides_as_its_row_says() {
        use AtAppliedHash::{ChangeSet, InSync};
        let complete = StackStatus::UpdateComplete;
        let rolled_back = StackStatus::UpdateRollbackComplete;
        let rows = [
            (Found::AsLeft(&complete), false, InSync),
            (
                Found::AsLeft(&complete),
                true,
                ChangeSet { must_apply: true },
            ),
            // Healthy as far as runs go, not in sync: the status decides.
            (
                Found::AsLeft(&rolled_back),
                false,
                ChangeSet { must_apply: false },
            ),
            (
                Found::Changed(Change::Updated),
                false,
                ChangeSet { must_apply: true },
            ),
            (Found::Unknown, false, ChangeSet { must_apply: true }),
        ];
        for (found, forced, wanted) in rows {
            assert_eq!(
                at_applied_hash(found, forced),
                wanted,
                "{found:?} forced={forced}"
            );
        }
    }

    #[test]
    fn the_tags_that_differ_are_said_with_both_sides() {
        let map = |pairs: &[(&str, &str)]| -> std::collections::BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect()
        };
        let stack = map(&[("team", "a"), ("old", "x"), ("same", "1")]);
        let desired = map(&[("team", "b"), ("new", "y"), ("same", "1")]);
        assert_eq!(
            tags_differing(&stack, &desired),
            ["new: (none) → y", "old: x → (none)", "team: a → b"]
        );
        assert!(tags_differing(&stack, &stack).is_empty());
    }
}
