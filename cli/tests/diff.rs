//! `stacksync diff`, end to end against the emulator's CloudFormation: a
//! preview of a create, of an update, and of nothing to do, each leaving
//! the stack, its change sets and the registry as they were.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test
#![recursion_limit = "256"]

mod common;

use common::{stacksync_on as stacksync, stacksync_with, stderr, stdout};
use serde_json::Value;
use stacksync::asl::Outcome;
use stacksync::reconcile::diff::MAX_TEMPLATE_BODY;
use stacksync::status::Phase;
use stacksync_testkit::backend::{Backend, named_queue};
use stacksync_testkit::git::GitRepo;
use stacksync_testkit::harness::Harness;
use stacksync_testkit::{Emulator, unique_name};

const QUEUE: &[u8] = b"Resources:\n  Queue: {Type: AWS::SQS::Queue}\n";
const QUEUE_AND_TOPIC: &[u8] =
    b"Resources:\n  Queue: {Type: AWS::SQS::Queue}\n  Topic: {Type: AWS::SNS::Topic}\n";

async fn diff_json(backend: Backend, table: &str, args: &[&str]) -> Value {
    let out = stacksync_with(backend, table, &[&["-o", "json", "diff"], args].concat()).await;
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_str::<Value>(&stdout(&out)).unwrap()["diff"].clone()
}

/// The stack as CloudFormation has it: status, last change, change sets,
/// template; `None` when there is none.
async fn observed(backend: Backend, stack: &str) -> Option<(String, String, Vec<String>, String)> {
    let cfn = backend.cloudformation();
    let out = cfn.describe_stacks().stack_name(stack).send().await.ok()?;
    let s = out.stacks().first()?.clone();
    let change_sets = backend
        .change_sets(stack)
        .await
        .iter()
        .filter_map(|c| c.change_set_name().map(str::to_owned))
        .collect();
    let template = cfn
        .get_template()
        .stack_name(stack)
        .send()
        .await
        .unwrap()
        .template_body()
        .unwrap_or_default()
        .to_owned();
    let changed = format!("{:?}", s.last_updated_time().or(s.creation_time()));
    Some((
        s.stack_status().unwrap().as_str().to_owned(),
        changed,
        change_sets,
        template,
    ))
}

