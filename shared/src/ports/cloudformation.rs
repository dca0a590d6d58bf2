//! The CloudFormation port: the stack and change-set operations the steps
//! use, and the values they are described by.

use std::collections::BTreeMap;
use std::future::Future;

use super::PortResult;
pub use crate::preview::ResourceChange;
use crate::spec::{DeploymentConfig, OnStackFailure, StackSpec};
use crate::stack_status::{ChangeSetKind, ChangeSetStatus, ExecutionStatus, StackStatus};

/// A stack as described.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StackInfo {
    pub stack_id: String,
    pub status: StackStatus,
    pub reason: Option<String>,
    /// When CloudFormation last changed the stack (epoch ms): its
    /// `LastUpdatedTime`, or its `CreationTime` if it was never updated.
    pub changed_at: i64,
    /// `DriftInformation.StackDriftStatus`, where reported.
    pub drift: Option<String>,
    /// The stack's parameters, as CloudFormation reports them.
    pub parameters: BTreeMap<String, String>,
    pub tags: BTreeMap<String, String>,
    /// `EnableTerminationProtection`.
    pub termination_protection: bool,
    /// The service role CloudFormation uses for the stack (`RoleARN`).
    pub role_arn: Option<String>,
    /// Its outputs (`OutputKey` → `OutputValue`).
    pub outputs: BTreeMap<String, String>,
    /// Its latest operations (`LastOperations`): (type, id), e.g.
    /// (`UPDATE_STACK`, id) then (`ROLLBACK`, id); empty where not reported.
    pub operations: Vec<(String, String)>,
}

/// A value read from a secret store, and the version it was read at (what
/// a run records of it: never the value, nor anything derived from it).
#[derive(Clone, PartialEq, Eq)]
pub struct Versioned {
    pub value: String,
    pub version: String,
    /// A secret's (Secrets Manager, an SSM `SecureString`), not a plain
    /// SSM `String` or `StringList`: it may go only to a `NoEcho`
    /// parameter, and no output equal to it is recorded.
    pub secret: bool,
}

/// The version only: the value may be a secret.
impl std::fmt::Debug for Versioned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Versioned")
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

impl StackInfo {
    /// The operation that deployed or deleted the stack last (the one whose
    /// failure a rollback follows), if reported.
    pub fn deploying_operation(&self) -> Option<&str> {
        self.operations
            .iter()
            .find(|(kind, _)| {
                matches!(
                    kind.as_str(),
                    "CREATE_STACK" | "UPDATE_STACK" | "DELETE_STACK"
                )
            })
            .or_else(|| self.operations.first())
            .map(|(_, id)| id.as_str())
    }
}

/// One failure an operation reported (`DescribeEvents` with
/// `FailedEvents`): a resource's, or a validation's or hook's before
/// anything was deployed, which stack events do not show.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OperationEvent {
    /// `VALIDATION_ERROR`, `HOOK_INVOCATION_ERROR`, `PROVISIONING_ERROR`,
    /// `STACK_EVENT`, …
    pub kind: String,
    /// Epoch milliseconds.
    pub timestamp: i64,
    pub logical_id: Option<String>,
    pub resource_type: Option<String>,
    pub status: Option<String>,
    pub reason: Option<String>,
    /// A validation's name and where in the template it failed.
    pub validation: Option<String>,
    pub path: Option<String>,
}

pub use crate::preview::ChangeSetCheck;

/// Whose events to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventsOf<'a> {
    /// One stack operation (its id).
    Operation(&'a str),
    /// A change set's creation (its pre-deployment validations).
    ChangeSet(&'a str),
}

/// A stack as `ListStacks` sums it up: what the scheduler's health check
/// compares, for every stack of an account and region at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StackSummary {
    pub name: String,
    pub stack_id: String,
    pub status: StackStatus,
    /// As [`StackInfo::changed_at`].
    pub changed_at: i64,
    pub drift: Option<String>,
    /// `DriftInformation.LastCheckTimestamp` (epoch ms): when the last
    /// drift detection of the stack was started, by anyone.
    pub drift_checked_at: Option<i64>,
}

