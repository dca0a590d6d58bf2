use super::*;
use crate::fakes::{MemorySources, ScriptedCloudFormation, TEST_INSTALLATION, failed, ready};
use crate::stack_status::StackStatus as S;

const URL: &str = "https://git.example/infra.git";
const HEAD: &str = "0123456789abcdef0123456789abcdef01234567";
const TEMPLATE: &[u8] = b"Resources:\n  Queue:\n    Type: AWS::SQS::Queue\n";

fn spec() -> StackSpec {
    serde_json::from_value(serde_json::json!({
        "name": "orders",
        "source": {"git": URL, "path": "t.yaml"},
        "parameters": {"Retention": "14"}
    }))
    .unwrap()
}

async fn preview(cfn: &ScriptedCloudFormation) -> Result<Diff, String> {
    let sources = MemorySources::new();
    sources.commit(URL, "main", HEAD, &[("t.yaml", TEMPLATE)]);
    let spec = spec();
    let registry = crate::registry::memory::MemoryRegistry::new();
    let desired = desired(&sources, &spec, None)
        .await?
        .read_values(cfn, &registry, cfn)
        .await?;
    let body = String::from_utf8(desired.template.clone()).unwrap();
    let waiting = Waiting {
        poll: Duration::from_millis(1),
        deadline: Duration::from_secs(5),
    };
    diff(
        cfn,
        &spec,
        TEST_INSTALLATION,
        None,
        &desired,
        TemplateAt::Body(body),
        waiting,
    )
    .await
}

use crate::fakes::queue_change as row;

fn never_executed(cfn: &ScriptedCloudFormation) {
    let ops = cfn.operations();
    assert!(!ops.iter().any(|o| o == "ExecuteChangeSet"), "{ops:?}");
    assert!(
        ops.iter().any(|o| o == "DeleteChangeSet"),
        "cleaned up: {ops:?}"
    );
}

#[tokio::test]
async fn a_create_is_previewed_from_the_template_body_and_its_placeholder_deleted() {
    let cfn = ScriptedCloudFormation::with_stack(&[None, Some(S::ReviewInProgress)]);
    cfn.script().changes = vec![row("Add", None)];
    cfn.script().listed_change_sets = Some(Vec::new());
    let diff = preview(&cfn).await.unwrap();
    assert_eq!(diff.kind, "Create");
    assert_eq!(diff.revision, HEAD);
    assert_eq!(diff.changes, vec![row("Add", None)]);
    assert_eq!(diff.stack_id, None);
    let request = cfn.script().requests[0].clone();
    assert_eq!(
        request.template_body.as_deref().map(str::as_bytes),
        Some(TEMPLATE)
    );
    assert_eq!(request.parameters, vec![("Retention".into(), "14".into())]);
    assert!(request.change_set_name.starts_with("stacksync-preview-"));
    assert!(
        request
            .tags
            .contains(&("stacksync:entry".into(), "orders".into())),
        "as a run makes it"
    );
    never_executed(&cfn);
    assert!(cfn.operations().contains(&"DeleteStack".to_owned()));
}

/// Issue "Real payloads and real templates" (8): an endpoint that
/// leaves the preview's placeholder `CREATE_FAILED` (not
/// `REVIEW_IN_PROGRESS`) had it left behind, and the next run refused
/// it as not stacksync's. The one the preview made goes, whatever its
/// status.
#[tokio::test]
async fn the_placeholder_the_preview_made_is_deleted_whatever_its_status() {
    let cfn = ScriptedCloudFormation::with_stack(&[None, Some(S::CreateFailed)]);
    cfn.script().listed_change_sets = Some(Vec::new());
    preview(&cfn).await.unwrap();
    never_executed(&cfn);
    assert!(
        cfn.operations().contains(&"DeleteStack".to_owned()),
        "{:?}",
        cfn.operations()
    );
}

#[tokio::test]
async fn a_placeholder_a_run_began_meanwhile_is_left_alone() {
    // No stack when the preview looked; then a run's create made the
    // placeholder, its change set there.
    let cfn = ScriptedCloudFormation::with_stack(&[None, Some(S::ReviewInProgress)]);
    cfn.script().listed_change_sets = Some(vec!["stacksync-v1-run".into()]);
    preview(&cfn).await.unwrap();
    never_executed(&cfn);
    assert!(!cfn.operations().contains(&"DeleteStack".to_owned()));
}

