//! Rules a spec must satisfy before it reaches the registry.
//!
//! Each rule reports the field (as written in `stacks.yaml`, e.g.
//! `source.path`) and what is wrong, so [`crate::manifest`] can say which
//! entry of which file to fix. The limits are CloudFormation's own, checked
//! here so they are not discovered at deploy time.

use std::collections::{BTreeMap, BTreeSet};

use crate::duration::Duration;
use crate::spec::{Capability, RollbackConfig, Source, SourceKind, StackSpec};

/// CloudFormation: at most 50 tags per stack.
pub const MAX_TAGS: usize = 50;
/// CloudFormation: at most 200 parameters per template.
pub const MAX_PARAMETERS: usize = 200;
/// CloudFormation: a parameter value is at most 4,096 bytes.
pub const MAX_PARAMETER_VALUE_BYTES: usize = 4096;
/// CloudFormation: at most 5 notification ARNs.
pub const MAX_NOTIFICATION_ARNS: usize = 5;
/// CloudFormation: at most 5 rollback triggers.
pub const MAX_ROLLBACK_TRIGGERS: usize = 5;
/// CloudFormation: a stack policy body is at most 16,384 bytes.
pub const MAX_STACK_POLICY_BYTES: usize = 16_384;
/// Longest template path we accept inside a source.
pub const MAX_PATH_LEN: usize = 1024;

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
/// The errors come in the order the fields are checked here, which is the
/// order they are written in a `stacks.yaml` entry.
pub fn validate_spec(spec: &StackSpec) -> Vec<FieldError> {
    let mut errors = Errors::default();
    check_identity(spec, &mut errors);
    check_roles(spec, &mut errors);
    check_source(&spec.source, &mut errors);
    check_parameters(spec, &mut errors);
    check_tags(&spec.tags, &mut errors);
    check_capabilities(&spec.capabilities, &mut errors);
    check_durations(spec, &mut errors);
    if let Some(policy) = &spec.stack_policy {
        errors.check("stackPolicy", stack_policy(policy));
    }
    check_notifications(&spec.notification_arns, &mut errors);
    if let Some(rollback) = &spec.rollback {
        check_rollback(rollback, &mut errors);
    }
    errors.0
}

/// The errors found so far, in the order they were found.
#[derive(Debug, Default)]
struct Errors(Vec<FieldError>);

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

/// `name`, `stackName` and `region`: what the stack is called, and where.
fn check_identity(spec: &StackSpec, errors: &mut Errors) {
    errors.check("name", stack_name(&spec.name));
    if let Some(name) = &spec.stack_name {
        errors.check("stackName", stack_name(name));
    }
    if let Some(region) = &spec.region {
        errors.check("region", region_name(region));
    }
}

/// `roleArn` (CloudFormation's service role) and `assumeRoleArn` (the role
/// stacksync assumes to reach the stack's account).
fn check_roles(spec: &StackSpec, errors: &mut Errors) {
    if let Some(arn) = &spec.role_arn {
        errors.check("roleArn", iam_role_arn(arn));
    }
    if let Some(arn) = &spec.assume_role_arn {
        errors.check("assumeRoleArn", iam_role_arn(arn));
    }
}

/// `source`: one Git or S3 location, its ref, the template's path inside it
/// and the secret that opens it.
fn check_source(source: &Source, errors: &mut Errors) {
    match source.kind() {
        None => errors.push(
            "source",
            "give exactly one of `git` (a repository URL) or `s3` (s3://bucket/key)",
        ),
        Some(SourceKind::Git) => {
            errors.check("source.git", git_url(source.url()));
            if let Some(r) = &source.reference {
                errors.check("source.ref", git_ref(r));
            }
        }
        Some(SourceKind::S3) => {
            errors.check("source.s3", s3_url(source.url()));
            if let Some(r) = &source.reference {
                errors.check("source.ref", s3_version(r));
            }
        }
    }
    errors.check("source.path", relative_path(&source.path));
    if let Some(secret) = &source.credentials_secret {
        errors.check("source.credentialsSecret", secret_arn(secret));
    }
}

