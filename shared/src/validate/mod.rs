//! Rules a spec must satisfy before it reaches the registry.
//!
//! Each rule reports the field (as written in `stacks.yaml`, e.g.
//! `source.path`) and what is wrong, so [`crate::manifest`] can say which
//! entry of which file to fix. The limits are CloudFormation's own, checked
//! here so they are not discovered at deploy time.
//!
//! [`validate_spec`] runs every rule over one spec. The rules are grouped by
//! what they check:
//!
//! - `names`: the registry name, the stack name and the region;
//! - `arns`: the shape of an ARN, and the roles a spec names;
//! - `source`: the Git repository or S3 archive, its ref, the path inside;
//! - `inputs`: what goes to CloudFormation with the template: parameters,
//!   tags and capabilities;
//! - `settings`: stacksync's intervals and the stack's policy, notification
//!   topics and rollback triggers.
//!
//! The rules for single values ([`stack_name`], [`region_name`],
//! [`parse_arn`], [`git_url`], ...) are public here, at the top of the
//! module, for other inputs that carry the same values.

mod arns;
mod deploy;
mod inputs;
mod names;
mod settings;
mod source;
mod targets;

pub use arns::{Arn, iam_role_arn, parse_arn, secret_arn};
pub use inputs::{MAX_PARAMETER_VALUE_BYTES, MAX_PARAMETERS, MAX_TAGS, tag};
pub use names::{region_name, stack_name};
pub use settings::{MAX_NOTIFICATION_ARNS, MAX_ROLLBACK_TRIGGERS, MAX_STACK_POLICY_BYTES};
pub use source::{MAX_PATH_LEN, git_ref, git_url, redacted, relative_path, s3_url};

use crate::spec::StackSpec;

/// One thing wrong with one field of a spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The field as written in `stacks.yaml`: `name`, `source.path`, `tags.team`.
    pub field: String,
    /// What is wrong, with the offending value.
    pub message: String,
}

impl FieldError {
    fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Every rule, over one spec. Empty when the spec is valid.
///
/// The errors come in the order the fields are declared in [`StackSpec`].
pub fn validate_spec(spec: &StackSpec) -> Vec<FieldError> {
    let mut errors = Errors::default();
    names::check_identity(spec, &mut errors);
    arns::check_roles(spec, &mut errors);
    source::check_source(&spec.source, &mut errors);
    source::check_policy(spec.policy.as_ref(), &mut errors);
    inputs::check_parameters(spec, &mut errors);
    inputs::check_tags(&spec.tags, &mut errors);
    inputs::check_capabilities(&spec.capabilities, &mut errors);
    settings::check_durations(spec, &mut errors);
    settings::check_stack_policy(spec.stack_policy.as_ref(), &mut errors);
    settings::check_notifications(&spec.notification_arns, &mut errors);
    settings::check_rollback(spec.rollback.as_ref(), &mut errors);
    settings::check_approvers(&spec.approvers, &mut errors);
    settings::check_windows(&spec.windows, &mut errors);
    settings::check_publish(spec.publish.as_ref(), &mut errors);
    deploy::check_deployment(spec, &mut errors);
    targets::check_targets(spec, &mut errors);
    check_stored_size(spec, &mut errors);
    errors.0
}

/// The most bytes a spec may take as stored: DynamoDB holds 400 KB per
/// item, and the entry's status, lease and indexed attributes need the rest.
pub const MAX_SPEC_BYTES: usize = 300 * 1024;

/// A spec that would not fit in its registry item, refused against its
/// largest field (200 parameters of 4 KB pass each rule, and not this one).
fn check_stored_size(spec: &StackSpec, errors: &mut Errors) {
    let Ok(serde_json::Value::Object(fields)) = serde_json::to_value(spec) else {
        return;
    };
    let size = |v: &serde_json::Value| serde_json::to_vec(v).map_or(0, |b| b.len());
    let total: usize = fields.iter().map(|(k, v)| k.len() + size(v) + 4).sum();
    if total <= MAX_SPEC_BYTES {
        return;
    }
    let largest = fields
        .iter()
        .max_by_key(|(_, v)| size(v))
        .map_or("name", |(k, _)| k.as_str());
    errors.push(
        largest,
        format!(
            "the entry is {total} bytes as stored, more than the {MAX_SPEC_BYTES} a registry \
             entry may hold (DynamoDB's items hold 400 KB, with the status): move values \
             to a parameter file in the source"
        ),
    );
}

/// The problems of a policy source (the installation's `PolicySource`),
/// as (field, message), named `policy.*`.
pub fn policy_problems(source: &crate::spec::Source) -> Vec<(String, String)> {
    let mut errors = Errors::default();
    source::check_policy(Some(source), &mut errors);
    errors.0.into_iter().map(|e| (e.field, e.message)).collect()
}

/// The errors found so far, in the order they were found.
#[derive(Debug, Default)]
struct Errors(Vec<FieldError>);

/// The problems of a source alone (`source.*` fields), as (field, message):
/// for a registry source, read with a template source's rules.
pub fn source_problems(source: &crate::spec::Source) -> Vec<(String, String)> {
    let mut errors = Errors::default();
    source::check_source(source, &mut errors);
    errors.0.into_iter().map(|e| (e.field, e.message)).collect()
}

impl Errors {
    /// Records the message of `result`, if it is an error, against `field`.
    fn check(&mut self, field: impl Into<String>, result: Result<(), String>) {
        if let Err(message) = result {
            self.push(field, message);
        }
    }

