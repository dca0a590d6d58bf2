use super::*;

/// The outcome of running `definition` on `input`.
async fn outcome(definition: Value, input: Value) -> Outcome {
    run_with(definition, input, fast()).await.0
}

/// A definition of one state `S`, then `Done` (a Succeed state) where it goes on.
fn one(state: Value) -> Value {
    json!({"StartAt": "S", "States": {"S": state, "Done": {"Type": "Succeed"}}})
}

fn failed(name: &str, cause: &str) -> Outcome {
    Outcome::Failed(AslError::new(name, cause))
}

// Pass

#[tokio::test]
async fn a_pass_with_a_result_puts_it_at_its_result_path_and_ignores_parameters() {
    let def = one(
        json!({"Type": "Pass", "Result": {"r": 1}, "Parameters": {"p": 2},
        "ResultPath": "$.out", "Next": "Done"}),
    );
    assert_eq!(
        outcome(def, json!({"keep": true})).await,
        Outcome::Succeeded(json!({"keep": true, "out": {"r": 1}}))
    );
}

#[tokio::test]
async fn a_pass_without_result_or_parameters_passes_its_effective_input() {
    let def = one(json!({"Type": "Pass", "InputPath": "$.a", "End": true}));
    assert_eq!(
        outcome(def, json!({"a": {"b": 1}, "c": 2})).await,
        Outcome::Succeeded(json!({"b": 1}))
    );
}

#[tokio::test]
async fn a_null_result_path_keeps_the_input_and_a_null_output_path_empties_it() {
    let def = one(json!({"Type": "Pass", "Result": 1, "ResultPath": null, "End": true}));
    assert_eq!(
        outcome(def, json!({"a": 1})).await,
        Outcome::Succeeded(json!({"a": 1}))
    );
    let def = one(json!({"Type": "Pass", "OutputPath": null, "End": true}));
    assert_eq!(
        outcome(def, json!({"a": 1})).await,
        Outcome::Succeeded(json!({}))
    );
    let def =
        one(json!({"Type": "Pass", "InputPath": null, "Parameters": {"n.$": "$"}, "End": true}));
    assert_eq!(
        outcome(def, json!({"a": 1})).await,
        Outcome::Succeeded(json!({"n": {}}))
    );
}

#[tokio::test]
async fn a_parameters_path_missing_from_the_input_fails_the_run() {
    let def = one(json!({"Type": "Pass", "Parameters": {"x.$": "$.nope"}, "End": true}));
    assert_eq!(
        outcome(def, json!({})).await,
        failed(
            "States.Runtime",
            "the path $.nope does not exist in the input"
        )
    );
}

// Task

#[tokio::test]
async fn a_task_calls_its_resource_with_its_parameters_and_places_the_result() {
    let def = one(json!({"Type": "Task", "Resource": "res",
        "Parameters": {"id.$": "$.id", "state.$": "$$.State.Name", "fixed": [1, {"n.$": "$.n"}]},
        "ResultPath": "$.out", "OutputPath": "$.out.echo", "Next": "Done"}));
    let (outcome, _, runner) = run_with(def, json!({"id": "a", "n": 2}), fast()).await;
    let sent = json!({"id": "a", "state": "S", "fixed": [1, {"n": 2}]});
    assert_eq!(outcome, Outcome::Succeeded(sent.clone()));
    assert_eq!(*runner.calls.lock().unwrap(), [("res".to_owned(), sent)]);
}

#[tokio::test]
async fn a_task_without_a_result_path_replaces_its_input_with_the_result() {
    let def = one(json!({"Type": "Task", "Resource": "res", "InputPath": "$.a", "End": true}));
    assert_eq!(
        outcome(def, json!({"a": 1, "b": 2})).await,
        Outcome::Succeeded(json!({"echo": 1, "resource": "res"}))
    );
}

#[tokio::test]
async fn an_error_no_rule_takes_ends_the_run_with_that_error() {
    let def = one(json!({"Type": "Task", "Resource": "always-fail:Boom",
        "Retry": [{"ErrorEquals": ["Other"]}], "Catch": [{"ErrorEquals": ["Other"], "Next": "Done"}],
        "End": true}));
    let (outcome, events, runner) = run_with(def, json!({}), fast()).await;
    assert_eq!(outcome, failed("Boom", "boom"));
    assert_eq!(runner.calls.lock().unwrap().len(), 1);
    assert!(events.contains(&Progress::TaskFailed {
        name: "S".to_owned(),
        error: AslError::new("Boom", "boom"),
        retry_in: None,
    }));
}

