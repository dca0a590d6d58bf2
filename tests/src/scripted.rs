//! The library's scripted CloudFormation (`stacksync::fakes`), for the stack
//! states the emulator cannot produce, with every call it gets recorded for
//! the IAM conformance test as the AWS call it stands for ([`Recorded`]).

pub use stacksync::fakes::{Script, ScriptedCloudFormation, failed, failure_event, pending, ready};
use stacksync::ports::{
    ChangeSetInfo, ChangeSetRequest, CloudFormation, CloudFormationFactory, Created, EventsOf,
    OperationEvent, PortResult, ResourceChange, StackEvent, StackInfo, StackSummary, Versioned,
};

use crate::iam::call::Call;
use crate::iam::record::{TAG_CONDITIONED, record, recording, template_transforms};

/// A CloudFormation port (or factory) whose calls are recorded under the
/// function that makes them.
#[derive(Debug, Clone)]
pub struct Recorded<T>(pub T);

/// What the scripted stack's `stacksync:installation` tag is now (for IAM's
/// `aws:ResourceTag`).
pub trait StackInstallation {
    fn stack_installation(&self, stack: &str) -> Option<String>;
}

impl StackInstallation for ScriptedCloudFormation {
    fn stack_installation(&self, stack: &str) -> Option<String> {
        let script = self.script();
        // A stack that is not there has no tags.
        if script.stack.front().is_some_and(Option::is_none) {
            return None;
        }
        script
            .stack_tags(stack)
            .get(stacksync::ownership::INSTALLATION_TAG)
            .cloned()
    }
}

impl<T: StackInstallation> Recorded<T> {
    fn call(&self, operation: &str, stack: &str, role_arn: Option<&str>) {
        if recording() {
            let tagged = TAG_CONDITIONED.contains(&operation);
            record(Call {
                service: "cloudformation".into(),
                operation: operation.into(),
                region: "us-east-1".into(),
                status: 200,
                stack: Some(stack.into()),
                role_arn: role_arn.map(str::to_owned),
                stack_installation: tagged.then(|| self.0.stack_installation(stack)).flatten(),
                ..Call::default()
            });
        }
    }
}

impl<T: CloudFormationFactory> CloudFormationFactory for Recorded<T>
where
    T::Port: StackInstallation,
{
    type Port = Recorded<T::Port>;

    async fn for_stack(
        &self,
        region: Option<&str>,
        assume_role: Option<&str>,
        entry: Option<&str>,
    ) -> PortResult<Self::Port> {
        if let Some(role) = assume_role.filter(|_| recording()) {
            record(Call {
                service: "sts".into(),
                operation: "AssumeRole".into(),
                region: "us-east-1".into(),
                status: 200,
                target: Some(role.to_owned()),
                // The session is tagged with the entry and installation.
                tagged: true,
                ..Call::default()
            });
        }
        Ok(Recorded(
            self.0.for_stack(region, assume_role, entry).await?,
        ))
    }

    fn home_region(&self) -> Option<String> {
        self.0.home_region()
    }
}

impl<T: CloudFormation + StackInstallation> CloudFormation for Recorded<T> {
    async fn describe_stack(&self, stack: &str) -> PortResult<Option<StackInfo>> {
        self.call("DescribeStacks", stack, None);
        self.0.describe_stack(stack).await
    }

    async fn list_stacks(&self) -> PortResult<Vec<StackSummary>> {
        self.call("ListStacks", "", None);
        self.0.list_stacks().await
    }

    async fn detect_drift(&self, stack: &str) -> PortResult<String> {
        self.call("DetectStackDrift", stack, None);
        self.0.detect_drift(stack).await
    }

    async fn drift_detection(
        &self,
        id: &str,
    ) -> PortResult<stacksync::ports::drift::DriftDetection> {
        self.call("DescribeStackDriftDetectionStatus", "", None);
        self.0.drift_detection(id).await
    }

    async fn resource_drifts(
        &self,
        stack: &str,
    ) -> PortResult<Vec<stacksync::ports::drift::ResourceDrift>> {
        self.call("DescribeStackResourceDrifts", stack, None);
        self.0.resource_drifts(stack).await
    }

    async fn ssm_parameter(
        &self,
        name: &str,
        version: Option<&str>,
    ) -> PortResult<Option<Versioned>> {
        record_value_read("ssm", "GetParameter");
        self.0.ssm_parameter(name, version).await
    }

