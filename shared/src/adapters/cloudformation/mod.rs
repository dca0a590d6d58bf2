//! The CloudFormation port on the AWS SDK.
//!
//! Quirks turned into domain values here:
//! - "Stack with id … does not exist" (a `ValidationError`) → not found, for
//!   stacks and, in the emulator, for change sets too;
//! - `ChangeSetNotFound` → not found (both: [`crate::ports::is_not_found`]);
//! - "Unexpected parameter DeploymentMode" on CreateChangeSet (a partition
//!   without drift-aware change sets) → `PortError::Unsupported`
//!   ([`crate::ports::is_unsupported`]);
//! - `AlreadyExistsException` on CreateChangeSet → fine (a retried step);
//! - "No updates are to be performed." on CreateChangeSet → nothing to change.

use aws_sdk_cloudformation::Client;
use aws_sdk_cloudformation::types::{
    Capability, ChangeSetType, DeploymentConfig, DeploymentConfigMode, OnStackFailure, Parameter,
    RollbackConfiguration, RollbackTrigger, Tag,
};
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;
use change_sets::{created, resource_change};

use super::port_error;
use crate::naming::request_token;
use crate::ports::{
    ChangeSetInfo, ChangeSetRequest, ChangeSets, Created, DriftDetections, EventsOf,
    OperationEvent, PortError, PortResult, ResourceChange, StackEvent, StackInfo, StackSummary,
    Stacks, Values, Versioned,
};

mod change_sets;
mod checks;
mod drift;
mod events;
mod factory;
mod values;
use crate::stack_status::{
    ChangeSetKind, ChangeSetStatus, ExecutionStatus, StackStatus, is_empty_change_set_reason,
};
pub use factory::{DRIFT_SESSION, SCHEDULER_SESSION, SdkCloudFormationFactory};

/// CloudFormation through the SDK, for one region and set of credentials.
#[derive(Debug, Clone)]
pub struct SdkCloudFormation {
    client: Client,
    /// SSM and Secrets Manager in the stack's account and region: where
    /// its parameters' `{ssm: …}` and `{secret: …}` are read.
    ssm: aws_sdk_ssm::Client,
    secrets: aws_sdk_secretsmanager::Client,
}

impl SdkCloudFormation {
    /// All three clients from one configuration (region, credentials).
    pub fn new(config: &aws_config::SdkConfig) -> Self {
        Self {
            client: Client::new(config),
            ssm: aws_sdk_ssm::Client::new(config),
            secrets: aws_sdk_secretsmanager::Client::new(config),
        }
    }
}

fn is_not_found<E: ProvideErrorMetadata>(err: &SdkError<E, HttpResponse>) -> bool {
    let status = err.raw_response().map(|r| r.status().as_u16());
    crate::ports::is_not_found(err.code(), err.message(), status)
}

fn millis(t: Option<&aws_smithy_types::DateTime>) -> i64 {
    t.and_then(|t| t.to_millis().ok()).unwrap_or(0)
}

/// `LastUpdatedTime`, or `CreationTime` for a stack never updated.
fn changed_at(
    updated: Option<&aws_smithy_types::DateTime>,
    created: Option<&aws_smithy_types::DateTime>,
) -> i64 {
    millis(updated.or(created))
}

/// Every stack status but `DELETE_COMPLETE`: `ListStacks` keeps deleted
/// stacks for 90 days, and a deleted stack is a missing one here.
fn live_statuses() -> Vec<aws_sdk_cloudformation::types::StackStatus> {
    aws_sdk_cloudformation::types::StackStatus::values()
        .iter()
        .filter(|s| **s != "DELETE_COMPLETE")
        .map(|s| aws_sdk_cloudformation::types::StackStatus::from(*s))
        .collect()
}

