//! An upgrade in the middle of a run: the state an execution carries was
//! written by the code deployed before, and the steps of the new code read
//! it and finish the run.
//!
//! `tests/fixtures/runstate/create.json` holds the input of each step of a
//! create as the code of c593395 wrote it (its values that depend on the
//! world, such as names, keys and hashes, replaced by `{{field}}`). A run of
//! today's code must give each step the same JSON (the wire shape is kept;
//! a field at its default, `false` or `0`, may be left out: both read it so;
//! a field added since, in `ADDED`, is not compared),
//! and a run whose poll-status is handed the old JSON instead of its own
//! must end `Ready`.
//!
//! `STACKSYNC_WRITE_FIXTURE=1` writes the fixture from the code under test.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test
#![recursion_limit = "256"]

use std::sync::Mutex;
use std::time::Duration;

use serde_json::{Map, Value};
use stacksync::asl::{AslError, Outcome, TaskRunner};
use stacksync::registry::Entries;
use stacksync::status::Phase;
use stacksync_testkit::git::GitRepo;
use stacksync_testkit::harness::Harness;
use stacksync_testkit::{repo_root, unique_name};

const QUEUE: &[u8] = b"Resources:\n  Queue:\n    Type: AWS::SQS::Queue\n";

/// The fields whose values depend on the world (names, times, keys,
/// hashes, ids), put back from the run at hand.
const WORLD: [&str; 14] = [
    "stackId",
    "execution",
    "executionArn",
    "startedAt",
    "revision",
    "artifactKey",
    "templateKey",
    "templateVersion",
    "parametersKey",
    "desiredHash",
    "changeSetName",
    "changeSetStackId",
    "waitSeconds",
    "polls",
];

/// A step's input with its world's values replaced by `{{field}}`.
fn abstracted(input: &Value) -> Value {
    let mut out = input.clone();
    if let Some(map) = out.as_object_mut() {
        for field in WORLD {
            if let Some(v) = map.get_mut(field) {
                *v = Value::String(format!("{{{{{field}}}}}"));
            }
        }
    }
    out
}

/// A state without the fields that hold their default (`false`, `0`):
/// either code reads a missing one as that default.
fn without_defaults(state: &Value) -> Value {
    let mut out = state.clone();
    if let Some(map) = out.as_object_mut() {
        map.retain(|k, v| {
            v.as_bool() != Some(false) && v.as_u64() != Some(0) && !ADDED.contains(&k.as_str())
        });
    }
    out
}

/// Fields the wire gained since the fixture, left out of the comparison
/// (nothing the code before wrote may be dropped or renamed; what it did
/// not write, it does not read): `parks`, set by the definition's `Start`
/// since issue 37 (an execution without it, as the fixture's, polls);
/// `slot`, the run slot artifact-fetch took (issue 39: a state without it,
/// as the fixture's, gives back the slot of its stack's account and region)
/// and `waitsForSlots`, set by the definition's `Start` (an execution
/// without it never waits for a slot).
const ADDED: &[&str] = &["parks", "slot", "waitsForSlots"];

/// `fixture` with the world's values of `actual` put back (a field the
/// fixture does not have stays absent).
fn concrete(fixture: &Value, actual: &Value) -> Value {
    let mut out = fixture.clone();
    if let (Some(map), Some(from)) = (out.as_object_mut(), actual.as_object()) {
        for field in WORLD {
            if map.contains_key(field) {
                map.insert(
                    field.to_owned(),
                    from.get(field).cloned().unwrap_or(Value::Null),
                );
            }
        }
    }
    out
}

/// Runs the steps, recording each one's first input, and hands the first
/// poll-status after the execution started the fixture's JSON instead of
/// its own.
struct Upgrading<'a, R> {
    inner: &'a R,
    fixture: Option<Map<String, Value>>,
    inputs: Mutex<Vec<(String, Value)>>,
    resumed: Mutex<bool>,
}

