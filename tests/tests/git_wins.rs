//! Git wins: a stack changed outside stacksync (updated, deleted, in this
//! account and region or another) is found — by the scheduler's health
//! check, or by the run an event starts — and put back by a change set, with
//! the status saying what was found and undone. Against the emulator's
//! CloudFormation, DynamoDB and S3, templates in real Git repositories, the
//! runs through the reconcile state machine (the local runner), the
//! scheduler's starts recorded and then run.
#![allow(clippy::unwrap_used)]
// tests: a failed unwrap is a failed test
// The run's future nests the interpreter, the steps and their ports deeply.
#![recursion_limit = "256"]

use serde_json::json;
use stacksync::adapters::cloudformation::SdkCloudFormationFactory;
use stacksync::adapters::git::GitFetcher;
use stacksync::asl::Outcome;
use stacksync::clock::now_millis;
use stacksync::fakes::RecordingStarter;
use stacksync::ports::Trigger;
use stacksync::registry::{Entries, Registry};
use stacksync::seen::Change;
use stacksync::status::Phase;
use stacksync::triggers::drift::{Config as DriftConfig, DriftPass, DriftReport};
use stacksync::triggers::scheduler::judge::Reason;
use stacksync::triggers::scheduler::{Config, Report, Scheduler};
use stacksync_testkit::backend::{Backend, settled};
use stacksync_testkit::git::GitRepo;
use stacksync_testkit::harness::Harness;
use stacksync_testkit::iam::as_function;
use stacksync_testkit::{Emulator, unique_name};

const QUEUE: &[u8] = b"Resources:
  Queue:
    Type: AWS::SQS::Queue
    Properties:
      VisibilityTimeout: 30
";

/// What someone deploys by hand: the queue, and a topic nobody asked for.
const EDITED: &str = r#"{"Resources": {
  "Queue": {"Type": "AWS::SQS::Queue", "Properties": {"VisibilityTimeout": 30}},
  "Opened": {"Type": "AWS::SNS::Topic"}}}"#;

const OTHER_ACCOUNT_ROLE: &str = "arn:aws:iam::210987654321:role/stacksync-target";

type TestScheduler = Scheduler<Registry, RecordingStarter, GitFetcher, SdkCloudFormationFactory>;

/// A stack name no other test uses (letters, digits and hyphens only).
fn stack_name(prefix: &str) -> String {
    unique_name(prefix).replace('-', "x")
}

/// A harness with one stack registered (`extra` lines added to its entry)
/// and reconciled: `Ready`, its stack seen as the run left it.
async fn reconciled_stack(
    backend: Backend,
    label: &str,
) -> (Harness<SdkCloudFormationFactory>, String, GitRepo) {
    let h = backend.harness(label).await;
    let repo = GitRepo::new(label);
    repo.commit(&[("stack.yaml", QUEUE)], "queue");
    let name = stack_name(label);
    h.apply(&format!(
        "stacks:\n  - name: {name}\n    source: {{git: '{}', path: stack.yaml}}\n",
        repo.file_url()
    ))
    .await;
    run(&h, &name, json!({"kind": "manual"})).await;
    let entry = h.entry(&name).await;
    assert_eq!(entry.status.phase, Phase::Ready, "{:?}", entry.status);
    assert!(
        entry.status.applied.seen.is_some(),
        "the run records what it left"
    );
    (h, name, repo)
}

/// Runs one execution of `name` with `trigger`; it must succeed.
async fn run(h: &Harness<SdkCloudFormationFactory>, name: &str, trigger: serde_json::Value) {
    let outcome = h
        .reconcile_with(name, json!({"stackId": name, "trigger": trigger}))
        .await;
    assert!(
        matches!(outcome, Outcome::Succeeded(_)),
        "{outcome:?}; status {:?}",
        h.entry(name).await.status
    );
}

