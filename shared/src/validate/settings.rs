//! How a stack is run: stacksync's intervals (`interval`, `pollInterval`,
//! `retryInterval`) and the stack's CloudFormation settings (`stackPolicy`,
//! `notificationArns`, `rollback`).
//!
//! The intervals are bounded at both ends: too short, and stacksync would
//! call AWS needlessly often; too long, and a drifted stack or a failed
//! deployment would wait days for its next look. The settings are held to
//! CloudFormation's own limits, so a spec that breaks one is refused when
//! `stacks.yaml` is read rather than when the stack is deployed.

use std::collections::BTreeSet;

use super::Errors;
use super::arns::arn_of;
use crate::duration::Duration;
use crate::spec::{
    DriftAction, DriftSpec, MAX_DRIFT_INTERVAL, MAX_IGNORE_RULES, MIN_DRIFT_INTERVAL,
    RollbackConfig, StackSpec,
};

/// CloudFormation: at most 5 notification ARNs.
pub const MAX_NOTIFICATION_ARNS: usize = 5;

/// CloudFormation: at most 5 rollback triggers.
pub const MAX_ROLLBACK_TRIGGERS: usize = 5;

/// CloudFormation: a stack policy body is at most 16,384 bytes.
pub const MAX_STACK_POLICY_BYTES: usize = 16_384;

/// `approvers`: IAM principal ARN patterns, at most
/// [`crate::approvers::MAX_APPROVERS`].
pub(super) fn check_approvers(approvers: &[String], errors: &mut Errors) {
    if approvers.len() > crate::approvers::MAX_APPROVERS {
        errors.push(
            "approvers",
            format!(
                "{} patterns; at most {}",
                approvers.len(),
                crate::approvers::MAX_APPROVERS
            ),
        );
    }
    for (i, pattern) in approvers.iter().enumerate() {
        if let Err(e) = crate::approvers::check_pattern(pattern) {
            errors.push(format!("approvers[{i}]"), e);
        }
    }
}

/// `interval`, `pollInterval`, `retryInterval`, `timeout` and `maxPolls`,
/// each within its bounds.
///
/// Bounds: a full reconcile from once a minute to once a day; a first poll of
/// CloudFormation from 1s to 5m; a retry after a failure from 10s to a day;
/// a run from 1m to a day, with 1 to 2,500 polls; 1 to 100 attempts; an
/// approval awaited from 5m to 30d.
/// `publish.ssm`, when given: a path that names SSM parameters.
pub(super) fn check_publish(publish: Option<&crate::spec::Publish>, errors: &mut Errors) {
    let Some(publish) = publish else {
        return;
    };
    match &publish.ssm {
        Some(path) => {
            if let Err(why) = crate::publish::check_path(path) {
                errors.push("publish.ssm", why);
            }
        }
        None => errors.push(
            "publish",
            "names nowhere to publish: write `ssm: /path/{output}`",
        ),
    }
}

/// The most sync windows an entry (or the installation) may name.
pub const MAX_WINDOWS: usize = 20;

/// Each sync window parses, starts at some time, and there are not too many.
pub(super) fn check_windows(windows: &[crate::spec::WindowSpec], errors: &mut Errors) {
    if windows.len() > MAX_WINDOWS {
        errors.push(
            "windows",
            format!("names {} windows: at most {MAX_WINDOWS}", windows.len()),
        );
    }
    let now = crate::clock::now_millis();
    for (i, window) in windows.iter().enumerate() {
        if let Err(why) = crate::window::Window::checked(window, now) {
            errors.push(format!("windows[{i}]"), why);
        }
    }
}

