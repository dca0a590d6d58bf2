//! template-upload refuses what the template makes certain to fail, with
//! the message `validate --templates` gives, before any value is read or
//! change set made.

use super::super::testing::*;
use super::*;
use crate::spec::{Capability, ParameterValue, ValueRef};

async fn uploaded(t: &Test) -> StepResult {
    let state = t.steps.artifact_fetch(t.input("run-1")).await?;
    t.steps.template_upload(state).await
}

#[tokio::test]
async fn what_the_template_makes_certain_to_fail_stalls_the_run_before_any_change_set() {
    let template: &[u8] = b"Parameters:\n  DbPassword: {Type: String, NoEcho: true}\nResources:\n  Role:\n    Type: AWS::IAM::Role\n    Properties: {AssumeRolePolicyDocument: {}}\n";
    let t = Test::with_entry(|e| {
        e.spec.parameters.insert("Foo".into(), "1".into());
    })
    .await;
    t.steps
        .sources
        .commit(URL, "main", "feedface", &[("t.yaml", template)]);
    let err = uploaded(&t).await.unwrap_err();
    let StepError::Stalled { reason, message } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(*reason, StallReason::InvalidTemplate, "{message}");
    assert_eq!(
        message,
        "template t.yaml: parameter DbPassword has no Default and the entry gives none; \
         template t.yaml: the entry gives parameter Foo, which the template does not declare; \
         template t.yaml: declares AWS::IAM::Role (Role) but capabilities lack CAPABILITY_IAM \
         (at feedface)"
    );
    assert!(t.cfn.operations().is_empty(), "{:?}", t.cfn.operations());
    assert!(
        t.blob(&template_key(&sha256_hex(template), None)).is_none(),
        "nothing stored"
    );

    // Given, as the run reads it, and acknowledged: on to the change set.
    let mut entry = t.entry();
    entry.spec.parameters.remove("Foo");
    entry.spec.parameters.insert(
        "DbPassword".into(),
        ParameterValue::From(ValueRef::Ssm {
            ssm: "/db/pw".into(),
        }),
    );
    entry.spec.capabilities = vec![Capability::Iam];
    t.steps.registry.inner.insert(entry);
    t.cfn.script().ssm.insert("/db/pw".into(), "pw".into());
    t.release("run-1").await;
    let state = uploaded(&t).await.unwrap();
    assert_eq!(state.next, Next::ChangeSet);
}