/// The installation's scheduler over the harness's registry, its starts
/// recorded (then run by [`run_started`]).
fn scheduler(backend: Backend, h: &Harness<SdkCloudFormationFactory>) -> TestScheduler {
    Scheduler {
        registry: h.steps.registry.clone(),
        starter: RecordingStarter::new(),
        sources: GitFetcher::new(std::env::temp_dir()),
        // As deployed: target roles assumed as this installation.
        cloudformation: SdkCloudFormationFactory::new(backend.sdk_config())
            .for_installation(h.steps.registry.table()),
        config: Config::default(),
    }
}

/// The installation's drift function over the harness's registry.
fn drift_pass(
    backend: Backend,
    h: &Harness<SdkCloudFormationFactory>,
) -> DriftPass<Registry, SdkCloudFormationFactory> {
    DriftPass {
        registry: h.steps.registry.clone(),
        cloudformation: SdkCloudFormationFactory::new(backend.sdk_config())
            .for_installation(h.steps.registry.table()),
        config: DriftConfig::default(),
    }
}

async fn drift_run(d: &DriftPass<Registry, SdkCloudFormationFactory>) -> DriftReport {
    let report = as_function("drift", d.run(now_millis())).await.unwrap();
    assert_eq!(report.errors, Vec::<String>::new());
    report
}

async fn scheduler_run(s: &TestScheduler) -> Report {
    let report = as_function("scheduler", s.run(now_millis())).await.unwrap();
    assert_eq!(report.errors, Vec::<String>::new());
    report
}

/// Runs every execution the scheduler started (as Step Functions would).
async fn run_started(h: &Harness<SdkCloudFormationFactory>, s: &TestScheduler, already: usize) {
    for (_, stack, trigger) in s.starter.started().into_iter().skip(already) {
        run(h, &stack, serde_json::to_value(&trigger).unwrap()).await;
    }
}

async fn template_of(cfn: &aws_sdk_cloudformation::Client, name: &str) -> String {
    cfn.get_template()
        .stack_name(name)
        .send()
        .await
        .unwrap()
        .template_body()
        .unwrap_or_default()
        .to_owned()
}

async fn stack_id(cfn: &aws_sdk_cloudformation::Client, name: &str) -> Option<String> {
    let out = cfn.describe_stacks().stack_name(name).send().await.ok()?;
    out.stacks()
        .first()
        .and_then(|s| s.stack_id())
        .map(str::to_owned)
}

/// CloudFormation in `region`, in the installation's account.
fn cloudformation_in(region: &str) -> aws_sdk_cloudformation::Client {
    let config = Emulator::shared().sdk_config();
    aws_sdk_cloudformation::Client::from_conf(
        aws_sdk_cloudformation::config::Builder::from(&config)
            .region(aws_config::Region::new(region.to_owned()))
            .build(),
    )
}

/// CloudFormation in the account of [`OTHER_ACCOUNT_ROLE`].
async fn cloudformation_there() -> aws_sdk_cloudformation::Client {
    let config = Emulator::shared().sdk_config();
    aws_sdk_cloudformation::Client::from_conf(
        aws_sdk_cloudformation::config::Builder::from(&config)
            .credentials_provider(
                aws_config::sts::AssumeRoleProvider::builder(OTHER_ACCOUNT_ROLE)
                    .session_name("someone-else")
                    .configure(&config)
                    .build()
                    .await,
            )
            .build(),
    )
}

async fn update_out_of_band(cfn: &aws_sdk_cloudformation::Client, name: &str) {
    cfn.update_stack()
        .stack_name(name)
        .template_body(EDITED)
        .send()
        .await
        .unwrap();
    assert_eq!(settled(cfn, name).await.as_deref(), Some("UPDATE_COMPLETE"));
    assert!(template_of(cfn, name).await.contains("Opened"));
}

