//! A fleet's rollout in waves (`rollout:`, issue "Fleets…"): one fleet of
//! 500 targets (250 accounts × 2 regions), `maxConcurrent: 50`, every
//! target started at once (as a push starts every follower), each stack's
//! create lasting `OPERATION_S` in the scripted CloudFormation. The real
//! state machine (the local interpreter) and the real steps on the fakes
//! in memory (registry, bucket, Git); a target's run starts the next wave
//! as Step Functions would (`StartExecution`: here a task of the
//! interpreter). Waits and operations are scaled by `SPEEDUP`. The runs
//! poll CloudFormation: a fleet's stacks are in other accounts, whose
//! stack events do not reach the installation (README "Waits"). Prints
//! Markdown.

#![allow(clippy::unwrap_used)] // a benchmark: a failed unwrap is a failed measurement
#![recursion_limit = "256"]

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::json;
use stacksync::asl::{Progress, RunOptions, StateMachine};
use stacksync::clock::now_millis;
use stacksync::fakes::{MemoryBlobs, MemorySources, ScriptedCloudFormation, ready};
use stacksync::manifest::parse_manifest;
use stacksync::ports::{
    CloudFormationFactory, PortResult, RunStarter, StartOn, Started, Trigger, TriggerKind,
};
use stacksync::reconcile::asl_runner::reconcile_machine;
use stacksync::reconcile::steps::{StepConfig, Steps, With};
use stacksync::registry::memory::MemoryRegistry;
use stacksync::registry::plan::Writer;
use stacksync::registry::targets::plan_with_fleets;
use stacksync::stack_status::StackStatus;
use stacksync::status::Phase;

const SPEEDUP: f64 = 20.0;
const OPERATION_S: f64 = 60.0;
const ACCOUNTS: u64 = 250;
const MAX_CONCURRENT: usize = 50;
const URL: &str = "https://git.example/infra.git";
const HEAD: &str = "0123456789abcdef0123456789abcdef01234567";

/// One scripted CloudFormation per account and region, each stack's
/// create lasting `OPERATION_S` (scaled).
#[derive(Clone, Default)]
struct PerTarget(Arc<Mutex<HashMap<String, ScriptedCloudFormation>>>);

fn fresh() -> ScriptedCloudFormation {
    let cfn = ScriptedCloudFormation::with_stack(&[None]);
    {
        let mut s = cfn.script();
        s.change_set = [ready()].into_iter().collect();
        s.after_execute = vec![
            Some(StackStatus::CreateInProgress),
            Some(StackStatus::CreateComplete),
        ];
        s.operation_lasts = Some(Duration::from_secs_f64(OPERATION_S / SPEEDUP));
    }
    cfn
}

impl CloudFormationFactory for PerTarget {
    type Port = ScriptedCloudFormation;

    async fn for_stack(
        &self,
        region: Option<&str>,
        assume_role: Option<&str>,
        entry: Option<&str>,
    ) -> PortResult<Self::Port> {
        let key = format!("{region:?}/{assume_role:?}");
        let cfn = self
            .0
            .lock()
            .unwrap()
            .entry(key)
            .or_insert_with(fresh)
            .clone();
        cfn.for_stack(region, assume_role, entry).await
    }
}

type BenchSteps = Steps<With<MemoryRegistry, MemoryBlobs, PerTarget, MemorySources>>;

/// Starts a run as Step Functions would: an execution of its own (a task
/// here), once per name.
#[derive(Default)]
struct Spawner {
    steps: OnceLock<Arc<BenchSteps>>,
    machine: OnceLock<StateMachine>,
    names: Mutex<BTreeSet<String>>,
    running: AtomicUsize,
    figures: Mutex<Figures>,
}

#[derive(Default)]
struct Figures {
    executions: usize,
    transitions: usize,
    invocations: usize,
}

impl Spawner {
    fn spawn(self: &Arc<Self>, stack: &str, trigger: &Trigger, key: &str) -> bool {
        let name = stacksync::naming::execution_name(stack, trigger.kind.as_str(), key);
        if !self.names.lock().unwrap().insert(name.clone()) {
            return false;
        }
        let me = self.clone();
        let input = json!({"stackId": stack, "trigger": trigger});
        self.running.fetch_add(1, Ordering::SeqCst);
        tokio::spawn(async move {
            let steps = me.steps.get().unwrap().clone();
            let machine = me.machine.get().unwrap().clone();
            let options = RunOptions {
                speedup: SPEEDUP,
                ..RunOptions::default()
            };
            let (mut transitions, mut invocations) = (0, 0);
            let _ = machine
                .execute(steps.as_ref(), &name, input, &options, &mut |event, _| {
                    if let Progress::StateEntered { name, .. } = event {
                        transitions += 1;
                        if is_task(name) {
                            invocations += 1;
                        }
                    }
                })
                .await;
            let mut f = me.figures.lock().unwrap();
            f.executions += 1;
            f.transitions += transitions;
            f.invocations += invocations;
            drop(f);
            me.running.fetch_sub(1, Ordering::SeqCst);
        });
        true
    }
}

/// [`Spawner`] as the steps' starter.
struct Starts(Arc<Spawner>);

