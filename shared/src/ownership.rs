//! Which stacks are stacksync's to touch: those it made (its tags on them)
//! or recorded (their StackId in the entry's status), and those an entry
//! adopts on purpose (`adopt: true`). Pure: the steps observe the stack and
//! ask here.

use std::collections::BTreeMap;

use crate::spec::StackSpec;
use crate::status::StallReason;

/// The tag naming the installation (its registry table) that made a stack.
pub const INSTALLATION_TAG: &str = "stacksync:installation";
/// The tag naming the registry entry that made a stack.
pub const ENTRY_TAG: &str = "stacksync:entry";

/// The tags a stack of `entry` carries: the spec's, and stacksync's own
/// two (which a spec may not set: `validate` refuses the `stacksync:`
/// prefix).
pub fn desired_tags(spec: &StackSpec, installation: &str) -> BTreeMap<String, String> {
    desired_tags_with(&BTreeMap::new(), spec, installation)
}

/// The same, over the tags the entry's parameter file gives (the entry's
/// own win).
pub fn desired_tags_with(
    from_file: &BTreeMap<String, String>,
    spec: &StackSpec,
    installation: &str,
) -> BTreeMap<String, String> {
    let mut tags = crate::template::merge_tags(from_file.clone(), spec);
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
    // Another installation's stack is never taken over, adopt or not: its
    // own installation drives it (and IAM would refuse the change anyway).
    let elsewhere = tags
        .get(INSTALLATION_TAG)
        .filter(|other| other.as_str() != installation);
    if let Some(other) = elsewhere {
        let entry = tags
            .get(ENTRY_TAG)
            .map(|e| format!("the entry {e:?} of "))
            .unwrap_or_default();
        let adopt = if spec.adopt {
            ", and adopt never takes over another installation's stack"
        } else {
            ""
        };
        return Owner::Foreign(format!(
            "stacksync leaves the stack {} ({stack_id}) alone: it was made by {entry}the \
             installation {other:?}, which manages it{adopt}. Remove it from that installation \
             first (its entry with destroyOnDelete: false, or the stack's stacksync: tags), or \
             give this entry another stackName",
            spec.effective_stack_name()
        ));
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

/// What a deployed installation allows its entries (its parameters, given
/// to the functions): the local runner knows none of it and checks none
/// (`Default`), leaving it to the credentials it runs with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InstallationPolicy {
    /// Only stacks whose names start so (`StackNamePrefix`; empty: any).
    pub stack_name_prefix: String,
    /// The service roles stacks may deploy under (`CloudFormationRoleArns`,
    /// IAM wildcards `*` and `?`); `None`: not known (the local runner).
    pub service_roles: Option<Vec<String>>,
    /// Every entry must name its service role (`RequireRoleArn`).
    pub require_role_arn: bool,
    /// Where entries may publish their outputs (`PublishParameterPath`: a
    /// path `publish.ssm` must start with; empty: nowhere); `None`: not
    /// known (the local runner).
    pub publish_path: Option<String>,
}

impl InstallationPolicy {
    /// What a deployed installation's functions are told (`get`: an
    /// environment variable's value): `STACKSYNC_STACK_NAME_PREFIX`
    /// (`StackNamePrefix`), `STACKSYNC_SERVICE_ROLE_ARNS`
    /// (`CloudFormationRoleArns`, comma-separated; unset: not known, and any
    /// attached role must be named) and `STACKSYNC_REQUIRE_ROLE_ARN` (`true`
    /// or `false`, `RequireRoleArn`; unset or empty: `true`, the safe side,
    /// as the template's default).
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        let require = match get("STACKSYNC_REQUIRE_ROLE_ARN").as_deref().map(str::trim) {
            None | Some("" | "true") => true,
            Some("false") => false,
            Some(other) => {
                return Err(format!(
                    "STACKSYNC_REQUIRE_ROLE_ARN must be true or false, not {other:?}"
                ));
            }
        };
        Ok(InstallationPolicy {
            stack_name_prefix: get("STACKSYNC_STACK_NAME_PREFIX").unwrap_or_default(),
            service_roles: get("STACKSYNC_SERVICE_ROLE_ARNS").map(|list| {
                list.split(',')
                    .map(str::trim)
                    .filter(|r| !r.is_empty())
                    .map(str::to_owned)
                    .collect()
            }),
            require_role_arn: require,
            publish_path: get("STACKSYNC_PUBLISH_PARAMETER_PATH").map(|p| p.trim().to_owned()),
        })
    }

    /// Why the installation refuses `spec` before anything is fetched or
    /// called: its stack name, its missing or unlisted `roleArn`.
    pub fn refuses_spec(&self, spec: &StackSpec) -> Option<String> {
        if let Some(why) = self.refuses_publish(spec) {
            return Some(why);
        }
        let stack = spec.effective_stack_name();
        if !stack.starts_with(&self.stack_name_prefix) {
            return Some(format!(
                "this installation manages only stacks whose names start with {:?} (StackNamePrefix): set stackName to such a name",
                self.stack_name_prefix
            ));
        }
        match spec.role_arn.as_deref() {
            None if self.require_role_arn => Some(format!(
                "this installation requires a service role on every entry (RequireRoleArn): set roleArn to one of {}",
                self.listed()
            )),
            Some(role) if !self.may_pass(role) => Some(format!(
                "roleArn {role} is not among the service roles this installation may pass ({}): name one of them, or add it to CloudFormationRoleArns",
                self.listed()
            )),
            _ => None,
        }
    }

    /// Why the installation refuses the entry's `publish.ssm`: outside its
    /// `PublishParameterPath`, or it publishes nowhere.
    fn refuses_publish(&self, spec: &StackSpec) -> Option<String> {
        let path = spec.publish.as_ref()?.ssm.as_deref()?;
        let allowed = self.publish_path.as_deref()?;
        if allowed.is_empty() {
            return Some(format!(
                "publish.ssm {path}: this installation publishes no outputs (its \
                 PublishParameterPath is empty): set it to a path that holds {path:?}"
            ));
        }
        (!crate::publish::fixed_prefix(path).starts_with(allowed)).then(|| {
            format!(
                "publish.ssm {path} is not under this installation's PublishParameterPath \
                 {allowed:?}: publish under it, or change the parameter"
            )
        })
    }

    /// Why a run must not deploy to (or delete) a stack that has the
    /// service role `attached` when the spec names `named`: without
    /// `roleArn`, CloudFormation uses the stack's role, and no
    /// `iam:PassRole` check applies, so whoever writes the registry could
    /// deploy under any role once attached to the stack. A role among the
    /// installation's own is fine; where those are not known (the local
    /// runner), any attached role must be named.
    pub fn refuses_role(
        &self,
        attached: Option<&str>,
        named: Option<&str>,
        stack: &str,
    ) -> Option<(StallReason, String)> {
        let (Some(role), None) = (attached, named) else {
            return None;
        };
        match &self.service_roles {
            Some(_) if self.may_pass(role) => None,
            Some(_) => Some((
                StallReason::NotAllowed,
                format!(
                    "the stack {stack} deploys under the service role {role}, which is not among the roles this installation may pass ({}), and the entry names none: CloudFormation would use it unchecked. Set roleArn to an allowed role",
                    self.listed()
                ),
            )),
            None => Some((
                StallReason::ServiceRoleNotNamed,
                format!(
                    "the stack {stack} deploys under the service role {role}, which the entry does not name: CloudFormation would use it without the installation's check on the roles it may pass. Set roleArn to it (or to another role the installation may pass)"
                ),
            )),
        }
    }

    /// Whether `role` is one of the installation's service roles (always,
    /// where they are not known).
    fn may_pass(&self, role: &str) -> bool {
        self.service_roles
            .as_ref()
            .is_none_or(|roles| roles.iter().any(|p| wildcard(p, role)))
    }

    fn listed(&self) -> String {
        match self.service_roles.as_deref() {
            Some([]) => "none: CloudFormationRoleArns is empty".to_owned(),
            Some(roles) => roles.join(", "),
            None => "the roles it may pass".to_owned(),
        }
    }
}