async fn an_out_of_band_update_is_found_by_the_scheduler_and_put_back_by_the_run_it_starts(
    backend: Backend,
) {
    let (h, name, _repo) = reconciled_stack(backend, "gwupdate").await;
    let cfn = backend.cloudformation();
    let s = scheduler(backend, &h);

    // The stack's first drift detection comes first (moto's ends failed at
    // once, saying it cannot detect drift): started, then read, by the
    // drift function.
    if backend == Backend::LocalStack {
        backend.skip(
            "an_out_of_band_update_is_found_by_the_scheduler_and_put_back_by_the_run_it_starts (its first part: the stack's first drift detection)",
            "LocalStack's community core answers DetectStackDrift \"not emulated\"",
        );
    } else {
        let d = drift_pass(backend, &h);
        assert_eq!(drift_run(&d).await.started, 1);
        assert_eq!(drift_run(&d).await.recorded, 1);
        let reason = h.entry(&name).await.status.findings.drift.unwrap().reason;
        assert_eq!(
            reason.as_deref(),
            Some("the emulator (moto) does not detect drift")
        );
    }
    // Fine: nothing started, nothing written.
    let before = h.entry(&name).await;
    let idle = scheduler_run(&s).await;
    assert_eq!((idle.stacks_watched, idle.stacks_fine), (1, 1));
    assert!(idle.started.is_empty(), "{idle:?}");
    assert_eq!(h.entry(&name).await, before, "a fine stack costs no write");

    update_out_of_band(&cfn, &name).await;
    let report = scheduler_run(&s).await;
    let started: Vec<_> = report
        .started
        .iter()
        .map(|r| (r.stack.as_str(), r.reason, r.change))
        .collect();
    // LocalStack never moves a stack's LastUpdatedTime (AWS does, on every
    // update: TESTING.md): there the update is found by its new status.
    let found_by_scheduler = match backend {
        Backend::Moto => Change::Updated,
        Backend::LocalStack => Change::StatusChanged,
    };
    assert_eq!(
        started,
        [(name.as_str(), Reason::Changed, Some(found_by_scheduler))]
    );
    run_started(&h, &s, 0).await;

    let status = h.entry(&name).await.status;
    assert_eq!(status.phase, Phase::Ready);
    let message = status.message.unwrap_or_default();
    let said = match backend {
        Backend::Moto => "putting back a change: the stack was updated outside stacksync",
        Backend::LocalStack => {
            "putting back a change: the stack is UPDATE_COMPLETE (stacksync left it CREATE_COMPLETE)"
        }
    };
    assert!(message.contains(said), "{message}");
    let found = status.findings.out_of_band.expect("what was found is kept");
    assert_eq!((found.change, found.undone), (found_by_scheduler, true));
    let template = template_of(&cfn, &name).await;
    assert!(
        !template.contains("Opened") && template.contains("VisibilityTimeout"),
        "Git's template is back: {template}"
    );

    // Put back and seen again: the next check finds it fine.
    let again = scheduler_run(&s).await;
    assert!(again.started.is_empty(), "{again:?}");
    assert_eq!(again.stacks_fine, 1);
}

async fn an_out_of_band_update_is_put_back_by_the_next_run_whatever_started_it(backend: Backend) {
    // The run a CloudFormation event starts (or any other) compares the
    // stack with what the last run left, before taking the in-sync shortcut.
    let (h, name, _repo) = reconciled_stack(backend, "gwevent").await;
    let cfn = backend.cloudformation();
    update_out_of_band(&cfn, &name).await;
    h.take_states();
    run(&h, &name, json!({"kind": "event"})).await;
    assert!(h.take_states().contains(&"ChangeSet".to_owned()));
    let status = h.entry(&name).await.status;
    assert!(
        status
            .message
            .as_deref()
            .unwrap_or_default()
            .contains("putting back a change"),
        "{status:?}"
    );
    assert!(!template_of(&cfn, &name).await.contains("Opened"));
}