impl Stacks for SdkCloudFormation {
    async fn describe_stack(&self, stack: &str) -> PortResult<Option<StackInfo>> {
        match self.client.describe_stacks().stack_name(stack).send().await {
            Ok(out) => Ok(out.stacks().first().map(|s| StackInfo {
                stack_id: s.stack_id().unwrap_or_default().to_owned(),
                status: StackStatus::parse(s.stack_status().map(|v| v.as_str()).unwrap_or("")),
                reason: s.stack_status_reason().map(str::to_owned),
                changed_at: changed_at(s.last_updated_time(), s.creation_time()),
                drift: s
                    .drift_information()
                    .and_then(|d| d.stack_drift_status())
                    .map(|d| d.as_str().to_owned()),
                parameters: s
                    .parameters()
                    .iter()
                    .filter_map(|p| {
                        Some((
                            p.parameter_key()?.to_owned(),
                            p.parameter_value()?.to_owned(),
                        ))
                    })
                    .collect(),
                tags: s
                    .tags()
                    .iter()
                    .filter_map(|t| Some((t.key()?.to_owned(), t.value()?.to_owned())))
                    .collect(),
                termination_protection: s.enable_termination_protection().unwrap_or(false),
                role_arn: s.role_arn().map(str::to_owned),
                outputs: s
                    .outputs()
                    .iter()
                    .filter_map(|o| {
                        Some((o.output_key()?.to_owned(), o.output_value()?.to_owned()))
                    })
                    .collect(),
                operations: s
                    .last_operations()
                    .iter()
                    .filter_map(|o| {
                        Some((
                            o.operation_type()?.as_str().to_owned(),
                            o.operation_id()?.to_owned(),
                        ))
                    })
                    .collect(),
            })),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(port_error("DescribeStacks", &e)),
        }
    }

