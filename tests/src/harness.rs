//! Running the reconcile state machine in-process against the emulator, as
//! `stacksync reconcile --local` does, with hooks for tests: a counting
//! source fetcher, any CloudFormation port, and sped-up waits.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};
use stacksync::adapters::cloudformation::SdkCloudFormationFactory;
use stacksync::adapters::s3::S3Store;
use stacksync::adapters::sources::Sources;
use stacksync::asl::{AslError, Outcome, Progress, RunOptions, StateMachine, TaskRunner};
use stacksync::clock::now_millis;
use stacksync::content::Wanted;
use stacksync::manifest::parse_manifest;
use stacksync::ports::{CloudFormationFactory, FetchError, Files, SourceFetcher, SourceLocation};
use stacksync::reconcile::asl_runner::reconcile_machine;
use stacksync::reconcile::steps::StepName;
use stacksync::reconcile::steps::{Steps, With};
use stacksync::registry::StackEntry;
use stacksync::registry::plan::plan_apply;
use stacksync::registry::{Entries, Registry, Specs};
use stacksync::wiring::sdk_steps;

use crate::counted::CallCounter;
use crate::iam::{as_function, as_installation};
use crate::scripted::{ScriptedCloudFormation, recorded};
use crate::{Emulator, unique_name};

/// The steps as the deployed state machine runs them: each Task state as its
/// own function, so the AWS calls it makes are recorded under that
/// function's role (the IAM conformance test).
#[derive(Debug)]
pub struct AsFunctions<'a, R>(pub &'a R, pub String);

impl<R: TaskRunner> TaskRunner for AsFunctions<'_, R> {
    async fn run(&self, resource: &str, input: Value) -> Result<Value, AslError> {
        let name = resource.strip_prefix("local:").unwrap_or(resource);
        let step = StepName::of_function(name)
            .ok_or_else(|| AslError::new("States.TaskFailed", format!("no function {name}")))?;
        // On the heap: debug builds keep every layer of a step's future in
        // the poll's stack frames, and test threads have 2 MiB.
        let run = as_installation(self.1.clone(), self.0.run(resource, input));
        Box::pin(as_function(step.function(), run)).await
    }

    async fn wait_for_token(
        &self,
        token: &str,
        timeout: std::time::Duration,
    ) -> Result<Value, AslError> {
        self.0.wait_for_token(token, timeout).await
    }
}

/// A [`SourceFetcher`] that counts what it is asked (clones share the counts).
#[derive(Debug, Clone)]
pub struct Counting<S> {
    pub inner: S,
    pub resolves: std::sync::Arc<AtomicUsize>,
    pub fetches: std::sync::Arc<AtomicUsize>,
}

impl<S> Counting<S> {
    pub fn new(inner: S) -> Self {
        Self {
            inner,
            resolves: std::sync::Arc::default(),
            fetches: std::sync::Arc::default(),
        }
    }
}

impl<S: SourceFetcher> SourceFetcher for Counting<S> {
    async fn resolve(
        &self,
        source: &SourceLocation,
        reference: &str,
    ) -> Result<String, FetchError> {
        self.resolves.fetch_add(1, Ordering::SeqCst);
        self.inner.resolve(source, reference).await
    }

    async fn fetch(
        &self,
        source: &SourceLocation,
        revision: &str,
        wanted: &Wanted,
    ) -> Result<Files, FetchError> {
        self.fetches.fetch_add(1, Ordering::SeqCst);
        self.inner.fetch(source, revision, wanted).await
    }
}

/// The steps a harness runs: the emulator's registry and bucket, the
/// sources counted, the CloudFormation of `F`.
pub type HarnessSteps<F> = Steps<With<Registry, S3Store, F, Counting<Sources>>>;

/// The steps and the machine, against the emulator's DynamoDB and S3.
#[derive(Debug)]
pub struct Harness<F: CloudFormationFactory> {
    pub steps: HarnessSteps<F>,
    pub machine: StateMachine,
    /// States entered and waits, of every run so far.
    pub events: Mutex<Vec<Progress>>,
    /// Every state's data as each state was entered (JSON text), for
    /// tests that look for what must never be in an execution's state.
    pub data: Mutex<Vec<String>>,
    /// The CloudFormation calls of a [`Backend`](crate::backend::Backend)'s
    /// harness (none counted for the others).
    pub cloudformation_calls: CallCounter,
}