/// IAM's wildcards in an ARN: `*` any run of characters, `?` one. (Also
/// the wildcards of one path segment of a registry source's pattern.)
pub(crate) fn wildcard(pattern: &str, text: &str) -> bool {
    let (p, t) = (pattern.as_bytes(), text.as_bytes());
    let (mut pi, mut ti) = (0, 0);
    // The last `*` seen, and where in the text it was tried from.
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == b'?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            // Let the star take one more character.
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
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

    /// Issue "Every message true": a message broken over source lines
    /// without a `\\` kept the indentation (18 spaces) inside it.
    #[test]
    fn the_installation_s_refusals_are_said_without_padding() {
        let policy = InstallationPolicy {
            stack_name_prefix: "stacksync-".into(),
            service_roles: Some(vec!["arn:aws:iam::1:role/deploy".into()]),
            require_role_arn: true,
            publish_path: None,
        };
        let mut named = spec("orders");
        let mut messages = vec![policy.refuses_spec(&named)];
        named.stack_name = Some("stacksync-orders".into());
        messages.push(policy.refuses_spec(&named));
        named.role_arn = Some("arn:aws:iam::1:role/other".into());
        messages.push(policy.refuses_spec(&named));
        let attached = Some("arn:aws:iam::1:role/attached");
        messages.push(policy.refuses_role(attached, None, "o").map(|(_, m)| m));
        let local = InstallationPolicy::default();
        messages.push(local.refuses_role(attached, None, "o").map(|(_, m)| m));
        for message in messages {
            let message = message.expect("refused");
            assert!(!message.contains("  "), "padded: {message:?}");
        }
    }

    #[test]
    fn an_unset_require_role_arn_requires_a_role_and_a_wrong_one_is_named() {
        let from = |value: Option<&str>| {
            InstallationPolicy::from_env(|name| {
                (name == "STACKSYNC_REQUIRE_ROLE_ARN")
                    .then(|| value.map(str::to_owned))
                    .flatten()
            })
        };
        assert!(from(None).unwrap().require_role_arn, "unset: required");
        assert!(from(Some("")).unwrap().require_role_arn, "empty: required");
        assert!(from(Some("true")).unwrap().require_role_arn);
        assert!(!from(Some("false")).unwrap().require_role_arn);
        let err = from(Some("yes")).unwrap_err();
        assert!(
            err.contains("STACKSYNC_REQUIRE_ROLE_ARN") && err.contains("\"yes\""),
            "{err}"
        );
        let listed = InstallationPolicy::from_env(|name| {
            (name == "STACKSYNC_SERVICE_ROLE_ARNS").then(|| " arn:a , ,arn:b".to_owned())
        })
        .unwrap();
        assert_eq!(
            listed.service_roles,
            Some(vec!["arn:a".to_owned(), "arn:b".to_owned()])
        );
    }

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
            // Issue "Every message true": no hint that adopt refuses.
            Owner::Foreign(why) => assert!(
                why.contains("made by the entry \"orders\" of the installation \"table-a\"")
                    && !why.contains("adopt: true")
                    && why.contains("Remove it from that installation first"),
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
        // Another installation's: never adopted.
        match owner(&adopting, "table-b", ID, &ours, None) {
            Owner::Foreign(why) => assert!(
                why.contains("the installation \"table-a\", which manages it")
                    && why.contains("adopt never takes over another installation's stack"),
                "{why}"
            ),
            other => panic!("{other:?}"),
        }
        // This installation's, made by another entry (renamed): adopted.
        let mut renamed = adopting.clone();
        renamed.name = "orders-v2".into();
        assert_eq!(owner(&renamed, "table-a", ID, &ours, None), Owner::Adopted);
    }

    #[test]
    fn only_stacksyncs_change_sets_are_its_own() {
        assert!(ours_change_set("stacksync-v1-a51fa57c19cfec5d"));
        assert!(!ours_change_set("deploy-from-console"));
    }

    #[test]
    fn a_stacks_role_must_be_named_by_the_entry_where_the_allowed_roles_are_not_known() {
        let admin = "arn:aws:iam::1:role/cdk-exec";
        let local = InstallationPolicy::default();
        let (reason, why) = local.refuses_role(Some(admin), None, "orders").unwrap();
        assert_eq!(reason, StallReason::ServiceRoleNotNamed);
        assert!(why.contains(admin) && why.contains("Set roleArn"), "{why}");
        assert_eq!(local.refuses_role(Some(admin), Some(admin), "orders"), None);
        assert_eq!(
            local.refuses_role(Some(admin), Some("arn:aws:iam::1:role/other"), "orders"),
            None
        );
        assert_eq!(local.refuses_role(None, None, "orders"), None);
    }

    #[test]
    fn an_entry_publishes_only_under_the_installations_path() {
        let mut s = spec("team-orders");
        s.role_arn = Some("arn:aws:iam::1:role/cfn-exec".into());
        s.publish = Some(crate::spec::Publish {
            ssm: Some("/team/orders/{output}".into()),
        });
        assert_eq!(deployed().refuses_spec(&s), None);
        s.publish = Some(crate::spec::Publish {
            ssm: Some("/other/{output}".into()),
        });
        let why = deployed().refuses_spec(&s).expect("refused");
        assert!(
            why.contains("not under this installation's PublishParameterPath \"/team/\""),
            "{why}"
        );
        let nowhere = InstallationPolicy {
            publish_path: Some(String::new()),
            ..deployed()
        };
        let why = nowhere.refuses_spec(&s).expect("refused");
        assert!(why.contains("publishes no outputs"), "{why}");
        assert_eq!(
            InstallationPolicy::default().refuses_publish(&s),
            None,
            "the local runner"
        );
    }

    fn deployed() -> InstallationPolicy {
        InstallationPolicy {
            stack_name_prefix: "team-".into(),
            service_roles: Some(vec![
                "arn:aws:iam::1:role/cfn-exec".into(),
                "arn:aws:iam::2:role/deploy-*".into(),
            ]),
            require_role_arn: true,
            publish_path: Some("/team/".into()),
        }
    }

    #[test]
    fn an_attached_role_outside_the_installations_list_is_refused_and_one_inside_it_is_not() {
        let policy = deployed();
        let (reason, why) = policy
            .refuses_role(Some("arn:aws:iam::1:role/cdk-exec"), None, "team-a")
            .unwrap();
        assert_eq!(reason, StallReason::NotAllowed);
        assert!(why.contains("arn:aws:iam::1:role/cfn-exec"), "{why}");
        assert_eq!(
            policy.refuses_role(Some("arn:aws:iam::2:role/deploy-x"), None, "team-a"),
            None,
            "one the installation may pass anyway"
        );
    }

    #[test]
    fn a_deployed_installation_refuses_names_outside_its_prefix_and_missing_or_unlisted_roles() {
        let policy = deployed();
        let mut s = spec("team-orders");
        s.role_arn = Some("arn:aws:iam::1:role/cfn-exec".into());
        assert_eq!(policy.refuses_spec(&s), None);

        let mut outside = s.clone();
        outside.stack_name = Some("orders".into());
        let why = policy.refuses_spec(&outside).unwrap();
        assert!(
            why.contains("\"team-\"") && why.contains("StackNamePrefix"),
            "{why}"
        );

        let mut unnamed = s.clone();
        unnamed.role_arn = None;
        let why = policy.refuses_spec(&unnamed).unwrap();
        assert!(why.contains("RequireRoleArn"), "{why}");
        let optional = InstallationPolicy {
            require_role_arn: false,
            ..deployed()
        };
        assert_eq!(optional.refuses_spec(&unnamed), None);

        let mut other = s.clone();
        other.role_arn = Some("arn:aws:iam::1:role/admin".into());
        let why = policy.refuses_spec(&other).unwrap();
        assert!(why.contains("CloudFormationRoleArns"), "{why}");
        other.role_arn = Some("arn:aws:iam::2:role/deploy-prod".into());
        assert_eq!(policy.refuses_spec(&other), None, "by wildcard");

        assert_eq!(InstallationPolicy::default().refuses_spec(&unnamed), None);
    }

    #[test]
    fn wildcards_match_as_iam_matches_them() {
        assert!(wildcard("a*c", "abbc"));
        assert!(wildcard("a*", "a"));
        assert!(wildcard("a?c", "abc"));
        assert!(!wildcard("a?c", "ac"));
        assert!(!wildcard("arn:*:role/x", "arn:aws:iam::1:role/xy"));
        assert!(wildcard("*", ""));
    }
}
