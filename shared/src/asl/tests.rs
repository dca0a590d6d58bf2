use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{Value, json};

use super::path::{get_path, set_path};
use super::*;

/// A runner whose resources answer from a script: "fail:N:Name" fails N times then echoes.
#[derive(Default)]
struct Scripted {
    calls: Mutex<Vec<(String, Value)>>,
}

impl TaskRunner for Scripted {
    async fn run(&self, resource: &str, input: Value) -> Result<Value, AslError> {
        let count = {
            let mut calls = self.calls.lock().unwrap();
            calls.push((resource.to_owned(), input.clone()));
            calls.iter().filter(|(r, _)| r == resource).count()
        };
        let parts: Vec<&str> = resource.split(':').collect();
        match parts.as_slice() {
            ["fail", n, name] if count <= n.parse::<usize>().unwrap() => {
                Err(AslError::new(*name, format!("attempt {count}")))
            }
            ["always-fail", name] => Err(AslError::new(*name, "boom")),
            _ => Ok(json!({"echo": input, "resource": resource})),
        }
    }
}

async fn run(definition: Value, input: Value) -> (Outcome, Vec<String>, Scripted) {
    let machine = StateMachine::load(&definition.to_string(), &BTreeMap::new()).unwrap();
    let runner = Scripted::default();
    let mut seen = Vec::new();
    let options = RunOptions {
        speedup: 1000.0,
        ..RunOptions::default()
    };
    let outcome = machine
        .execute(&runner, "exec-1", input, &options, &mut |event, _| {
            if let Progress::StateEntered { name, .. } = event {
                seen.push(name.clone());
            }
        })
        .await;
    (outcome, seen, runner)
}

/// Runs `definition` on `input` with `options`: how it ended, every event, and the runner.
async fn run_with(
    definition: Value,
    input: Value,
    options: RunOptions,
) -> (Outcome, Vec<Progress>, Scripted) {
    let machine = StateMachine::load(&definition.to_string(), &BTreeMap::new()).unwrap();
    let runner = Scripted::default();
    let mut events = Vec::new();
    let outcome = machine
        .execute(&runner, "exec-1", input, &options, &mut |event, _| {
            events.push(event.clone());
        })
        .await;
    (outcome, events, runner)
}

/// The options of most tests: waits and retry intervals sped up 1000 times.
fn fast() -> RunOptions {
    RunOptions {
        speedup: 1000.0,
        ..RunOptions::default()
    }
}

#[tokio::test]
async fn pass_parameters_read_the_input_and_the_context() {
    let def = json!({"StartAt": "P", "States": {
        "P": {"Type": "Pass", "Parameters": {"id.$": "$.a.b", "exec.$": "$$.Execution.Name", "fixed": 1}, "ResultPath": "$.out", "Next": "S"},
        "S": {"Type": "Succeed"}}});
    let (outcome, _, _) = run(def, json!({"a": {"b": "x"}})).await;
    assert_eq!(
        outcome,
        Outcome::Succeeded(
            json!({"a": {"b": "x"}, "out": {"id": "x", "exec": "exec-1", "fixed": 1}})
        )
    );
}

#[tokio::test]
async fn choices_route_on_the_input_and_fall_to_the_default() {
    let def = |next: &str| {
        json!({"StartAt": "C", "States": {
        "C": {"Type": "Choice", "Choices": [
            {"Variable": "$.next", "StringEquals": "a", "Next": "A"},
            {"And": [{"Variable": "$.n", "NumericGreaterThan": 1}, {"Not": {"Variable": "$.flag", "BooleanEquals": true}}], "Next": "B"}],
         "Default": "D"},
        "A": {"Type": "Succeed"}, "B": {"Type": "Succeed"}, "D": {"Type": "Fail", "Error": "E", "Cause": next}}})
    };
    assert_eq!(run(def("a"), json!({"next": "a"})).await.1, ["C", "A"]);
    assert_eq!(
        run(def("b"), json!({"next": "z", "n": 2, "flag": false}))
            .await
            .1,
        ["C", "B"]
    );
    let (outcome, seen, _) = run(def("d"), json!({"next": "z", "n": 0, "flag": false})).await;
    assert_eq!(seen, ["C", "D"]);
    assert_eq!(outcome, Outcome::Failed(AslError::new("E", "d")));
}

