//! Parameters read at reconcile time and stacks that depend on stacks,
//! against the emulator: SSM String and SecureString values and a key of a
//! Secrets Manager secret (a rotation updates the stack once, and the
//! values are in no log line, status, execution state or stored object);
//! a Git sync deployment file alone; a chain network → database → app
//! passing outputs, run as the scheduler runs it (what is due, in turn).
#![allow(clippy::unwrap_used)]
// tests: a failed unwrap is a failed test
#![recursion_limit = "256"]

use std::collections::BTreeMap;

use stacksync::adapters::cloudformation::SdkCloudFormationFactory;
use stacksync::asl::Outcome;
use stacksync::clock::now_millis;
use stacksync::status::{Phase, StallReason};
use stacksync_testkit::backend::Backend;
use stacksync_testkit::chain::{Chain, DATABASE};
use stacksync_testkit::git::GitRepo;
use stacksync_testkit::harness::Harness;
use stacksync_testkit::{Emulator, logs, unique_name};

/// The stack's parameters as the emulator's CloudFormation has them.
async fn stack_parameters(stack: &str) -> BTreeMap<String, String> {
    Emulator::shared().stack_parameters(stack).await
}

async fn put_ssm(name: &str, value: &str, kind: aws_sdk_ssm::types::ParameterType) {
    aws_sdk_ssm::Client::new(&Emulator::shared().sdk_config())
        .put_parameter()
        .name(name)
        .value(value)
        .r#type(kind)
        .overwrite(true)
        .send()
        .await
        .unwrap();
}

const SECRETS_TEMPLATE: &[u8] = b"Parameters:
  Region: {Type: String}
  Password: {Type: String, NoEcho: true}
  ApiKey: {Type: String, NoEcho: true}
Resources:
  Queue:
    Type: AWS::SQS::Queue
Outputs:
  Echoed: {Value: !Ref Password}
  QueueUrl: {Value: !Ref Queue}
";

