//! The steps against the in-memory fakes: one registered stack, `orders`,
//! whose template is committed at [`HEAD`] of its source.

use std::collections::BTreeMap;

use crate::fakes::{
    Failing, MemoryBlobs, MemoryNotices, MemorySources, ScriptedCloudFormation, stack_id,
};
use crate::reconcile::run::{RunState, Trigger};
use crate::registry::memory::MemoryRegistry;
use crate::registry::{Leases, StackEntry, sample_entry};
use crate::seen::{Seen, deployed_hash};
use crate::stack_status::StackStatus;
use crate::status::{Phase, Status, Timestamp};

use super::{StepConfig, Steps, With};

pub const URL: &str = "https://git.example/infra.git";
pub const HEAD: &str = "0123456789abcdef0123456789abcdef01234567";
pub const TEMPLATE: &[u8] = b"Resources:\n  Queue:\n    Type: AWS::SQS::Queue\n";
pub const NAME: &str = "orders";

pub type TestSteps = Steps<
    With<Failing<MemoryRegistry>, Failing<MemoryBlobs>, ScriptedCloudFormation, MemorySources>,
>;

/// The steps, their fakes, and the one entry.
#[derive(Debug)]
pub struct Test {
    pub steps: TestSteps,
    pub cfn: ScriptedCloudFormation,
    /// What the steps put on the bus.
    pub notices: std::sync::Arc<MemoryNotices>,
}

impl Test {
    /// `orders`, registered and `Pending`; no stack yet.
    pub async fn new() -> Test {
        Test::with_entry(|_| {}).await
    }

    /// The same, with the entry changed by `change` first.
    pub async fn with_entry(change: impl FnOnce(&mut StackEntry)) -> Test {
        Test::with(ScriptedCloudFormation::with_stack(&[None]), change).await
    }

    /// With a scripted CloudFormation of the test's own.
    pub async fn with(cfn: ScriptedCloudFormation, change: impl FnOnce(&mut StackEntry)) -> Test {
        let registry = MemoryRegistry::new();
        let mut entry = sample_entry(NAME, Status::default());
        entry.status.phase = Phase::Pending;
        entry.spec.poll_interval = crate::Duration::from_secs(5);
        change(&mut entry);
        registry.insert(entry);
        let sources = MemorySources::new();
        sources.commit(URL, "main", HEAD, &[("t.yaml", TEMPLATE)]);
        let notices = std::sync::Arc::new(MemoryNotices::default());
        Test {
            steps: Steps {
                registry: Failing::new(registry),
                blobs: Failing::new(MemoryBlobs::new()),
                cloudformation: cfn.clone(),
                sources,
                config: StepConfig {
                    answer_url: None,
                    rules: None,
                    stack_events: None,
                    windows: Vec::new(),
                    clock: Default::default(),
                    max_runs_per_account: None,
                    home_region: None,
                    local: false,
                    installation: crate::fakes::TEST_INSTALLATION.into(),
                    policy: Default::default(),
                    template_url_base: "https://bucket.s3.us-east-1.amazonaws.com".into(),
                    bucket: "bucket".into(),
                },
                notices: crate::ports::Notifier::to(notices.clone()),
                rule_cache: Default::default(),
                wakes: crate::ports::Wakes::none(),
                starter: crate::ports::RunStarter::none(),
            },
            cfn,
            notices,
        }
    }

    /// A fresh run's input, as `Start` makes it.
    pub fn input(&self, execution: &str) -> RunState {
        RunState {
            entry: NAME.into(),
            execution: crate::reconcile::run::Execution {
                name: execution.into(),
                ..Default::default()
            },
            trigger: Trigger::default(),
            ..RunState::default()
        }
    }

    pub fn entry(&self) -> StackEntry {
        self.steps
            .registry
            .inner
            .entry(NAME)
            .unwrap_or_else(|| panic!("{NAME} is gone"))
    }

    pub fn blob(&self, key: &str) -> Option<Vec<u8>> {
        self.steps.blobs.inner.object(key)
    }

    pub async fn release(&self, owner: &str) {
        self.steps
            .registry
            .release_lease(NAME, owner)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }

    /// What a run that left the scripted stack as it is now, at `status`,
    /// recorded of it.
    pub fn seen(&self, status: StackStatus) -> Seen {
        let s = self.cfn.script();
        Seen {
            region: None,
            assume_role_arn: None,
            stack_id: stack_id(NAME, s.generation),
            changed_at: Timestamp(s.changed_at),
            stack_status: status.to_string(),
            drift: s.drift.clone(),
            deployed_hash: deployed_hash(&s.template, &BTreeMap::new(), &s.stack_tags(NAME)),
            interval_seconds: 600,
            drift_seconds: Some(86_400),
        }
    }

    /// `orders` as a run left it: applied at `desired`, the stack seen at `status`.
    pub fn applied(&self, desired: &str, status: StackStatus) {
        let mut entry = self.entry();
        entry.status.applied.applied_hash = Some(desired.to_owned());
        entry.status.applied.seen = Some(self.seen(status));
        self.steps.registry.inner.insert(entry);
    }

    /// The scripted stack's statuses from now on.
    pub fn stack_answers(&self, statuses: &[Option<StackStatus>]) {
        self.cfn.script().stack = statuses.iter().cloned().collect();
    }
}