impl Harness<SdkCloudFormationFactory> {
    /// With the emulator's CloudFormation.
    pub async fn new(prefix: &str) -> Self {
        let emulator = Emulator::shared();
        Harness::on(prefix, &emulator.sdk_config(), emulator.endpoint()).await
    }

    /// With the CloudFormation and S3 of `config`, served at `endpoint` (a
    /// [`Backend`](crate::backend::Backend)'s); the registry and the event
    /// bus in the emulator.
    pub async fn on(prefix: &str, config: &aws_config::SdkConfig, endpoint: &str) -> Self {
        let emulator = Emulator::shared();
        let steps = steps_of(
            config,
            emulator.new_registry(prefix).await,
            prefix,
            endpoint,
        )
        .await;
        // Every run's events go to the emulator's default bus, as a deployed
        // installation's do (recorded for the IAM test like every call).
        let steps = Steps {
            notices: stacksync::wiring::event_bus(&emulator.sdk_config(), "default"),
            ..steps
        };
        Harness::with_cloudformation(steps, |real| real)
    }

    /// With every AWS call made through `config` (a fault proxy's endpoint,
    /// its own timeouts), the registry's table and the bucket in the
    /// emulator; CloudFormation reads templates from the emulator's own S3.
    pub async fn through(prefix: &str, config: &aws_config::SdkConfig) -> Self {
        let emulator = Emulator::shared();
        let table = emulator.new_registry(prefix).await.table().to_owned();
        let registry = Registry::new(aws_sdk_dynamodb::Client::new(config), table);
        let steps = steps_of(config, registry, prefix, emulator.endpoint()).await;
        Harness::with_cloudformation(steps, |real| real)
    }
}

/// The steps as the local runner builds them, over `registry`, with the
/// CloudFormation and S3 of `config` (an emulator's, at `endpoint`) and a
/// bucket of their own.
async fn steps_of(
    config: &aws_config::SdkConfig,
    registry: Registry,
    prefix: &str,
    endpoint: &str,
) -> stacksync::wiring::SdkSteps {
    sdk_steps(
        config,
        registry,
        &unique_name(prefix).to_lowercase(),
        Some(endpoint),
        // As the local runner: the tests' Git servers speak git:// and
        // http:// on 127.0.0.1.
        true,
    )
    .await
    .expect("steps built")
}

impl Harness<ScriptedCloudFormation> {
    /// Real registry, bucket and Git; `cloudformation` (a scripted fake)
    /// instead of the emulator's, its calls recorded for the IAM test.
    pub async fn with_port(prefix: &str, cloudformation: ScriptedCloudFormation) -> Self {
        let real = Harness::new(prefix).await;
        let mut config = real.steps.config;
        // The fake's stacks were made by this installation.
        config.installation = stacksync::fakes::TEST_INSTALLATION.into();
        let steps = Steps {
            registry: real.steps.registry,
            blobs: real.steps.blobs,
            cloudformation: real.steps.cloudformation,
            sources: real.steps.sources.inner,
            config,
            notices: real.steps.notices,
            rule_cache: real.steps.rule_cache,
            wakes: real.steps.wakes,
            starter: real.steps.starter,
        };
        Harness::with_cloudformation(steps, |_| recorded(cloudformation))
    }
}

impl<F: CloudFormationFactory> Harness<F> {
    /// With another CloudFormation port, everything else real.
    pub fn with_cloudformation<G: CloudFormationFactory>(
        steps: Steps<With<Registry, S3Store, G, Sources>>,
        replace: impl FnOnce(G) -> F,
    ) -> Self {
        Harness {
            steps: Steps {
                registry: steps.registry,
                blobs: steps.blobs,
                cloudformation: replace(steps.cloudformation),
                sources: Counting::new(steps.sources),
                config: steps.config,
                notices: steps.notices,
                rule_cache: steps.rule_cache,
                wakes: steps.wakes,
                starter: steps.starter,
            },
            machine: reconcile_machine().expect("the reconcile definition loads"),
            events: Mutex::new(Vec::new()),
            data: Mutex::new(Vec::new()),
            cloudformation_calls: CallCounter::new("cloudformation"),
        }
    }

