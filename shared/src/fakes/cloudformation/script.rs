//! What the scripted CloudFormation answers, and what it was asked.

use std::collections::{BTreeMap, VecDeque};

use super::{TEST_INSTALLATION, versioned};
use crate::fakes::calls::{Faults, Observer};
use crate::ports::{
    ChangeSetInfo, ChangeSetRequest, OperationEvent, PortError, ResourceChange, StackEvent,
    StackSummary, Versioned,
};
use crate::stack_status::StackStatus;

/// What the fake answers, and what it was asked.
#[derive(Debug)]
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
    /// The stack's `LastUpdatedTime` (epoch ms): a change set executed
    /// moves it on by a second; a test moves it for a change out of band.
    pub changed_at: i64,
    /// The last part of the stack's id (a stack replaced out of band has another).
    pub generation: u32,
    /// What GetTemplate answers.
    pub template: String,
    /// The drift status DescribeStacks reports.
    pub drift: Option<String>,
    /// The service role DescribeStacks reports.
    pub role_arn: Option<String>,
    /// The stack's tags as DescribeStacks reports them: these when set;
    /// else the last change set's; else those of a stack that the entry
    /// of its name made in [`TEST_INSTALLATION`].
    pub tags: Option<BTreeMap<String, String>>,
    /// What ListStacks answers.
    pub listing: Vec<StackSummary>,
    /// The stack's termination protection and policy, as set.
    pub termination_protection: bool,
    pub stack_policy: Option<String>,
    /// Every port asked of the factory: (region, role assumed).
    pub connections: Vec<(Option<String>, Option<String>)>,
    /// Every call, as "Operation detail".
    pub calls: Vec<String>,
    /// Every change set asked for, in full.
    pub requests: Vec<ChangeSetRequest>,
    /// What a change set would do (`change_set_changes`).
    pub changes: Vec<ResourceChange>,
    /// The stack's `LastOperations` (type, id).
    pub operations: Vec<(String, String)>,
    /// The stack's outputs, as DescribeStacks reports them.
    pub outputs: BTreeMap<String, String>,
    /// What drift detections report, one per `DescribeStackDriftDetectionStatus`
    /// (the last repeats), and the drifted resources.
    pub drift_detections: VecDeque<crate::ports::drift::DriftDetection>,
    pub resource_drifts: Vec<crate::ports::drift::ResourceDrift>,
    /// SSM parameters and secrets of the stack's account (name → value).
    /// SSM parameters are `SecureString`s unless named in `plain_ssm`.
    pub ssm: BTreeMap<String, String>,
    pub plain_ssm: std::collections::BTreeSet<String>,
    /// The SSM parameters the steps published (`publish:`), name → value.
    pub published: BTreeMap<String, String>,
    pub secrets: BTreeMap<String, String>,
    /// Earlier values of SSM parameters and secrets, any of them (a value's
    /// version is a hash of it), as read at a version.
    pub earlier_values: Vec<String>,
    /// What `DescribeEvents` answers; `None`: not served (as the emulator).
    pub operation_events: Option<Vec<OperationEvent>>,
    /// CloudFormation's checks of a ready change set (`None`: not served).
    pub checks: Option<Vec<crate::ports::ChangeSetCheck>>,
    /// What ListChangeSets answers; `None`: one change set a killed run of
    /// stacksync left, and one someone else made.
    pub listed_change_sets: Option<Vec<String>>,
    /// What is told of each call ([`super::ScriptedCloudFormation::observe`]).
    pub observer: Observer,
    /// Failures planned for the n-th call of an operation, and the calls
    /// counted ([`super::ScriptedCloudFormation::fail`]).
    pub faults: Faults,
    /// How long an executed change set's operation lasts in real time
    /// (`None`: one status per describe): DescribeStacks answers the first
    /// of `after_execute` until it has passed, then the last.
    pub operation_lasts: Option<std::time::Duration>,
    /// When the operation under way settles ([`Script::operation_lasts`]).
    pub settles_at: Option<std::time::Instant>,
    /// CreateChangeSet answers that there is nothing to change (AWS's
    /// `ValidationError` "didn't contain changes", answered at once).
    pub nothing_to_change: bool,
}

impl Script {
    /// `current` (an SSM parameter's or a secret's value), or at `version`
    /// that one or one of [`Script::earlier_values`].
    pub(super) fn value_at(
        &self,
        current: Option<&String>,
        version: Option<&str>,
    ) -> Option<Versioned> {
        let current = versioned(current?);
        match version {
            None => Some(current),
            Some(v) if current.version == v => Some(current),
            Some(v) => self
                .earlier_values
                .iter()
                .map(|e| versioned(e))
                .find(|e| e.version == v),
        }
    }

    /// The stack's `stacksync:installation` tag now (none: no stack).
    pub(super) fn installation_of(&self, stack: &str) -> Option<String> {
        if self.stack.front().is_some_and(Option::is_none) {
            return None;
        }
        self.stack_tags(stack)
            .get(crate::ownership::INSTALLATION_TAG)
            .cloned()
    }

    /// The tags DescribeStacks reports for `stack` ([`Script::tags`]).
    pub fn stack_tags(&self, stack: &str) -> BTreeMap<String, String> {
        self.tags
            .clone()
            .or_else(|| {
                self.requests
                    .last()
                    .map(|r| r.tags.iter().cloned().collect())
            })
            .unwrap_or_else(|| {
                BTreeMap::from([
                    (
                        crate::ownership::INSTALLATION_TAG.to_owned(),
                        TEST_INSTALLATION.to_owned(),
                    ),
                    (crate::ownership::ENTRY_TAG.to_owned(), stack.to_owned()),
                ])
            })
    }
}

impl Default for Script {
    fn default() -> Self {
        Self {
            stack: VecDeque::new(),
            change_set: VecDeque::new(),
            after_execute: Vec::new(),
            after_delete: Vec::new(),
            after_continue: Vec::new(),
            failures: BTreeMap::new(),
            events: Vec::new(),
            changed_at: 1_700_000_000_000,
            generation: 1,
            template: "Resources: {}".into(),
            drift: None,
            role_arn: None,
            tags: None,
            listing: Vec::new(),
            termination_protection: false,
            stack_policy: None,
            connections: Vec::new(),
            calls: Vec::new(),
            requests: Vec::new(),
            changes: Vec::new(),
            operations: Vec::new(),
            drift_detections: VecDeque::new(),
            resource_drifts: Vec::new(),
            outputs: BTreeMap::new(),
            ssm: BTreeMap::new(),
            plain_ssm: std::collections::BTreeSet::new(),
            published: BTreeMap::new(),
            secrets: BTreeMap::new(),
            earlier_values: Vec::new(),
            operation_events: None,
            checks: None,
            listed_change_sets: None,
            observer: Observer::default(),
            faults: Faults::default(),
            operation_lasts: None,
            settles_at: None,
            nothing_to_change: false,
        }
    }
}