    /// Records a problem with `field`.
    fn push(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.0.push(FieldError::new(field, message));
    }
}

/// The fields [`validate_spec`] names for a spec, in order (for tests).
#[cfg(test)]
fn fields(s: &StackSpec) -> Vec<String> {
    validate_spec(s).into_iter().map(|e| e.field).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::duration::Duration;
    use crate::spec::fixtures::spec;

    #[test]
    fn the_minimal_fixture_is_valid() {
        assert_eq!(validate_spec(&spec("orders-queue")), vec![]);
    }

    #[test]
    fn a_spec_too_large_for_its_registry_item_is_refused_with_its_size() {
        let mut s = spec("a");
        // 200 parameters of 4 KB: each within the rules, 800 KB in all.
        for i in 0..MAX_PARAMETERS {
            s.parameters.insert(
                format!("P{i}"),
                "v".repeat(MAX_PARAMETER_VALUE_BYTES).into(),
            );
        }
        let errors = validate_spec(&s);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].field, "parameters");
        assert!(
            errors[0]
                .message
                .contains("more than the 307200 a registry entry may hold"),
            "{}",
            errors[0].message
        );
        // 70 of them fit.
        s.parameters = s.parameters.into_iter().take(70).collect();
        assert_eq!(validate_spec(&s), vec![]);
    }

    #[test]
    fn each_field_is_named_when_wrong() {
        use crate::spec::{Capability, RollbackConfig, RollbackTrigger};
        let mut s = spec("a");
        s.stack_name = Some("bad_name".into());
        s.region = Some("moon-1".into());
        s.role_arn = Some("role".into());
        s.assume_role_arn = Some("arn:aws:iam::111122223333:group/x".into());
        s.source.s3 = Some("s3://bucket/k.zip".into());
        s.parameter_file = Some("../p.json".into());
        s.capabilities = vec![Capability::Iam, Capability::Iam];
        s.stack_policy = Some(serde_json::json!({"Nope": 1}));
        s.notification_arns = vec!["arn:aws:sqs:us-east-1:111122223333:q".into()];
        s.rollback = Some(RollbackConfig {
            monitoring_time: Some(Duration::from_secs(90)),
            triggers: vec![RollbackTrigger {
                arn: "arn:aws:cloudwatch:us-east-1:111122223333:dashboard:x".into(),
                kind: "AWS::SNS::Topic".into(),
            }],
        });
        assert_eq!(
            fields(&s),
            vec![
                "stackName",
                "region",
                "roleArn",
                "assumeRoleArn",
                "source",
                "parameterFile",
                "capabilities",
                "stackPolicy",
                "notificationArns[0]",
                "rollback.monitoringTime",
                "rollback.triggers[0].arn",
                "rollback.triggers[0].type",
            ]
        );
    }
}