    async fn list_stacks(&self) -> PortResult<Vec<StackSummary>> {
        let mut stacks = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let out = self
                .client
                .list_stacks()
                .set_stack_status_filter(Some(live_statuses()))
                .set_next_token(token.take())
                .send()
                .await
                .map_err(|e| port_error("ListStacks", &e))?;
            for s in out.stack_summaries() {
                let (Some(name), Some(id)) = (s.stack_name(), s.stack_id()) else {
                    continue;
                };
                stacks.push(StackSummary {
                    name: name.to_owned(),
                    stack_id: id.to_owned(),
                    status: StackStatus::parse(s.stack_status().map(|v| v.as_str()).unwrap_or("")),
                    changed_at: changed_at(s.last_updated_time(), s.creation_time()),
                    drift: s
                        .drift_information()
                        .and_then(|d| d.stack_drift_status())
                        .map(|d| d.as_str().to_owned()),
                    drift_checked_at: s
                        .drift_information()
                        .and_then(|d| d.last_check_timestamp())
                        .map(|t| millis(Some(t))),
                });
            }
            match out.next_token() {
                Some(t) if !t.is_empty() => token = Some(t.to_owned()),
                _ => break,
            }
        }
        Ok(stacks)
    }

    async fn template_body(&self, stack: &str) -> PortResult<Option<String>> {
        match self
            .client
            .get_template()
            .stack_name(stack)
            .template_stage(aws_sdk_cloudformation::types::TemplateStage::Original)
            .send()
            .await
        {
            Ok(out) => Ok(Some(out.template_body().unwrap_or_default().to_owned())),
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(port_error("GetTemplate", &e)),
        }
    }

    async fn delete_stack(
        &self,
        stack: &str,
        role_arn: Option<&str>,
        attempt: &str,
    ) -> PortResult<()> {
        self.client
            .delete_stack()
            .stack_name(stack)
            .set_role_arn(role_arn.map(str::to_owned))
            .client_request_token(delete_token(stack, attempt))
            .send()
            .await
            .map(|_| ())
            .map_err(|e| port_error("DeleteStack", &e))
    }

    async fn continue_update_rollback(
        &self,
        stack: &str,
        role_arn: Option<&str>,
    ) -> PortResult<()> {
        self.client
            .continue_update_rollback()
            .stack_name(stack)
            .set_role_arn(role_arn.map(str::to_owned))
            .send()
            .await
            .map(|_| ())
            .map_err(|e| port_error("ContinueUpdateRollback", &e))
    }

    async fn set_termination_protection(&self, stack: &str, enabled: bool) -> PortResult<()> {
        self.client
            .update_termination_protection()
            .stack_name(stack)
            .enable_termination_protection(enabled)
            .send()
            .await
            .map(|_| ())
            .map_err(|e| port_error("UpdateTerminationProtection", &e))
    }

    async fn set_stack_policy(&self, stack: &str, policy_json: &str) -> PortResult<()> {
        self.client
            .set_stack_policy()
            .stack_name(stack)
            .stack_policy_body(policy_json)
            .send()
            .await
            .map(|_| ())
            .map_err(|e| port_error("SetStackPolicy", &e))
    }

    async fn stack_policy(&self, stack: &str) -> PortResult<Option<String>> {
        self.client
            .get_stack_policy()
            .stack_name(stack)
            .send()
            .await
            .map(|out| out.stack_policy_body().map(str::to_owned))
            .map_err(|e| port_error("GetStackPolicy", &e))
    }

    async fn failed_events(
        &self,
        stack: &str,
        of: EventsOf<'_>,
    ) -> PortResult<Option<Vec<OperationEvent>>> {
        Ok(events::failed_events(&self.client, stack, of).await)
    }

    async fn events_since(&self, stack: &str, since: i64) -> PortResult<Vec<StackEvent>> {
        let mut events = Vec::new();
        let mut token = None;
        'pages: loop {
            let out = match self
                .client
                .describe_stack_events()
                .stack_name(stack)
                .set_next_token(token)
                .send()
                .await
            {
                Ok(out) => out,
                Err(e) if is_not_found(&e) => break,
                Err(e) => return Err(port_error("DescribeStackEvents", &e)),
            };
            // Newest first: stop at the first event older than `since`.
            for e in out.stack_events() {
                let timestamp = millis(e.timestamp());
                if timestamp < since {
                    break 'pages;
                }
                events.push(StackEvent {
                    event_id: e.event_id().unwrap_or_default().to_owned(),
                    timestamp,
                    logical_id: e.logical_resource_id().unwrap_or_default().to_owned(),
                    resource_type: e.resource_type().unwrap_or_default().to_owned(),
                    status: e
                        .resource_status()
                        .map(|s| s.as_str().to_owned())
                        .unwrap_or_default(),
                    reason: e.resource_status_reason().map(str::to_owned),
                });
            }
            match out.next_token() {
                Some(t) => token = Some(t.to_owned()),
                None => break,
            }
        }
        events.reverse();
        Ok(events)
    }
}