/// A change set as described.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeSetInfo {
    pub status: ChangeSetStatus,
    pub execution: ExecutionStatus,
    pub reason: Option<String>,
    /// The id of the stack it is for (the one a create made).
    pub stack_id: Option<String>,
}

/// One stack event, for people to watch and for failure reasons.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StackEvent {
    pub event_id: String,
    /// Epoch milliseconds.
    pub timestamp: i64,
    pub logical_id: String,
    pub resource_type: String,
    pub status: String,
    pub reason: Option<String>,
}

impl StackEvent {
    /// A resource operation failed (`CREATE_FAILED`, `UPDATE_FAILED`, …).
    pub fn is_failure(&self) -> bool {
        self.status.ends_with("_FAILED")
    }
}

/// Everything a change set is made from.
/// The most bytes CloudFormation takes as `TemplateBody`.
pub const MAX_TEMPLATE_BODY: usize = 51_200;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeSetRequest {
    pub stack_name: String,
    pub change_set_name: String,
    pub kind: ChangeSetKind,
    pub template_url: String,
    /// The template itself instead of `template_url` (`TemplateBody`, at
    /// most [`MAX_TEMPLATE_BODY`] bytes): previews, which store nothing,
    /// and runs, for every template that fits.
    pub template_body: Option<String>,
    pub parameters: Vec<(String, String)>,
    pub tags: Vec<(String, String)>,
    pub capabilities: Vec<String>,
    pub role_arn: Option<String>,
    pub notification_arns: Vec<String>,
    /// (alarm ARN, type)
    pub rollback_triggers: Vec<(String, String)>,
    pub rollback_monitoring_minutes: Option<i32>,
    /// What a CREATE change set whose execution fails leaves
    /// (`OnStackFailure`; CloudFormation's default, a rollback, when `None`).
    /// Ignored for an UPDATE.
    pub on_stack_failure: Option<OnStackFailure>,
    /// `IncludeNestedStacks`.
    pub include_nested_stacks: bool,
    /// `ImportExistingResources`.
    pub import_existing_resources: bool,
    /// `DeploymentConfig`.
    pub deployment_config: Option<DeploymentConfig>,
    /// A drift-aware change set (`DeploymentMode: REVERT_DRIFT`): it also
    /// puts back what drifted. UPDATE only.
    pub revert_drift: bool,
    /// Written as `Description`, so a change set tells who made it and why.
    pub description: String,
}

impl ChangeSetRequest {
    /// The change set a run of `spec` makes in `installation`: its tags
    /// (the parameter file's, the entry's over them, and stacksync's), capabilities, roles, notifications,
    /// rollback and deployment settings; the template at `template_url`.
    /// Its `description` says only the entry: the caller says more.
    pub fn for_spec(
        spec: &StackSpec,
        file_tags: &BTreeMap<String, String>,
        installation: &str,
        name: &str,
        kind: ChangeSetKind,
        template_url: String,
        parameters: Vec<(String, String)>,
    ) -> Self {
        let rollback = spec.rollback.as_ref();
        ChangeSetRequest {
            stack_name: spec.effective_stack_name().to_owned(),
            change_set_name: name.to_owned(),
            kind,
            template_url,
            template_body: None,
            parameters,
            tags: crate::ownership::desired_tags_with(file_tags, spec, installation)
                .into_iter()
                .collect(),
            capabilities: spec
                .capabilities
                .iter()
                .map(|c| c.as_str().to_owned())
                .collect(),
            role_arn: spec.role_arn.clone(),
            notification_arns: spec.notification_arns.clone(),
            rollback_triggers: rollback
                .iter()
                .flat_map(|r| r.triggers.iter().map(|t| (t.arn.clone(), t.kind.clone())))
                .collect(),
            rollback_monitoring_minutes: rollback
                .and_then(|r| r.monitoring_time)
                .and_then(|t| i32::try_from(t.as_secs() / 60).ok()),
            on_stack_failure: spec.create_on_failure(),
            include_nested_stacks: spec.include_nested_stacks,
            import_existing_resources: spec.import_existing_resources,
            deployment_config: spec.deployment_config.clone(),
            revert_drift: false,
            description: format!("stacksync: {}", spec.name),
        }
    }
}