async fn an_out_of_band_delete_is_found_and_the_stack_recreated(backend: Backend) {
    let (h, name, _repo) = reconciled_stack(backend, "gwdelete").await;
    let cfn = backend.cloudformation();
    let first_id = stack_id(&cfn, &name).await.unwrap();
    cfn.delete_stack().stack_name(&name).send().await.unwrap();
    assert_eq!(settled(&cfn, &name).await, None);

    let s = scheduler(backend, &h);
    let report = scheduler_run(&s).await;
    assert_eq!(
        report.started.iter().map(|r| r.change).collect::<Vec<_>>(),
        [Some(Change::Deleted)]
    );
    run_started(&h, &s, 0).await;
    let new_id = stack_id(&cfn, &name).await.expect("recreated");
    assert_ne!(new_id, first_id);
    let status = h.entry(&name).await.status;
    assert_eq!(status.phase, Phase::Ready);
    assert!(
        status
            .message
            .as_deref()
            .unwrap_or_default()
            .contains("the stack was deleted outside stacksync"),
        "{status:?}"
    );
    assert_eq!(
        status.applied.seen.map(|seen| seen.stack_id),
        Some(new_id),
        "the new stack is the one watched"
    );
    assert!(scheduler_run(&s).await.started.is_empty());
}

/// Deleted and made again with the entry's tags (by a pipeline that still
/// deploys it, say) but another template: another StackId, found by the
/// scheduler, and Git's template put back on the new stack.
async fn an_out_of_band_replacement_is_found_and_put_back(backend: Backend) {
    let (h, name, _repo) = reconciled_stack(backend, "gwreplace").await;
    let cfn = backend.cloudformation();
    let first_id = stack_id(&cfn, &name).await.unwrap();
    let tags = backend.stack_tags(&name).await;
    cfn.delete_stack().stack_name(&name).send().await.unwrap();
    assert_eq!(settled(&cfn, &name).await, None);
    let tags: Vec<_> = tags
        .iter()
        .map(|(k, v)| {
            aws_sdk_cloudformation::types::Tag::builder()
                .key(k)
                .value(v)
                .build()
        })
        .collect();
    cfn.create_stack()
        .stack_name(&name)
        .template_body(EDITED)
        .set_tags(Some(tags))
        .send()
        .await
        .unwrap();
    assert_eq!(
        settled(&cfn, &name).await.as_deref(),
        Some("CREATE_COMPLETE")
    );
    let second_id = stack_id(&cfn, &name).await.unwrap();
    assert_ne!(second_id, first_id);

    let s = scheduler(backend, &h);
    let report = scheduler_run(&s).await;
    assert_eq!(
        report.started.iter().map(|r| r.change).collect::<Vec<_>>(),
        [Some(Change::Replaced)]
    );
    run_started(&h, &s, 0).await;
    let status = h.entry(&name).await.status;
    assert_eq!(status.phase, Phase::Ready);
    let message = status.message.unwrap_or_default();
    assert!(
        message.contains("the stack was replaced outside stacksync"),
        "{message}"
    );
    assert!(!template_of(&cfn, &name).await.contains("Opened"));
    assert_eq!(
        stack_id(&cfn, &name).await,
        Some(second_id),
        "updated in place, not made anew"
    );
    assert!(scheduler_run(&s).await.started.is_empty());
}

/// A stack reconciled with `setting` in its entry (and `destroyOnDelete`).
async fn with_setting(
    backend: Backend,
    label: &str,
    setting: &str,
) -> (Harness<SdkCloudFormationFactory>, String) {
    let h = backend.harness(label).await;
    let repo = GitRepo::new(label);
    repo.commit(&[("stack.yaml", QUEUE)], "queue");
    let name = stack_name(label);
    h.apply(&format!(
        "stacks:\n  - name: {name}\n    source: {{git: '{}', path: stack.yaml}}\n    \
         destroyOnDelete: true\n    {setting}\n",
        repo.file_url()
    ))
    .await;
    run(&h, &name, json!({"kind": "manual"})).await;
    (h, name)
}

