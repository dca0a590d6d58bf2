//! A scripted CloudFormation: statuses advance over successive describes,
//! failures are injected per operation. For the stack states the emulator
//! cannot produce (in-progress loops, rollbacks, `DELETE_FAILED`,
//! throttling). Every call is kept, with the request of each change set.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

use crate::ports::{
    ChangeSetInfo, ChangeSetRequest, CloudFormation, CloudFormationFactory, Created, PortError,
    PortResult, StackEvent, StackInfo,
};
use crate::stack_status::{ChangeSetStatus, ExecutionStatus, StackStatus};

/// What the fake answers, and what it was asked.
#[derive(Debug, Default)]
pub struct Script {
    /// What DescribeStacks answers next; the last one repeats. `None`: no stack.
    pub stack: VecDeque<Option<StackStatus>>,
    /// What DescribeChangeSet answers after CreateChangeSet; the last repeats.
    pub change_set: VecDeque<ChangeSetInfo>,
    /// Stack statuses after ExecuteChangeSet.
    pub after_execute: Vec<Option<StackStatus>>,
    /// Stack statuses after DeleteStack.
    pub after_delete: Vec<Option<StackStatus>>,
    /// Stack statuses after ContinueUpdateRollback.
    pub after_continue: Vec<Option<StackStatus>>,
    /// Operation → errors to give before answering normally.
    pub failures: BTreeMap<&'static str, VecDeque<PortError>>,
    /// What DescribeStackEvents answers.
    pub events: Vec<StackEvent>,
    /// Every call, as "Operation detail".
    pub calls: Vec<String>,
    /// Every change set asked for, in full.
    pub requests: Vec<ChangeSetRequest>,
}

/// The fake, shared between the test and the steps.
#[derive(Debug, Clone, Default)]
pub struct ScriptedCloudFormation(pub Arc<Mutex<Script>>);

/// A change set ready to execute, with `changes` changes.
pub fn ready(changes: usize) -> ChangeSetInfo {
    ChangeSetInfo {
        status: ChangeSetStatus::CreateComplete,
        execution: ExecutionStatus::Available,
        reason: None,
        changes,
    }
}

/// A change set still being made.
pub fn pending() -> ChangeSetInfo {
    ChangeSetInfo {
        status: ChangeSetStatus::CreatePending,
        execution: ExecutionStatus::Unavailable,
        reason: None,
        changes: 0,
    }
}

/// A failed change set.
pub fn failed(reason: &str) -> ChangeSetInfo {
    ChangeSetInfo {
        status: ChangeSetStatus::Failed,
        execution: ExecutionStatus::Unavailable,
        reason: Some(reason.to_owned()),
        changes: 0,
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
            s.change_set = [pending(), ready(1)].into_iter().collect();
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

    fn call(&self, operation: &'static str, detail: String) -> PortResult<()> {
        let mut s = self.script();
        s.calls.push(format!("{operation} {detail}"));
        match s.failures.get_mut(operation).and_then(VecDeque::pop_front) {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    fn next_stack(&self) -> Option<StackStatus> {
        let mut s = self.script();
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
        _region: Option<&str>,
        _assume_role: Option<&str>,
    ) -> PortResult<Self::Port> {
        Ok(self.clone())
    }
}

impl CloudFormation for ScriptedCloudFormation {
    async fn describe_stack(&self, stack: &str) -> PortResult<Option<StackInfo>> {
        self.call("DescribeStacks", stack.to_owned())?;
        Ok(self.next_stack().map(|status| StackInfo {
            stack_id: format!("arn:aws:cloudformation:us-east-1:123456789012:stack/{stack}/1"),
            status,
            reason: None,
            parameters: BTreeMap::new(),
            tags: BTreeMap::new(),
        }))
    }

    async fn create_change_set(&self, request: &ChangeSetRequest) -> PortResult<Created> {
        self.call(
            "CreateChangeSet",
            format!("{} {:?}", request.change_set_name, request.kind),
        )?;
        self.script().requests.push(request.clone());
        Ok(Created::ChangeSet)
    }

    async fn describe_change_set(
        &self,
        _stack: &str,
        name: &str,
    ) -> PortResult<Option<ChangeSetInfo>> {
        self.call("DescribeChangeSet", name.to_owned())?;
        let mut s = self.script();
        let info = if s.change_set.len() > 1 {
            s.change_set.pop_front()
        } else {
            s.change_set.front().cloned()
        };
        Ok(info)
    }

    async fn execute_change_set(&self, _stack: &str, name: &str) -> PortResult<()> {
        self.call("ExecuteChangeSet", name.to_owned())?;
        let mut s = self.script();
        s.stack = s.after_execute.iter().cloned().collect();
        s.change_set = [ChangeSetInfo {
            execution: ExecutionStatus::ExecuteComplete,
            ..ready(1)
        }]
        .into_iter()
        .collect();
        Ok(())
    }

    async fn delete_change_set(&self, _stack: &str, name: &str) -> PortResult<()> {
        self.call("DeleteChangeSet", name.to_owned())
    }

    async fn list_change_sets(&self, _stack: &str) -> PortResult<Vec<String>> {
        self.call("ListChangeSets", String::new())?;
        Ok(vec!["left-over".to_owned()])
    }

    async fn delete_stack(&self, stack: &str, _role_arn: Option<&str>) -> PortResult<()> {
        self.call("DeleteStack", stack.to_owned())?;
        let mut s = self.script();
        s.stack = s.after_delete.iter().cloned().collect();
        Ok(())
    }

    async fn continue_update_rollback(
        &self,
        stack: &str,
        _role_arn: Option<&str>,
    ) -> PortResult<()> {
        self.call("ContinueUpdateRollback", stack.to_owned())?;
        let mut s = self.script();
        s.stack = s.after_continue.iter().cloned().collect();
        Ok(())
    }

    async fn set_termination_protection(&self, stack: &str, enabled: bool) -> PortResult<()> {
        self.call("UpdateTerminationProtection", format!("{stack} {enabled}"))
    }

    async fn set_stack_policy(&self, stack: &str, _policy_json: &str) -> PortResult<()> {
        self.call("SetStackPolicy", stack.to_owned())
    }

    async fn events_since(&self, stack: &str, _since: i64) -> PortResult<Vec<StackEvent>> {
        self.call("DescribeStackEvents", stack.to_owned())?;
        Ok(self.script().events.clone())
    }
}
