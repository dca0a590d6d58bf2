//! A scripted CloudFormation: statuses advance over successive describes,
//! failures are injected per operation. For the stack states the emulator
//! cannot produce (in-progress loops, rollbacks, `DELETE_FAILED`,
//! throttling). Every call is kept, with the request of each change set.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

mod script;

pub use script::Script;

use super::calls::{FakeCall, Observer};
use crate::ports::{
    ChangeSetInfo, ChangeSetRequest, ChangeSets, CloudFormationFactory, Created, DriftDetections,
    EventsOf, OperationEvent, PortError, PortResult, ResourceChange, StackEvent, StackInfo,
    StackSummary, Stacks, Values, Versioned,
};
use crate::stack_status::{ChangeSetStatus, ExecutionStatus, StackStatus};

/// The installation the fake's stacks were made by, unless a test says
/// otherwise (the steps under test are configured with it).
pub const TEST_INSTALLATION: &str = "stacksync-test";

/// The fake, shared between the test and the steps.
#[derive(Debug, Clone, Default)]
pub struct ScriptedCloudFormation(pub Arc<Mutex<Script>>);

/// The id the fake gives a stack of this name and generation.
pub fn stack_id(stack: &str, generation: u32) -> String {
    format!("arn:aws:cloudformation:us-east-1:123456789012:stack/{stack}/{generation}")
}

/// A stack as ListStacks sums it up, at generation 1.
pub fn summary(stack: &str, status: StackStatus, changed_at: i64) -> StackSummary {
    StackSummary {
        name: stack.to_owned(),
        stack_id: stack_id(stack, 1),
        status,
        changed_at,
        drift: None,
        drift_checked_at: None,
    }
}

/// What a drift detection finds of a queue edited in the console: its
/// visibility timeout (30 → 60) and a tag (blue → green).
pub fn queue_drift() -> crate::ports::drift::ResourceDrift {
    let difference =
        |path: &str, expected: &str, actual: &str| crate::ports::drift::PropertyDifference {
            path: path.into(),
            expected: expected.into(),
            actual: actual.into(),
            kind: "NOT_EQUAL".into(),
        };
    crate::ports::drift::ResourceDrift {
        logical_id: "Queue".into(),
        resource_type: "AWS::SQS::Queue".into(),
        physical_id: Some("https://sqs.us-east-1.amazonaws.com/123456789012/orders".into()),
        status: "MODIFIED".into(),
        differences: vec![
            difference("/VisibilityTimeout", "30", "60"),
            difference("/Tags/0/Value", "blue", "green"),
        ],
    }
}

/// A change set ready to execute (what it lists is `changes` of the script).
pub fn ready() -> ChangeSetInfo {
    ChangeSetInfo {
        status: ChangeSetStatus::CreateComplete,
        execution: ExecutionStatus::Available,
        reason: None,
        stack_id: None,
    }
}

/// A change set still being made.
pub fn pending() -> ChangeSetInfo {
    ChangeSetInfo {
        status: ChangeSetStatus::CreatePending,
        execution: ExecutionStatus::Unavailable,
        reason: None,
        stack_id: None,
    }
}

/// A failed change set.
pub fn failed(reason: &str) -> ChangeSetInfo {
    ChangeSetInfo {
        status: ChangeSetStatus::Failed,
        execution: ExecutionStatus::Unavailable,
        reason: Some(reason.to_owned()),
        stack_id: None,
    }
}

/// One row of a change set: `action` on the queue `Queue` (its name
/// changed), with `replacement` as CloudFormation says it.
pub fn queue_change(action: &str, replacement: Option<&str>) -> ResourceChange {
    ResourceChange {
        action: action.into(),
        logical_id: "Queue".into(),
        resource_type: "AWS::SQS::Queue".into(),
        physical_id: None,
        replacement: replacement.map(str::to_owned),
        changed: vec!["Properties.QueueName".into()],
    }
}

/// A failed resource event.
pub fn failure_event(logical_id: &str, status: &str, reason: &str) -> StackEvent {
    StackEvent {
        event_id: format!("{logical_id}-{status}"),
        timestamp: i64::MAX / 2,
        logical_id: logical_id.to_owned(),
        resource_type: "AWS::S3::Bucket".to_owned(),
        status: status.to_owned(),
        reason: Some(reason.to_owned()),
    }
}