    /// Applies a stacks file (panics on a bad one: tests write good ones).
    pub async fn apply(&self, yaml: &str) {
        let specs = parse_manifest("test.yaml", yaml).expect("valid stacks file");
        let current = self.steps.registry.list().await.expect("list");
        let plan = plan_apply(&specs, &current, true).expect("no conflicts");
        self.steps
            .registry
            .apply(&plan, now_millis())
            .await
            .expect("applied");
    }

    /// Runs one execution, waits sped up 1000 times.
    pub async fn reconcile(&self, name: &str) -> Outcome {
        self.reconcile_with(
            name,
            json!({"stackId": name, "trigger": {"kind": "manual"}}),
        )
        .await
    }

    /// Runs one execution, its waits sped up `speedup` times (1: real
    /// time): its execution name (the lease owner) and outcome.
    pub async fn reconcile_at(&self, name: &str, speedup: f64) -> (String, Outcome) {
        let input = json!({"stackId": name, "trigger": {"kind": "manual"}});
        let options = RunOptions {
            speedup,
            ..RunOptions::default()
        };
        self.execute_with(&self.functions(), name, input, options)
            .await
    }

    /// Runs one execution with the given input.
    pub async fn reconcile_with(&self, name: &str, input: Value) -> Outcome {
        self.execute(&self.functions(), name, input).await.1
    }

    /// Runs one execution of `name` (a manual trigger) whose Task states
    /// `runner` runs: its execution name (the lease owner) and outcome.
    pub async fn reconcile_by<T: TaskRunner>(&self, runner: &T, name: &str) -> (String, Outcome) {
        let input = json!({"stackId": name, "trigger": {"kind": "manual"}});
        self.execute(runner, name, input).await
    }

    /// One execution of the machine, its Task states run by `runner`, waits
    /// sped up 1000 times: its name and outcome. (The machine's future is
    /// boxed: inline, it makes every test's own future, and the stack its
    /// polls need, hundreds of KB larger in debug builds, whose test threads
    /// have 2 MiB.)
    async fn execute<T: TaskRunner>(
        &self,
        runner: &T,
        name: &str,
        input: Value,
    ) -> (String, Outcome) {
        let options = RunOptions {
            speedup: 1000.0,
            ..RunOptions::default()
        };
        self.execute_with(runner, name, input, options).await
    }

    async fn execute_with<T: TaskRunner>(
        &self,
        runner: &T,
        name: &str,
        input: Value,
        options: RunOptions,
    ) -> (String, Outcome) {
        let execution = unique_name(&format!("run-{name}"));
        let mut seen = Vec::new();
        let mut data = Vec::new();
        let outcome = Box::pin(self.machine.execute(
            runner,
            &execution,
            input,
            &options,
            &mut |event, state| {
                seen.push(event.clone());
                data.push(state.to_string());
            },
        ))
        .await;
        self.events.lock().expect("events").extend(seen);
        self.data.lock().expect("data").extend(data);
        (execution, outcome)
    }

    /// Runs that wait on their stack park until its CloudFormation event,
    /// as in a deployment whose events function gets them
    /// ([`Harness::events_handler`] delivers them).
    pub fn with_stack_events(mut self) -> Self {
        self.steps.config.stack_events = Some("us-east-1".into());
        self.steps.wakes = stacksync::ports::Wakes::by(std::sync::Arc::new(
            crate::parked::LocalWakes(self.steps.registry.clone()),
        ));
        self
    }