/// `parameters` (how many, each name and value) and `parameterFile`.
fn check_parameters(spec: &StackSpec, errors: &mut Errors) {
    if spec.parameters.len() > MAX_PARAMETERS {
        errors.push(
            "parameters",
            format!(
                "{} parameters given; CloudFormation allows at most {MAX_PARAMETERS}",
                spec.parameters.len()
            ),
        );
    }
    for (key, value) in &spec.parameters {
        errors.check(format!("parameters.{key}"), parameter(key, value));
    }
    if let Some(path) = &spec.parameter_file {
        errors.check("parameterFile", relative_path(path));
    }
}

/// `tags`: how many, and each key and value.
fn check_tags(tags: &BTreeMap<String, String>, errors: &mut Errors) {
    if tags.len() > MAX_TAGS {
        errors.push(
            "tags",
            format!(
                "{} tags given; CloudFormation allows at most {MAX_TAGS} per stack",
                tags.len()
            ),
        );
    }
    for (key, value) in tags {
        errors.check(format!("tags.{key}"), tag(key, value));
    }
}

/// `capabilities`: each listed once.
fn check_capabilities(capabilities: &[Capability], errors: &mut Errors) {
    let mut seen = BTreeSet::new();
    for cap in capabilities {
        if !seen.insert(*cap) {
            errors.push("capabilities", format!("{cap} is listed twice"));
        }
    }
}

/// `interval`, `pollInterval` and `retryInterval`, each within its bounds.
///
/// Bounds: a full reconcile from once a minute to once a day; a first poll of
/// CloudFormation from 1s to 5m; a retry after a failure from 10s to a day.
fn check_durations(spec: &StackSpec, errors: &mut Errors) {
    let durations = [
        (
            "interval",
            spec.interval,
            Duration::from_mins(1),
            Duration::from_secs(86_400),
        ),
        (
            "pollInterval",
            spec.poll_interval,
            Duration::from_secs(1),
            Duration::from_mins(5),
        ),
        (
            "retryInterval",
            spec.retry_interval,
            Duration::from_secs(10),
            Duration::from_secs(86_400),
        ),
    ];
    for (field, value, min, max) in durations {
        if value < min || value > max {
            errors.push(
                field,
                format!("{value} is out of range: use {min} to {max}"),
            );
        }
    }
}

/// `notificationArns`: how many, each an SNS topic, each listed once.
fn check_notifications(arns: &[String], errors: &mut Errors) {
    if arns.len() > MAX_NOTIFICATION_ARNS {
        errors.push(
            "notificationArns",
            format!(
                "{} topics given; CloudFormation allows at most {MAX_NOTIFICATION_ARNS}",
                arns.len()
            ),
        );
    }
    let mut seen = BTreeSet::new();
    for (i, arn) in arns.iter().enumerate() {
        let field = format!("notificationArns[{i}]");
        errors.check(field.clone(), sns_topic_arn(arn));
        if !seen.insert(arn) {
            errors.push(field, format!("{arn} is listed twice"));
        }
    }
}

/// `rollback`: the monitoring time, how many triggers, and each trigger's
/// alarm ARN and type.
fn check_rollback(rollback: &RollbackConfig, errors: &mut Errors) {
    if let Some(time) = rollback.monitoring_time {
        errors.check("rollback.monitoringTime", monitoring_time(time));
    }
    if rollback.triggers.len() > MAX_ROLLBACK_TRIGGERS {
        errors.push(
            "rollback.triggers",
            format!(
                "{} triggers given; CloudFormation allows at most {MAX_ROLLBACK_TRIGGERS}",
                rollback.triggers.len()
            ),
        );
    }
    for (i, trigger) in rollback.triggers.iter().enumerate() {
        errors.check(
            format!("rollback.triggers[{i}].arn"),
            alarm_arn(&trigger.arn),
        );
        errors.check(
            format!("rollback.triggers[{i}].type"),
            trigger_type(&trigger.kind),
        );
    }
}