fn actions(diff: &Value) -> Vec<(String, String)> {
    diff["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["action"].as_str().unwrap().to_owned(),
                c["logicalId"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

async fn a_preview_of_a_create_an_update_and_nothing_to_do_changes_nothing(backend: Backend) {
    let h = backend.harness("diff").await;
    let table = h.steps.registry.table().to_owned();
    let repo = GitRepo::new("diff");
    let first = repo.commit(&[("t.yaml", QUEUE)], "queue");
    let name = unique_name("diff").replace('-', "x");
    h.apply(&format!(
        "stacks:\n  - name: {name}\n    source: {{git: '{}', path: t.yaml}}\n    tags: {{team: orders}}\n",
        repo.file_url()
    ))
    .await;

    // A create: previewed, and no stack left behind (not even in review).
    let create = diff_json(backend, &table, &[&name]).await;
    assert_eq!(create["kind"], "Create");
    assert_eq!(create["revision"], first.as_str());
    assert_eq!(actions(&create), [("Add".to_owned(), "Queue".to_owned())]);
    assert_eq!(
        observed(backend, &name).await,
        None,
        "the placeholder was deleted"
    );
    assert_eq!(h.entry(&name).await.status.phase, Phase::Pending);

    assert!(matches!(h.reconcile(&name).await, Outcome::Succeeded(_)));
    // (The emulator keeps the executed change set listed; AWS drops it.)
    let before = observed(backend, &name).await.unwrap();

    // An update: the new resource shown, the stack untouched.
    let second = repo.commit(&[("t.yaml", QUEUE_AND_TOPIC)], "topic");
    let update = diff_json(backend, &table, &[&name]).await;
    assert_eq!(update["kind"], "Update");
    assert_eq!(update["revision"], second.as_str());
    assert!(
        actions(&update).contains(&("Add".to_owned(), "Topic".to_owned())),
        "{update}"
    );
    assert_eq!(observed(backend, &name).await.unwrap(), before);

    // Nothing to do at the deployed commit: said in words.
    let out = stacksync_with(backend, &table, &["diff", &name, "--ref", &first]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("no changes"), "{text}");
    assert!(text.contains(&first[..12]), "{text}");
    assert_eq!(observed(backend, &name).await.unwrap(), before);

    // The registry saw none of it.
    let entry = h.entry(&name).await;
    assert_eq!(entry.status.phase, Phase::Ready);
    assert_eq!(entry.status.applied.last_applied_revision, Some(first));
    assert!(entry.lease.is_none());
}

/// A change that replaces a resource is previewed as one: the row says
/// `replacement: True` (as AWS documents `ResourceChange.Replacement`), and
/// the text says the resource is replaced.
async fn a_preview_of_a_replacement_says_so(backend: Backend) {
    if backend == Backend::Moto {
        return backend.skip(
            "a_preview_of_a_replacement_says_so",
            "moto's change sets report no replacements (ResourceChange.Replacement is never set)",
        );
    }
    let h = backend.harness("diffrep").await;
    let table = h.steps.registry.table().to_owned();
    let repo = GitRepo::new("diffrep");
    repo.commit(&[("t.yaml", named_queue("a", 30).as_slice())], "queue a");
    let name = unique_name("diffrep").replace('-', "x");
    h.apply(&format!(
        "stacks:\n  - name: {name}\n    source: {{git: '{}', path: t.yaml}}\n",
        repo.file_url()
    ))
    .await;
    assert!(matches!(h.reconcile(&name).await, Outcome::Succeeded(_)));
    let before = observed(backend, &name).await.unwrap();

    repo.commit(&[("t.yaml", named_queue("b", 30).as_slice())], "queue b");
    let update = diff_json(backend, &table, &[&name]).await;
    let rows = update["changes"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{update}");
    assert_eq!(
        (
            &rows[0]["action"],
            &rows[0]["logicalId"],
            &rows[0]["replacement"]
        ),
        (&"Modify".into(), &"Queue".into(), &"True".into()),
        "{update}"
    );
    let out = stacksync_with(backend, &table, &["diff", &name]).await;
    let text = stdout(&out);
    assert!(
        text.contains("Queue") && text.to_lowercase().contains("replace"),
        "{text}"
    );
    assert_eq!(
        observed(backend, &name).await.unwrap(),
        before,
        "nothing changed"
    );
}

/// A change of the template's outputs alone: previewed as something a run
/// applies (not "no changes"), and applied by the run. LocalStack, as AWS,
/// makes such a change set `AVAILABLE` with no resource change in it (runs
/// once took it for "in sync", and the output never changed); moto lists
/// each resource as modified.
async fn an_output_change_alone_is_previewed_and_applied(backend: Backend) {
    const BEFORE: &[u8] =
        b"Resources:\n  Queue: {Type: AWS::SQS::Queue}\nOutputs:\n  Version: {Value: one}\n";
    const AFTER: &[u8] =
        b"Resources:\n  Queue: {Type: AWS::SQS::Queue}\nOutputs:\n  Version: {Value: two}\n";
    let h = backend.harness("diffout").await;
    let table = h.steps.registry.table().to_owned();
    let repo = GitRepo::new("diffout");
    repo.commit(&[("t.yaml", BEFORE)], "one");
    let name = unique_name("diffout").replace('-', "x");
    h.apply(&format!(
        "stacks:\n  - name: {name}\n    source: {{git: '{}', path: t.yaml}}\n",
        repo.file_url()
    ))
    .await;
    assert!(matches!(h.reconcile(&name).await, Outcome::Succeeded(_)));
    let output = || async {
        let stack = backend.stack(&name).await;
        stack
            .outputs()
            .iter()
            .find(|o| o.output_key() == Some("Version"))
            .and_then(|o| o.output_value())
            .map(str::to_owned)
    };
    assert_eq!(output().await.as_deref(), Some("one"));

    repo.commit(&[("t.yaml", AFTER)], "two");
    let update = diff_json(backend, &table, &[&name]).await;
    match backend {
        Backend::Moto => assert_eq!(actions(&update), [("Modify".into(), "Queue".into())]),
        Backend::LocalStack => {
            assert_eq!(actions(&update), Vec::<(String, String)>::new());
            assert_eq!(update["beyondResources"], true, "{update}");
            let out = stacksync_with(backend, &table, &["diff", &name]).await;
            let text = stdout(&out);
            assert!(text.contains("a run executes it"), "{text}");
        }
    }
    assert_eq!(
        output().await.as_deref(),
        Some("one"),
        "the preview changed nothing"
    );
    assert!(matches!(h.reconcile(&name).await, Outcome::Succeeded(_)));
    assert_eq!(output().await.as_deref(), Some("two"));
    assert_eq!(
        h.entry(&name).await.status.applied.outputs["Version"],
        "two"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_preview_of_an_unknown_entry_or_a_missing_template_says_what_is_wrong() {
    let h = Harness::new("diffbad").await;
    let table = h.steps.registry.table().to_owned();
    let out = stacksync(&table, &["diff", "nosuchstack"]).await;
    assert!(!out.status.success());
    assert!(stderr(&out).contains("nosuchstack"), "{}", stderr(&out));

    let repo = GitRepo::new("diffbad");
    repo.commit(&[("other.yaml", QUEUE)], "other");
    let name = unique_name("diffbad").replace('-', "x");
    h.apply(&format!(
        "stacks:\n  - name: {name}\n    source: {{git: '{}', path: t.yaml}}\n",
        repo.file_url()
    ))
    .await;
    let out = stacksync(&table, &["diff", &name]).await;
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains(&name) && err.contains("t.yaml"), "{err}");
    assert_eq!(observed(Backend::Moto, &name).await, None);
}

/// A queue whose template is over CloudFormation's `TemplateBody` limit
/// (51,200 bytes): the preview has to store it in the bucket first.
fn large_queue() -> Vec<u8> {
    let padding = "x".repeat(MAX_TEMPLATE_BODY);
    format!("Metadata:\n  Padding: {padding}\nResources:\n  Queue: {{Type: AWS::SQS::Queue}}\n")
        .into_bytes()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_preview_of_a_large_template_with_a_bucket_not_made_yet_makes_it_as_a_local_run_would() {
    let h = Harness::new("difflarge").await;
    let table = h.steps.registry.table().to_owned();
    let repo = GitRepo::new("difflarge");
    let template = large_queue();
    assert!(template.len() > MAX_TEMPLATE_BODY);
    let first = repo.commit(&[("t.yaml", &template)], "a large queue");
    let name = unique_name("difflarge").replace('-', "x");
    h.apply(&format!(
        "stacks:\n  - name: {name}\n    source: {{git: '{}', path: t.yaml}}\n",
        repo.file_url()
    ))
    .await;
    // A fresh installation's bucket, as the emulator has none of it yet.
    let bucket = unique_name("difffresh").to_lowercase();
    let s3 = Emulator::shared().s3();
    assert!(s3.head_bucket().bucket(&bucket).send().await.is_err());

    let out = stacksync(&table, &["--bucket", &bucket, "-o", "json", "diff", &name]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let create = serde_json::from_str::<Value>(&stdout(&out)).unwrap()["diff"].clone();
    assert_eq!(create["kind"], "Create");
    assert_eq!(create["revision"], first.as_str());
    assert_eq!(actions(&create), [("Add".to_owned(), "Queue".to_owned())]);
    assert_eq!(
        observed(Backend::Moto, &name).await,
        None,
        "the placeholder was deleted"
    );
    // The bucket made as a local run makes it, and the stored template deleted after.
    let previews = s3
        .list_objects_v2()
        .bucket(&bucket)
        .prefix("previews/")
        .send()
        .await
        .unwrap();
    assert_eq!(previews.contents().len(), 0, "{previews:?}");
}

stacksync_testkit::scenarios!(
    a_preview_of_a_create_an_update_and_nothing_to_do_changes_nothing,
    a_preview_of_a_replacement_says_so,
    an_output_change_alone_is_previewed_and_applied,
);