impl ChangeSets for SdkCloudFormation {
    async fn create_change_set(&self, r: &ChangeSetRequest) -> PortResult<Created> {
        let mut request = self
            .client
            .create_change_set()
            .stack_name(&r.stack_name)
            .change_set_name(&r.change_set_name)
            .change_set_type(match r.kind {
                ChangeSetKind::Create => ChangeSetType::Create,
                ChangeSetKind::Update => ChangeSetType::Update,
            })
            .set_template_url((r.template_body.is_none()).then(|| r.template_url.clone()))
            .set_template_body(r.template_body.clone())
            // A retry after a lost answer is then the same request to
            // CloudFormation, not a second change set of that name.
            .client_token(request_token(&format!(
                "create-{}{}",
                r.change_set_name,
                if r.revert_drift { "-revert-drift" } else { "" }
            )))
            .description(&r.description)
            .set_role_arn(r.role_arn.clone())
            .set_notification_arns(Some(r.notification_arns.clone()));
        for (key, value) in &r.parameters {
            request = request.parameters(
                Parameter::builder()
                    .parameter_key(key)
                    .parameter_value(value)
                    .build(),
            );
        }
        for (key, value) in &r.tags {
            request = request.tags(Tag::builder().key(key).value(value).build());
        }
        for cap in &r.capabilities {
            request = request.capabilities(Capability::from(cap.as_str()));
        }
        if let Some(on_failure) = r.on_stack_failure
            && r.kind == ChangeSetKind::Create
        {
            request = request.on_stack_failure(OnStackFailure::from(on_failure.as_str()));
        }
        if r.include_nested_stacks {
            request = request.include_nested_stacks(true);
        }
        if r.import_existing_resources {
            request = request.import_existing_resources(true);
        }
        if r.revert_drift {
            request =
                request.deployment_mode(aws_sdk_cloudformation::types::DeploymentMode::RevertDrift);
        }
        if let Some(config) = &r.deployment_config {
            request = request.deployment_config(
                DeploymentConfig::builder()
                    .mode(DeploymentConfigMode::from(config.mode.as_str()))
                    .set_disable_rollback(config.disable_rollback)
                    .build(),
            );
        }
        if !r.rollback_triggers.is_empty() || r.rollback_monitoring_minutes.is_some() {
            let mut config = RollbackConfiguration::builder()
                .set_monitoring_time_in_minutes(r.rollback_monitoring_minutes);
            for (arn, kind) in &r.rollback_triggers {
                let trigger = RollbackTrigger::builder().arn(arn).r#type(kind).build();
                config = config.rollback_triggers(trigger);
            }
            request = request.rollback_configuration(config.build());
        }
        created(request.send().await)
    }

    async fn describe_change_set(
        &self,
        stack: &str,
        name: &str,
    ) -> PortResult<Option<ChangeSetInfo>> {
        match self
            .client
            .describe_change_set()
            .stack_name(stack)
            .change_set_name(name)
            .send()
            .await
        {
            Ok(out) => {
                let status = out.status().map(|s| s.as_str()).unwrap_or("");
                let execution = out.execution_status().map(|s| s.as_str()).unwrap_or("");
                Ok(Some(ChangeSetInfo {
                    status: ChangeSetStatus::parse(status).ok_or_else(|| {
                        PortError::Refused(format!("change set {name}: unknown status {status:?}"))
                    })?,
                    execution: ExecutionStatus::parse(execution)
                        .unwrap_or(ExecutionStatus::Unavailable),
                    reason: out.status_reason().map(str::to_owned),
                    stack_id: out.stack_id().map(str::to_owned),
                }))
            }
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(port_error("DescribeChangeSet", &e)),
        }
    }

    async fn change_set_checks(
        &self,
        stack: &str,
        name: &str,
    ) -> PortResult<Option<Vec<crate::ports::ChangeSetCheck>>> {
        Ok(checks::change_set_checks(&self.client, stack, name).await)
    }

    async fn change_set_changes(&self, stack: &str, name: &str) -> PortResult<Vec<ResourceChange>> {
        let mut rows = Vec::new();
        let mut next = None;
        // Bounded: a change set lists at most a few thousand changes.
        for _ in 0..100 {
            let out = match self
                .client
                .describe_change_set()
                .stack_name(stack)
                .change_set_name(name)
                .set_next_token(next.take())
                .send()
                .await
            {
                Ok(out) => out,
                Err(e) if is_not_found(&e) => return Ok(Vec::new()),
                Err(e) => return Err(port_error("DescribeChangeSet", &e)),
            };
            rows.extend(
                out.changes()
                    .iter()
                    .filter_map(|c| c.resource_change())
                    .map(resource_change),
            );
            match out.next_token {
                Some(token) if !token.is_empty() => next = Some(token),
                _ => break,
            }
        }
        Ok(rows)
    }