impl StartOn for Starts {
    fn start_on<'a>(
        &'a self,
        _machine: &'a str,
        stack: &'a str,
        trigger: &'a Trigger,
        key: &'a str,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = PortResult<Started>> + Send + 'a>> {
        Box::pin(async move {
            let new = self.0.spawn(stack, trigger, key);
            let name = stacksync::naming::execution_name(stack, trigger.kind.as_str(), key);
            Ok(Started {
                stack: stack.to_owned(),
                execution_arn: format!("local:{name}"),
                execution_name: name,
                new,
            })
        })
    }
}

fn is_task(state: &str) -> bool {
    matches!(
        state,
        "FetchArtifact"
            | "UploadTemplate"
            | "ChangeSet"
            | "PollStatus"
            | "DeleteStack"
            | "RecordFailure"
    )
}

/// A fleet of `accounts` × `regions` (each region a wave of its own when
/// `accounts` is at most `MAX_CONCURRENT`).
async fn installation(
    spawner: &Arc<Spawner>,
    accounts: u64,
    regions: &[&str],
) -> (Arc<BenchSteps>, Vec<String>) {
    let registry = MemoryRegistry::new();
    let accounts: Vec<String> = (0..accounts)
        .map(|i| format!("{}", 100_000_000_000 + i))
        .collect();
    let yaml = format!(
        "stacks:\n  - name: base\n    source: {{git: '{URL}', path: t.yaml}}\n    \
         assumeRoleArn: 'arn:aws:iam::{{account}}:role/deploy'\n    \
         targets: {{accounts: {accounts:?}, regions: {regions:?}}}\n    \
         rollout: {{maxConcurrent: {MAX_CONCURRENT}, order: {regions:?}}}\n"
    );
    let desired = parse_manifest("stacks.yaml", &yaml).unwrap();
    let units = Default::default();
    let plan = plan_with_fleets(&desired, &units, &[], false, None, Writer::Cli).unwrap();
    let now = now_millis();
    stacksync::registry::apply_plan(&registry, &plan, now, |_| {})
        .await
        .unwrap();
    stacksync::triggers::fleets::record_fleets(&registry, &desired, &units, false, now)
        .await
        .unwrap();
    let sources = MemorySources::new();
    sources.commit(
        URL,
        "main",
        HEAD,
        &[("t.yaml", b"Resources:\n  Q:\n    Type: AWS::SQS::Queue\n")],
    );
    let steps = Steps {
        registry: registry.clone(),
        blobs: MemoryBlobs::new(),
        cloudformation: PerTarget::default(),
        sources,
        config: StepConfig {
            template_url_base: "https://bucket.s3.us-east-1.amazonaws.com".into(),
            bucket: "bucket".into(),
            local: true,
            installation: stacksync::fakes::TEST_INSTALLATION.into(),
            policy: Default::default(),
            answer_url: None,
            rules: None,
            stack_events: None,
            windows: Vec::new(),
            clock: Default::default(),
            max_runs_per_account: None,
            home_region: None,
        },
        notices: Default::default(),
        rule_cache: Default::default(),
        wakes: stacksync::ports::Wakes::none(),
        starter: RunStarter::by(Arc::new(Starts(spawner.clone()))),
    };
    let names = plan
        .changes
        .iter()
        .map(|c| c.name.clone())
        .filter(|n| n.starts_with("base-"))
        .collect();
    (Arc::new(steps), names)
}

/// Starts every target of `accounts` × `regions` at once (as a push does)
/// and waits for every run: the simulated seconds it took, the steps, the
/// targets, the figures.
async fn rollout(
    accounts: u64,
    regions: &[&str],
) -> (f64, Arc<BenchSteps>, Vec<String>, Arc<Spawner>) {
    let spawner = Arc::new(Spawner::default());
    let (steps, names) = installation(&spawner, accounts, regions).await;
    let _ = spawner.steps.set(steps.clone());
    let _ = spawner.machine.set(reconcile_machine().unwrap());
    let started = Instant::now();
    let push = Trigger::of(TriggerKind::Webhook);
    for name in &names {
        spawner.spawn(name, &push, HEAD);
    }
    while spawner.running.load(Ordering::SeqCst) > 0 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (
        started.elapsed().as_secs_f64() * SPEEDUP,
        steps,
        names,
        spawner,
    )
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    // One target alone: what one run takes, its own waits included.
    let (alone, ..) = rollout(1, &["us-east-1"]).await;
    let (took, steps, names, spawner) = rollout(ACCOUNTS, &["us-east-1", "eu-west-1"]).await;
    let ready = names
        .iter()
        .filter(|n| {
            steps
                .registry
                .entry(n)
                .is_some_and(|e| e.status.phase == Phase::Ready)
        })
        .count();
    let f = spawner.figures.lock().unwrap();
    let waves = names.len().div_ceil(MAX_CONCURRENT);
    let ideal = waves as f64 * OPERATION_S;
    let chained = waves as f64 * alone;
    println!(
        "| targets | maxConcurrent | waves | operation | rollout (simulated) | ideal (waves × operation) | over ideal | one target's run alone | waves × that | over it | executions | transitions | Lambda invocations | Ready |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    println!(
        "| {} | {MAX_CONCURRENT} | {waves} | {OPERATION_S:.0} s | {took:.0} s | {ideal:.0} s | {:+.1}% | {alone:.0} s | {chained:.0} s | {:+.1}% | {} | {} | {} | {ready} |",
        names.len(),
        (took / ideal - 1.0) * 100.0,
        (took / chained - 1.0) * 100.0,
        f.executions,
        f.transitions,
        f.invocations,
    );
}