#[tokio::test]
async fn retry_delays_grow_by_the_backoff_rate_up_to_the_max_delay() {
    let def = one(json!({"Type": "Task", "Resource": "always-fail:Boom",
        "Retry": [{"ErrorEquals": ["Boom"], "IntervalSeconds": 1, "BackoffRate": 2, "MaxDelaySeconds": 3, "MaxAttempts": 3}],
        "End": true}));
    let (outcome, events, runner) = run_with(def, json!({}), fast()).await;
    assert_eq!(outcome, failed("Boom", "boom"));
    assert_eq!(runner.calls.lock().unwrap().len(), 4);
    let delays: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Progress::TaskFailed { retry_in, .. } => Some(*retry_in),
            _ => None,
        })
        .collect();
    let secs = |s| Some(Duration::from_secs(s));
    assert_eq!(delays, [secs(1), secs(2), secs(3), None]);
}

#[tokio::test]
async fn full_jitter_makes_each_delay_at_most_the_backoff_delay() {
    let def = one(json!({"Type": "Task", "Resource": "fail:2:Boom",
        "Retry": [{"ErrorEquals": ["Boom"], "IntervalSeconds": 2, "JitterStrategy": "FULL"}],
        "End": true}));
    let (outcome, events, _) = run_with(def, json!({}), fast()).await;
    assert!(matches!(outcome, Outcome::Succeeded(_)), "{outcome:?}");
    let delays: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Progress::TaskFailed { retry_in, .. } => *retry_in,
            _ => None,
        })
        .collect();
    assert_eq!(delays.len(), 2);
    assert!(delays[0] <= Duration::from_secs(2), "{delays:?}");
    assert!(delays[1] <= Duration::from_secs(4), "{delays:?}");
}

#[tokio::test]
async fn a_used_up_retrier_does_not_hand_the_error_to_a_later_one() {
    let def = one(json!({"Type": "Task", "Resource": "always-fail:Boom",
        "Retry": [{"ErrorEquals": ["Boom"], "MaxAttempts": 1}, {"ErrorEquals": ["States.ALL"], "MaxAttempts": 5}],
        "End": true}));
    let (outcome, _, runner) = run_with(def, json!({}), fast()).await;
    assert_eq!(outcome, failed("Boom", "boom"));
    assert_eq!(runner.calls.lock().unwrap().len(), 2, "one try, one retry");
}

#[tokio::test]
async fn a_catcher_without_a_result_path_replaces_the_input_with_the_error() {
    let def = one(json!({"Type": "Task", "Resource": "always-fail:Boom",
        "Catch": [{"ErrorEquals": ["States.TaskFailed"], "Next": "Done"}], "End": true}));
    let (outcome, events, _) = run_with(def, json!({"gone": true}), fast()).await;
    assert_eq!(
        outcome,
        Outcome::Succeeded(json!({"Error": "Boom", "Cause": "boom"}))
    );
    assert!(events.contains(&Progress::Caught {
        name: "S".to_owned(),
        error: AslError::new("Boom", "boom"),
        next: "Done".to_owned(),
    }));
}