impl ScriptedCloudFormation {
    /// A fake whose stack answers these statuses, in turn.
    pub fn with_stack(statuses: &[Option<StackStatus>]) -> Self {
        let fake = Self::default();
        {
            let mut s = fake.script();
            s.stack = statuses.iter().cloned().collect();
            s.change_set = [pending(), ready()].into_iter().collect();
            s.after_execute = vec![
                Some(StackStatus::UpdateInProgress),
                Some(StackStatus::UpdateComplete),
            ];
            s.after_delete = vec![Some(StackStatus::DeleteInProgress), None];
            s.after_continue = vec![
                Some(StackStatus::UpdateRollbackInProgress),
                Some(StackStatus::UpdateRollbackComplete),
            ];
        }
        fake
    }

    pub fn script(&self) -> std::sync::MutexGuard<'_, Script> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The calls made so far, by operation name only.
    pub fn operations(&self) -> Vec<String> {
        self.script()
            .calls
            .iter()
            .map(|c| c.split(' ').next().unwrap_or("").to_owned())
            .collect()
    }

    /// Has `observe` told of every call from now on, as the AWS call it
    /// stands for (it replaces the one set before).
    pub fn observe(&self, observe: impl Fn(&FakeCall) + Send + Sync + 'static) {
        self.script().observer = Observer::new(observe);
    }

    /// The `nth` call (from 1) of `operation` fails with `error`.
    pub fn fail(&self, operation: &str, nth: usize, error: PortError) -> &Self {
        self.script().faults.plan(operation, nth, error);
        self
    }

    /// How many times `operation` was called.
    pub fn calls(&self, operation: &str) -> usize {
        self.script().faults.calls(operation)
    }

    /// Keeps a call (`detail`: what [`Script::calls`] says of it), tells the
    /// observer, and fails it if a failure is planned or queued for it.
    fn call(&self, mut call: FakeCall, detail: String) -> PortResult<()> {
        let mut s = self.script();
        let operation = call.operation;
        s.calls.push(format!("{operation} {detail}"));
        call.stack_installation = call.stack.as_deref().and_then(|st| s.installation_of(st));
        let planned = s.faults.count(operation);
        let queued = s.failures.get_mut(operation).and_then(VecDeque::pop_front);
        let observer = s.observer.clone();
        drop(s);
        observer.tell(&call);
        planned?;
        queued.map_or(Ok(()), Err)
    }

    fn next_stack(&self) -> Option<StackStatus> {
        let mut s = self.script();
        if let Some(at) = s.settles_at {
            if std::time::Instant::now() >= at {
                while s.stack.len() > 1 {
                    s.stack.pop_front();
                }
            }
            return s.stack.front().cloned().flatten();
        }
        if s.stack.len() > 1 {
            s.stack.pop_front().flatten()
        } else {
            s.stack.front().cloned().flatten()
        }
    }
}

impl CloudFormationFactory for ScriptedCloudFormation {
    type Port = ScriptedCloudFormation;

    async fn for_stack(
        &self,
        region: Option<&str>,
        assume_role: Option<&str>,
        _entry: Option<&str>,
    ) -> PortResult<Self::Port> {
        let observer = {
            let mut s = self.script();
            s.connections
                .push((region.map(str::to_owned), assume_role.map(str::to_owned)));
            s.observer.clone()
        };
        if let Some(role) = assume_role {
            // The session is tagged with the entry and installation.
            observer.tell(&FakeCall {
                target: Some(role.to_owned()),
                ..FakeCall::to("sts", "AssumeRole")
            });
        }
        Ok(self.clone())
    }

    fn home_region(&self) -> Option<String> {
        Some("us-east-1".into())
    }
}

impl Stacks for ScriptedCloudFormation {
    async fn describe_stack(&self, stack: &str) -> PortResult<Option<StackInfo>> {
        self.call(
            FakeCall::cloudformation("DescribeStacks", stack),
            stack.to_owned(),
        )?;
        // Asked by id, as by name: the one stack.
        let stack = match stack.strip_prefix("arn:") {
            Some(arn) => arn.split('/').nth(1).unwrap_or(stack),
            None => stack,
        };
        let status = self.next_stack();
        let s = self.script();
        let tags = s.stack_tags(stack);
        Ok(status.map(|status| StackInfo {
            stack_id: stack_id(stack, s.generation),
            status,
            reason: None,
            changed_at: s.changed_at,
            drift: s.drift.clone(),
            parameters: BTreeMap::new(),
            tags,
            termination_protection: s.termination_protection,
            role_arn: s.role_arn.clone(),
            outputs: s.outputs.clone(),
            operations: s.operations.clone(),
        }))
    }

    async fn list_stacks(&self) -> PortResult<Vec<StackSummary>> {
        self.call(FakeCall::cloudformation("ListStacks", ""), String::new())?;
        Ok(self.script().listing.clone())
    }