/// CloudFormation stack names (and our registry names): 1–128 characters,
/// a letter first, then letters, digits and hyphens.
pub fn stack_name(name: &str) -> Result<(), String> {
    let rule = "a stack name is 1 to 128 characters: a letter, then letters, digits or hyphens";
    let mut chars = name.chars();
    match chars.next() {
        None => return Err(format!("is empty: {rule}")),
        Some(c) if !c.is_ascii_alphabetic() => {
            return Err(format!("{name:?} does not start with a letter: {rule}"));
        }
        _ => {}
    }
    if let Some(bad) = chars.find(|c| !(c.is_ascii_alphanumeric() || *c == '-')) {
        return Err(format!("{name:?} contains {bad:?}: {rule}"));
    }
    if name.len() > 128 {
        return Err(format!("is {} characters long: {rule}", name.len()));
    }
    Ok(())
}

/// AWS region names such as `us-east-1`, `eu-central-2`, `us-gov-west-1`, `cn-north-1`.
pub fn region_name(region: &str) -> Result<(), String> {
    let fail = || {
        Err(format!(
            "{region:?} is not an AWS region name (like us-east-1 or eu-west-2)"
        ))
    };
    let parts: Vec<&str> = region.split('-').collect();
    let (area, qualifier, direction, number) = match parts.as_slice() {
        [a, d, n] => (*a, None, *d, *n),
        [a, q, d, n] => (*a, Some(*q), *d, *n),
        _ => return fail(),
    };
    let area_ok = area.len() == 2 && area.chars().all(|c| c.is_ascii_lowercase());
    let qualifier_ok =
        qualifier.is_none_or(|q| matches!(q, "gov" | "iso" | "isob" | "isoe" | "isof"));
    let direction_ok = matches!(
        direction,
        "north"
            | "south"
            | "east"
            | "west"
            | "central"
            | "northeast"
            | "northwest"
            | "southeast"
            | "southwest"
    );
    let number_ok = !number.is_empty()
        && number.len() <= 2
        && number.chars().all(|c| c.is_ascii_digit())
        && !number.starts_with('0');
    if area_ok && qualifier_ok && direction_ok && number_ok {
        Ok(())
    } else {
        fail()
    }
}

/// The parts of an ARN: `arn:partition:service:region:account:resource`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arn<'a> {
    pub partition: &'a str,
    pub service: &'a str,
    pub region: &'a str,
    pub account: &'a str,
    pub resource: &'a str,
}

/// Splits an ARN into its parts, checking the partition and account id.
pub fn parse_arn(arn: &str) -> Result<Arn<'_>, String> {
    let parts: Vec<&str> = arn.splitn(6, ':').collect();
    let [prefix, partition, service, region, account, resource] = parts.as_slice() else {
        return Err(format!(
            "{arn:?} is not an ARN (arn:partition:service:region:account:resource)"
        ));
    };
    if *prefix != "arn" {
        return Err(format!(
            "{arn:?} is not an ARN: it must start with \"arn:\""
        ));
    }
    if !matches!(
        *partition,
        "aws"
            | "aws-cn"
            | "aws-us-gov"
            | "aws-iso"
            | "aws-iso-b"
            | "aws-iso-e"
            | "aws-iso-f"
            | "aws-eusc"
    ) {
        return Err(format!("{arn:?} has an unknown partition {partition:?}"));
    }
    let twelve_digits = account.len() == 12 && account.chars().all(|c| c.is_ascii_digit());
    if !account.is_empty() && !twelve_digits {
        return Err(format!(
            "{arn:?} has {account:?} as account id: it must be 12 digits"
        ));
    }
    Ok(Arn {
        partition,
        service,
        region,
        account,
        resource,
    })
}