    /// The events function of this installation: it wakes the runs parked
    /// on a stack; its starts are recorded, not made.
    pub fn events_handler(
        &self,
    ) -> stacksync::triggers::events::handler::EventHandler<
        Registry,
        stacksync::fakes::RecordingStarter,
    > {
        use stacksync::triggers::events::wake::TokenWaker;
        stacksync::triggers::events::handler::EventHandler {
            registry: self.steps.registry.clone(),
            starter: stacksync::fakes::RecordingStarter::new(),
            region: "us-east-1".into(),
            registry_sources: None,
            drift: None,
            waker: Some(std::sync::Arc::new(TokenWaker {
                blobs: self.steps.blobs.clone(),
                wakes: stacksync::ports::Wakes::by(std::sync::Arc::new(crate::parked::LocalWakes(
                    self.steps.registry.clone(),
                ))),
            })),
        }
    }

    /// The steps as the deployed machine runs them (each as its function).
    pub fn functions(&self) -> AsFunctions<'_, HarnessSteps<F>> {
        AsFunctions(&self.steps, self.steps.config.installation.clone())
    }

    /// Runs what is due among `names`, as the scheduler does, until
    /// nothing is: each round starts every due stack (here one after the
    /// other, in name order), as the scheduler starts a batch at once. The
    /// executions, in order, each with the states it entered. Panics on a
    /// run that does not succeed, and after 10 rounds.
    pub async fn run_due(&self, names: &[&str]) -> Vec<(String, usize)> {
        let mut ran = Vec::new();
        for _ in 0..10 {
            let entries = self.steps.registry.list().await.expect("list");
            let now = now_millis();
            let due: Vec<String> = entries
                .iter()
                .filter(|e| names.contains(&e.name.as_str()))
                .filter(|e| e.status.times.next_reconcile_at.is_some_and(|t| t.0 <= now))
                .map(|e| e.name.clone())
                .collect();
            if due.is_empty() {
                return ran;
            }
            for name in due {
                let outcome = self.reconcile(&name).await;
                assert!(
                    matches!(outcome, Outcome::Succeeded(_)),
                    "{name}: {outcome:?}: {:?}",
                    self.entry(&name).await.status.message
                );
                let states = self.take_states().len();
                ran.push((name, states));
            }
        }
        panic!("still due after 10 rounds: {ran:?}");
    }

    /// The entry as it is now.
    pub async fn entry(&self, name: &str) -> StackEntry {
        self.steps
            .registry
            .get(name)
            .await
            .expect("get")
            .expect("registered")
    }

    /// What the run of `name` waits for, once it does (polls the registry).
    pub async fn awaiting(&self, name: &str) -> stacksync::status::AwaitingApproval {
        loop {
            if let Some(awaiting) = self.entry(name).await.status.approval.awaiting {
                return awaiting;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    /// Approves what the run of `name` waits for, through the registry with
    /// the token the run kept (never in the status), as `stacksync
    /// approve` answers a local run.
    pub async fn approve(&self, name: &str, awaiting: &stacksync::status::AwaitingApproval) {
        use stacksync::ports::Blobs as _;
        use stacksync::registry::{Answer, Answers as _};
        let output = serde_json::to_value(stacksync::reconcile::run::ApprovalAnswer {
            change_set: awaiting.change_set.clone(),
            by: Some("tester".into()),
            at: now_millis(),
        })
        .expect("an answer is JSON");
        let key = stacksync::naming::approval_token_key(name, &awaiting.run);
        let token = self
            .steps
            .blobs
            .get(&key, 16 * 1024)
            .await
            .expect("the run kept its token");
        let token = String::from_utf8(token).expect("a token is text");
        let answer = Answer::Success { output };
        let answered = self.steps.registry.answer(&token, &answer, 0).await;
        assert!(answered.expect("answered"), "the run took the answer");
    }

    /// The names of the states entered, in order, since the last call.
    pub fn take_states(&self) -> Vec<String> {
        std::mem::take(&mut *self.events.lock().expect("events"))
            .into_iter()
            .filter_map(|e| match e {
                Progress::StateEntered { name, .. } => Some(name),
                _ => None,
            })
            .collect()
    }

    /// The waits (seconds) since the last call.
    pub fn take_waits(&self) -> Vec<f64> {
        std::mem::take(&mut *self.events.lock().expect("events"))
            .into_iter()
            .filter_map(|e| match e {
                Progress::Waiting { seconds, .. } => Some(seconds),
                _ => None,
            })
            .collect()
    }
}