    async fn template_body(&self, stack: &str) -> PortResult<Option<String>> {
        self.call(
            FakeCall::cloudformation("GetTemplate", stack),
            stack.to_owned(),
        )?;
        Ok(Some(self.script().template.clone()))
    }

    async fn delete_stack(
        &self,
        stack: &str,
        role_arn: Option<&str>,
        attempt: &str,
    ) -> PortResult<()> {
        self.call(
            FakeCall::cloudformation("DeleteStack", stack).with_role(role_arn),
            format!("{stack} {attempt}"),
        )?;
        let mut s = self.script();
        s.stack = s.after_delete.iter().cloned().collect();
        Ok(())
    }

    async fn continue_update_rollback(
        &self,
        stack: &str,
        role_arn: Option<&str>,
    ) -> PortResult<()> {
        self.call(
            FakeCall::cloudformation("ContinueUpdateRollback", stack).with_role(role_arn),
            stack.to_owned(),
        )?;
        let mut s = self.script();
        s.stack = s.after_continue.iter().cloned().collect();
        Ok(())
    }

    async fn set_termination_protection(&self, stack: &str, enabled: bool) -> PortResult<()> {
        self.call(
            FakeCall::cloudformation("UpdateTerminationProtection", stack),
            format!("{stack} {enabled}"),
        )?;
        self.script().termination_protection = enabled;
        Ok(())
    }

    async fn set_stack_policy(&self, stack: &str, policy_json: &str) -> PortResult<()> {
        self.call(
            FakeCall::cloudformation("SetStackPolicy", stack),
            stack.to_owned(),
        )?;
        self.script().stack_policy = Some(policy_json.to_owned());
        Ok(())
    }

    async fn stack_policy(&self, stack: &str) -> PortResult<Option<String>> {
        self.call(
            FakeCall::cloudformation("GetStackPolicy", stack),
            stack.to_owned(),
        )?;
        Ok(self.script().stack_policy.clone())
    }

    async fn failed_events(
        &self,
        stack: &str,
        _of: EventsOf<'_>,
    ) -> PortResult<Option<Vec<OperationEvent>>> {
        self.call(
            FakeCall::cloudformation("DescribeEvents", stack),
            stack.to_owned(),
        )?;
        Ok(self.script().operation_events.clone())
    }

    async fn events_since(&self, stack: &str, _since: i64) -> PortResult<Vec<StackEvent>> {
        self.call(
            FakeCall::cloudformation("DescribeStackEvents", stack),
            stack.to_owned(),
        )?;
        Ok(self.script().events.clone())
    }
}

impl ChangeSets for ScriptedCloudFormation {
    async fn create_change_set(&self, request: &ChangeSetRequest) -> PortResult<Created> {
        self.call(
            FakeCall {
                request: Some(request.clone()),
                ..FakeCall::cloudformation("CreateChangeSet", &request.stack_name)
            },
            format!("{} {:?}", request.change_set_name, request.kind),
        )?;
        let mut s = self.script();
        if s.nothing_to_change {
            return Ok(Created::NothingToChange);
        }
        s.requests.push(request.clone());
        // A new change set after one was executed is a new one, ready.
        if !s.change_set.is_empty()
            && s.change_set
                .iter()
                .all(|c| c.execution == ExecutionStatus::ExecuteComplete)
        {
            s.change_set = [ready()].into_iter().collect();
        }
        Ok(Created::ChangeSet {
            stack_id: Some(stack_id(&request.stack_name, s.generation)),
        })
    }

    async fn describe_change_set(
        &self,
        stack: &str,
        name: &str,
    ) -> PortResult<Option<ChangeSetInfo>> {
        self.call(
            FakeCall::cloudformation("DescribeChangeSet", stack),
            name.to_owned(),
        )?;
        let mut s = self.script();
        let info = if s.change_set.len() > 1 {
            s.change_set.pop_front()
        } else {
            s.change_set.front().cloned()
        };
        Ok(info)
    }

    async fn change_set_changes(&self, stack: &str, name: &str) -> PortResult<Vec<ResourceChange>> {
        self.call(
            FakeCall::cloudformation("DescribeChangeSet", stack),
            name.to_owned(),
        )?;
        Ok(self.script().changes.clone())
    }

    async fn change_set_checks(
        &self,
        stack: &str,
        name: &str,
    ) -> PortResult<Option<Vec<crate::ports::ChangeSetCheck>>> {
        self.call(
            FakeCall::cloudformation("DescribeEvents", stack),
            name.to_owned(),
        )?;
        Ok(self.script().checks.clone())
    }