pub(super) fn check_durations(spec: &StackSpec, errors: &mut Errors) {
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
        (
            "timeout",
            spec.timeout,
            Duration::from_mins(1),
            Duration::from_secs(86_400),
        ),
        (
            "approvalTimeout",
            spec.approval_timeout,
            Duration::from_mins(5),
            Duration::from_secs(30 * 86_400),
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
    check_drift(&spec.drift, errors);
    if !(1..=MAX_POLLS).contains(&spec.max_polls) {
        errors.push(
            "maxPolls",
            format!("{} is out of range: use 1 to {MAX_POLLS}", spec.max_polls),
        );
    }
    if !(1..=MAX_ATTEMPTS).contains(&spec.max_attempts) {
        errors.push(
            "maxAttempts",
            format!(
                "{} is out of range: use 1 to {MAX_ATTEMPTS}",
                spec.max_attempts
            ),
        );
    }
}

/// `drift`: an interval within bounds (15m to 30d), rules that read.
fn check_drift(drift: &DriftSpec, errors: &mut Errors) {
    if drift.action != DriftAction::Off
        && !(MIN_DRIFT_INTERVAL..=MAX_DRIFT_INTERVAL).contains(&drift.interval)
    {
        errors.push(
            "drift.interval",
            format!(
                "{} is out of range: use {MIN_DRIFT_INTERVAL} to {MAX_DRIFT_INTERVAL}",
                drift.interval
            ),
        );
    }
    if drift.ignore.len() > MAX_IGNORE_RULES {
        errors.push(
            "drift.ignore",
            format!("{} rules: at most {MAX_IGNORE_RULES}", drift.ignore.len()),
        );
    }
    for (i, rule) in drift.ignore.iter().enumerate() {
        if let Err(e) = crate::drift::ignore::IgnoreRule::parse(rule) {
            errors.push(format!("drift.ignore[{i}]"), e);
        }
    }
}

/// The most `maxAttempts`: past about 10 the waits reach their 6-hour cap,
/// and 100 attempts are a month of retrying one failure.
pub const MAX_ATTEMPTS: u32 = 100;

/// The most `maxPolls`: each poll costs about nine events of a Step
/// Functions execution's history, which holds 25,000.
pub const MAX_POLLS: u32 = 2_500;

/// `stackPolicy`, when given: a policy document CloudFormation accepts.
pub(super) fn check_stack_policy(policy: Option<&serde_json::Value>, errors: &mut Errors) {
    if let Some(policy) = policy {
        errors.check("stackPolicy", stack_policy(policy));
    }
}

/// `notificationArns`: how many, each an SNS topic, each listed once.
pub(super) fn check_notifications(arns: &[String], errors: &mut Errors) {
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

/// `rollback`, when given: the monitoring time, how many triggers, and each
/// trigger's alarm ARN and type.
pub(super) fn check_rollback(rollback: Option<&RollbackConfig>, errors: &mut Errors) {
    let Some(rollback) = rollback else {
        return;
    };
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

/// A stack policy: a document with at least one statement, no larger as
/// JSON than CloudFormation accepts.
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
    use crate::validate::fields;

    #[test]
    fn a_publish_path_is_checked_and_an_empty_publish_refused() {
        let mut s = spec("a");
        s.publish = Some(crate::spec::Publish {
            ssm: Some("/app/{output}".into()),
        });
        assert!(fields(&s).is_empty());
        s.publish = Some(crate::spec::Publish {
            ssm: Some("/app/Url".into()),
        });
        assert_eq!(fields(&s), ["publish.ssm"]);
        s.publish = Some(crate::spec::Publish::default());
        assert_eq!(fields(&s), ["publish"]);
    }

    #[test]
    fn each_bad_window_is_named_and_so_are_too_many() {
        let mut s = spec("a");
        s.windows = serde_yaml_ng::from_str(
            "[{allow: '0 8 * * MON-FRI', duration: 10h, timeZone: Europe/Berlin}, \
              {deny: '0 0 31 2 *', duration: 1h}, {allow: '0 8 * *', duration: 1h}]",
        )
        .expect("windows");
        let errors = crate::validate::validate_spec(&s);
        let said: Vec<(String, String)> =
            errors.into_iter().map(|e| (e.field, e.message)).collect();
        assert_eq!(said.len(), 2, "{said:?}");
        assert_eq!(said[0].0, "windows[1]");
        assert!(said[0].1.contains("never starts"), "{said:?}");
        assert_eq!(said[1].0, "windows[2]");
        assert!(said[1].1.contains("has 4 field(s)"), "{said:?}");
        s.windows = vec![s.windows[0].clone(); MAX_WINDOWS + 1];
        assert_eq!(fields(&s), ["windows"]);
    }

    #[test]
    fn durations_have_sane_bounds() {
        let mut s = spec("a");
        s.interval = Duration::from_secs(10);
        s.poll_interval = Duration::from_mins(10);
        s.retry_interval = Duration::from_secs(2 * 86_400);
        s.timeout = Duration::from_secs(30);
        s.max_polls = 0;
        s.max_attempts = 0;
        assert_eq!(
            fields(&s),
            vec![
                "interval",
                "pollInterval",
                "retryInterval",
                "timeout",
                "maxPolls",
                "maxAttempts"
            ]
        );
        s = spec("a");
        s.max_attempts = MAX_ATTEMPTS + 1;
        assert_eq!(fields(&s), vec!["maxAttempts"]);
        s = spec("a");
        s.max_polls = MAX_POLLS + 1;
        assert_eq!(fields(&s), vec!["maxPolls"]);
    }

    #[test]
    fn drift_settings_are_bounded_and_each_bad_rule_is_named() {
        let mut s = spec("a");
        s.drift.interval = Duration::from_mins(5);
        s.drift.ignore = vec!["Queue.Tags".into(), "Que-ue".into(), "Queue..X".into()];
        assert_eq!(
            fields(&s),
            vec!["drift.interval", "drift.ignore[1]", "drift.ignore[2]"]
        );
        s.drift.action = crate::spec::DriftAction::Off;
        s.drift.ignore = vec!["*".into(); MAX_IGNORE_RULES + 1];
        assert_eq!(
            fields(&s),
            vec!["drift.ignore"],
            "off: any interval; too many rules"
        );
        let yaml = "name: a\nsource: {git: https://h/r.git, path: t.yaml}\ndrift: {interval: 1h, action: revert, ignore: [Queue.Tags]}\n";
        let read: StackSpec = serde_yaml_ng::from_str(yaml).unwrap();
        assert_eq!(read.drift.action, crate::spec::DriftAction::Revert);
        assert!(fields(&read).is_empty());
        let bad = "name: a\nsource: {git: https://h/r.git, path: t.yaml}\ndrift: {every: 1h}\n";
        assert!(
            serde_yaml_ng::from_str::<StackSpec>(bad).is_err(),
            "unknown field"
        );
        // Left out at its default: a spec written before it hashes as it did.
        let json = serde_json::to_value(spec("a")).unwrap();
        assert!(json.get("drift").is_none());
    }
}