#[tokio::test]
async fn states_task_failed_does_not_catch_a_timeout_but_states_all_does() {
    let def = json!({"StartAt": "T", "States": {
        "T": {"Type": "Task", "Resource": "x", "TimeoutSeconds": 0.01, "End": true,
              "Catch": [{"ErrorEquals": ["States.TaskFailed"], "Next": "Wrong"},
                        {"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "Right"}]},
        "Wrong": {"Type": "Fail", "Error": "Wrong"},
        "Right": {"Type": "Pass", "End": true}}});
    let machine = StateMachine::load(&def.to_string(), &BTreeMap::new()).unwrap();
    let outcome = machine
        .execute(&Hangs, "e", json!({}), &fast(), &mut |_, _| {})
        .await;
    assert_eq!(
        outcome,
        Outcome::Succeeded(
            json!({"error": {"Error": "States.Timeout", "Cause": "T ran longer than 0.01 s"}})
        )
    );
}

// Choice

/// Runs a Choice state `C` with `rule` to `Yes` and a default to `No`: which one it took.
async fn chosen(rule: Value, input: Value) -> Result<String, Outcome> {
    let mut rule = rule;
    rule["Next"] = json!("Yes");
    let def = json!({"StartAt": "C", "States": {
        "C": {"Type": "Choice", "Choices": [rule], "Default": "No"},
        "Yes": {"Type": "Succeed"}, "No": {"Type": "Succeed"}}});
    let (outcome, events, _) = run_with(def, input, fast()).await;
    match (&outcome, events.last()) {
        (Outcome::Succeeded(_), Some(Progress::StateEntered { name, .. })) => Ok(name.clone()),
        _ => Err(outcome),
    }
}

#[tokio::test]
async fn an_or_rule_matches_when_any_nested_rule_does() {
    let rule = json!({"Or": [{"Variable": "$.a", "StringEquals": "x"}, {"Variable": "$.b", "BooleanEquals": true}]});
    assert_eq!(
        chosen(rule.clone(), json!({"a": "y", "b": true}))
            .await
            .unwrap(),
        "Yes"
    );
    assert_eq!(
        chosen(rule, json!({"a": "y", "b": false})).await.unwrap(),
        "No"
    );
}

#[tokio::test]
async fn numeric_comparisons_compare_numbers_and_never_match_other_types() {
    let equals = json!({"Variable": "$.n", "NumericEquals": 2});
    let less = json!({"Variable": "$.n", "NumericLessThan": 2});
    assert_eq!(
        chosen(equals.clone(), json!({"n": 2.0})).await.unwrap(),
        "Yes"
    );
    assert_eq!(chosen(equals, json!({"n": "2"})).await.unwrap(), "No");
    assert_eq!(
        chosen(less.clone(), json!({"n": 1.5})).await.unwrap(),
        "Yes"
    );
    assert_eq!(chosen(less, json!({"n": 2})).await.unwrap(), "No");
    let string = json!({"Variable": "$.s", "StringEquals": "2"});
    assert_eq!(chosen(string, json!({"s": 2})).await.unwrap(), "No");
}

#[tokio::test]
async fn is_present_and_is_null_look_at_the_variable_itself() {
    let present = json!({"Variable": "$.a.b", "IsPresent": false});
    assert_eq!(
        chosen(present.clone(), json!({"a": {}})).await.unwrap(),
        "Yes"
    );
    assert_eq!(
        chosen(present, json!({"a": {"b": null}})).await.unwrap(),
        "No"
    );
    let null = json!({"Variable": "$.a", "IsNull": true});
    assert_eq!(
        chosen(null.clone(), json!({"a": null})).await.unwrap(),
        "Yes"
    );
    assert_eq!(chosen(null, json!({"a": 0})).await.unwrap(), "No");
}

#[tokio::test]
async fn a_compared_variable_missing_from_the_input_fails_the_run() {
    let rule = json!({"Variable": "$.gone", "StringEquals": "x"});
    assert_eq!(
        chosen(rule, json!({})).await,
        Err(failed(
            "States.Runtime",
            "choice variable $.gone is not in the input"
        ))
    );
}

#[tokio::test]
async fn a_choice_with_no_match_and_no_default_fails_with_no_choice_matched() {
    let def = one(
        json!({"Type": "Choice", "Choices": [{"Variable": "$.a", "IsPresent": true, "Next": "Done"}]}),
    );
    assert_eq!(
        outcome(def, json!({})).await,
        failed("States.NoChoiceMatched", "state S: no choice matched")
    );
}

#[tokio::test]
async fn a_choice_decides_on_its_input_path_and_passes_its_output_path_on() {
    let def = one(
        json!({"Type": "Choice", "InputPath": "$.inner", "OutputPath": "$.keep",
        "Choices": [{"Variable": "$.go", "BooleanEquals": true, "Next": "Done"}]}),
    );
    assert_eq!(
        outcome(def, json!({"inner": {"go": true}, "keep": 1})).await,
        Outcome::Succeeded(json!(1))
    );
}

// Wait

#[tokio::test]
async fn a_wait_with_seconds_waits_that_long_and_says_so() {
    let def = one(json!({"Type": "Wait", "Seconds": 20, "Next": "Done"}));
    let started = std::time::Instant::now();
    let (outcome, events, _) = run_with(def, json!({"a": 1}), fast()).await;
    assert!(
        started.elapsed() >= Duration::from_millis(20),
        "20 s at speed-up 1000"
    );
    assert_eq!(outcome, Outcome::Succeeded(json!({"a": 1})));
    assert!(events.contains(&Progress::Waiting {
        name: "S".to_owned(),
        seconds: 20.0
    }));
}

#[tokio::test]
async fn a_wait_with_seconds_path_waits_that_long() {
    let def = one(
        json!({"Type": "Wait", "InputPath": "$.w", "SecondsPath": "$.s", "OutputPath": "$.a", "Next": "Done"}),
    );
    let started = std::time::Instant::now();
    let (outcome, events, _) = run_with(def, json!({"w": {"s": 30}, "a": 2}), fast()).await;
    assert!(
        started.elapsed() >= Duration::from_millis(30),
        "30 s at speed-up 1000"
    );
    assert_eq!(
        outcome,
        Outcome::Succeeded(json!(2)),
        "the output comes from the whole input"
    );
    assert!(events.contains(&Progress::Waiting {
        name: "S".to_owned(),
        seconds: 30.0
    }));
}

#[tokio::test]
async fn a_negative_seconds_path_fails_the_run() {
    let def = one(json!({"Type": "Wait", "SecondsPath": "$.s", "Next": "Done"}));
    assert_eq!(
        outcome(def, json!({"s": -1})).await,
        failed(
            "States.Runtime",
            "state S: SecondsPath is not a non-negative number"
        )
    );
}

// Succeed and Fail

#[tokio::test]
async fn a_succeed_state_ends_with_its_input_through_its_paths() {
    let def = one(json!({"Type": "Succeed", "InputPath": "$.a", "OutputPath": "$.b"}));
    assert_eq!(
        outcome(def, json!({"a": {"b": [1]}, "c": 2})).await,
        Outcome::Succeeded(json!([1]))
    );
}

#[tokio::test]
async fn a_fail_state_without_error_or_cause_fails_with_states_failed() {
    let def = one(json!({"Type": "Fail"}));
    assert_eq!(outcome(def, json!({})).await, failed("States.Failed", ""));
}

// The run

#[tokio::test]
async fn every_state_entered_is_reported_with_its_type_and_input() {
    let def = json!({"StartAt": "P", "States": {
        "P": {"Type": "Pass", "Result": {"n": 1}, "Next": "C"},
        "C": {"Type": "Choice", "Choices": [{"Variable": "$.n", "NumericEquals": 1, "Next": "T"}]},
        "T": {"Type": "Task", "Resource": "r", "ResultPath": null, "Next": "W"},
        "W": {"Type": "Wait", "Seconds": 0, "Next": "S"},
        "S": {"Type": "Succeed"}}});
    let machine = StateMachine::load(&def.to_string(), &BTreeMap::new()).unwrap();
    let mut entered = Vec::new();
    let outcome = machine
        .execute(
            &Scripted::default(),
            "e",
            json!({}),
            &fast(),
            &mut |event, data| {
                if let Progress::StateEntered { name, kind } = event {
                    entered.push(format!("{name} {kind} {data}"));
                }
            },
        )
        .await;
    assert_eq!(outcome, Outcome::Succeeded(json!({"n": 1})));
    assert_eq!(
        entered,
        [
            "P Pass {}",
            r#"C Choice {"n":1}"#,
            r#"T Task {"n":1}"#,
            r#"W Wait {"n":1}"#,
            r#"S Succeed {"n":1}"#
        ]
    );
}

#[tokio::test]
async fn a_run_that_would_go_on_forever_stops_after_max_transitions() {
    let def = json!({"StartAt": "A", "States": {"A": {"Type": "Pass", "Next": "A"}}});
    let options = RunOptions {
        max_transitions: 5,
        ..fast()
    };
    let (outcome, events, _) = run_with(def, json!({}), options).await;
    assert_eq!(
        outcome,
        failed(
            "States.Runtime",
            "the run passed 5 state transitions; stopped"
        )
    );
    assert_eq!(events.len(), 5);
}