    async fn execute_change_set(&self, stack: &str, name: &str) -> PortResult<()> {
        self.call(
            FakeCall::cloudformation("ExecuteChangeSet", stack),
            name.to_owned(),
        )?;
        let mut s = self.script();
        s.stack = s.after_execute.iter().cloned().collect();
        s.settles_at = s.operation_lasts.map(|d| std::time::Instant::now() + d);
        s.changed_at += 1000;
        s.change_set = [ChangeSetInfo {
            execution: ExecutionStatus::ExecuteComplete,
            ..ready()
        }]
        .into_iter()
        .collect();
        Ok(())
    }

    async fn delete_change_set(&self, stack: &str, name: &str) -> PortResult<()> {
        self.call(
            FakeCall::cloudformation("DeleteChangeSet", stack),
            name.to_owned(),
        )
    }

    async fn list_change_sets(&self, stack: &str) -> PortResult<Vec<String>> {
        self.call(
            FakeCall::cloudformation("ListChangeSets", stack),
            String::new(),
        )?;
        Ok(self.script().listed_change_sets.clone().unwrap_or_else(|| {
            // One a killed run of stacksync left, one someone else made.
            vec![
                "stacksync-v1-left-over".to_owned(),
                "someone-elses".to_owned(),
            ]
        }))
    }
}

impl DriftDetections for ScriptedCloudFormation {
    async fn detect_drift(&self, stack: &str) -> PortResult<String> {
        self.call(
            FakeCall::cloudformation("DetectStackDrift", stack),
            stack.to_owned(),
        )?;
        Ok(format!("drift-{stack}"))
    }

    async fn drift_detection(&self, id: &str) -> PortResult<crate::ports::drift::DriftDetection> {
        self.call(
            FakeCall::cloudformation("DescribeStackDriftDetectionStatus", ""),
            id.to_owned(),
        )?;
        let mut s = self.script();
        let next = if s.drift_detections.len() > 1 {
            s.drift_detections.pop_front()
        } else {
            s.drift_detections.front().cloned()
        };
        Ok(next.unwrap_or(crate::ports::drift::DriftDetection {
            status: crate::ports::drift::DetectionStatus::Complete,
            stack_drift: Some("IN_SYNC".into()),
            reason: None,
            drifted_resources: Some(0),
        }))
    }

    async fn resource_drifts(
        &self,
        stack: &str,
    ) -> PortResult<Vec<crate::ports::drift::ResourceDrift>> {
        self.call(
            FakeCall::cloudformation("DescribeStackResourceDrifts", stack),
            stack.to_owned(),
        )?;
        Ok(self.script().resource_drifts.clone())
    }
}

impl Values for ScriptedCloudFormation {
    async fn ssm_parameter(
        &self,
        name: &str,
        version: Option<&str>,
    ) -> PortResult<Option<Versioned>> {
        self.call(FakeCall::to("ssm", "GetParameter"), name.to_owned())?;
        let s = self.script();
        Ok(s.value_at(s.ssm.get(name), version).map(|v| Versioned {
            secret: !s.plain_ssm.contains(name),
            ..v
        }))
    }

    async fn secret_string(
        &self,
        id: &str,
        version: Option<&str>,
    ) -> PortResult<Option<Versioned>> {
        self.call(
            FakeCall::to("secretsmanager", "GetSecretValue"),
            id.to_owned(),
        )?;
        let s = self.script();
        Ok(s.value_at(s.secrets.get(id), version))
    }
}

impl crate::ports::Publications for ScriptedCloudFormation {
    async fn put_ssm_parameter(&self, name: &str, value: &str) -> PortResult<()> {
        let call = FakeCall {
            target: Some(name.to_owned()),
            ..FakeCall::to("ssm", "PutParameter")
        };
        self.call(call, name.to_owned())?;
        self.script()
            .published
            .insert(name.to_owned(), value.to_owned());
        Ok(())
    }

    async fn delete_ssm_parameter(&self, name: &str) -> PortResult<()> {
        let call = FakeCall {
            target: Some(name.to_owned()),
            ..FakeCall::to("ssm", "DeleteParameter")
        };
        self.call(call, name.to_owned())?;
        self.script().published.remove(name);
        Ok(())
    }
}

/// A scripted secret at a version of its own: a new value, a new version.
fn versioned(value: &str) -> Versioned {
    Versioned {
        value: value.to_owned(),
        version: crate::hash::sha256_hex(value.as_bytes())[..8].to_owned(),
        secret: true,
    }
}
