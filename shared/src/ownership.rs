//! Which stacks are stacksync's to touch: those it made (its tags on them)
//! or recorded (their StackId in the entry's status), and those an entry
//! adopts on purpose (`adopt: true`). Pure: the steps observe the stack and
//! ask here.

use std::collections::BTreeMap;

use crate::spec::StackSpec;

/// The tag naming the installation (its registry table) that made a stack.
pub const INSTALLATION_TAG: &str = "stacksync:installation";
/// The tag naming the registry entry that made a stack.
pub const ENTRY_TAG: &str = "stacksync:entry";

/// The tags a stack of `entry` carries: the spec's, and stacksync's own
/// two (which a spec may not set: `validate` refuses the `stacksync:`
/// prefix).
pub fn desired_tags(spec: &StackSpec, installation: &str) -> BTreeMap<String, String> {
    let mut tags = spec.tags.clone();
    tags.insert(INSTALLATION_TAG.to_owned(), installation.to_owned());
    tags.insert(ENTRY_TAG.to_owned(), spec.name.clone());
    tags
}

/// Whose a stack is, as a run finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// This installation's entry made it, or recorded it as its own.
    Ours,
    /// Not made by this entry, and the entry adopts it (`adopt: true`).
    Adopted,
    /// Somebody else's: the run refuses to touch it, saying why.
    Foreign(String),
}

/// Whose the stack (`stack_id`, `tags`) is, for `spec` of `installation`
/// that last recorded the stack `recorded` (a StackId, if any).
pub fn owner(
    spec: &StackSpec,
    installation: &str,
    stack_id: &str,
    tags: &BTreeMap<String, String>,
    recorded: Option<&str>,
) -> Owner {
    let tagged = tags.get(ENTRY_TAG).map(String::as_str) == Some(spec.name.as_str())
        && tags.get(INSTALLATION_TAG).map(String::as_str) == Some(installation);
    // A stack made before stacksync tagged its stacks: known by its id.
    if tagged || recorded == Some(stack_id) {
        return Owner::Ours;
    }
    if spec.adopt {
        return Owner::Adopted;
    }
    let whose = match (tags.get(INSTALLATION_TAG), tags.get(ENTRY_TAG)) {
        (Some(i), Some(e)) => format!("it was made by the entry {e:?} of the installation {i:?}"),
        _ => "it was not made by stacksync (it has no stacksync:entry tag)".to_owned(),
    };
    Owner::Foreign(format!(
        "stacksync leaves the stack {} ({stack_id}) alone: {whose}. To take it over, set \
         adopt: true in the entry: the next run updates it to the template (resources the \
         template lacks are deleted) and tags it as this entry's",
        spec.effective_stack_name()
    ))
}

/// Why a run must not deploy to a stack that has the service role
/// `attached` when the spec names `named`: without `roleArn`, CloudFormation
/// uses the stack's role, and no `iam:PassRole` check applies, so whoever
/// writes the registry could deploy under any role once attached to the
/// stack. `None`: the run may go on (no role, or the spec names one, which
/// passing checks).
pub fn unnamed_role(attached: Option<&str>, named: Option<&str>, stack: &str) -> Option<String> {
    match (attached, named) {
        (Some(role), None) => Some(format!(
            "the stack {stack} deploys under the service role {role}, which the entry does not \
             name: CloudFormation would use it without the installation's check on the roles it \
             may pass. Set roleArn to it (or to another role the installation may pass)"
        )),
        _ => None,
    }
}

/// Whether a change set is one stacksync made (its names start so):
/// cleaning a stack left in review deletes only those.
pub fn ours_change_set(name: &str) -> bool {
    name.starts_with("stacksync-")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::fixtures::spec;

    const ID: &str = "arn:aws:cloudformation:us-east-1:1:stack/orders/1";

    #[test]
    fn a_stack_is_ours_by_its_tags_or_its_recorded_id_else_adopted_or_foreign() {
        let s = spec("orders");
        let ours = desired_tags(&s, "table-a");
        assert_eq!(ours["stacksync:entry"], "orders");
        assert_eq!(owner(&s, "table-a", ID, &ours, None), Owner::Ours);
        assert_eq!(
            owner(&s, "table-a", ID, &BTreeMap::new(), Some(ID)),
            Owner::Ours,
            "made before the tags"
        );
        // Another installation's, or nobody's.
        match owner(&s, "table-b", ID, &ours, None) {
            Owner::Foreign(why) => assert!(
                why.contains("made by the entry \"orders\" of the installation \"table-a\"")
                    && why.contains("adopt: true"),
                "{why}"
            ),
            other => panic!("{other:?}"),
        }
        match owner(&s, "table-a", ID, &BTreeMap::new(), Some("another-id")) {
            Owner::Foreign(why) => assert!(why.contains("no stacksync:entry tag"), "{why}"),
            other => panic!("{other:?}"),
        }
        let mut adopting = s.clone();
        adopting.adopt = true;
        assert_eq!(
            owner(&adopting, "table-a", ID, &BTreeMap::new(), None),
            Owner::Adopted
        );
    }

    #[test]
    fn only_stacksyncs_change_sets_are_its_own() {
        assert!(ours_change_set("stacksync-v1-a51fa57c19cfec5d"));
        assert!(!ours_change_set("deploy-from-console"));
    }

    #[test]
    fn a_stacks_role_must_be_named_by_the_entry() {
        let admin = "arn:aws:iam::1:role/cdk-exec";
        let why = unnamed_role(Some(admin), None, "orders").unwrap();
        assert!(why.contains(admin) && why.contains("Set roleArn"), "{why}");
        assert_eq!(unnamed_role(Some(admin), Some(admin), "orders"), None);
        assert_eq!(
            unnamed_role(Some(admin), Some("arn:aws:iam::1:role/other"), "orders"),
            None
        );
        assert_eq!(unnamed_role(None, None, "orders"), None);
    }
}
