use super::*;

/// The cause of refusing `definition` (always a `States.Runtime` error).
fn refusal(definition: &Value) -> String {
    let error = StateMachine::load(&definition.to_string(), &BTreeMap::new()).unwrap_err();
    assert_eq!(error.name, "States.Runtime", "{error}");
    error.cause
}

/// The cause of refusing a definition whose only state is `state`, named `S`.
fn refusal_of(state: Value) -> String {
    refusal(&json!({"StartAt": "S", "States": {"S": state}}))
}

#[test]
fn a_state_without_next_or_end_is_refused() {
    assert_eq!(
        refusal_of(json!({"Type": "Pass"})),
        "state S: needs Next or End: true"
    );
    assert_eq!(
        refusal_of(json!({"Type": "Pass", "End": false})),
        "state S: field End must be true (or give Next)"
    );
    assert_eq!(
        refusal_of(json!({"Type": "Pass", "Next": "S", "End": true})),
        "state S: field End may not be given with Next"
    );
}

#[test]
fn a_state_without_a_type_or_that_is_not_an_object_is_refused() {
    assert_eq!(
        refusal_of(json!({"End": true})),
        "state S: field Type is missing"
    );
    assert_eq!(refusal_of(json!("Pass")), "state S must be an object");
}

#[test]
fn a_field_of_another_state_type_is_not_allowed() {
    assert_eq!(
        refusal_of(json!({"Type": "Pass", "Resource": "x", "End": true})),
        "state S: field Resource is not allowed in a Pass state"
    );
    assert_eq!(
        refusal_of(json!({"Type": "Fail", "Next": "S"})),
        "state S: field Next is not allowed in a Fail state"
    );
    assert_eq!(
        refusal_of(json!({"Type": "Succeed", "ResultPath": "$.x"})),
        "state S: field ResultPath is not allowed in a Succeed state"
    );
}

#[test]
fn fields_the_local_runner_does_not_run_are_refused_as_unsupported() {
    assert_eq!(
        refusal_of(json!({"Type": "Pass", "Bogus": 1, "End": true})),
        "state S: field Bogus is not supported by the local runner"
    );
    assert_eq!(
        refusal_of(json!({"Type": "Wait", "Timestamp": "2030-01-01T00:00:00Z", "End": true})),
        "state S: field Timestamp is not supported by the local runner"
    );
    assert_eq!(
        refusal_of(json!({"Type": "Task", "Resource": "x", "ResultSelector": {}, "End": true})),
        "state S: field ResultSelector is not supported by the local runner"
    );
    let timeout =
        json!({"StartAt": "S", "TimeoutSeconds": 5, "States": {"S": {"Type": "Succeed"}}});
    assert_eq!(
        refusal(&timeout),
        "definition: field TimeoutSeconds is not supported by the local runner"
    );
}

#[test]
fn a_field_of_the_wrong_kind_is_refused() {
    assert_eq!(
        refusal_of(json!({"Type": "Task", "End": true})),
        "state S: field Resource is missing"
    );
    assert_eq!(
        refusal_of(json!({"Type": "Task", "Resource": 7, "End": true})),
        "state S: field Resource must be a string"
    );
    assert_eq!(
        refusal_of(json!({"Type": "Task", "Resource": "x", "TimeoutSeconds": 0, "End": true})),
        "state S: field TimeoutSeconds must be more than 0"
    );
    assert_eq!(
        refusal_of(json!({"Type": "Fail", "Error": ["E"]})),
        "state S: field Error must be a string"
    );
}

#[test]
fn paths_are_checked_at_load() {
    assert_eq!(
        refusal_of(json!({"Type": "Pass", "InputPath": "a.b", "End": true})),
        r#"state S: field InputPath is not a reference path: "a.b""#
    );
    assert_eq!(
        refusal_of(json!({"Type": "Pass", "OutputPath": 3, "End": true})),
        "state S: field OutputPath must be a path or null"
    );
    assert_eq!(
        refusal_of(json!({"Type": "Pass", "ResultPath": "$.a[0]", "End": true})),
        "state S: field ResultPath may not index arrays"
    );
    assert_eq!(
        refusal_of(json!({"Type": "Pass", "Parameters": {"list": [{"id.$": 1}]}, "End": true})),
        "state S: field Parameters.list[0].id.$ must be a path"
    );
    assert_eq!(
        refusal_of(
            json!({"Type": "Pass", "Parameters": {"f.$": "States.Format('x')"}, "End": true})
        ),
        r#"state S: field Parameters.f.$ "States.Format('x')": the local runner knows one intrinsic function, States.MathAdd"#
    );
}

#[test]
fn a_wait_needs_exactly_one_of_seconds_and_seconds_path() {
    assert_eq!(
        refusal_of(json!({"Type": "Wait", "End": true})),
        "state S: needs Seconds or SecondsPath"
    );
    assert_eq!(
        refusal_of(json!({"Type": "Wait", "Seconds": 1, "SecondsPath": "$.s", "End": true})),
        "state S: field SecondsPath may not be given with Seconds"
    );
    assert_eq!(
        refusal_of(json!({"Type": "Wait", "Seconds": -1, "End": true})),
        "state S: field Seconds must be a number of at least 0"
    );
}