fn arn_of(arn: &str, service: &str, resource_ok: impl Fn(&str) -> bool) -> Result<(), String> {
    let parsed = parse_arn(arn)?;
    if parsed.service != service {
        return Err(format!(
            "{arn:?} is an ARN of {:?}, expected one of {service:?}",
            parsed.service
        ));
    }
    region_name(parsed.region).map_err(|_| format!("{arn:?} names no valid region"))?;
    if parsed.account.is_empty() {
        return Err(format!("{arn:?} names no account id"));
    }
    if !resource_ok(parsed.resource) {
        return Err(format!(
            "{arn:?} does not name a {service} resource of the right kind"
        ));
    }
    Ok(())
}

/// IAM role ARNs: `arn:aws:iam::123456789012:role/path/name`.
pub fn iam_role_arn(arn: &str) -> Result<(), String> {
    let parsed = parse_arn(arn)?;
    let shape = "an IAM role ARN looks like arn:aws:iam::123456789012:role/name";
    if parsed.service != "iam" || !parsed.region.is_empty() || parsed.account.is_empty() {
        return Err(format!("{arn:?} is not an IAM role ARN: {shape}"));
    }
    let Some(name) = parsed.resource.strip_prefix("role/") else {
        return Err(format!("{arn:?} does not name a role: {shape}"));
    };
    let role = name.rsplit('/').next().unwrap_or("");
    let allowed = |c: char| c.is_ascii_alphanumeric() || "+=,.@_-/".contains(c);
    if role.is_empty() || role.len() > 64 || !name.chars().all(allowed) || arn.len() > 2048 {
        return Err(format!("{arn:?} has an invalid role name: {shape}"));
    }
    Ok(())
}

/// Secrets Manager secret ARNs or SSM parameter ARNs.
pub fn secret_arn(arn: &str) -> Result<(), String> {
    let parsed = parse_arn(arn)?;
    let ok = match parsed.service {
        "secretsmanager" => parsed.resource.starts_with("secret:") && parsed.resource.len() > 7,
        "ssm" => parsed.resource.starts_with("parameter/") && parsed.resource.len() > 10,
        _ => false,
    };
    if !ok || parsed.account.is_empty() || region_name(parsed.region).is_err() {
        return Err(format!(
            "{arn:?} is neither a Secrets Manager secret ARN \
             (arn:aws:secretsmanager:REGION:ACCOUNT:secret:NAME) nor an SSM parameter ARN \
             (arn:aws:ssm:REGION:ACCOUNT:parameter/NAME)"
        ));
    }
    Ok(())
}

/// Git repository URLs stacksync can fetch from.
pub fn git_url(url: &str) -> Result<(), String> {
    if url.is_empty() || url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("{url:?} is not a Git URL"));
    }
    if let Some((scheme, rest)) = url.split_once("://") {
        if !matches!(scheme, "https" | "http" | "ssh" | "git" | "file") {
            return Err(format!(
                "{url:?} uses {scheme}://; stacksync fetches from https://, http://, ssh://, \
                 git:// and file:// URLs"
            ));
        }
        let authority = rest.split('/').next().unwrap_or("");
        if scheme != "file" && authority.rsplit('@').next().unwrap_or("").is_empty() {
            return Err(format!("{url:?} names no host"));
        }
        if matches!(scheme, "https" | "http") && authority.contains('@') {
            return Err(format!(
                "{url:?} has credentials in it: put them in `source.credentialsSecret` instead"
            ));
        }
        if rest.len() <= authority.len() + 1 {
            return Err(format!("{url:?} names no repository"));
        }
        return Ok(());
    }
    // scp-like syntax: user@host:path
    match url.split_once(':') {
        Some((host, path)) if !host.is_empty() && !host.contains('/') && !path.is_empty() => Ok(()),
        _ => Err(format!(
            "{url:?} is not a Git URL: use https://host/org/repo.git, ssh://git@host/org/repo.git, \
             git@host:org/repo.git or file:///path"
        )),
    }
}

