//! What the drift tests start from: a stack reconciled `Ready` through the
//! real state machine, registry (the emulator's DynamoDB) and Git, against
//! the scripted CloudFormation (the emulator has no drift detection); and
//! the installation's scheduler and drift function over the same registry,
//! the drift notices kept, the calls recorded for the IAM test as each
//! function's.

use std::sync::Arc;

use stacksync::adapters::git::GitFetcher;
use stacksync::clock::{EpochMillis, now_millis};
pub use stacksync::fakes::queue_drift;
use stacksync::fakes::{MemoryNotices, RecordingStarter, stack_id};
use stacksync::ports::drift::{DetectionStatus, DriftDetection, ResourceDrift};
use stacksync::ports::{Notifier, StackSummary};
use stacksync::registry::{Registry, StackEntry};
use stacksync::stack_status::StackStatus;
use stacksync::triggers::drift::{Config as DriftConfig, DriftPass, DriftReport};
use stacksync::triggers::scheduler::{Config, Scheduler};

use crate::git::GitRepo;
use crate::harness::Harness;
use crate::iam::as_function;
use crate::scripted::{ScriptedCloudFormation, failed, recorded};
use crate::unique_name;

pub type DriftScheduler = Scheduler<Registry, RecordingStarter, GitFetcher, ScriptedCloudFormation>;
pub type DriftFunction = DriftPass<Registry, ScriptedCloudFormation>;

/// A stack `Ready`, its scheduler and drift function, and a clock the test
/// moves.
pub struct Drifting {
    pub fake: ScriptedCloudFormation,
    pub h: Harness<ScriptedCloudFormation>,
    pub name: String,
    /// Starts what a drift to revert makes due (recorded, not run).
    pub scheduler: DriftScheduler,
    pub drift: DriftFunction,
    pub notices: Arc<MemoryNotices>,
    /// The scheduler's clock, moved by [`Self::later`]: from a day before
    /// real time, so that what a run records at real time (a revert) comes
    /// after the detections before it, as it does on one clock.
    pub now: EpochMillis,
    pub repo: GitRepo,
}

impl std::fmt::Debug for Drifting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Drifting")
            .field("name", &self.name)
            .field("now", &self.now)
            .finish_non_exhaustive()
    }
}

/// The queue's template.
pub const TEMPLATE: &[u8] = b"Resources:\n  Queue:\n    Type: AWS::SQS::Queue\n";

impl Drifting {
    /// `drift`: the entry's `drift:` line(s), indented as a field of it
    /// (`"    drift: {action: revert}\n"`), or empty for the defaults.
    pub async fn new(prefix: &str, drift: &str) -> Self {
        let fake = ScriptedCloudFormation::with_stack(&[Some(StackStatus::UpdateComplete)]);
        fake.script().change_set = [failed(
            "The submitted information didn't contain changes. Submit different information to create a change set.",
        )]
        .into_iter()
        .collect();
        let h = Harness::with_port(prefix, fake.clone()).await;
        let repo = GitRepo::new(prefix);
        repo.commit(&[("t.yaml", TEMPLATE)], "template");
        let name = unique_name("d").replace('-', "x");
        h.apply(&format!(
            "stacks:\n  - name: {name}\n    source: {{git: '{}', path: t.yaml}}\n    pollInterval: 5s\n{drift}",
            repo.file_url()
        ))
        .await;
        let outcome = h.reconcile(&name).await;
        assert!(
            matches!(outcome, stacksync::asl::Outcome::Succeeded(_)),
            "{outcome:?}"
        );
        fake.script().calls.clear();
        let notices = Arc::new(MemoryNotices::default());
        let scheduler = Scheduler {
            registry: h.steps.registry.clone(),
            starter: RecordingStarter::new(),
            sources: GitFetcher::new(std::env::temp_dir()),
            cloudformation: recorded(fake.clone()),
            config: Config::default(),
        };
        let drift = DriftPass {
            registry: h.steps.registry.clone(),
            cloudformation: recorded(fake.clone()),
            config: DriftConfig {
                installation: h.steps.registry.table().to_owned(),
                notices: Notifier::to(notices.clone()),
                ..DriftConfig::default()
            },
        };
        Self {
            fake,
            h,
            name,
            scheduler,
            drift,
            notices,
            now: now_millis() - 86_400_000,
            repo,
        }
    }

    /// One scheduler run and one drift run (both on the schedule), `ms`
    /// after the last; neither may report an error. The drift run's report.
    pub async fn later(&mut self, ms: EpochMillis) -> DriftReport {
        self.now += ms;
        {
            // ListStacks says what the scripted stack is now.
            let mut s = self.fake.script();
            let summary = StackSummary {
                name: self.name.clone(),
                stack_id: stack_id(&self.name, s.generation),
                status: StackStatus::UpdateComplete,
                changed_at: s.changed_at,
                drift: None,
                drift_checked_at: None,
            };
            s.listing = vec![summary];
        }
        let report = as_function("scheduler", self.scheduler.run(self.now))
            .await
            .expect("the registry answers");
        assert_eq!(report.errors, Vec::<String>::new());
        let report = as_function("drift", self.drift.run(self.now))
            .await
            .expect("the registry answers");
        assert_eq!(report.errors, Vec::<String>::new());
        report
    }

    /// What the next detection finds: `stack_drift`, and these resources.
    pub fn finds(&self, stack_drift: &str, drifts: Vec<ResourceDrift>) {
        let mut s = self.fake.script();
        s.drift_detections = [DriftDetection {
            status: DetectionStatus::Complete,
            stack_drift: Some(stack_drift.into()),
            reason: None,
            drifted_resources: u32::try_from(drifts.len()).ok(),
        }]
        .into_iter()
        .collect();
        s.resource_drifts = drifts;
    }

    /// The entry as the registry holds it now.
    pub async fn entry(&self) -> StackEntry {
        self.h.entry(&self.name).await
    }

    /// The CloudFormation calls made since the last look, by operation.
    pub fn calls(&self) -> Vec<String> {
        let calls = self.fake.operations();
        self.fake.script().calls.clear();
        calls
    }
}