    async fn execute_change_set(&self, stack: &str, name: &str) -> PortResult<()> {
        self.client
            .execute_change_set()
            .stack_name(stack)
            .change_set_name(name)
            .client_request_token(request_token(name))
            .send()
            .await
            .map(|_| ())
            .map_err(|e| port_error("ExecuteChangeSet", &e))
    }

    async fn delete_change_set(&self, stack: &str, name: &str) -> PortResult<()> {
        match self
            .client
            .delete_change_set()
            .stack_name(stack)
            .change_set_name(name)
            .send()
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(port_error("DeleteChangeSet", &e)),
        }
    }

    async fn list_change_sets(&self, stack: &str) -> PortResult<Vec<String>> {
        let mut names = Vec::new();
        let mut token = None;
        loop {
            let out = match self
                .client
                .list_change_sets()
                .stack_name(stack)
                .set_next_token(token)
                .send()
                .await
            {
                Ok(out) => out,
                Err(e) if is_not_found(&e) => return Ok(names),
                Err(e) => return Err(port_error("ListChangeSets", &e)),
            };
            // The emulator ignores StackName: keep only this stack's change sets.
            names.extend(
                out.summaries()
                    .iter()
                    .filter(|s| s.stack_name() == Some(stack))
                    .filter_map(|s| s.change_set_name().map(str::to_owned)),
            );
            match out.next_token() {
                Some(t) => token = Some(t.to_owned()),
                None => return Ok(names),
            }
        }
    }
}

impl DriftDetections for SdkCloudFormation {
    async fn detect_drift(&self, stack: &str) -> PortResult<String> {
        drift::detect(&self.client, stack).await
    }

    async fn drift_detection(&self, id: &str) -> PortResult<crate::ports::drift::DriftDetection> {
        drift::detection(&self.client, id).await
    }

    async fn resource_drifts(
        &self,
        stack: &str,
    ) -> PortResult<Vec<crate::ports::drift::ResourceDrift>> {
        drift::resources(&self.client, stack).await
    }
}

impl Values for SdkCloudFormation {
    async fn ssm_parameter(
        &self,
        name: &str,
        version: Option<&str>,
    ) -> PortResult<Option<Versioned>> {
        values::ssm_parameter(&self.ssm, name, version).await
    }

    async fn secret_string(
        &self,
        id: &str,
        version: Option<&str>,
    ) -> PortResult<Option<Versioned>> {
        values::secret_string(&self.secrets, id, version).await
    }
}

impl crate::ports::Publications for SdkCloudFormation {
    async fn put_ssm_parameter(&self, name: &str, value: &str) -> PortResult<()> {
        values::put_ssm_parameter(&self.ssm, name, value).await
    }

    async fn delete_ssm_parameter(&self, name: &str) -> PortResult<()> {
        values::delete_ssm_parameter(&self.ssm, name).await
    }
}

/// The `ClientRequestToken` of one delete request: the same for the same
/// stack and attempt (a retry after a lost answer), another for a later
/// attempt (CloudFormation would take a reused token for a retry of the
/// first request, and not delete again). Hashed: stack names and
/// execution names together can pass the token's 128 characters.
pub fn delete_token(stack: &str, attempt: &str) -> String {
    let digest = crate::hash::sha256_hex(format!("{stack}\n{attempt}").as_bytes());
    request_token(&format!("delete-{}", &digest[..32]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::naming::OWN_TOKEN_PREFIX;

    #[test]
    fn a_delete_token_is_the_same_for_a_retry_and_new_for_a_later_attempt() {
        let long = "s".repeat(128);
        let run = "x".repeat(80);
        let first = delete_token(&long, &format!("{run}/0"));
        assert_eq!(first, delete_token(&long, &format!("{run}/0")));
        assert_ne!(first, delete_token(&long, &format!("{run}/1")));
        assert_ne!(first, delete_token(&long, "another-run/0"));
        assert!(
            first.len() <= 128 && first.starts_with(OWN_TOKEN_PREFIX),
            "{first}"
        );
    }
}
