//! "CloudFormation done → run Ready": how long after CloudFormation ends an
//! operation the run that waits on it ends, polling (today's `pollInterval`,
//! ×1.5 to 60 s) and parked until the stack's event (the fallback poll
//! after 30 s, doubling to 300 s), for operations of 10 s, 60 s and 300 s;
//! and the state transitions and Lambda invocations of each run.
//!
//! The real state machine (the local interpreter) and the real steps, on
//! the fakes in memory (registry, bucket, Git, the scripted CloudFormation
//! whose operation lasts a set time); waits and operations scaled by
//! `SPEEDUP`; the stack's event delivered to the real events handler
//! `DELIVERY_S` after the operation ends (EventBridge's typical delivery is
//! well under a second). A task token's answer reaches the waiting run at
//! once (Step Functions' does; the local runner's registry answers are
//! polled every 250 ms and would blur the figures). Prints Markdown.

#![allow(clippy::unwrap_used)] // a benchmark: a failed unwrap is a failed measurement

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use stacksync::asl::{AslError, Progress, RunOptions, TaskRunner};
use stacksync::clock::{now_millis, rfc3339};
use stacksync::fakes::{
    MemoryBlobs, MemorySources, RecordingStarter, ScriptedCloudFormation, ready, stack_id,
};
use stacksync::manifest::parse_manifest;
use stacksync::ports::{Answer, PortResult, TaskTokens, Wakes};
use stacksync::reconcile::asl_runner::reconcile_machine;
use stacksync::reconcile::steps::{StepConfig, Steps, With};
use stacksync::registry::Specs;
use stacksync::registry::memory::MemoryRegistry;
use stacksync::registry::plan::plan_apply;
use stacksync::stack_status::StackStatus;
use stacksync::triggers::events::from_value;
use stacksync::triggers::events::handler::EventHandler;
use stacksync::triggers::events::wake::TokenWaker;
use tokio::sync::Notify;

const SPEEDUP: f64 = 100.0;
const RUNS: usize = 20;
const DELIVERY_S: f64 = 0.5;
const URL: &str = "https://git.example/infra.git";
const HEAD: &str = "0123456789abcdef0123456789abcdef01234567";

type BenchSteps = Steps<With<MemoryRegistry, MemoryBlobs, ScriptedCloudFormation, MemorySources>>;

/// Task tokens answered in memory, the waiting run told at once.
#[derive(Debug, Default)]
struct Tokens {
    answers: Mutex<HashMap<String, Value>>,
    notify: Notify,
}

/// [`Tokens`], shared.
#[derive(Debug, Clone, Default)]
struct SharedTokens(Arc<Tokens>);

impl TaskTokens for SharedTokens {
    async fn answer_token(&self, token: &str, answer: &Answer) -> PortResult<bool> {
        let Answer::Success { output } = answer else {
            return Ok(false);
        };
        let new = self
            .0
            .answers
            .lock()
            .unwrap()
            .insert(token.to_owned(), output.clone())
            .is_none();
        self.0.notify.notify_waiters();
        Ok(new)
    }
}

/// The steps as the Task states' resources; token waits on [`Tokens`].
struct Runner<'a> {
    steps: &'a BenchSteps,
    tokens: Arc<Tokens>,
}

impl TaskRunner for Runner<'_> {
    /// The steps as the local runner calls them (`asl_runner`).
    async fn run(&self, resource: &str, input: Value) -> Result<Value, AslError> {
        Box::pin(TaskRunner::run(self.steps, resource, input)).await
    }

    async fn wait_for_token(&self, token: &str, timeout: Duration) -> Result<Value, AslError> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.tokens.notify.notified();
            if let Some(output) = self.tokens.answers.lock().unwrap().remove(token) {
                return Ok(output);
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return Err(AslError::new("States.Timeout", "no answer"));
            }
        }
    }
}

/// One run's figures: seconds from the operation's end to the run's end
/// (simulated), state transitions, Lambda invocations, stack events handled.
struct Figures {
    late_s: f64,
    transitions: usize,
    invocations: usize,
    events: usize,
}

/// One installation in memory with `name` registered, whose operation
/// lasts `operation_s` (simulated): its steps, its events handler, its
/// CloudFormation and the tokens its runs wait on.
async fn installation(
    name: &str,
    operation_s: f64,
    events: bool,
) -> (
    BenchSteps,
    EventHandler<MemoryRegistry, RecordingStarter>,
    ScriptedCloudFormation,
    Arc<Tokens>,
) {
    let registry = MemoryRegistry::new();
    let yaml = format!(
        "stacks:\n  - name: {name}\n    source: {{git: '{URL}', path: t.yaml}}\n    pollInterval: 5s\n"
    );
    let specs = parse_manifest("stacks.yaml", &yaml).unwrap();
    let plan = plan_apply(&specs, &[], true).unwrap();
    registry.apply(&plan, now_millis()).await.unwrap();
    let sources = MemorySources::new();
    sources.commit(
        URL,
        "main",
        HEAD,
        &[("t.yaml", b"Resources:\n  Q:\n    Type: AWS::SQS::Queue\n")],
    );
    let cfn = ScriptedCloudFormation::with_stack(&[None]);
    {
        let mut s = cfn.script();
        s.change_set = [ready()].into_iter().collect();
        s.after_execute = vec![
            Some(StackStatus::CreateInProgress),
            Some(StackStatus::CreateComplete),
        ];
        s.operation_lasts = Some(Duration::from_secs_f64(operation_s / SPEEDUP));
    }
    let tokens = Arc::new(Tokens::default());
    let blobs = MemoryBlobs::new();
    let steps: BenchSteps = Steps {
        registry: registry.clone(),
        blobs: blobs.clone(),
        cloudformation: cfn.clone(),
        sources,
        config: StepConfig {
            template_url_base: "https://bucket.s3.us-east-1.amazonaws.com".into(),
            bucket: "bucket".into(),
            local: true,
            installation: stacksync::fakes::TEST_INSTALLATION.into(),
            policy: Default::default(),
            answer_url: None,
            rules: None,
            stack_events: events.then(|| "us-east-1".to_owned()),
            windows: Vec::new(),
            clock: Default::default(),
            max_runs_per_account: None,
            home_region: None,
        },
        notices: Default::default(),
        rule_cache: Default::default(),
        wakes: Wakes::by(Arc::new(SharedTokens(tokens.clone()))),
        starter: Default::default(),
    };
    let handler = EventHandler {
        registry: registry.clone(),
        starter: RecordingStarter::new(),
        region: "us-east-1".into(),
        registry_sources: None,
        drift: None,
        waker: Some(Arc::new(TokenWaker {
            blobs,
            wakes: Wakes::by(Arc::new(SharedTokens(tokens.clone()))),
        })),
    };
    (steps, handler, cfn, tokens)
}