#[test]
fn malformed_retriers_and_catchers_are_refused_with_their_index() {
    let task = |rules: Value| {
        let mut task = json!({"Type": "Task", "Resource": "x", "End": true});
        task.as_object_mut()
            .unwrap()
            .extend(rules.as_object().unwrap().clone());
        refusal_of(task)
    };
    assert_eq!(
        task(json!({"Retry": [{"ErrorEquals": ["A"]}, {"MaxAttempts": 2}]})),
        "state S: field Retry[1].ErrorEquals is missing"
    );
    assert_eq!(
        task(json!({"Retry": [{"ErrorEquals": ["A"], "MaxAttempts": -1}]})),
        "state S: field Retry[0].MaxAttempts must be a whole number, 0 or more"
    );
    assert_eq!(
        task(json!({"Retry": [{"ErrorEquals": ["A"], "BackoffRate": 0.5}]})),
        "state S: field Retry[0].BackoffRate must be a number of at least 1"
    );
    assert_eq!(
        task(json!({"Retry": [{"ErrorEquals": ["A"], "JitterStrategy": "HALF"}]})),
        "state S: field Retry[0].JitterStrategy must be FULL or NONE"
    );
    assert_eq!(
        task(json!({"Retry": [{"ErrorEquals": []}]})),
        "state S: field Retry[0].ErrorEquals must not be empty"
    );
    assert_eq!(
        task(json!({"Catch": [{"ErrorEquals": ["States.ALL"]}]})),
        "state S: field Catch[0].Next is missing"
    );
    assert_eq!(
        task(json!({"Catch": [{"ErrorEquals": ["States.ALL"], "Next": "S", "MaxAttempts": 1}]})),
        "state S: field Catch[0].MaxAttempts is not allowed in a catcher"
    );
}

#[test]
fn malformed_choice_rules_are_refused_with_where_they_are() {
    let choice = |rule: Value| {
        refusal_of(json!({"Type": "Choice", "Choices": [
            {"Variable": "$.a", "IsPresent": true, "Next": "S"}, rule]}))
    };
    assert_eq!(
        choice(json!({"Variable": "$.a", "StringEquals": "x"})),
        "state S: field Choices[1].Next is missing"
    );
    assert_eq!(
        choice(json!({"Variable": "$.a", "StringMatches": "x*", "Next": "S"})),
        "state S: field Choices[1].StringMatches is not supported by the local runner"
    );
    assert_eq!(
        choice(json!({"Variable": "$.a", "Next": "S"})),
        "state S: field Choices[1] has no comparison"
    );
    assert_eq!(
        choice(json!({"Variable": "$.a", "StringEquals": "x", "IsNull": false, "Next": "S"})),
        "state S: field Choices[1] has more than one comparison"
    );
    assert_eq!(
        choice(json!({"Variable": "$.a", "NumericEquals": "1", "Next": "S"})),
        "state S: field Choices[1].NumericEquals must be a number"
    );
    assert_eq!(
        choice(
            json!({"And": [{"Variable": "$.a", "IsNull": true}, {"Variable": "a", "IsNull": true}], "Next": "S"})
        ),
        r#"state S: field Choices[1].And[1].Variable is not a reference path: "a""#
    );
    assert_eq!(
        choice(json!({"Not": {"Variable": "$.a", "IsNull": true, "Next": "S"}, "Next": "S"})),
        "state S: field Choices[1].Not.Next is not allowed in a choice rule"
    );
    assert_eq!(
        choice(json!({"Or": [], "Next": "S"})),
        "state S: field Choices[1].Or must not be empty"
    );
    assert_eq!(
        refusal_of(json!({"Type": "Choice", "Choices": [], "Default": "S"})),
        "state S: field Choices must not be empty"
    );
}

#[test]
fn every_transition_must_name_a_state() {
    let choice = json!({"StartAt": "C", "States": {
        "C": {"Type": "Choice", "Choices": [{"Variable": "$.a", "IsPresent": true, "Next": "S"}], "Default": "Gone"},
        "S": {"Type": "Succeed"}}});
    assert_eq!(
        refusal(&choice),
        r#"state C: field Default: state "Gone" does not exist"#
    );
    let rule = json!({"StartAt": "C", "States": {
        "C": {"Type": "Choice", "Choices": [{"Variable": "$.a", "IsPresent": true, "Next": "Gone"}]}}});
    assert_eq!(
        refusal(&rule),
        r#"state C: field Choices[0].Next: state "Gone" does not exist"#
    );
    let start = json!({"StartAt": "Gone", "States": {"S": {"Type": "Succeed"}}});
    assert_eq!(refusal(&start), r#"StartAt "Gone" does not exist"#);
}