#[tokio::test]
async fn transient_errors_are_retried_and_then_succeed() {
    let def = json!({"StartAt": "T", "States": {
        "T": {"Type": "Task", "Resource": "fail:2:Throttled", "Retry": [{"ErrorEquals": ["Throttled"], "IntervalSeconds": 1, "MaxAttempts": 3, "BackoffRate": 2.0, "JitterStrategy": "FULL"}], "End": true}}});
    let (outcome, _, runner) = run(def, json!({"x": 1})).await;
    assert!(matches!(outcome, Outcome::Succeeded(_)), "{outcome:?}");
    assert_eq!(runner.calls.lock().unwrap().len(), 3);
}

#[tokio::test]
async fn exhausted_retries_go_to_the_catcher_with_the_error_at_its_result_path() {
    let def = json!({"StartAt": "T", "States": {
        "T": {"Type": "Task", "Resource": "always-fail:Boom", "Retry": [{"ErrorEquals": ["Boom"], "IntervalSeconds": 1, "MaxAttempts": 2}],
              "Catch": [{"ErrorEquals": ["Other"], "Next": "Nope"}, {"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "Handler"}], "Next": "Nope"},
        "Handler": {"Type": "Pass", "End": true},
        "Nope": {"Type": "Fail"}}});
    let (outcome, seen, runner) = run(def, json!({"keep": true})).await;
    assert_eq!(seen, ["T", "Handler"]);
    assert_eq!(
        runner.calls.lock().unwrap().len(),
        3,
        "one try and two retries"
    );
    assert_eq!(
        outcome,
        Outcome::Succeeded(json!({"keep": true, "error": {"Error": "Boom", "Cause": "boom"}}))
    );
}

#[tokio::test]
async fn waits_take_their_seconds_from_the_input() {
    let def = json!({"StartAt": "W", "States": {"W": {"Type": "Wait", "SecondsPath": "$.s", "Next": "S"}, "S": {"Type": "Succeed"}}});
    let started = std::time::Instant::now();
    let (outcome, _, _) = run(def.clone(), json!({"s": 2})).await;
    assert!(matches!(outcome, Outcome::Succeeded(_)));
    assert!(
        started.elapsed() >= Duration::from_millis(2),
        "2 s at speed-up 1000"
    );
    let (outcome, _, _) = run(def, json!({"s": "soon"})).await;
    assert!(matches!(outcome, Outcome::Failed(AslError { name, .. }) if name == "States.Runtime"));
}

#[test]
fn definitions_with_unsupported_parts_are_refused_at_load() {
    let map = json!({"StartAt": "M", "States": {"M": {"Type": "Map", "End": true}}});
    assert!(
        StateMachine::load(&map.to_string(), &BTreeMap::new())
            .unwrap_err()
            .cause
            .contains("Map")
    );
    let dangling = json!({"StartAt": "A", "States": {"A": {"Type": "Pass", "Next": "B"}}});
    assert!(
        StateMachine::load(&dangling.to_string(), &BTreeMap::new())
            .unwrap_err()
            .cause
            .contains("\"B\" does not exist")
    );
    let placeholder =
        r#"{"StartAt": "A", "States": {"A": {"Type": "Task", "Resource": "${X}", "End": true}}}"#;
    assert!(
        StateMachine::load(placeholder, &BTreeMap::new())
            .unwrap_err()
            .cause
            .contains("${X}")
    );
}

#[test]
fn the_reconcile_definition_loads_with_its_substitutions() {
    let text = include_str!("../../../statemachine/reconcile.asl.json");
    let subs: BTreeMap<String, String> = [
        "ArtifactFetch",
        "TemplateUpload",
        "ChangeSet",
        "PollStatus",
        "Approval",
        "Delete",
        "Finalize",
    ]
    .iter()
    .map(|n| (format!("{n}FunctionArn"), format!("local:{n}")))
    .collect();
    StateMachine::load(text, &subs).unwrap();
}

#[test]
fn paths_read_and_write() {
    let v = json!({"a": {"b": [10, {"c": 3}]}});
    assert_eq!(get_path(&v, "$.a.b[1].c").unwrap(), json!(3));
    assert_eq!(get_path(&v, "$").unwrap(), v);
    assert!(get_path(&v, "$.a.x").is_err());
    assert!(get_path(&v, "a.b").is_err());
    assert_eq!(
        set_path(json!({"a": 1}), "$.b.c", json!(2)).unwrap(),
        json!({"a": 1, "b": {"c": 2}})
    );
    assert_eq!(set_path(json!({"a": 1}), "$", json!(2)).unwrap(), json!(2));
}

#[tokio::test]
async fn a_catcher_with_a_null_result_path_keeps_the_input_and_a_dangling_catch_is_refused() {
    let def = json!({"StartAt": "T", "States": {
        "T": {"Type": "Task", "Resource": "always-fail:Boom", "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": null, "Next": "H"}], "End": true},
        "H": {"Type": "Pass", "End": true}}});
    let (outcome, _, _) = run(def, json!({"keep": 1})).await;
    assert_eq!(outcome, Outcome::Succeeded(json!({"keep": 1})));
    let dangling = json!({"StartAt": "T", "States": {
        "T": {"Type": "Task", "Resource": "x", "Catch": [{"ErrorEquals": ["States.ALL"], "Next": "Nowhere"}], "End": true}}});
    assert!(
        StateMachine::load(&dangling.to_string(), &BTreeMap::new())
            .unwrap_err()
            .cause
            .contains("Nowhere")
    );
}

/// A runner that never answers.
struct Hangs;

impl TaskRunner for Hangs {
    async fn run(&self, _resource: &str, _input: Value) -> Result<Value, AslError> {
        std::future::pending().await
    }
}

#[tokio::test]
async fn a_task_past_its_timeout_fails_with_states_timeout() {
    let def = json!({"StartAt": "T", "States": {"T": {"Type": "Task", "Resource": "x", "TimeoutSeconds": 1, "End": true}}});
    let machine = StateMachine::load(&def.to_string(), &BTreeMap::new()).unwrap();
    let outcome = machine
        .execute(
            &Hangs,
            "e",
            json!({}),
            &RunOptions::default(),
            &mut |_, _| {},
        )
        .await;
    assert!(
        matches!(outcome, Outcome::Failed(AslError { ref name, .. }) if name == "States.Timeout"),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn huge_waits_do_not_panic() {
    let def = json!({"StartAt": "W", "States": {"W": {"Type": "Wait", "SecondsPath": "$.s", "Next": "S"}, "S": {"Type": "Succeed"}}});
    let machine = StateMachine::load(&def.to_string(), &BTreeMap::new()).unwrap();
    let options = RunOptions::default();
    let mut ignore = |_: &Progress, _: &Value| {};
    let run = machine.execute(&Hangs, "e", json!({"s": 1e300}), &options, &mut ignore);
    assert!(
        tokio::time::timeout(Duration::from_millis(50), run)
            .await
            .is_err(),
        "it waits, bounded, without panicking"
    );
}

#[test]
fn an_execution_can_be_moved_to_another_thread() {
    fn is_send<T: Send>(_: &T) {}
    let def = json!({"StartAt": "S", "States": {"S": {"Type": "Succeed"}}});
    let machine = StateMachine::load(&def.to_string(), &BTreeMap::new()).unwrap();
    let options = RunOptions::default();
    let mut ignore = |_: &Progress, _: &Value| {};
    let run = machine.execute(&Hangs, "e", json!({}), &options, &mut ignore);
    is_send(&run);
}

/// What each state type does, where the tests above do not show it.
mod behaviour;
/// Definitions refused at load, each error naming the state and the field.
mod malformed;

#[tokio::test]
async fn states_math_add_sums_paths_and_numbers_and_a_pass_can_put_a_value_back() {
    let def = json!({"StartAt": "Double", "States": {
        "Double": {"Type": "Pass", "Parameters": {"seconds.$": "States.MathAdd($.waitSeconds, $.waitSeconds)", "plusOne.$": "States.MathAdd($.waitSeconds, 1)"}, "ResultPath": "$.longer", "Next": "Back"},
        "Back": {"Type": "Pass", "InputPath": "$.longer.seconds", "ResultPath": "$.waitSeconds", "End": true}
    }});
    let (outcome, _, _) = run(def, json!({"waitSeconds": 30})).await;
    assert_eq!(
        outcome,
        Outcome::Succeeded(json!({"waitSeconds": 60, "longer": {"seconds": 60, "plusOne": 31}}))
    );
}

#[test]
fn an_intrinsic_function_the_runner_does_not_know_is_refused_at_load() {
    let def = json!({"StartAt": "P", "States": {
        "P": {"Type": "Pass", "Parameters": {"a.$": "States.Format('{}', $.x)"}, "End": true},
    }});
    let err = StateMachine::load(&def.to_string(), &BTreeMap::new()).unwrap_err();
    assert!(err.cause.contains("States.MathAdd"), "{err}");
    let def = json!({"StartAt": "P", "States": {
        "P": {"Type": "Pass", "Parameters": {"a.$": "States.MathAdd($.x)"}, "End": true},
    }});
    let err = StateMachine::load(&def.to_string(), &BTreeMap::new()).unwrap_err();
    assert!(err.cause.contains("two arguments"), "{err}");
}