async fn one_run(operation_s: f64, events: bool, i: usize) -> Figures {
    let name = format!("bench{i}");
    let (steps, handler, cfn, tokens) = installation(&name, operation_s, events).await;
    let registry = steps.registry.clone();
    // CloudFormation: the stack's event, `DELIVERY_S` after the operation ends.
    let delivered = Arc::new(Mutex::new(0usize));
    let deliver = {
        let (cfn, delivered, name) = (cfn.clone(), delivered.clone(), name.clone());
        async move {
            let settles = loop {
                if let Some(at) = cfn.script().settles_at {
                    break at;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            };
            tokio::time::sleep_until(
                (settles + Duration::from_secs_f64(DELIVERY_S / SPEEDUP)).into(),
            )
            .await;
            if !events {
                return;
            }
            let id = stack_id(&name, cfn.script().generation);
            let event = from_value(json!({
                "version": "0", "id": format!("e-{name}"), "account": "123456789012",
                "time": rfc3339(now_millis()), "region": "us-east-1",
                "detail-type": "CloudFormation Stack Status Change", "source": "aws.cloudformation",
                "resources": [id],
                "detail": {"stack-id": id, "status-details": {"status": "CREATE_COMPLETE"}}
            }))
            .unwrap();
            handler.handle(&event, now_millis()).await.unwrap();
            *delivered.lock().unwrap() += 1;
        }
    };
    let deliverer = tokio::spawn(deliver);
    let machine = reconcile_machine().unwrap();
    let runner = Runner {
        steps: &steps,
        tokens,
    };
    let options = RunOptions {
        speedup: SPEEDUP,
        ..RunOptions::default()
    };
    let (mut transitions, mut invocations) = (0, 0);
    let input = json!({"stackId": name, "trigger": {"kind": "manual"}});
    let outcome = machine
        .execute(
            &runner,
            &format!("run-{i}"),
            input,
            &options,
            &mut |event, _| {
                if let Progress::StateEntered { name, .. } = event {
                    transitions += 1;
                    if is_task(name) {
                        invocations += 1;
                    }
                }
            },
        )
        .await;
    let ended = Instant::now();
    assert!(
        matches!(outcome, stacksync::asl::Outcome::Succeeded(_)),
        "{outcome:?}"
    );
    let settled = cfn.script().settles_at.expect("executed");
    let _ = deliverer.await;
    assert!(registry.entry(&name).unwrap().lease.is_none());
    Figures {
        late_s: ended.saturating_duration_since(settled).as_secs_f64() * SPEEDUP,
        transitions,
        invocations,
        events: *delivered.lock().unwrap(),
    }
}

/// The states that invoke a Lambda function.
fn is_task(state: &str) -> bool {
    matches!(
        state,
        "FetchArtifact"
            | "UploadTemplate"
            | "ChangeSet"
            | "PollStatus"
            | "WaitForEvent"
            | "DeleteStack"
            | "RecordFailure"
            | "AwaitApproval"
    )
}

fn quantile(values: &mut [f64], q: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    values[((values.len() as f64 * q).ceil() as usize).saturating_sub(1)]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    println!("## CloudFormation done → run `Ready`: polling vs the stack's event");
    println!();
    println!(
        "{RUNS} creates per row, each operation within ±10% of its length (simulated time, ×{SPEEDUP} faster; the event delivered {DELIVERY_S} s after the operation ends). Transitions and Lambda invocations: the whole run (fetch, upload, change set, waits), as Step Functions bills them."
    );
    println!();
    println!(
        "| operation | waits | late p50 | late p99 | transitions | Lambda invocations | stack events read |"
    );
    println!("|---|---|---|---|---|---|---|");
    for operation in [10.0, 60.0, 300.0] {
        for events in [false, true] {
            let mut late = Vec::new();
            let (mut transitions, mut invocations, mut handled) = (0, 0, 0);
            for i in 0..RUNS {
                let length = operation * (0.9 + 0.2 * (i as f64) / (RUNS as f64 - 1.0));
                let f = one_run(length, events, i).await;
                late.push(f.late_s);
                transitions += f.transitions;
                invocations += f.invocations;
                handled += f.events;
            }
            println!(
                "| {operation:.0} s | {} | {:.1} s | {:.1} s | {:.1} | {:.1} | {:.1} |",
                if events { "parked, event" } else { "polling" },
                quantile(&mut late, 0.5),
                quantile(&mut late, 0.99),
                transitions as f64 / RUNS as f64,
                invocations as f64 / RUNS as f64,
                handled as f64 / RUNS as f64,
            );
        }
    }
}