/// What creating a change set gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Created {
    /// Made (or already there under that name), in the stack with this
    /// StackId where CloudFormation said (a CREATE change set makes a
    /// `REVIEW_IN_PROGRESS` stack for it).
    ChangeSet { stack_id: Option<String> },
    /// Refused because it would change nothing (one of the shapes of an empty
    /// change set): the stack is in sync.
    NothingToChange,
}

/// The port to one account and region, by purpose (the factory gives one
/// handle that is all four): [`Stacks`], [`ChangeSets`],
/// [`super::DriftDetections`], [`Values`].
pub trait CloudFormation:
    Stacks + ChangeSets + super::DriftDetections + Values + Publications
{
}

impl<T: Stacks + ChangeSets + super::DriftDetections + Values + Publications> CloudFormation for T {}

/// The stacks of one account and region: read, listed, deleted, protected,
/// their events.
pub trait Stacks: Send + Sync {
    /// The stack, or `None` when it does not exist.
    fn describe_stack(
        &self,
        stack: &str,
    ) -> impl Future<Output = PortResult<Option<StackInfo>>> + Send;

    /// Every stack of the account and region that is not deleted, every
    /// page read (a listing cut short is an error, never a shorter list).
    fn list_stacks(&self) -> impl Future<Output = PortResult<Vec<StackSummary>>> + Send;

    /// The stack's template as it was submitted (`GetTemplate`, stage
    /// `Original`), or `None` when the stack does not exist.
    fn template_body(&self, stack: &str)
    -> impl Future<Output = PortResult<Option<String>>> + Send;

    /// `attempt` names this request (the run and its count of delete
    /// requests): sent again after a lost answer, it is the same request;
    /// a later attempt (after `DELETE_FAILED`) is a new one.
    fn delete_stack(
        &self,
        stack: &str,
        role_arn: Option<&str>,
        attempt: &str,
    ) -> impl Future<Output = PortResult<()>> + Send;

    fn continue_update_rollback(
        &self,
        stack: &str,
        role_arn: Option<&str>,
    ) -> impl Future<Output = PortResult<()>> + Send;

    fn set_termination_protection(
        &self,
        stack: &str,
        enabled: bool,
    ) -> impl Future<Output = PortResult<()>> + Send;

    fn set_stack_policy(
        &self,
        stack: &str,
        policy_json: &str,
    ) -> impl Future<Output = PortResult<()>> + Send;

    /// The stack's policy as set (`GetStackPolicy`), `None` when it has none.
    fn stack_policy(&self, stack: &str) -> impl Future<Output = PortResult<Option<String>>> + Send;

    /// The failures an operation or a change set reported, oldest first
    /// (`DescribeEvents`, `FailedEvents`); `None` where the endpoint does
    /// not serve them (older regions, the emulator): read the stack's
    /// events instead.
    fn failed_events(
        &self,
        stack: &str,
        of: EventsOf<'_>,
    ) -> impl Future<Output = PortResult<Option<Vec<OperationEvent>>>> + Send;

    /// Events newer than `since` (epoch ms), oldest first.
    fn events_since(
        &self,
        stack: &str,
        since: i64,
    ) -> impl Future<Output = PortResult<Vec<StackEvent>>> + Send;
}

/// Change sets: made, described, executed, deleted, listed.
pub trait ChangeSets: Send + Sync {
    /// Creates a change set; one that already exists under that name is fine
    /// (a retried step), so the call is idempotent.
    fn create_change_set(
        &self,
        request: &ChangeSetRequest,
    ) -> impl Future<Output = PortResult<Created>> + Send;

    /// The change set, or `None` when it does not exist.
    fn describe_change_set(
        &self,
        stack: &str,
        name: &str,
    ) -> impl Future<Output = PortResult<Option<ChangeSetInfo>>> + Send;

    /// What the change set would do, one row per resource change, every
    /// page read (`DescribeChangeSet`); empty for one that is not there.
    fn change_set_changes(
        &self,
        stack: &str,
        name: &str,
    ) -> impl Future<Output = PortResult<Vec<ResourceChange>>> + Send;

