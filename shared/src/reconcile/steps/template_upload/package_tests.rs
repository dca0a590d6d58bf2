//! template-upload packages what the template names (on the fakes): the
//! objects stored by content before the template, the template deployed
//! naming them, what was packaged recorded; an artifact an earlier version
//! stored without those files is not re-used.

use super::super::testing::*;
use super::*;
use crate::naming::artifact_key;

const FUNCTION: &[u8] = b"Resources:
  Fn:
    Type: AWS::Lambda::Function
    Properties:
      Runtime: python3.12
      Handler: index.handler
      Role: arn:aws:iam::123456789012:role/fn
      Code: src
";

async fn uploaded(t: &Test) -> StepResult {
    let state = t.steps.artifact_fetch(t.input("run-1")).await?;
    t.steps.template_upload(state).await
}

#[tokio::test]
async fn the_code_a_template_names_is_stored_by_content_and_the_template_names_it() {
    let t = Test::new().await;
    t.steps.sources.commit(
        URL,
        "main",
        "feedface",
        &[
            ("t.yaml", FUNCTION),
            ("src/index.py", b"def handler(e, c): return 1"),
        ],
    );
    // What an earlier version stored for this revision: the template alone.
    let old = artifact_key(
        URL,
        "feedface",
        &crate::content::Wanted::of(&t.entry().spec).key(),
    );
    let stale = crate::artifact::pack(&[("t.yaml".into(), FUNCTION.to_vec())]).unwrap();
    t.steps.blobs.inner.put(&old, &stale);

    let state = uploaded(&t).await.unwrap();
    let uploaded = state.uploaded.clone().unwrap();
    let template = t.blob(&uploaded.template_key).unwrap();
    let value: serde_json::Value = serde_json::from_slice(&template).unwrap();
    let code = &value["Resources"]["Fn"]["Properties"]["Code"];
    assert_eq!(code["S3Bucket"], "bucket");
    let key = code["S3Key"].as_str().unwrap();
    assert!(key.starts_with("templates/packages/"), "{key}");
    let zip = t.blob(key).expect("the code stored");
    assert_eq!(key, format!("templates/packages/{}", sha256_hex(&zip)));
    let packaged = t.entry().status.inputs.packaged;
    assert_eq!(packaged.len(), 1);
    assert_eq!(
        (
            packaged[0].path.as_str(),
            packaged[0].at.as_str(),
            packaged[0].key.as_str()
        ),
        ("src", "t.yaml: resource Fn property Code", key)
    );
}

#[tokio::test]
async fn a_path_the_template_names_that_is_missing_stalls_the_run_and_stores_nothing() {
    let t = Test::new().await;
    t.steps
        .sources
        .commit(URL, "main", "feedface", &[("t.yaml", FUNCTION)]);
    let err = uploaded(&t).await.unwrap_err();
    let StepError::Stalled { reason, message } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(*reason, StallReason::InvalidTemplate, "{message}");
    assert!(
        message
            .starts_with("t.yaml: resource Fn property Code names src, which is not in the source"),
        "{message}"
    );
    assert!(t.cfn.operations().is_empty(), "nothing made");
}

#[tokio::test]
async fn a_nested_template_fetched_with_an_included_folder_has_its_own_paths_fetched_too() {
    let t = Test::with_entry(|e| e.spec.source.include = vec!["nested".into()]).await;
    let parent: &[u8] = b"Resources:\n  N:\n    Type: AWS::CloudFormation::Stack\n    Properties:\n      TemplateURL: nested/n.yaml\n";
    let nested: &[u8] = b"Resources:\n  Fn:\n    Type: AWS::Serverless::Function\n    Properties:\n      CodeUri: ../src\n";
    t.steps.sources.commit(
        URL,
        "main",
        "feedface",
        &[
            ("t.yaml", parent),
            ("nested/n.yaml", nested),
            ("src/index.js", b"exports.h = 1"),
        ],
    );
    uploaded(&t).await.unwrap();
    let packaged: Vec<String> = t
        .entry()
        .status
        .inputs
        .packaged
        .iter()
        .map(|a| a.path.clone())
        .collect();
    assert_eq!(packaged, ["src", "nested/n.yaml"]);
}