#[tokio::test]
async fn an_update_with_a_replacement_shows_it_and_changes_nothing() {
    let cfn = ScriptedCloudFormation::with_stack(&[Some(S::UpdateComplete)]);
    cfn.script().changes = vec![row("Modify", Some("True"))];
    cfn.script().termination_protection = true;
    let diff = preview(&cfn).await.unwrap();
    assert_eq!(diff.kind, "Update");
    assert_eq!(diff.changes[0].replacement.as_deref(), Some("True"));
    assert_eq!(diff.stack_status.as_deref(), Some("UPDATE_COMPLETE"));
    // The parameter the stack lacks, and the protection the spec turns off.
    assert_eq!(
        diff.parameters,
        vec![Difference {
            name: "Retention".into(),
            now: None,
            desired: Some("14".into())
        }]
    );
    assert_eq!(diff.settings[0].name, "terminationProtection");
    never_executed(&cfn);
    assert!(!cfn.operations().contains(&"DeleteStack".to_owned()));
}

#[tokio::test]
async fn an_empty_change_set_is_no_change_and_is_deleted() {
    let cfn = ScriptedCloudFormation::with_stack(&[Some(S::UpdateComplete)]);
    cfn.script().change_set = [failed(
        "The submitted information didn't contain changes. Submit different information to create a change set.",
    )]
    .into_iter()
    .collect();
    let diff = preview(&cfn).await.unwrap();
    assert!(diff.changes.is_empty() && !diff.beyond_resources);
    never_executed(&cfn);
}

/// A change set CloudFormation made to run with no resource change in
/// it (the template's outputs changed, say) is not "no changes".
#[tokio::test]
async fn a_ready_change_set_without_resource_changes_is_shown_as_one_to_run() {
    let cfn = ScriptedCloudFormation::with_stack(&[Some(S::UpdateComplete)]);
    cfn.script().change_set = [ready()].into_iter().collect();
    let diff = preview(&cfn).await.unwrap();
    assert!(diff.changes.is_empty() && diff.beyond_resources, "{diff:?}");
    assert!(!diff.is_empty());
    never_executed(&cfn);
}

#[tokio::test]
async fn a_stack_that_is_not_the_entrys_or_is_busy_is_not_previewed_and_not_touched() {
    let cfn = ScriptedCloudFormation::with_stack(&[Some(S::UpdateComplete)]);
    cfn.script().tags = Some(BTreeMap::from([("team".into(), "theirs".into())]));
    let e = preview(&cfn).await.unwrap_err();
    assert!(e.contains("leaves the stack") && e.contains("adopt"), "{e}");
    assert_eq!(cfn.operations(), ["DescribeStacks"]);

    let cfn = ScriptedCloudFormation::with_stack(&[Some(S::UpdateInProgress)]);
    let e = preview(&cfn).await.unwrap_err();
    assert!(e.contains("UPDATE_IN_PROGRESS"), "{e}");
    assert_eq!(cfn.operations(), ["DescribeStacks"]);

    let cfn = ScriptedCloudFormation::with_stack(&[Some(S::RollbackComplete)]);
    let e = preview(&cfn).await.unwrap_err();
    assert!(
        e.contains("ROLLBACK_COMPLETE") && e.contains("takes no update"),
        "{e}"
    );
    assert_eq!(cfn.operations(), ["DescribeStacks"]);
}

#[tokio::test]
async fn a_change_set_cloudformation_refuses_is_said_and_still_cleaned_up() {
    let cfn = ScriptedCloudFormation::with_stack(&[Some(S::UpdateComplete)]);
    cfn.script().change_set = [failed("Template format error: bad")].into_iter().collect();
    let e = preview(&cfn).await.unwrap_err();
    assert!(e.contains("Template format error"), "{e}");
    never_executed(&cfn);
}

#[tokio::test]
async fn a_missing_template_is_refused_before_any_call() {
    let sources = MemorySources::new();
    sources.commit(URL, "main", HEAD, &[("other.yaml", TEMPLATE)]);
    let e = desired(&sources, &spec(), None).await.unwrap_err();
    assert!(e.contains("t.yaml"), "{e}");
}
