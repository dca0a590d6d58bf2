//! Approval gates: whether a ready change set waits for a person, and
//! whether an approval still holds when the run comes back to it. Pure, as
//! the rest of the table.

use crate::preview::ResourceChange;
use crate::pull_request::{Reviewed, rows_hash};
use crate::spec::Approval;

/// Why a change set waits for a person, or `None` when it runs at once:
/// the entry's `approval` policy against what the change set would do.
pub fn approval_needed(policy: Approval, changes: &[ResourceChange]) -> Option<String> {
    let named = |rows: Vec<&ResourceChange>| {
        rows.iter()
            .map(|c| format!("{} ({})", c.logical_id, c.resource_type))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match policy {
        Approval::Never => None,
        Approval::Always => Some("approval: always".to_owned()),
        Approval::OnReplace => {
            let replaced: Vec<&ResourceChange> = changes.iter().filter(|c| c.replaces()).collect();
            (!replaced.is_empty())
                .then(|| format!("approval: onReplace, and it replaces {}", named(replaced)))
        }
        Approval::OnRemove => {
            let removed: Vec<&ResourceChange> =
                changes.iter().filter(|c| c.action == "Remove").collect();
            (!removed.is_empty())
                .then(|| format!("approval: onRemove, and it removes {}", named(removed)))
        }
        // Decided with the pull request's preview: `pull_request_holds`.
        Approval::PullRequest => Some("approval: pullRequest".to_owned()),
    }
}

/// Whether a change set is what the merged pull request's last preview of
/// the stack showed (`approval: pullRequest`): `Ok(())` to execute it,
/// else what differs (the change set waits for a person, as `always`).
pub fn pull_request_holds(
    reviewed: Option<&Reviewed>,
    desired_hash: Option<&str>,
    changes: &[ResourceChange],
) -> Result<(), String> {
    let why = |what: String| Err(format!("approval: pullRequest, and {what}"));
    let Some(reviewed) = reviewed else {
        return why("no pull request previewed this stack".to_owned());
    };
    let on = &reviewed.pull_request;
    if !reviewed.merged {
        return why(format!(
            "the last preview of this stack, on {on} at {}, is not of a merged pull request (not merged yet, another pull request previewed it since, or the merge was of another commit)",
            short(&reviewed.head)
        ));
    }
    if desired_hash != Some(reviewed.desired_hash.as_str()) {
        return why(format!(
            "the desired state is not the one previewed on {on} (another commit landed, or a resolved value moved since)"
        ));
    }
    if rows_hash(changes) != reviewed.rows_hash {
        return why(format!(
            "the change set's rows differ from those previewed on {on} (the stack changed outside stacksync since)"
        ));
    }
    Ok(())
}

fn short(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}

/// What an approved change set was made from, and what the run finds now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Approved<'a> {
    /// The change set the approver named, and the one that asked.
    pub named: &'a str,
    pub asked: &'a str,
    /// (revision, desired hash, spec version) when it asked, and now.
    pub desired_then: (Option<&'a str>, Option<&'a str>, u64),
    pub desired_now: (Option<&'a str>, Option<&'a str>, u64),
    /// (StackId, when CloudFormation last changed it) when it asked, and
    /// now (`None`: no stack).
    pub stack_then: Option<(&'a str, i64)>,
    pub stack_now: Option<(&'a str, i64)>,
}

/// `Ok(())` when the approval holds: the approver named the change set
/// that asked, and neither the stack nor its desired state moved since.
/// Else why it is void.
pub fn approval_holds(a: Approved<'_>) -> Result<(), String> {
    if a.named != a.asked {
        return Err(format!(
            "the approval names the change set {}, not {}",
            a.named, a.asked
        ));
    }
    let (revision, hash, spec) = a.desired_now;
    if a.desired_then.2 != spec {
        return Err("the entry's spec changed since the preview".to_owned());
    }
    if a.desired_then.0 != revision {
        return Err(format!(
            "the source moved since the preview (now at {})",
            revision.unwrap_or("?")
        ));
    }
    if a.desired_then.1 != hash {
        return Err("the desired state changed since the preview".to_owned());
    }
    if a.stack_then != a.stack_now {
        return Err(
            "the stack changed since the preview (updated, replaced or deleted outside the run)"
                .to_owned(),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(action: &str, id: &str, replacement: Option<&str>) -> ResourceChange {
        ResourceChange {
            action: action.into(),
            logical_id: id.into(),
            resource_type: "AWS::SQS::Queue".into(),
            physical_id: None,
            replacement: replacement.map(str::to_owned),
            changed: Vec::new(),
        }
    }

    #[test]
    fn each_policy_asks_for_what_it_names() {
        let modify = change("Modify", "Queue", Some("False"));
        let replace = change("Modify", "Queue", Some("True"));
        let maybe = change("Modify", "Queue", Some("Conditional"));
        let remove = change("Remove", "Topic", None);
        let add = change("Add", "Bucket", None);
        use Approval::*;
        for (policy, rows, asks) in [
            (Never, vec![replace.clone(), remove.clone()], false),
            (Always, vec![], true),
            (Always, vec![add.clone()], true),
            (
                OnReplace,
                vec![modify.clone(), add.clone(), remove.clone()],
                false,
            ),
            (OnReplace, vec![modify.clone(), replace.clone()], true),
            (OnReplace, vec![maybe.clone()], true),
            (OnRemove, vec![replace.clone(), add.clone()], false),
            (OnRemove, vec![modify.clone(), remove.clone()], true),
        ] {
            assert_eq!(
                approval_needed(policy, &rows).is_some(),
                asks,
                "{policy:?} {rows:?}"
            );
        }
        assert_eq!(
            approval_needed(OnReplace, &[replace]).unwrap(),
            "approval: onReplace, and it replaces Queue (AWS::SQS::Queue)"
        );
        assert_eq!(
            approval_needed(OnRemove, &[remove]).unwrap(),
            "approval: onRemove, and it removes Topic (AWS::SQS::Queue)"
        );
    }

    #[test]
    fn a_pull_request_approves_only_what_its_merged_preview_showed() {
        let rows = vec![change("Modify", "Queue", Some("False"))];
        let reviewed = Reviewed {
            pull_request: "github acme/infra#7".into(),
            head: "a".repeat(40),
            desired_hash: "h1".into(),
            rows_hash: rows_hash(&rows),
            merged: true,
            at: 0,
        };
        assert_eq!(
            pull_request_holds(Some(&reviewed), Some("h1"), &rows),
            Ok(())
        );
        let wait = |r: Option<&Reviewed>, hash: &str, rows: &[ResourceChange]| {
            pull_request_holds(r, Some(hash), rows).unwrap_err()
        };
        assert!(wait(None, "h1", &rows).contains("no pull request previewed"));
        let open = Reviewed {
            merged: false,
            ..reviewed.clone()
        };
        assert!(wait(Some(&open), "h1", &rows).contains("not of a merged pull request"));
        assert!(
            wait(Some(&reviewed), "h2", &rows).contains("desired state is not the one previewed")
        );
        let other = vec![change("Modify", "Queue", Some("True"))];
        assert!(wait(Some(&reviewed), "h1", &other).contains("rows differ"));
        // Rows in another order are the same rows.
        let two = vec![change("Add", "B", None), change("Remove", "A", None)];
        let reversed: Vec<_> = two.iter().rev().cloned().collect();
        assert_eq!(rows_hash(&two), rows_hash(&reversed));
    }

    fn approved<'a>() -> Approved<'a> {
        Approved {
            named: "cs-1",
            asked: "cs-1",
            desired_then: (Some("abc"), Some("h1"), 3),
            desired_now: (Some("abc"), Some("h1"), 3),
            stack_then: Some(("stack/1", 100)),
            stack_now: Some(("stack/1", 100)),
        }
    }

    #[test]
    fn an_approval_holds_only_for_what_was_previewed() {
        assert_eq!(approval_holds(approved()), Ok(()));
        let void = |a: Approved<'_>| approval_holds(a).unwrap_err();
        assert!(
            void(Approved {
                named: "cs-0",
                ..approved()
            })
            .contains("names the change set cs-0")
        );
        assert!(
            void(Approved {
                desired_now: (Some("def"), Some("h2"), 3),
                ..approved()
            })
            .contains("source moved")
        );
        assert!(
            void(Approved {
                desired_now: (Some("abc"), Some("h1"), 4),
                ..approved()
            })
            .contains("spec changed")
        );
        assert!(
            void(Approved {
                desired_now: (Some("abc"), Some("h2"), 3),
                ..approved()
            })
            .contains("desired state")
        );
        assert!(
            void(Approved {
                stack_now: Some(("stack/1", 200)),
                ..approved()
            })
            .contains("stack changed")
        );
        assert!(
            void(Approved {
                stack_now: Some(("stack/2", 100)),
                ..approved()
            })
            .contains("stack changed")
        );
        assert!(
            void(Approved {
                stack_now: None,
                ..approved()
            })
            .contains("stack changed")
        );
    }
}