/// Runs `name` again after a change made in the console (which moves no
/// `LastUpdatedTime`): put back without a change set, and said so.
async fn put_back_without_a_change_set(
    h: &Harness<SdkCloudFormationFactory>,
    name: &str,
    said: &str,
) {
    let change_sets = h
        .cloudformation_calls
        .count_of("cloudformation:CreateChangeSet");
    run(h, name, json!({"kind": "manual"})).await;
    let message = h.entry(name).await.status.message.unwrap_or_default();
    assert_eq!(message, format!("in sync: nothing to change; {said}"));
    assert_eq!(
        h.cloudformation_calls
            .count_of("cloudformation:CreateChangeSet"),
        change_sets,
        "no change set"
    );
}

/// Termination protection, which no change set carries: turned on after
/// the create, put back after someone turns it off, and lifted to delete
/// the stack with its entry (that it is lifted before the delete, which
/// LocalStack does not refuse on a protected stack as AWS does, is shown
/// against the scripted CloudFormation: tests/tests/scripted.rs).
async fn termination_protection_follows_the_spec(backend: Backend) {
    if backend == Backend::Moto {
        // tests/tests/messages.rs: what a run says then.
        return backend.skip(
            "termination_protection_follows_the_spec",
            "moto does not implement UpdateTerminationProtection (a bare HTTP 500)",
        );
    }
    let (h, name) = with_setting(backend, "gwprotect", "terminationProtection: true").await;
    let protected = || async { backend.stack(&name).await.enable_termination_protection() };
    assert_eq!(protected().await, Some(true));
    backend
        .cloudformation()
        .update_termination_protection()
        .stack_name(&name)
        .enable_termination_protection(false)
        .send()
        .await
        .unwrap();
    put_back_without_a_change_set(&h, &name, "termination protection turned on").await;
    assert_eq!(protected().await, Some(true));

    h.apply("stacks: []\n").await;
    run(&h, &name, json!({"kind": "manual"})).await;
    assert!(h.steps.registry.get(&name).await.unwrap().is_none());
    assert_eq!(backend.settled(&name).await, None, "deleted");
}

/// The stack policy, which no change set carries either: set after the
/// create, and put back after someone replaces it.
async fn the_stack_policy_follows_the_spec(backend: Backend) {
    if backend == Backend::LocalStack {
        return backend.skip(
            "the_stack_policy_follows_the_spec",
            "LocalStack's community core answers SetStackPolicy and GetStackPolicy \"not emulated\" (HTTP 501)",
        );
    }
    let (h, name) = with_setting(
        backend,
        "gwpolicy",
        "stackPolicy: {Statement: [{Effect: Deny, Action: 'Update:Replace', Principal: '*', Resource: '*'}]}",
    )
    .await;
    let cfn = backend.cloudformation();
    let policy = || async {
        let out = cfn
            .get_stack_policy()
            .stack_name(&name)
            .send()
            .await
            .unwrap();
        out.stack_policy_body().unwrap_or_default().to_owned()
    };
    let set = policy().await;
    assert!(
        set.contains("Deny") && set.contains("Update:Replace"),
        "{set}"
    );
    cfn.set_stack_policy()
        .stack_name(&name)
        .stack_policy_body(
            r#"{"Statement": [{"Effect": "Allow", "Action": "Update:*", "Principal": "*", "Resource": "*"}]}"#,
        )
        .send()
        .await
        .unwrap();
    put_back_without_a_change_set(&h, &name, "stack policy set").await;
    assert_eq!(policy().await, set);
}