    async fn secret_string(
        &self,
        id: &str,
        version: Option<&str>,
    ) -> PortResult<Option<Versioned>> {
        record_value_read("secretsmanager", "GetSecretValue");
        self.0.secret_string(id, version).await
    }

    async fn template_body(&self, stack: &str) -> PortResult<Option<String>> {
        self.call("GetTemplate", stack, None);
        self.0.template_body(stack).await
    }

    async fn create_change_set(&self, request: &ChangeSetRequest) -> PortResult<Created> {
        if recording() {
            record(Call {
                service: "cloudformation".into(),
                operation: "CreateChangeSet".into(),
                region: "us-east-1".into(),
                status: 200,
                stack: Some(request.stack_name.clone()),
                role_arn: request.role_arn.clone(),
                template_url: Some(request.template_url.clone()),
                transforms: template_transforms(&request.template_url),
                tagged: !request.tags.is_empty(),
                request_installation: request
                    .tags
                    .iter()
                    .find(|(k, _)| k == stacksync::ownership::INSTALLATION_TAG)
                    .map(|(_, v)| v.clone()),
                stack_installation: self.0.stack_installation(&request.stack_name),
                ..Call::default()
            });
        }
        self.0.create_change_set(request).await
    }

    async fn describe_change_set(
        &self,
        stack: &str,
        name: &str,
    ) -> PortResult<Option<ChangeSetInfo>> {
        self.call("DescribeChangeSet", stack, None);
        self.0.describe_change_set(stack, name).await
    }

    async fn failed_events(
        &self,
        stack: &str,
        of: EventsOf<'_>,
    ) -> PortResult<Option<Vec<OperationEvent>>> {
        self.call("DescribeEvents", stack, None);
        self.0.failed_events(stack, of).await
    }

    async fn change_set_changes(&self, stack: &str, name: &str) -> PortResult<Vec<ResourceChange>> {
        self.call("DescribeChangeSet", stack, None);
        self.0.change_set_changes(stack, name).await
    }

    async fn execute_change_set(&self, stack: &str, name: &str) -> PortResult<()> {
        self.call("ExecuteChangeSet", stack, None);
        self.0.execute_change_set(stack, name).await
    }

    async fn delete_change_set(&self, stack: &str, name: &str) -> PortResult<()> {
        self.call("DeleteChangeSet", stack, None);
        self.0.delete_change_set(stack, name).await
    }

    async fn list_change_sets(&self, stack: &str) -> PortResult<Vec<String>> {
        self.call("ListChangeSets", stack, None);
        self.0.list_change_sets(stack).await
    }

    async fn delete_stack(
        &self,
        stack: &str,
        role_arn: Option<&str>,
        attempt: &str,
    ) -> PortResult<()> {
        self.call("DeleteStack", stack, role_arn);
        self.0.delete_stack(stack, role_arn, attempt).await
    }

    async fn continue_update_rollback(
        &self,
        stack: &str,
        role_arn: Option<&str>,
    ) -> PortResult<()> {
        self.call("ContinueUpdateRollback", stack, role_arn);
        self.0.continue_update_rollback(stack, role_arn).await
    }

    async fn set_termination_protection(&self, stack: &str, enabled: bool) -> PortResult<()> {
        self.call("UpdateTerminationProtection", stack, None);
        self.0.set_termination_protection(stack, enabled).await
    }

    async fn set_stack_policy(&self, stack: &str, policy_json: &str) -> PortResult<()> {
        self.call("SetStackPolicy", stack, None);
        self.0.set_stack_policy(stack, policy_json).await
    }

    async fn stack_policy(&self, stack: &str) -> PortResult<Option<String>> {
        self.call("GetStackPolicy", stack, None);
        self.0.stack_policy(stack).await
    }

    async fn events_since(&self, stack: &str, since: i64) -> PortResult<Vec<StackEvent>> {
        self.call("DescribeStackEvents", stack, None);
        self.0.events_since(stack, since).await
    }
}

/// A parameter value read through the stack's port: a call to SSM or
/// Secrets Manager, as the SDK adapter makes it.
fn record_value_read(service: &str, operation: &str) {
    if recording() {
        record(Call {
            service: service.into(),
            operation: operation.into(),
            region: "us-east-1".into(),
            status: 200,
            ..Call::default()
        });
    }
}