/// Git ref names (branch or tag) or commit ids, per `git check-ref-format`.
pub fn git_ref(reference: &str) -> Result<(), String> {
    let name = reference
        .strip_prefix("refs/heads/")
        .or_else(|| reference.strip_prefix("refs/tags/"))
        .unwrap_or(reference);
    let bad = name.is_empty()
        || name.len() > 255
        || name.starts_with('/')
        || name.ends_with('/')
        || name.ends_with('.')
        || name.ends_with(".lock")
        || name.starts_with('-')
        || name.contains("..")
        || name.contains("//")
        || name.contains("@{")
        || name == "@"
        || name.split('/').any(|part| part.starts_with('.'))
        || name
            .chars()
            .any(|c| c.is_control() || c.is_whitespace() || "~^:?*[\\".contains(c));
    if bad {
        return Err(format!(
            "{reference:?} is not a valid Git branch, tag or commit id"
        ));
    }
    Ok(())
}

fn s3_version(version: &str) -> Result<(), String> {
    if version.is_empty() || version.len() > 1024 || version.chars().any(|c| c.is_whitespace()) {
        return Err(format!("{version:?} is not an S3 object version id"));
    }
    Ok(())
}

/// `s3://bucket/key` with a valid bucket name and a key.
pub fn s3_url(url: &str) -> Result<(), String> {
    let Some(rest) = url.strip_prefix("s3://") else {
        return Err(format!(
            "{url:?} is not an S3 URL: write s3://bucket/key.zip"
        ));
    };
    let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
    let bucket_ok = (3..=63).contains(&bucket.len())
        && bucket
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-')
        && bucket.starts_with(|c: char| c.is_ascii_alphanumeric())
        && bucket.ends_with(|c: char| c.is_ascii_alphanumeric())
        && !bucket.contains("..");
    if !bucket_ok {
        return Err(format!("{url:?}: {bucket:?} is not a valid S3 bucket name"));
    }
    if key.is_empty() || key.len() > 1024 {
        return Err(format!(
            "{url:?} names no object key: write s3://bucket/key.zip"
        ));
    }
    Ok(())
}

/// A path inside a source: relative, and unable to leave the source.
pub fn relative_path(path: &str) -> Result<(), String> {
    if path.is_empty() {
        return Err("is empty: give the file's path inside the source".into());
    }
    if path.starts_with('/') || path.starts_with('~') || path.as_bytes().get(1) == Some(&b':') {
        return Err(format!(
            "{path:?} is absolute: give a path relative to the root of the source"
        ));
    }
    if path.contains('\\') {
        return Err(format!(
            "{path:?} contains a backslash: separate folders with /"
        ));
    }
    if path.chars().any(char::is_control) {
        return Err(format!("{path:?} contains a control character"));
    }
    if path.split('/').any(|part| part == "..") {
        return Err(format!(
            "{path:?} leaves the source: \"..\" is not allowed in a path"
        ));
    }
    if path.split('/').all(|part| part.is_empty() || part == ".") || path.ends_with('/') {
        return Err(format!("{path:?} names a folder, not a file"));
    }
    if path.len() > MAX_PATH_LEN {
        return Err(format!(
            "is {} bytes long; at most {MAX_PATH_LEN}",
            path.len()
        ));
    }
    Ok(())
}

fn parameter(key: &str, value: &str) -> Result<(), String> {
    if key.is_empty() || key.len() > 255 || !key.chars().all(|c| c.is_ascii_alphanumeric()) {
        return Err(format!(
            "{key:?} is not a CloudFormation parameter name: 1 to 255 letters and digits"
        ));
    }
    if value.len() > MAX_PARAMETER_VALUE_BYTES {
        return Err(format!(
            "the value is {} bytes; CloudFormation allows at most {MAX_PARAMETER_VALUE_BYTES}",
            value.len()
        ));
    }
    Ok(())
}

fn tag(key: &str, value: &str) -> Result<(), String> {
    let allowed = |c: char| c.is_alphanumeric() || c == ' ' || "_.:/=+-@".contains(c);
    let keys = key.chars().count();
    if keys == 0 || keys > 128 || !key.chars().all(allowed) {
        return Err(format!(
            "{key:?} is not a valid tag key: 1 to 128 letters, digits, spaces or _.:/=+-@"
        ));
    }
    if key.to_ascii_lowercase().starts_with("aws:") {
        return Err(format!("{key:?} uses the reserved prefix \"aws:\""));
    }
    if value.chars().count() > 256 || !value.chars().all(allowed) {
        return Err(format!(
            "the value {value:?} is not valid: at most 256 letters, digits, spaces or _.:/=+-@"
        ));
    }
    Ok(())
}