async fn force_makes_a_change_set_for_a_stack_in_sync(backend: Backend) {
    let (h, name, _repo) = reconciled_stack(backend, "gwforce").await;
    // Without force: the shortcut, no change set.
    h.take_states();
    run(&h, &name, json!({"kind": "manual"})).await;
    assert!(!h.take_states().contains(&"ChangeSet".to_owned()));
    assert_eq!(
        h.entry(&name).await.status.message.as_deref(),
        Some("in sync: nothing to change")
    );
    // With force: a change set, found empty, and said so.
    let forced = serde_json::to_value(Trigger {
        force: true,
        ..Trigger::default()
    })
    .unwrap();
    run(&h, &name, forced).await;
    assert!(h.take_states().contains(&"ChangeSet".to_owned()));
    let message = h.entry(&name).await.status.message.unwrap_or_default();
    assert!(message.contains("the change set was empty"), "{message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn stacks_in_another_region_and_another_account_are_listed_once_each_and_their_changes_found()
{
    // One stack in eu-west-3 and one in another account (us-east-1 there),
    // besides one at home: three listings, one per account and region.
    let h = Harness::new("gwregions").await;
    let backend = Backend::Moto;
    let (home, abroad, elsewhere) = (
        stack_name("gwhome"),
        stack_name("gwabroad"),
        stack_name("gwacct"),
    );
    let repo = GitRepo::new("gwregions");
    repo.commit(&[("stack.yaml", QUEUE)], "queue");
    let source = format!("source: {{git: '{}', path: stack.yaml}}", repo.file_url());
    h.apply(&format!(
        "stacks:\n  - name: {home}\n    {source}\n  \
         - name: {abroad}\n    {source}\n    region: eu-west-3\n  \
         - name: {elsewhere}\n    {source}\n    assumeRoleArn: {OTHER_ACCOUNT_ROLE}\n"
    ))
    .await;
    for name in [&home, &abroad, &elsewhere] {
        run(&h, name, json!({"kind": "manual"})).await;
    }
    let paris = cloudformation_in("eu-west-3");
    let there = cloudformation_there().await;
    assert!(stack_id(&paris, &abroad).await.is_some());
    assert!(stack_id(&there, &elsewhere).await.is_some());

    let s = scheduler(backend, &h);
    let idle = scheduler_run(&s).await;
    assert_eq!(
        (idle.stacks_watched, idle.stacks_fine, idle.listings),
        (3, 3, 3),
        "{idle:?}"
    );
    assert!(idle.started.is_empty(), "{idle:?}");
    // The drift function lists the same three on its own (through the
    // target role for the other account) and starts a first detection of
    // each.
    let drift = drift_run(&drift_pass(Backend::Moto, &h)).await;
    assert_eq!((drift.listings, drift.started), (3, 3), "{drift:?}");

    update_out_of_band(&paris, &abroad).await;
    there
        .delete_stack()
        .stack_name(&elsewhere)
        .send()
        .await
        .unwrap();
    assert_eq!(settled(&there, &elsewhere).await, None);
    let report = scheduler_run(&s).await;
    let mut started: Vec<_> = report
        .started
        .iter()
        .map(|r| (r.stack.clone(), r.change))
        .collect();
    started.sort();
    let mut expected = vec![
        (abroad.clone(), Some(Change::Updated)),
        (elsewhere.clone(), Some(Change::Deleted)),
    ];
    expected.sort();
    assert_eq!(started, expected);
    assert_eq!(report.stacks_fine, 1, "the home stack");

    run_started(&h, &s, 0).await;
    assert!(!template_of(&paris, &abroad).await.contains("Opened"));
    assert!(
        stack_id(&there, &elsewhere).await.is_some(),
        "recreated there"
    );
    let again = scheduler_run(&s).await;
    assert!(again.started.is_empty(), "{again:?}");
    assert_eq!(again.stacks_fine, 3);
}

stacksync_testkit::scenarios!(
    an_out_of_band_update_is_found_by_the_scheduler_and_put_back_by_the_run_it_starts,
    an_out_of_band_update_is_put_back_by_the_next_run_whatever_started_it,
    an_out_of_band_delete_is_found_and_the_stack_recreated,
    an_out_of_band_replacement_is_found_and_put_back,
    termination_protection_follows_the_spec,
    the_stack_policy_follows_the_spec,
    force_makes_a_change_set_for_a_stack_in_sync,
);