/// The key of a step's input in the fixture: the step and what it waits on.
fn key_of(resource: &str, input: &Value) -> String {
    let step = resource.strip_prefix("local:").unwrap_or(resource);
    if input["execute"] == Value::Bool(true) {
        return format!("{step}:execute");
    }
    match input["waitOn"].as_str() {
        Some(on) => format!("{step}:{on}"),
        None => step.to_owned(),
    }
}

impl<R: TaskRunner> TaskRunner for Upgrading<'_, R> {
    async fn run(&self, resource: &str, input: Value) -> Result<Value, AslError> {
        let key = key_of(resource, &input);
        let mut input = input;
        {
            let mut inputs = self.inputs.lock().unwrap();
            if !inputs.iter().any(|(k, _)| *k == key) {
                inputs.push((key.clone(), input.clone()));
            }
        }
        if key == "poll-status:execution"
            && let Some(old) = self.fixture.as_ref().and_then(|f| f.get(&key))
        {
            let mut resumed = self.resumed.lock().unwrap();
            if !*resumed {
                *resumed = true;
                input = concrete(old, &input);
            }
        }
        Box::pin(self.inner.run(resource, input)).await
    }

    async fn wait_for_token(&self, token: &str, timeout: Duration) -> Result<Value, AslError> {
        self.inner.wait_for_token(token, timeout).await
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_state_written_by_the_code_before_is_read_by_todays_and_the_run_ends_ready() {
    let path = repo_root().join("tests/fixtures/runstate/create.json");
    let writing = std::env::var("STACKSYNC_WRITE_FIXTURE").is_ok_and(|v| v == "1");
    let fixture: Option<Map<String, Value>> = if writing {
        None
    } else {
        let text = std::fs::read_to_string(&path).unwrap();
        Some(serde_json::from_str(&text).unwrap())
    };
    let h = Harness::new("upgrade").await;
    let repo = GitRepo::new("upgrade");
    repo.commit(&[("stacks/queue.yaml", QUEUE)], "queue");
    let name = unique_name("up").replace('-', "x");
    h.apply(&format!(
        "stacks:\n  - name: {name}\n    source: {{git: '{}', path: stacks/queue.yaml}}\n",
        repo.file_url()
    ))
    .await;

    let functions = h.functions();
    let runner = Upgrading {
        inner: &functions,
        fixture: fixture.clone(),
        inputs: Mutex::new(Vec::new()),
        resumed: Mutex::new(false),
    };
    let (_, outcome) = h.reconcile_by(&runner, &name).await;
    let entry = h.steps.registry.get(&name).await.unwrap().unwrap();
    assert!(
        matches!(outcome, Outcome::Succeeded(_)),
        "{outcome:?}: {:?}",
        entry.status.message
    );
    assert_eq!(
        entry.status.phase,
        Phase::Ready,
        "{:?}",
        entry.status.message
    );
    assert_eq!(
        entry.status.stack.status.as_deref(),
        Some("CREATE_COMPLETE")
    );

    let inputs = runner.inputs.into_inner().unwrap();
    let keys: Vec<&str> = inputs.iter().map(|(k, _)| k.as_str()).collect();
    for step in [
        "artifact-fetch",
        "template-upload",
        "change-set",
        "poll-status:change-set",
        "change-set:execute",
        "poll-status:execution",
    ] {
        assert!(keys.contains(&step), "{step} not in {keys:?}");
    }
    let written: Map<String, Value> = inputs
        .iter()
        .map(|(k, v)| (k.clone(), abstracted(v)))
        .collect();
    match fixture {
        None => {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            let text = serde_json::to_string_pretty(&written).unwrap();
            std::fs::write(&path, format!("{text}\n")).unwrap();
        }
        Some(old) => {
            assert!(*runner.resumed.lock().unwrap(), "resumed from the old JSON");
            for (key, was) in &old {
                assert_eq!(
                    written.get(key).map(without_defaults),
                    Some(without_defaults(was)),
                    "the input of {key} is not what the code before wrote"
                );
            }
        }
    }
}