fn stack_policy(policy: &serde_json::Value) -> Result<(), String> {
    let has_statements = policy
        .get("Statement")
        .is_some_and(|s| s.as_array().is_some_and(|a| !a.is_empty()) || s.is_object());
    if !has_statements {
        return Err("a stack policy is a document with a non-empty \"Statement\" list".into());
    }
    let size = serde_json::to_vec(policy)
        .map(|v| v.len())
        .unwrap_or(usize::MAX);
    if size > MAX_STACK_POLICY_BYTES {
        return Err(format!(
            "the policy is {size} bytes as JSON; CloudFormation allows at most {MAX_STACK_POLICY_BYTES}"
        ));
    }
    Ok(())
}

/// SNS topic ARNs: `arn:aws:sns:us-east-1:123456789012:topic`.
fn sns_topic_arn(arn: &str) -> Result<(), String> {
    arn_of(arn, "sns", |r| !r.is_empty() && !r.contains(':'))
}

/// CloudWatch alarm ARNs: `arn:aws:cloudwatch:us-east-1:123456789012:alarm:name`.
fn alarm_arn(arn: &str) -> Result<(), String> {
    arn_of(arn, "cloudwatch", |r| {
        r.starts_with("alarm:") && r.len() > 6
    })
}

/// The rollback monitoring time: CloudFormation takes whole minutes, 0 to 180.
fn monitoring_time(time: Duration) -> Result<(), String> {
    if !time.as_secs().is_multiple_of(60) || time > Duration::from_mins(180) {
        return Err(format!(
            "{time} is not allowed: CloudFormation takes whole minutes from 0m to 180m"
        ));
    }
    Ok(())
}