#[tokio::test(flavor = "multi_thread")]
async fn ssm_and_secrets_manager_values_rotate_into_one_update_and_are_never_shown() {
    let logs = logs::capture();
    let h = Harness::new("values").await;
    let repo = GitRepo::new("values");
    repo.commit(&[("t.yaml", SECRETS_TEMPLATE)], "template");
    let emulator = Emulator::shared();
    let plain = format!("/stacksync-tests/{}", unique_name("region"));
    put_ssm(
        &plain,
        "eu-west-1",
        aws_sdk_ssm::types::ParameterType::String,
    )
    .await;
    let secure = format!("/stacksync-tests/{}", unique_name("pw"));
    put_ssm(
        &secure,
        "pw-SECRET-one",
        aws_sdk_ssm::types::ParameterType::SecureString,
    )
    .await;
    let secret = emulator
        .put_secret("api", r#"{"key": "key-SECRET-one", "user": "app"}"#)
        .await;
    let name = unique_name("vals").replace('-', "x");
    h.apply(&format!(
        "stacks:\n  - name: {name}\n    source: {{git: '{}', path: t.yaml}}\n    parameters:\n      \
         Region: {{ssm: '{plain}'}}\n      Password: {{ssm: '{secure}'}}\n      \
         ApiKey: {{secret: '{secret}', key: key}}\n",
        repo.file_url()
    ))
    .await;
    assert!(matches!(h.reconcile(&name).await, Outcome::Succeeded(_)));
    let params = stack_parameters(&name).await;
    assert_eq!(params["Region"], "eu-west-1");
    // The template echoes the password into an output (CloudFormation
    // shows it there): the registry records it masked, the others as they are.
    let outputs = h.entry(&name).await.status.applied.outputs;
    assert_eq!(outputs["Echoed"], "****", "{outputs:?}");
    let echoed = output_of(&name, "Echoed").await;
    assert_eq!(
        echoed.map(|v| v.starts_with("pw-SECRET")),
        Some(true),
        "CloudFormation shows the value, not stacksync"
    );
    assert!(outputs["QueueUrl"].contains("://"), "{outputs:?}");
    // NoEcho: CloudFormation shows stars; the change set had the values.
    assert_eq!(h.entry(&name).await.status.phase, Phase::Ready);
    let provenance = h.entry(&name).await.status.inputs.provenance;
    let region = provenance.iter().find(|p| p.name == "Region").unwrap();
    assert!(region.from.contains(&plain), "{region:?}");
    assert!(
        provenance
            .iter()
            .filter(|p| p.name != "Region")
            .all(|p| p.value.is_none())
    );

    // Back in the queue after its interval: a rotation announces itself
    // nowhere else.
    let due = h
        .entry(&name)
        .await
        .status
        .times
        .next_reconcile_at
        .unwrap()
        .0;
    assert!(due > now_millis() + 9 * 60_000, "due at its interval (10m)");

    // In sync: nothing to change.
    assert!(matches!(h.reconcile(&name).await, Outcome::Succeeded(_)));
    let message = h.entry(&name).await.status.message.unwrap();
    assert!(message.starts_with("in sync"), "{message}");

    a_rotation_is_deployed_once(&h, &name, &secure).await;
    a_secret_for_a_parameter_without_no_echo_is_refused(&h, &repo, &secure).await;

    // Nowhere: logs, the status (and `get -o json`, which prints it), the
    // executions' states, the stored parameters.
    let entry = serde_json::to_string(&h.entry(&name).await).unwrap();
    let states = h.data.lock().unwrap().join("\n");
    let stored = stored_parameters(h.steps.blobs.bucket()).await;
    assert!(
        stored.contains(&secure),
        "the parameters were stored: {stored}"
    );
    // Every log line at the levels stacksync logs at, and every line of
    // stacksync's own at any level. (The SDK's wire trace, TRACE of
    // `aws_smithy_runtime`, shows request bodies, values included, as any
    // AWS SDK's does: README, troubleshooting.)
    let logged: String = logs
        .text()
        .lines()
        .filter(|l| !(l.contains(" TRACE ") || l.contains(" DEBUG ")) || l.contains(" stacksync::"))
        .collect::<Vec<_>>()
        .join("\n");
    shows_no_secret([
        ("logs", logged),
        ("status", entry),
        ("execution states", states),
        ("stored parameters", stored),
    ]);
}

/// Each text is not empty, and holds no secret value (every value the test
/// reads has `SECRET` in it).
fn shows_no_secret(texts: [(&str, String); 4]) {
    for (what, text) in texts {
        assert!(!text.is_empty(), "{what} is empty");
        if let Some(at) = text.find("SECRET") {
            let from = text[..at].rfind('\n').unwrap_or(0);
            panic!(
                "{what} shows a secret value: {}",
                &text[from..(at + 200).min(text.len())]
            );
        }
    }
}

/// The output `key` of `stack`, as CloudFormation shows it.
async fn output_of(stack: &str, key: &str) -> Option<String> {
    let described = Emulator::shared()
        .cloudformation()
        .describe_stacks()
        .stack_name(stack)
        .send()
        .await
        .unwrap();
    described.stacks()[0]
        .outputs()
        .iter()
        .find(|o| o.output_key() == Some(key))
        .and_then(|o| o.output_value())
        .map(str::to_owned)
}

/// Every parameters object stored in `bucket`, one after the other.
async fn stored_parameters(bucket: &str) -> String {
    let mut stored = String::new();
    let s3 = Emulator::shared().s3();
    let listed = s3.list_objects_v2().bucket(bucket).send().await.unwrap();
    for object in listed.contents() {
        let key = object.key().unwrap();
        if key.starts_with("parameters/") {
            let body = s3
                .get_object()
                .bucket(bucket)
                .key(key)
                .send()
                .await
                .unwrap();
            stored.push_str(&String::from_utf8_lossy(
                &body.body.collect().await.unwrap().into_bytes(),
            ));
        }
    }
    stored
}

/// Rotated (the SSM parameter `secure` of the stack `name`): exactly one
/// update, then in sync again.
async fn a_rotation_is_deployed_once(
    h: &Harness<SdkCloudFormationFactory>,
    name: &str,
    secure: &str,
) {
    let updated_before = stack_updated_at(name).await;
    put_ssm(
        secure,
        "pw-SECRET-two",
        aws_sdk_ssm::types::ParameterType::SecureString,
    )
    .await;
    assert!(matches!(h.reconcile(name).await, Outcome::Succeeded(_)));
    let message = h.entry(name).await.status.message.unwrap();
    assert!(
        message.starts_with("applied"),
        "the rotation is deployed: {message}"
    );
    assert_ne!(stack_updated_at(name).await, updated_before);
    assert!(matches!(h.reconcile(name).await, Outcome::Succeeded(_)));
    let message = h.entry(name).await.status.message.unwrap();
    assert!(message.starts_with("in sync"), "one update only: {message}");
}

/// A secret for a parameter the template does not mark NoEcho, where
/// DescribeStacks would show it: refused, nothing made.
async fn a_secret_for_a_parameter_without_no_echo_is_refused(
    h: &Harness<SdkCloudFormationFactory>,
    repo: &GitRepo,
    secure: &str,
) {
    let emulator = Emulator::shared();
    let exposed = unique_name("expo").replace('-', "x");
    repo.commit(
        &[(
            "open.yaml",
            b"Parameters:\n  Password: {Type: String}\nResources:\n  Queue: {Type: AWS::SQS::Queue}\n"
                as &[u8],
        )],
        "open",
    );
    h.apply(&format!(
        "stacks:\n  - name: {exposed}\n    source: {{git: '{}', path: open.yaml}}\n    parameters:\n      \
         Password: {{ssm: '{secure}'}}\n",
        repo.file_url()
    ))
    .await;
    assert!(matches!(h.reconcile(&exposed).await, Outcome::Failed(_)));
    let status = h.entry(&exposed).await.status;
    assert_eq!(
        status.stall_reason,
        Some(StallReason::SecretNotNoEcho),
        "{:?}",
        status.message
    );
    assert!(
        status
            .message
            .as_deref()
            .is_some_and(|m| m.contains(&format!("Password (from SSM parameter {secure})"))),
        "{:?}",
        status.message
    );
    assert_eq!(emulator.stack_status(&exposed).await, None, "nothing made");
}

async fn stack_updated_at(stack: &str) -> Option<String> {
    let out = Emulator::shared()
        .cloudformation()
        .describe_stacks()
        .stack_name(stack)
        .send()
        .await
        .unwrap();
    out.stacks()[0].last_updated_time().map(|t| t.to_string())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_value_fails_naming_it_and_a_deployment_file_alone_gives_the_template() {
    let h = Harness::new("missing").await;
    let repo = GitRepo::new("missing");
    repo.commit(
        &[
            ("stacks/q.yaml", b"Parameters:\n  Days: {Type: String}\nResources:\n  Queue: {Type: AWS::SQS::Queue}\n" as &[u8]),
            (
                "deploy/q.yaml",
                b"template-file-path: stacks/q.yaml\nparameters:\n  Days: 7\ntags:\n  team: platform\n",
            ),
        ],
        "git sync layout",
    );
    let name = unique_name("gsync").replace('-', "x");
    let missing = unique_name("nomiss").replace('-', "x");
    h.apply(&format!(
        "stacks:\n  - name: {name}\n    source: {{git: '{url}', deploymentFile: deploy/q.yaml}}\n  \
         - name: {missing}\n    source: {{git: '{url}', path: stacks/q.yaml}}\n    \
         parameters: {{Days: {{ssm: /stacksync-tests/not-there}}}}\n",
        url = repo.file_url()
    ))
    .await;
    assert!(matches!(h.reconcile(&name).await, Outcome::Succeeded(_)));
    assert_eq!(stack_parameters(&name).await["Days"], "7");
    assert_eq!(
        Emulator::shared()
            .stack_tags(&name)
            .await
            .get("team")
            .map(String::as_str),
        Some("platform")
    );
    let from = h.entry(&name).await.status.inputs.provenance;
    assert!(
        from.iter()
            .all(|p| p.from == "deployment file deploy/q.yaml"),
        "{from:?}"
    );

    assert!(!matches!(
        h.reconcile(&missing).await,
        Outcome::Succeeded(_)
    ));
    let status = h.entry(&missing).await.status;
    assert_eq!(status.stall_reason, Some(StallReason::MissingValue));
    let message = status.message.unwrap();
    assert!(
        message.contains("parameter Days: SSM parameter /stacksync-tests/not-there is not there"),
        "{message}"
    );
    assert_eq!(
        Emulator::shared().stack_status(&missing).await,
        None,
        "nothing made"
    );
}

/// The names of what ran (`Harness::run_due`), in order.
async fn run_due(h: &Harness<SdkCloudFormationFactory>, names: &[&str]) -> Vec<String> {
    h.run_due(names)
        .await
        .into_iter()
        .map(|(name, _)| name)
        .collect()
}

async fn a_chain_converges_in_order_and_only_a_changed_output_runs_what_reads_it(backend: Backend) {
    let h = backend.harness("chain").await;
    let chain = Chain::new("chain");
    let (net, db, app) = (chain.net.clone(), chain.db.clone(), chain.app.clone());
    let stacks = |cidr: &str, owner: &str| chain.stacks(cidr, owner);
    let names = chain.names();
    h.apply(&stacks("10", "a")).await;

    // From empty: the entries downstream are registered waiting (not due);
    // each is made due by what it waits for once that is Ready: one
    // execution per stack, in order, none of them polling.
    let waiting = h.entry(&app).await.status;
    assert_eq!(
        (waiting.phase, waiting.inputs.waiting_for.len()),
        (Phase::Pending, 2)
    );
    let ran = run_due(&h, &names).await;
    for name in names {
        assert_eq!(h.entry(name).await.status.phase, Phase::Ready, "{name}");
    }
    assert_eq!(ran, [net.clone(), db.clone(), app.clone()]);
    assert_eq!(backend.stack_parameters(&db).await["Vpc"], "vpc-10");
    assert_eq!(
        backend.stack_parameters(&app).await["Endpoint"],
        "db.vpc-10"
    );
    let vpc = h.entry(&db).await.status.inputs.provenance;
    assert_eq!(
        (vpc[0].from.clone(), vpc[0].value.clone()),
        (
            format!("stacks.yaml: output VpcId of stack {net}"),
            Some("vpc-10".to_owned())
        )
    );
    assert_eq!(
        h.entry(&net).await.status.applied.outputs,
        BTreeMap::from([("VpcId".to_owned(), "vpc-10".to_owned())])
    );
    assert!(run_due(&h, &names).await.is_empty(), "settled");

    // The network's output changes: the database, then the app, once each.
    h.apply(&stacks("20", "a")).await;
    assert_eq!(
        run_due(&h, &names).await,
        [net.clone(), db.clone(), app.clone()]
    );
    assert_eq!(backend.stack_parameters(&db).await["Vpc"], "vpc-20");
    assert_eq!(
        backend.stack_parameters(&app).await["Endpoint"],
        "db.vpc-20"
    );

    // A change that alters no output runs nothing downstream.
    h.apply(&stacks("20", "b")).await;
    assert_eq!(run_due(&h, &names).await, std::slice::from_ref(&net));
    assert_eq!(backend.stack_parameters(&net).await["Owner"], "b");

    // A push all three follow (the network's output changes with it): the
    // webhook starts all three at once (here downstream first). Those
    // downstream find that what they depend on has not run at the pushed
    // commit yet and wait (a short execution each) rather than deploy what
    // is about to change; each stack then deploys once, in order.
    let head = chain.push_new_output();
    for name in [&app, &db, &net] {
        let pushed = serde_json::json!({
            "stackId": name,
            "trigger": {"kind": "webhook", "revision": head},
        });
        assert!(matches!(
            h.reconcile_with(name, pushed).await,
            Outcome::Succeeded(_)
        ));
    }
    let waited = h.entry(&app).await.status;
    assert_eq!(waited.phase, Phase::Pending);
    let message = waited.message.unwrap();
    assert!(message.contains("not run at"), "app waited: {message}");
    assert_eq!(run_due(&h, &names).await, [db.clone(), app.clone()]);
    assert_eq!(backend.stack_parameters(&db).await["Vpc"], "net-20");
    assert_eq!(
        backend.stack_parameters(&app).await["Endpoint"],
        "db.net-20"
    );
    for name in names {
        let status = h.entry(name).await.status;
        assert_eq!(status.phase, Phase::Ready, "{name}");
        assert!(
            status.message.unwrap().starts_with("applied"),
            "{name}: one deploy each"
        );
    }
}

/// Values are read where the stack is: a stack in another account (its
/// `assumeRoleArn`) reads an SSM parameter of that account, and a stack of
/// the installation's account reads its output, through its role.
#[tokio::test(flavor = "multi_thread")]
async fn values_are_read_in_the_account_of_the_stack_that_holds_them() {
    let emulator = Emulator::shared();
    let h = Harness::new("xvalues").await;
    let repo = GitRepo::new("xvalues");
    repo.commit(
        &[
            (
                "net.yaml",
                b"Parameters:\n  Cidr: {Type: String}\nResources:\n  Queue: {Type: AWS::SQS::Queue}\nOutputs:\n  VpcId:\n    Value: !Join ['-', [vpc, !Ref Cidr]]\n" as &[u8],
            ),
            ("db.yaml", DATABASE.as_bytes()),
        ],
        "two accounts",
    );
    let target = "arn:aws:iam::210987654321:role/stacksync-target";
    let config = emulator.sdk_config();
    let assumed = emulator.assumed_config(target).await;
    let parameter = format!("/stacksync-tests/{}", unique_name("cidr"));
    aws_sdk_ssm::Client::new(&assumed)
        .put_parameter()
        .name(&parameter)
        .value("172")
        .r#type(aws_sdk_ssm::types::ParameterType::String)
        .send()
        .await
        .unwrap();
    let id = unique_name("x").replace('-', "x");
    let (net, db) = (format!("{id}net"), format!("{id}db"));
    h.apply(&format!(
        "stacks:\n  - name: {net}\n    source: {{git: '{url}', path: net.yaml}}\n    \
         assumeRoleArn: {target}\n    parameters: {{Cidr: {{ssm: '{parameter}'}}}}\n  \
         - name: {db}\n    source: {{git: '{url}', path: db.yaml}}\n    \
         parameters: {{Vpc: {{fromStack: {net}, output: VpcId}}}}\n",
        url = repo.file_url()
    ))
    .await;
    let ran: Vec<String> = run_due(&h, &[net.as_str(), db.as_str()]).await;
    assert_eq!(ran, [net.clone(), db.clone()]);
    assert_eq!(stack_parameters(&db).await["Vpc"], "vpc-172");
    // The parameter is not in the installation's account: read there, it
    // would have failed (MissingValue).
    let here = aws_sdk_ssm::Client::new(&config)
        .get_parameter()
        .name(&parameter)
        .send()
        .await;
    assert!(here.is_err(), "the parameter is only in the other account");
}

stacksync_testkit::scenarios!(
    a_chain_converges_in_order_and_only_a_changed_output_runs_what_reads_it
);

/// A run that ends `Ready` starts the dependents it makes due itself, on
/// its own machine: network → database → app, the first started by hand,
/// each next one by the run before it, no scheduler run in between.
#[tokio::test(flavor = "multi_thread")]
async fn a_chain_runs_each_stack_the_moment_the_one_before_is_ready_without_the_scheduler() {
    use stacksync::ports::{RunStarter, TriggerKind};
    use stacksync_testkit::parked::ChannelStarter;
    let mut h = Harness::new("upstream").await;
    let (starter, mut starts) = ChannelStarter::new();
    h.steps.starter = RunStarter::by(std::sync::Arc::new(starter));
    let chain = Chain::new("upstream");
    h.apply(&chain.stacks("10", "a")).await;

    let mut ran = vec![chain.net.clone()];
    let outcome = h.reconcile(&chain.net).await;
    assert!(matches!(outcome, Outcome::Succeeded(_)), "{outcome:?}");
    // Each start was made by the run before it, as it ended: it is there
    // the moment that run is over.
    while let Ok((stack, trigger)) = starts.try_recv() {
        assert_eq!(trigger.kind, TriggerKind::Upstream, "{stack}");
        let input = serde_json::json!({"stackId": stack, "trigger": trigger});
        let outcome = h.reconcile_with(&stack, input).await;
        assert!(
            matches!(outcome, Outcome::Succeeded(_)),
            "{stack}: {outcome:?}"
        );
        ran.push(stack);
    }
    assert_eq!(
        ran,
        [chain.net.clone(), chain.db.clone(), chain.app.clone()]
    );
    for name in chain.names() {
        assert_eq!(h.entry(name).await.status.phase, Phase::Ready, "{name}");
    }
    assert_eq!(
        Emulator::shared().stack_parameters(&chain.app).await["Endpoint"],
        "db.vpc-10"
    );

    // A change of the network's output: the database, then the app, again
    // each started by the run before it.
    chain.push_new_output();
    let outcome = h.reconcile(&chain.net).await;
    assert!(matches!(outcome, Outcome::Succeeded(_)), "{outcome:?}");
    let mut again = Vec::new();
    while let Ok((stack, trigger)) = starts.try_recv() {
        let input = serde_json::json!({"stackId": stack, "trigger": trigger});
        assert!(matches!(
            h.reconcile_with(&stack, input).await,
            Outcome::Succeeded(_)
        ));
        again.push(stack);
    }
    assert_eq!(again, [chain.db.clone(), chain.app.clone()]);
    assert_eq!(
        Emulator::shared().stack_parameters(&chain.app).await["Endpoint"],
        "db.net-10"
    );

    // A stack registered while the network is suspended waits for it; the
    // network resumed, its run ends in sync (no change set: template-upload
    // ends it) and starts the one that waited.
    use stacksync::registry::Specs;
    h.steps
        .registry
        .set_suspended(&chain.net, true, now_millis())
        .await
        .unwrap();
    let extra = format!("{}x", chain.app);
    h.apply(&format!(
        "{}  - name: {extra}\n    source: {{git: '{}', path: db.yaml}}\n    \
         parameters: {{Vpc: {{fromStack: {}, output: VpcId}}}}\n",
        chain.stacks("10", "a"),
        chain.repo.file_url(),
        chain.net
    ))
    .await;
    assert_eq!(
        h.entry(&extra).await.status.inputs.waiting_for,
        [chain.net.as_str()]
    );
    h.steps
        .registry
        .set_suspended(&chain.net, false, now_millis())
        .await
        .unwrap();
    h.take_states();
    assert!(matches!(
        h.reconcile(&chain.net).await,
        Outcome::Succeeded(_)
    ));
    assert!(
        h.take_states().iter().all(|s| s != "ChangeSet"),
        "ended in sync by template-upload"
    );
    let (stack, trigger) = starts.try_recv().expect("started as the network ended");
    assert_eq!(
        (stack.as_str(), trigger.kind),
        (extra.as_str(), TriggerKind::Upstream)
    );
    let input = serde_json::json!({"stackId": stack, "trigger": trigger});
    assert!(matches!(
        h.reconcile_with(&stack, input).await,
        Outcome::Succeeded(_)
    ));
    assert_eq!(
        Emulator::shared().stack_parameters(&extra).await["Vpc"],
        "net-10"
    );
    assert!(starts.try_recv().is_err(), "nothing else to start");
}