    /// CloudFormation's own checks of a ready change set: its
    /// pre-deployment validations (failures and warnings), its hooks'
    /// results, the hooks its execution will invoke. `None` where the
    /// endpoint serves none of them (older regions, the emulators).
    fn change_set_checks(
        &self,
        stack: &str,
        name: &str,
    ) -> impl Future<Output = PortResult<Option<Vec<ChangeSetCheck>>>> + Send;

    fn execute_change_set(
        &self,
        stack: &str,
        name: &str,
    ) -> impl Future<Output = PortResult<()>> + Send;

    /// Deletes a change set; a missing one is fine.
    fn delete_change_set(
        &self,
        stack: &str,
        name: &str,
    ) -> impl Future<Output = PortResult<()>> + Send;

    /// The names of the stack's change sets.
    fn list_change_sets(&self, stack: &str)
    -> impl Future<Output = PortResult<Vec<String>>> + Send;
}

/// The values a stack's parameters read in its account and region: SSM
/// parameters and Secrets Manager secrets.
pub trait Values: Send + Sync {
    /// An SSM parameter's value in the stack's account and region
    /// (SecureString decrypted; a StringList as its comma-separated text),
    /// with its version, or `None` when there is none. Never logged.
    /// `version`: that one (as [`Versioned::version`] gave it), not the
    /// current one.
    fn ssm_parameter(
        &self,
        name: &str,
        version: Option<&str>,
    ) -> impl Future<Output = PortResult<Option<Versioned>>> + Send;

    /// A Secrets Manager secret's `SecretString` in the stack's account and
    /// region, with its `VersionId`, or `None` when there is none. Never
    /// logged. `version`: that `VersionId`, not the current one.
    fn secret_string(
        &self,
        id: &str,
        version: Option<&str>,
    ) -> impl Future<Output = PortResult<Option<Versioned>>> + Send;
}

/// Where a stack's outputs are published in its account and region
/// (`publish:`): SSM parameters written and deleted. Apart from
/// [`Values`], which only reads.
pub trait Publications: Send + Sync {
    /// Writes an SSM String parameter in the stack's account and region
    /// (`publish:`), overwriting the one there.
    fn put_ssm_parameter(
        &self,
        name: &str,
        value: &str,
    ) -> impl Future<Output = PortResult<()>> + Send;

    /// Deletes an SSM parameter there; one that is not there is fine.
    fn delete_ssm_parameter(&self, name: &str) -> impl Future<Output = PortResult<()>> + Send;
}

/// What CloudFormation says of resources it gave up because another one
/// failed: a symptom, never the cause.
pub fn is_cancellation(reason: &str) -> bool {
    let reason = reason.to_ascii_lowercase();
    reason.starts_with("resource creation cancelled")
        || reason.starts_with("resource update cancelled")
        || reason.starts_with("resource deletion cancelled")
        || reason.contains("the following resource(s) failed to")
}

/// The root cause among an operation's failures: the first validation or
/// hook failure (nothing was deployed), else the first failed resource
/// whose reason is not a cancellation, else the first with a reason.
pub fn root_cause(events: &[OperationEvent]) -> Option<String> {
    let with_reason = || {
        events
            .iter()
            .filter(|e| e.reason.as_deref().is_some_and(|r| !r.trim().is_empty()))
    };
    let before_deploying = with_reason().find(|e| {
        matches!(
            e.kind.as_str(),
            "VALIDATION_ERROR" | "HOOK_INVOCATION_ERROR"
        )
    });
    let cause = before_deploying
        .or_else(|| with_reason().find(|e| !is_cancellation(e.reason.as_deref().unwrap_or(""))))
        .or_else(|| with_reason().next())?;
    let reason = cause.reason.as_deref().unwrap_or("");
    Some(match (&cause.validation, &cause.logical_id) {
        (Some(name), _) => format!(
            "validation {name} failed{}: {reason}",
            cause
                .path
                .as_deref()
                .map(|p| format!(" at {p}"))
                .unwrap_or_default()
        ),
        (None, Some(id)) => format!(
            "{id} ({}) {}: {reason}",
            cause.resource_type.as_deref().unwrap_or("?"),
            cause.status.as_deref().unwrap_or(&cause.kind)
        ),
        (None, None) => format!("{}: {reason}", cause.kind),
    })
}