/// The types of resource CloudFormation accepts as a rollback trigger.
fn trigger_type(kind: &str) -> Result<(), String> {
    if !matches!(
        kind,
        "AWS::CloudWatch::Alarm" | "AWS::CloudWatch::CompositeAlarm"
    ) {
        return Err(format!(
            "{kind:?} is not a trigger type: use AWS::CloudWatch::Alarm or \
             AWS::CloudWatch::CompositeAlarm"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::fixtures::spec;

    fn fields(s: &StackSpec) -> Vec<String> {
        validate_spec(s).into_iter().map(|e| e.field).collect()
    }

    #[test]
    fn the_minimal_fixture_is_valid() {
        assert_eq!(validate_spec(&spec("orders-queue")), vec![]);
    }

    #[test]
    fn stack_names_follow_cloudformation() {
        assert!(stack_name("prod-orders-1").is_ok());
        assert!(stack_name(&"a".repeat(128)).is_ok());
        for bad in ["", "1abc", "-abc", "a_b", "a.b", "a b", "ünicode"] {
            assert!(stack_name(bad).is_err(), "{bad}");
        }
        assert!(stack_name(&"a".repeat(129)).is_err());
    }

    #[test]
    fn region_names_are_checked() {
        for ok in [
            "us-east-1",
            "eu-west-2",
            "ap-southeast-3",
            "us-gov-west-1",
            "cn-north-1",
            "us-isob-east-1",
            "il-central-1",
            "ca-west-1",
        ] {
            assert!(region_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "us-east",
            "useast1",
            "US-EAST-1",
            "us-middle-1",
            "us-east-01",
            "mars-north-1",
        ] {
            assert!(region_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn role_arns_must_name_an_iam_role() {
        assert!(iam_role_arn("arn:aws:iam::111122223333:role/cfn-exec").is_ok());
        assert!(iam_role_arn("arn:aws-us-gov:iam::111122223333:role/path/to/r+=,.@_-").is_ok());
        for bad in [
            "cfn-exec",
            "arn:aws:iam::1111:role/x",
            "arn:aws:iam::111122223333:user/x",
            "arn:aws:s3:::bucket",
            "arn:aws:iam:us-east-1:111122223333:role/x",
            "arn:nope:iam::111122223333:role/x",
            "arn:aws:iam::111122223333:role/",
            "arn:aws:iam::111122223333:role/has space",
        ] {
            assert!(iam_role_arn(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn paths_cannot_escape_the_source() {
        for ok in [
            "t.yaml",
            "a/b/c.json",
            "./a.yaml",
            "dir.with.dots/x..y.yaml",
        ] {
            assert!(relative_path(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "/etc/passwd",
            "../x.yaml",
            "a/../../x",
            "a/..",
            "~/x",
            "C:/x",
            "a\\b",
            "a/",
            ".",
            "a\0b",
        ] {
            assert!(relative_path(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn git_urls_and_refs() {
        for ok in [
            "https://github.com/acme/infra.git",
            "http://127.0.0.1:9418/repo",
            "ssh://git@github.com/acme/infra.git",
            "git@github.com:acme/infra.git",
            "git://127.0.0.1/repo.git",
            "file:///tmp/repo",
        ] {
            assert!(git_url(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "ftp://h/r",
            "https://",
            "https://host",
            "https://u:p@host/r.git",
            "not a url",
            "/tmp/repo",
        ] {
            assert!(git_url(bad).is_err(), "{bad}");
        }
        for ok in [
            "main",
            "release/1.2",
            "v1.0.0",
            "refs/heads/main",
            "0123456789abcdef0123456789abcdef01234567",
        ] {
            assert!(git_ref(ok).is_ok(), "{ok}");
        }
        for bad in [
            "", "a..b", "a b", "x.lock", "-x", "a~1", "a^", "a:b", "/a", "a/", ".hidden", "@",
        ] {
            assert!(git_ref(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn s3_sources() {
        assert!(s3_url("s3://my-bucket/infra/app.zip").is_ok());
        for bad in [
            "s3://",
            "s3://Bucket/k",
            "s3://b/k",
            "s3://bucket",
            "s3://bucket/",
            "https://bucket/k",
        ] {
            assert!(s3_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn secrets_must_be_secrets_manager_or_ssm_arns() {
        assert!(
            secret_arn("arn:aws:secretsmanager:us-east-1:111122223333:secret:git-token-AbCdEf")
                .is_ok()
        );
        assert!(secret_arn("arn:aws:ssm:eu-west-1:111122223333:parameter/git/key").is_ok());
        assert!(secret_arn("my-secret").is_err());
        assert!(secret_arn("arn:aws:s3:us-east-1:111122223333:secret:x").is_err());
    }

    #[test]
    fn limits_on_tags_and_parameters() {
        let mut s = spec("a");
        for i in 0..51 {
            s.tags.insert(format!("k{i}"), "v".into());
        }
        assert_eq!(fields(&s), vec!["tags"]);

        let mut s = spec("a");
        s.tags.insert("aws:owner".into(), "x".into());
        s.tags.insert("ok".into(), "x".repeat(257));
        assert_eq!(fields(&s), vec!["tags.aws:owner", "tags.ok"]);

        let mut s = spec("a");
        for i in 0..201 {
            s.parameters.insert(format!("P{i}"), "v".into());
        }
        assert_eq!(fields(&s), vec!["parameters"]);

        let mut s = spec("a");
        s.parameters.insert("Bad-Name".into(), "v".into());
        s.parameters.insert("Big".into(), "x".repeat(4097));
        assert_eq!(fields(&s), vec!["parameters.Bad-Name", "parameters.Big"]);
    }

    #[test]
    fn durations_have_sane_bounds() {
        let mut s = spec("a");
        s.interval = Duration::from_secs(10);
        s.poll_interval = Duration::from_mins(10);
        s.retry_interval = Duration::from_secs(2 * 86_400);
        assert_eq!(
            fields(&s),
            vec!["interval", "pollInterval", "retryInterval"]
        );
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