/// The first failed resource since `since`, as "LogicalId (Type): reason",
/// passing over cancellations (symptoms of another failure) if any other
/// failure is there.
pub fn first_failure(events: &[StackEvent]) -> Option<String> {
    let failed = || {
        events
            .iter()
            .filter(|e| e.is_failure() && e.reason.as_deref().is_some_and(|r| !r.trim().is_empty()))
    };
    failed()
        .find(|e| !is_cancellation(e.reason.as_deref().unwrap_or("")))
        .or_else(|| failed().next())
        .map(|e| {
            format!(
                "{} ({}) {}: {}",
                e.logical_id,
                e.resource_type,
                e.status,
                e.reason.as_deref().unwrap_or("")
            )
        })
}

/// Gives the CloudFormation port for one stack's region and account.
pub trait CloudFormationFactory: Send + Sync {
    type Port: CloudFormation;
    /// `region`: the stack's (the default one when `None`); `assume_role`: a
    /// role to assume first (cross-account); `entry`: the entry the calls
    /// are made for, which names the assumed role's session (`None`: the
    /// scheduler's, for many stacks).
    fn for_stack(
        &self,
        region: Option<&str>,
        assume_role: Option<&str>,
        entry: Option<&str>,
    ) -> impl Future<Output = PortResult<Self::Port>> + Send;
    /// The region used when a stack names none, if known: stacks that name
    /// it and stacks that name none are then listed together.
    fn home_region(&self) -> Option<String> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: &str, id: Option<&str>, reason: &str) -> OperationEvent {
        OperationEvent {
            kind: kind.into(),
            logical_id: id.map(str::to_owned),
            resource_type: id.map(|_| "AWS::SQS::Queue".to_owned()),
            status: id.map(|_| "CREATE_FAILED".to_owned()),
            reason: Some(reason.into()),
            ..OperationEvent::default()
        }
    }

    #[test]
    fn the_root_cause_is_a_validation_then_a_real_failure_never_a_cancellation() {
        let cancelled = event("STACK_EVENT", Some("Topic"), "Resource creation cancelled");
        let failed = event("PROVISIONING_ERROR", Some("Queue"), "Queue name too long");
        let mut validation = event("VALIDATION_ERROR", None, "required key [Event] not found");
        validation.validation = Some("PROPERTY_VALIDATION".into());
        validation.path = Some("/Resources/Bucket/Properties".into());
        assert_eq!(
            root_cause(&[cancelled.clone(), failed.clone(), validation]).as_deref(),
            Some(
                "validation PROPERTY_VALIDATION failed at /Resources/Bucket/Properties: required key [Event] not found"
            )
        );
        assert_eq!(
            root_cause(&[cancelled.clone(), failed]).as_deref(),
            Some("Queue (AWS::SQS::Queue) CREATE_FAILED: Queue name too long")
        );
        assert_eq!(
            root_cause(std::slice::from_ref(&cancelled)).as_deref(),
            Some("Topic (AWS::SQS::Queue) CREATE_FAILED: Resource creation cancelled"),
            "a cancellation only when nothing better is there"
        );
        assert_eq!(root_cause(&[]), None);
    }

    #[test]
    fn stack_events_pass_over_cancellations_to_the_failure_that_caused_them() {
        let event = |id: &str, reason: &str| StackEvent {
            event_id: id.into(),
            timestamp: 1,
            logical_id: id.into(),
            resource_type: "AWS::SNS::Topic".into(),
            status: "CREATE_FAILED".into(),
            reason: Some(reason.into()),
        };
        let events = [
            event("Topic", "Resource creation cancelled"),
            event("Queue", "Access denied"),
        ];
        assert_eq!(
            first_failure(&events).as_deref(),
            Some("Queue (AWS::SNS::Topic) CREATE_FAILED: Access denied")
        );
    }
}
