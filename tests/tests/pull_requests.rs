//! Pull requests, end to end against the emulator: a signed GitHub
//! `pull_request` delivery (GitHub's published payload, its repository
//! pointed at a real repository served over HTTP on 127.0.0.1) through the
//! webhook, relayed on the emulator's bus as EventBridge delivers it to the
//! preview function's rule, reviewed by the preview (change sets made,
//! described and deleted in the emulator, never executed), and the comment
//! and statuses posted to a fake of the host's API on 127.0.0.1.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use serde_json::{Value, json};
use stacksync::clock::now_millis;
use stacksync::fakes::RecordingStarter;
use stacksync::reconcile::review::runs::{report_run, run_event};
use stacksync::reconcile::review::{Reviewed, pull_request_event};
use stacksync::registry::Entries;
use stacksync::triggers::webhook::handler::{Relay, Webhook};
use stacksync::wiring::{SdkReviewer, sdk_reviewer};
use stacksync_testkit::backend::Backend;
use stacksync_testkit::bus::{queue_for, received};
use stacksync_testkit::git::GitRepo;
use stacksync_testkit::git_hosts::{GitHostApi, github_pull_request, signed_github_pull_request};
use stacksync_testkit::harness::Harness;
use stacksync_testkit::http::{Config, GitHttpServer};
use stacksync_testkit::iam::{as_function, as_installation};
use stacksync_testkit::private_sources::{ready, stack_name};
use stacksync_testkit::{Emulator, unique_name};

const SECRET: &str = "pull-requests-webhook-secret";
const QUEUE: &[u8] = b"Resources:\n  Queue:\n    Type: AWS::SQS::Queue\n";
const QUEUE_DELAYED: &[u8] =
    b"Resources:\n  Queue:\n    Type: AWS::SQS::Queue\n    Properties:\n      DelaySeconds: 5\n";
const QUEUE_DELAYED_MORE: &[u8] =
    b"Resources:\n  Queue:\n    Type: AWS::SQS::Queue\n    Properties:\n      DelaySeconds: 9\n";
const TOPIC: &[u8] = b"Resources:\n  Topic:\n    Type: AWS::SNS::Topic\n";

/// A repository `acme/infra` served over HTTP (a token required), two
/// stacks synced from it, the webhook, a relay queue, the preview, and the
/// host's API.
struct World {
    h: Harness<stacksync::adapters::cloudformation::SdkCloudFormationFactory>,
    repo: GitRepo,
    _server: GitHttpServer,
    api: GitHostApi,
    url: String,
    orders: String,
    alerts: String,
    webhook: Webhook<
        stacksync::registry::Registry,
        RecordingStarter,
        stacksync::adapters::secrets::Secrets,
    >,
    relayed: String,
    preview: SdkReviewer,
    /// Where CloudFormation (and S3, Secrets Manager) is.
    backend: Backend,
}

impl World {
    async fn new(prefix: &str, preview_forks: bool) -> World {
        World::on(Backend::Moto, prefix, preview_forks).await
    }

    /// With CloudFormation, S3 and the secrets on `backend`; the registry,
    /// the bus and the host's API as in [`World::new`].
    async fn on(backend: Backend, prefix: &str, preview_forks: bool) -> World {
        let token = unique_name("tok");
        let base = std::env::temp_dir().join(unique_name(prefix));
        let repo = GitRepo::new_in(&base.join("acme"), "infra");
        repo.commit(
            &[("orders.yaml", QUEUE), ("alerts.yaml", TOPIC)],
            "two stacks",
        );
        let server = GitHttpServer::serve(
            &base,
            Config {
                accounts: vec![("x-access-token".into(), token.clone())],
                ..Config::default()
            },
        );
        let url = server.url(&repo);
        let api = GitHostApi::serve(&token);
        let emulator = Emulator::shared();
        let secret_text = json!({
            "token": token, "username": "x-access-token",
            "hosts": ["127.0.0.1"], "apiUrl": api.api_url("github"),
        })
        .to_string();
        // Where the steps and the preview read it: the back end's.
        let secret = aws_sdk_secretsmanager::Client::new(&backend.sdk_config())
            .create_secret()
            .name(unique_name("gh"))
            .secret_string(secret_text)
            .send()
            .await
            .unwrap()
            .arn()
            .unwrap()
            .to_owned();
        let h = backend.harness(prefix).await;
        let (orders, alerts) = (stack_name("ord"), stack_name("alr"));
        let entry = |name: &str, path: &str| {
            format!(
                "  - name: {name}\n    source: {{git: '{url}', path: {path}, credentialsSecret: '{secret}'}}\n"
            )
        };
        h.apply(&format!(
            "stacks:\n{}{}",
            entry(&orders, "orders.yaml"),
            entry(&alerts, "alerts.yaml")
        ))
        .await;
        for name in [&orders, &alerts] {
            assert!(ready(&h.reconcile(name).await), "{name} synced first");
        }
        let config = emulator.sdk_config();
        let table = h.steps.registry.table().to_owned();
        let relayed = queue_for(json!({
            "source": ["stacksync"], "detail-type": ["Pull Request Changed"],
            "detail": {"installation": [table]}
        }))
        .await;
        let webhook = Webhook {
            queue: Default::default(),
            registry: h.steps.registry.clone(),
            starter: RecordingStarter::new(),
            secrets: stacksync::adapters::secrets::Secrets::new(
                stacksync::adapters::secrets::SecretLocation::Fixed(vec![SECRET.into()]),
                &config,
            ),
            registry_sources: Some(Relay {
                bus: stacksync::wiring::event_bus(&config, "default"),
                installation: table,
                preview_forks,
            }),
        };
        let preview = sdk_reviewer(
            &backend.sdk_config(),
            h.steps.registry.clone(),
            h.steps.blobs.bucket(),
            Some(&backend.endpoint()),
            Default::default(),
        );
        World {
            h,
            repo,
            _server: server,
            api,
            url,
            orders,
            alerts,
            webhook,
            relayed,
            preview,
            backend,
        }
    }

    /// Commits `files` on the branch `feature` (made from `main` the first
    /// time) and points `refs/pull/7/head` at it, as GitHub does; `main`
    /// stays where it was. The commit.
    fn push_to_pull_request(&self, files: &[(&str, &[u8])], message: &str) -> String {
        let git = |args: &[&str]| {
            let out = std::process::Command::new("git")
                .args(args)
                .current_dir(&self.repo.dir)
                .output()
                .unwrap();
            assert!(out.status.success(), "git {args:?}: {out:?}");
            String::from_utf8_lossy(&out.stdout).trim().to_owned()
        };
        let exists = std::process::Command::new("git")
            .args(["rev-parse", "--verify", "-q", "feature"])
            .current_dir(&self.repo.dir)
            .status()
            .unwrap()
            .success();
        git(&[
            "checkout",
            "-q",
            if exists { "feature" } else { "-b" },
            if exists { "--" } else { "feature" },
        ]);
        let commit = self.repo.commit(files, message);
        git(&["update-ref", "refs/pull/7/head", &commit]);
        git(&["checkout", "-q", "main"]);
        commit
    }

    /// GitHub's published `pull_request` payload, its repository this
    /// world's and its head `head`.
    fn payload(&self, action: &str, head: &str, fork: bool) -> Vec<u8> {
        github_pull_request(&self.url, action, head, fork)
    }

    /// Delivers the event signed as GitHub signs it: the webhook's answer.
    async fn deliver(&self, action: &str, head: &str, fork: bool) -> Value {
        self.deliver_body(&self.payload(action, head, fork)).await
    }

    /// Delivers `body` signed as GitHub signs it: the webhook's answer.
    async fn deliver_body(&self, body: &[u8]) -> Value {
        let headers = signed_github_pull_request(body, SECRET);
        let response =
            as_function("webhook", self.webhook.handle(&headers, body, now_millis())).await;
        assert!(response.status < 300, "{response:?}");
        response.body
    }

    /// Delivers it and hands what the bus carried to the preview, as the
    /// preview function's rule does: what the review did.
    async fn review(&self, action: &str, head: &str) -> Reviewed {
        let answer = self.deliver(action, head, false).await;
        assert_eq!(answer["result"], "relayed to the preview", "{answer}");
        let events = received(&self.relayed, 1, std::time::Duration::from_secs(20)).await;
        assert_eq!(events.len(), 1, "one event on the bus: {events:?}");
        let pr = pull_request_event(&events[0], self.h.steps.registry.table()).unwrap();
        let table = self.h.steps.registry.table().to_owned();
        as_installation(table, as_function("preview", self.preview.review(&pr)))
            .await
            .unwrap()
    }

    fn comments(&self) -> Vec<(u64, String)> {
        self.api.comments("github", "acme/infra", 7)
    }

    /// Nothing a preview makes is left: no change set, no stack in review.
    async fn nothing_left(&self) {
        let cfn = self.backend.cloudformation();
        for name in [&self.orders, &self.alerts] {
            let sets = cfn
                .list_change_sets()
                .stack_name(name)
                .send()
                .await
                .unwrap();
            let previews: Vec<_> = sets
                .summaries()
                .iter()
                .filter(|s| {
                    s.change_set_name()
                        .is_some_and(|n| n.starts_with("stacksync-preview"))
                })
                .collect();
            assert!(previews.is_empty(), "{name}: {previews:?}");
            let status = self.backend.settled(name).await;
            assert_ne!(status.as_deref(), Some("REVIEW_IN_PROGRESS"), "{name}");
        }
    }
}

stacksync_testkit::scenarios!(
    a_pull_request_gets_one_comment_updated_in_place_and_a_status_per_push,
    a_stack_the_pull_request_creates_leaves_no_placeholder_beside_anothers_change_set,
);

async fn a_pull_request_gets_one_comment_updated_in_place_and_a_status_per_push(backend: Backend) {
    let w = World::on(backend, "pr-comment", false).await;
    let first = w.push_to_pull_request(&[("orders.yaml", QUEUE_DELAYED)], "orders: delay");
    let Reviewed::Posted {
        stacks,
        comment,
        status,
    } = w.review("opened", &first).await
    else {
        panic!("posted")
    };
    assert_eq!(stacks, vec![(w.orders.clone(), "update")]);
    assert!(comment.unwrap().unwrap().created);
    status.unwrap();
    let comments = w.comments();
    assert_eq!(comments.len(), 1);
    let body = &comments[0].1;
    assert!(
        body.contains(&format!("| `{}` | update |", w.orders)),
        "{body}"
    );
    assert!(!body.contains(&w.alerts), "alerts untouched: {body}");
    assert!(
        body.contains("| Modify | `Queue` | `AWS::SQS::Queue` |"),
        "{body}"
    );
    let statuses = w.api.statuses();
    assert_eq!(statuses.len(), 1);
    assert_eq!(
        (statuses[0].commit.as_str(), statuses[0].state.as_str()),
        (first.as_str(), "success")
    );
    w.nothing_left().await;
    // Never executed: the stack still has the first template's queue.
    assert!(ready(&w.h.reconcile(&w.orders).await));

    // A second push: the same comment, now about both stacks.
    let second = w.push_to_pull_request(
        &[("orders.yaml", QUEUE_DELAYED_MORE), ("alerts.yaml", QUEUE)],
        "both",
    );
    let Reviewed::Posted {
        stacks, comment, ..
    } = w.review("synchronize", &second).await
    else {
        panic!("posted")
    };
    let mut names: Vec<_> = stacks.iter().map(|(n, _)| n.clone()).collect();
    names.sort();
    let mut want = vec![w.orders.clone(), w.alerts.clone()];
    want.sort();
    assert_eq!(names, want);
    assert!(!comment.unwrap().unwrap().created, "updated in place");
    let comments = w.comments();
    assert_eq!(comments.len(), 1, "never a second comment");
    assert!(comments[0].1.contains(&second[..12]), "{}", comments[0].1);
    let calls = w.api.calls();
    let posts = calls
        .iter()
        .filter(|c| c.starts_with("POST") && c.contains("/comments"))
        .count();
    assert_eq!(posts, 1, "{calls:?}");
    std::fs::write(
        std::env::temp_dir().join(format!(
            "stacksync-pr-comment-example-{}.md",
            w.backend.name()
        )),
        &comments[0].1,
    )
    .unwrap();
    w.nothing_left().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_broken_template_fails_the_status_naming_its_stack_and_a_fork_is_not_previewed() {
    let w = World::new("pr-broken", false).await;
    let head = w.push_to_pull_request(
        &[("alerts.yaml", b"Resources: [not, a, map" as &[u8])],
        "broken",
    );
    let Reviewed::Posted { stacks, .. } = w.review("opened", &head).await else {
        panic!("posted")
    };
    assert_eq!(stacks, vec![(w.alerts.clone(), "failed")]);
    let status = w.api.statuses().pop().unwrap();
    assert_eq!(status.state, "failure");
    assert!(status.description.contains(&w.alerts), "{status:?}");
    let body = &w.comments()[0].1;
    assert!(body.contains("The preview failed"), "{body}");
    w.nothing_left().await;

    // A fork's pull request: answered, nothing put on the bus.
    let answer = w.deliver("synchronize", &head, true).await;
    assert!(
        answer["reason"].as_str().unwrap().contains("PreviewForks"),
        "{answer}"
    );
    let events = received(&w.relayed, 1, std::time::Duration::from_secs(2)).await;
    assert!(events.is_empty(), "{events:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_host_api_that_fails_is_retried_and_never_fails_the_review() {
    let w = World::new("pr-down", false).await;
    let head = w.push_to_pull_request(&[("orders.yaml", QUEUE_DELAYED)], "orders: delay");
    // Down for two calls: the listing is tried again and gets through.
    w.api.fail(2);
    let Reviewed::Posted {
        comment, status, ..
    } = w.review("opened", &head).await
    else {
        panic!("posted")
    };
    assert!(comment.unwrap().unwrap().created);
    status.unwrap();
    // Down for good: said, not raised.
    w.api.fail(u32::MAX);
    let second = w.push_to_pull_request(&[("orders.yaml", QUEUE_DELAYED_MORE)], "again");
    let Reviewed::Posted {
        comment, status, ..
    } = w.review("synchronize", &second).await
    else {
        panic!("posted")
    };
    assert!(comment.unwrap_err().contains("503"));
    assert!(status.unwrap_err().contains("503"));
    w.nothing_left().await;
}

/// A stack the pull request creates is previewed as a create, and its
/// `REVIEW_IN_PROGRESS` placeholder deleted, while another stack holds a
/// change set of its own. (moto 5.2.5 listed every stack's change sets for
/// one stack: `nothing_left` saw another test's preview as this one's until
/// scripts/moto_server.py filtered ListChangeSets by stack, as AWS documents.)
async fn a_stack_the_pull_request_creates_leaves_no_placeholder_beside_anothers_change_set(
    backend: Backend,
) {
    let w = World::on(backend, "pr-create", false).await;
    let fresh = stack_name("new");
    let secret =
        w.h.entry(&w.orders)
            .await
            .spec
            .source
            .credentials_secret
            .unwrap();
    w.h.apply(&format!(
        "stacks:\n  - name: {fresh}\n    source: {{git: '{}', path: fresh.yaml, credentialsSecret: '{secret}'}}\n",
        w.url
    ))
    .await;
    // Someone's change set on another stack, left for review.
    let cfn = w.backend.cloudformation();
    cfn.create_change_set()
        .stack_name(&w.orders)
        .change_set_name("someones-review")
        .change_set_type(aws_sdk_cloudformation::types::ChangeSetType::Update)
        .template_body(std::str::from_utf8(QUEUE_DELAYED).unwrap())
        .send()
        .await
        .unwrap();
    let head = w.push_to_pull_request(&[("fresh.yaml", QUEUE)], "a new stack");
    let Reviewed::Posted { stacks, .. } = w.review("opened", &head).await else {
        panic!("posted")
    };
    assert!(stacks.contains(&(fresh.clone(), "create")), "{stacks:?}");
    let status = w.backend.settled(&fresh).await;
    assert!(
        status.is_none() || status.as_deref() == Some("DELETE_COMPLETE"),
        "the placeholder is gone: {status:?}"
    );
    cfn.delete_change_set()
        .stack_name(&w.orders)
        .change_set_name("someones-review")
        .send()
        .await
        .unwrap();
    w.nothing_left().await;
}

/// Previews are made where a run makes its change set: a stack in another
/// account through its `assumeRoleArn`, a stack with its service role
/// (`roleArn`) and a parameter read from SSM, and a template over
/// CloudFormation's body limit put at `previews/` in the bucket.
#[tokio::test(flavor = "multi_thread")]
async fn a_preview_reads_values_assumes_roles_and_stores_large_templates_as_a_run_does() {
    let w = World::new("pr-where", false).await;
    let emulator = Emulator::shared();
    let parameter = format!("/app/{}", unique_name("delay"));
    aws_sdk_ssm::Client::new(&emulator.sdk_config())
        .put_parameter()
        .name(&parameter)
        .value("3")
        .r#type(aws_sdk_ssm::types::ParameterType::String)
        .send()
        .await
        .unwrap();
    let secret =
        w.h.entry(&w.orders)
            .await
            .spec
            .source
            .credentials_secret
            .unwrap();
    let (far, big) = (stack_name("far"), stack_name("big"));
    let role = "arn:aws:iam::123456789012:role/stacksync-cfn-exec";
    let target = "arn:aws:iam::210987654321:role/stacksync-target";
    let source = |path: &str| {
        format!(
            "{{git: '{}', path: {path}, credentialsSecret: '{secret}'}}",
            w.url
        )
    };
    w.h.apply(&format!(
        "stacks:\n  - name: {far}\n    source: {}\n    assumeRoleArn: {target}\n  \
         - name: {big}\n    source: {}\n    roleArn: {role}\n    \
         parameters: {{Delay: {{ssm: '{parameter}'}}}}\n",
        source("far.yaml"),
        source("big.yaml")
    ))
    .await;
    let mut large = b"Parameters:\n  Delay: {Type: String}\nResources:\n  Queue:\n    Type: AWS::SQS::Queue\n    Properties:\n      DelaySeconds: !Ref Delay\n".to_vec();
    large.extend(format!("# {}\n", "x".repeat(60_000)).bytes());
    let head = w.push_to_pull_request(&[("far.yaml", QUEUE), ("big.yaml", &large)], "two more");
    let Reviewed::Posted { stacks, status, .. } = w.review("opened", &head).await else {
        panic!("posted")
    };
    status.unwrap();
    assert!(stacks.contains(&(far.clone(), "create")), "{stacks:?}");
    assert!(stacks.contains(&(big.clone(), "create")), "{stacks:?}");
    // The large template went by URL, from previews/ (never templates/).
    let key = stacksync::naming::preview_template_key(&stacksync::hash::sha256_hex(&large));
    let stored = emulator
        .s3()
        .head_object()
        .bucket(w.h.steps.blobs.bucket())
        .key(&key)
        .send()
        .await;
    assert!(stored.is_ok(), "{key}: {stored:?}");
    // Nothing left in the other account either.
    let there = aws_sdk_cloudformation::Client::new(&emulator.assumed_config(target).await);
    let left = there.describe_stacks().stack_name(&far).send().await;
    let status = left.ok().and_then(|d| {
        d.stacks()
            .first()
            .and_then(|s| s.stack_status().map(|s| s.as_str().to_owned()))
    });
    assert!(
        status.is_none() || status.as_deref() == Some("DELETE_COMPLETE"),
        "{status:?}"
    );
    w.nothing_left().await;
}

impl World {
    /// Merges the pull request (`main` fast-forwarded to `feature`): the
    /// merged commit.
    fn merge(&self) -> String {
        let out = std::process::Command::new("git")
            .args(["merge", "-q", "--ff-only", "feature"])
            .current_dir(&self.repo.dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        self.repo.head()
    }

    /// Runs `name` as the push of `commit` starts it, and hands the run's
    /// events, as the bus carries them to the preview function's rule, to
    /// the preview function: the statuses it set.
    async fn run_pushed(&self, name: &str, commit: &str, runs: &str) -> Vec<String> {
        let input = json!({"stackId": name, "trigger": {"kind": "webhook", "revision": commit}});
        self.h.reconcile_with(name, input).await;
        self.report_runs(runs, 2).await
    }

    /// The preview function handed `want` run events from `runs`: what it
    /// reported of each.
    async fn report_runs(&self, runs: &str, want: usize) -> Vec<String> {
        let events = received(runs, want, std::time::Duration::from_secs(20)).await;
        let table = self.h.steps.registry.table().to_owned();
        let mut reports = Vec::new();
        for event in events {
            let (moment, run) = run_event(&event, &table).unwrap().expect("a run event");
            let report = as_installation(
                table.clone(),
                as_function(
                    "preview",
                    report_run(
                        &self.preview.registry,
                        &self.preview.hosts,
                        &table,
                        moment,
                        &run,
                    ),
                ),
            )
            .await
            .unwrap();
            reports.push(format!("{report:?}"));
        }
        reports
    }

    /// A queue for this installation's run events as the preview function's
    /// rule matches them (runs a push started).
    async fn run_events(&self) -> String {
        queue_for(json!({
            "source": ["stacksync"],
            "detail-type": ["Reconcile Started", "Reconcile Succeeded", "Reconcile Failed", "Approval Requested"],
            "detail": {"installation": [self.h.steps.registry.table()], "trigger": ["webhook", "event"]}
        }))
        .await
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_merges_run_sets_pending_then_success_on_the_merged_commit_with_its_execution() {
    let w = World::new("pr-merge", false).await;
    let runs = w.run_events().await;
    let head = w.push_to_pull_request(&[("orders.yaml", QUEUE_DELAYED)], "orders: delay");
    w.review("opened", &head).await;
    let merged = w.merge();
    let reports = w.run_pushed(&w.orders, &merged, &runs).await;
    assert_eq!(reports.len(), 2, "{reports:?}");
    let on_merged: Vec<_> = w
        .api
        .statuses()
        .into_iter()
        .filter(|s| {
            s.commit == merged && s.context.starts_with(&format!("stacksync/{} ", w.orders))
        })
        .collect();
    let states: Vec<&str> = on_merged.iter().map(|s| s.state.as_str()).collect();
    assert_eq!(states, ["pending", "success"], "{on_merged:?}");
    assert!(
        on_merged[1].description.contains("applied"),
        "{on_merged:?}"
    );
    // A run the scheduler starts reports nothing (no event reaches the rule).
    w.h.reconcile(&w.orders).await;
    let none = received(&runs, 1, std::time::Duration::from_secs(2)).await;
    assert!(none.is_empty(), "{none:?}");
}

impl World {
    /// Gives `orders` `approval: pullRequest` (after its first sync).
    async fn bind_orders(&self) {
        let secret = self
            .h
            .entry(&self.orders)
            .await
            .spec
            .source
            .credentials_secret
            .unwrap();
        let entry = |name: &str, path: &str, extra: &str| {
            format!(
                "  - name: {name}\n    source: {{git: '{}', path: {path}, credentialsSecret: '{secret}'}}\n{extra}",
                self.url
            )
        };
        self.h
            .apply(&format!(
                "stacks:\n{}{}",
                entry(&self.orders, "orders.yaml", "    approval: pullRequest\n"),
                entry(&self.alerts, "alerts.yaml", "")
            ))
            .await;
    }

    /// Delivers the pull request's merge (`closed`, merged) to the preview.
    async fn merged(&self, head: &str) -> Reviewed {
        let mut body: Value = serde_json::from_slice(&self.payload("closed", head, false)).unwrap();
        body["pull_request"]["merged"] = true.into();
        body["pull_request"]["merge_commit_sha"] = head.into();
        let answer = self.deliver_body(body.to_string().as_bytes()).await;
        assert_eq!(answer["result"], "relayed to the preview", "{answer}");
        let events = received(&self.relayed, 1, std::time::Duration::from_secs(20)).await;
        let pr = pull_request_event(&events[0], self.h.steps.registry.table()).unwrap();
        let table = self.h.steps.registry.table().to_owned();
        as_installation(table, as_function("preview", self.preview.review(&pr)))
            .await
            .unwrap()
    }
}

/// `approval: pullRequest`: the merge's run executes what the pull
/// request's preview showed, at once; when the stack moved outside
/// stacksync between the preview and the merge, the run waits for a
/// person and says what differs.
#[tokio::test(flavor = "multi_thread")]
async fn approval_pull_request_executes_what_was_reviewed_and_waits_when_the_stack_moved() {
    let w = World::new("pr-bound", false).await;
    w.bind_orders().await;
    let runs = w.run_events().await;
    let head = w.push_to_pull_request(&[("orders.yaml", QUEUE_DELAYED)], "orders: delay");
    w.review("opened", &head).await;
    let body = &w.comments()[0].1;
    assert!(body.contains("`approval: pullRequest`"), "{body}");
    assert_eq!(
        w.merged(&head).await,
        Reviewed::Merged {
            marked: vec![w.orders.clone()]
        }
    );
    let merged = w.merge();
    let input = json!({"stackId": w.orders, "trigger": {"kind": "webhook", "revision": merged}});
    let outcome = w.h.reconcile_with(&w.orders, input).await;
    assert!(ready(&outcome), "executed at once: {outcome:?}");
    assert_eq!(w.report_runs(&runs, 2).await.len(), 2, "started, succeeded");
    let entry = w.h.entry(&w.orders).await;
    assert!(entry.status.approval.records.is_empty(), "no person asked");
    assert_eq!(
        entry.status.applied.last_applied_revision.as_deref(),
        Some(merged.as_str())
    );

    // Previewed and merged again; then someone changes the stack by hand.
    let second = w.push_to_pull_request(&[("orders.yaml", QUEUE_DELAYED_MORE)], "more delay");
    w.review("synchronize", &second).await;
    assert_eq!(
        w.merged(&second).await,
        Reviewed::Merged {
            marked: vec![w.orders.clone()]
        }
    );
    let merged = w.merge();
    Emulator::shared()
        .cloudformation()
        .update_stack()
        .stack_name(&w.orders)
        .template_body("Resources:\n  Queue:\n    Type: AWS::SQS::Queue\n    Properties:\n      DelaySeconds: 5\n  Extra:\n    Type: AWS::SNS::Topic\n")
        .send()
        .await
        .unwrap();
    let input = json!({"stackId": w.orders, "trigger": {"kind": "webhook", "revision": merged}});
    let (outcome, ()) = tokio::join!(w.h.reconcile_with(&w.orders, input), async {
        let awaiting = w.h.awaiting(&w.orders).await;
        assert!(
            awaiting.why.contains("approval: pullRequest") && awaiting.why.contains("rows differ"),
            "{}",
            awaiting.why
        );
        w.h.approve(&w.orders, &awaiting).await;
    });
    assert!(ready(&outcome), "approved by a person: {outcome:?}");
    // The merged commit's status and the pull request's comment say so.
    // Started, waiting, started again once approved (the local runner
    // comes back through artifact-fetch), succeeded.
    let reports = w.report_runs(&runs, 4).await;
    assert_eq!(reports.len(), 4, "{reports:?}");
    let on_merged: Vec<_> = w
        .api
        .statuses()
        .into_iter()
        .filter(|s| s.commit == merged)
        .collect();
    assert!(
        on_merged
            .iter()
            .any(|s| s.state == "pending" && s.description.contains("waits for approval")),
        "{on_merged:?}"
    );
    let body = &w.comments()[0].1;
    assert!(body.contains("**After the merge**"), "{body}");
    assert!(
        body.contains(&format!("- `{}` ", w.orders))
            && body.contains("(what this pull request previewed)"),
        "the last word is the run's end: {body}"
    );
}

/// Each host's adapter against the loopback fake of its API: one comment
/// created, then found by its marker and edited in place (never a second),
/// and a commit status, in each host's own shapes; a token the host
/// refuses is said, with the status.
#[tokio::test(flavor = "multi_thread")]
async fn each_hosts_api_gets_one_comment_edited_in_place_and_a_status() {
    use stacksync::adapters::credentials::Credentials;
    use stacksync::adapters::git_host::GitHosts;
    use stacksync::ports::{CommitStatus, GitHost, HostRepository};
    use stacksync::pull_request::{CommitState, Host};
    let api = GitHostApi::serve("tok-1");
    let commit = "0123456789abcdef0123456789abcdef01234567";
    for (host, name, repository) in [
        (Host::GitHub, "github", "acme/infra"),
        (Host::GitLab, "gitlab", "group/sub/infra"),
        (Host::Bitbucket, "bitbucket", "acme/infra"),
    ] {
        let arn = format!("arn:aws:secretsmanager:us-east-1:111111111111:secret:{name}");
        let secret =
            json!({"token": api.token(), "hosts": ["127.0.0.1"], "apiUrl": api.api_url(name)});
        let hosts = GitHosts::new(std::sync::Arc::new(Credentials::fixed(
            [(arn.clone(), secret.to_string())],
            "us-east-1",
        )));
        let target = HostRepository {
            host,
            repository: repository.into(),
            url: format!("http://127.0.0.1:1/{repository}.git"),
            credentials: Some(arn.clone()),
        };
        let first = hosts
            .upsert_comment(&target, 7, "<!-- m -->", "<!-- m -->\none", true)
            .await
            .unwrap();
        let second = hosts
            .upsert_comment(&target, 7, "<!-- m -->", "<!-- m -->\ntwo", false)
            .await
            .unwrap();
        let (first, second) = (first.unwrap(), second.unwrap());
        assert!(first.created && !second.created, "{name}");
        assert_eq!(first.id, second.id, "{name}");
        let comments = api.comments(name, repository, 7);
        assert_eq!(comments.len(), 1, "{name}: {comments:?}");
        assert!(comments[0].1.ends_with("two"), "{name}");
        // Nothing to correct, nothing made: a pull request without one.
        let none = hosts
            .upsert_comment(&target, 8, "<!-- m -->", "x", false)
            .await;
        assert_eq!(none.unwrap(), None, "{name}");
        assert!(api.comments(name, repository, 8).is_empty(), "{name}");
        let status = CommitStatus {
            state: CommitState::Failure,
            context: "stacksync/preview (prod)".into(),
            description: "x".repeat(300),
            url: Some("https://example.org/run".into()),
            summary: None,
        };
        hosts.set_status(&target, commit, &status).await.unwrap();
        let seen = api
            .statuses()
            .into_iter()
            .rfind(|s| s.host == name)
            .unwrap();
        let state = match host {
            Host::GitHub => "failure",
            Host::GitLab => "failed",
            Host::Bitbucket => "FAILED",
        };
        assert_eq!(
            (
                seen.repository.as_str(),
                seen.commit.as_str(),
                seen.state.as_str()
            ),
            (repository, commit, state)
        );
        assert!(
            seen.description.chars().count() <= 255,
            "{name}: cut to the host's limit"
        );

        // A token the host refuses: said, with the status (no retry of a 401).
        let wrong = json!({"token": "wrong", "hosts": ["127.0.0.1"], "apiUrl": api.api_url(name)});
        let refused = GitHosts::new(std::sync::Arc::new(Credentials::fixed(
            [(arn, wrong.to_string())],
            "us-east-1",
        )));
        let e = refused
            .upsert_comment(&target, 7, "<!-- m -->", "x", true)
            .await
            .unwrap_err();
        assert!(e.to_string().contains("HTTP 401"), "{name}: {e}");
    }
    let calls = api.calls();
    assert!(
        calls
            .iter()
            .any(|c| c
                .starts_with("PUT /api/v4/projects/group%2Fsub%2Finfra/merge_requests/7/notes/")),
        "{calls:?}"
    );
    assert!(
        calls
            .iter()
            .any(|c| c.starts_with("PUT /2.0/repositories/acme/infra/pullrequests/7/comments/")),
        "{calls:?}"
    );
    assert!(
        calls
            .iter()
            .any(|c| c.starts_with("PATCH /api/v3/repos/acme/infra/issues/comments/")),
        "{calls:?}"
    );
}

/// A GitHub App's status is a check run where the app may make one
/// (`checks:write`), else a commit status (GitHub answers 403).
#[tokio::test(flavor = "multi_thread")]
async fn a_github_apps_status_is_a_check_run_where_allowed_else_a_commit_status() {
    use stacksync::adapters::credentials::Credentials;
    use stacksync::adapters::git_host::GitHosts;
    use stacksync::ports::{CommitStatus, GitHost, HostRepository};
    use stacksync::pull_request::{CommitState, Host};
    use stacksync_testkit::http::App;
    let (app, key) = App::generate("4242", "99", "unused");
    let api = GitHostApi::serve("app-token").with_app(app);
    let arn = "arn:aws:secretsmanager:us-east-1:111111111111:secret:app";
    let secret = json!({"appId": "4242", "installationId": "99", "privateKey": key, "hosts": ["127.0.0.1"], "apiUrl": api.api_url("github")});
    let hosts = GitHosts::new(std::sync::Arc::new(Credentials::fixed(
        [(arn.to_owned(), secret.to_string())],
        "us-east-1",
    )));
    let target = HostRepository {
        host: Host::GitHub,
        repository: "acme/infra".into(),
        url: "http://127.0.0.1:1/acme/infra.git".into(),
        credentials: Some(arn.into()),
    };
    let status = |state| CommitStatus {
        state,
        context: "stacksync/preview (prod)".into(),
        description: "2 previewed".into(),
        url: None,
        summary: Some("the comment".into()),
    };
    let commit = "0123456789abcdef0123456789abcdef01234567";
    hosts
        .set_status(&target, commit, &status(CommitState::Success))
        .await
        .unwrap();
    api.allow_check_runs();
    hosts
        .set_status(&target, commit, &status(CommitState::Pending))
        .await
        .unwrap();
    let calls: Vec<String> = api
        .calls()
        .into_iter()
        .filter(|c| !c.ends_with("/access_tokens"))
        .collect();
    assert_eq!(
        calls,
        [
            "POST /api/v3/repos/acme/infra/check-runs",
            "POST /api/v3/repos/acme/infra/statuses/0123456789abcdef0123456789abcdef01234567",
            "POST /api/v3/repos/acme/infra/check-runs",
        ]
    );
    let states: Vec<String> = api.statuses().into_iter().map(|s| s.state).collect();
    assert_eq!(
        states,
        ["success", "in_progress"],
        "a status, then a check run"
    );
}

/// A registry source in the repository (`stacks.yaml`): a pull request that
/// adds an entry (with its template beside it) is previewed with the entry
/// as it would be registered, and the comment says what the stacks files
/// do; one that breaks the file fails the status, naming the source.
#[tokio::test(flavor = "multi_thread")]
async fn a_pull_request_that_adds_an_entry_to_a_stacks_file_previews_it() {
    use stacksync::registry::RegistrySources;
    let w = World::new("pr-files", false).await;
    let secret =
        w.h.entry(&w.orders)
            .await
            .spec
            .source
            .credentials_secret
            .unwrap();
    w.repo.commit(
        &[("stacks.yaml", b"stacks: []\n" as &[u8])],
        "an empty stacks file",
    );
    let source = stacksync::registry_source::SourceSpec {
        name: "platform".into(),
        url: w.url.clone(),
        reference: "main".into(),
        path: "stacks.yaml".into(),
        credentials_secret: Some(secret),
        signed_by: vec![],
        insecure: true,
    };
    assert!(
        w.h.steps
            .registry
            .add_registry_source(&source)
            .await
            .unwrap()
    );
    let fresh = stack_name("new");
    let file = format!("stacks:\n  - name: {fresh}\n    source: {{ path: ./fresh.yaml }}\n");
    let head = w.push_to_pull_request(
        &[("stacks.yaml", file.as_bytes()), ("fresh.yaml", QUEUE)],
        "a new stack",
    );
    let Reviewed::Posted { stacks, status, .. } = w.review("opened", &head).await else {
        panic!("posted")
    };
    assert_eq!(stacks, vec![(fresh.clone(), "create")]);
    status.unwrap();
    let body = &w.comments()[0].1;
    assert!(body.contains("**Registry source `platform`**"), "{body}");
    assert!(body.contains(&format!("- adds `{fresh}`")), "{body}");
    assert!(
        w.h.steps.registry.get(&fresh).await.unwrap().is_none(),
        "nothing registered"
    );
    w.nothing_left().await;

    let broken = w.push_to_pull_request(
        &[("stacks.yaml", b"stacks:\n  - name: [unclosed\n" as &[u8])],
        "broken",
    );
    let Reviewed::Posted { .. } = w.review("synchronize", &broken).await else {
        panic!("posted")
    };
    let status = w.api.statuses().pop().unwrap();
    assert_eq!(status.state, "failure");
    assert!(
        status.description.contains("registry source platform"),
        "{status:?}"
    );
    let body = &w.comments()[0].1;
    assert!(body.contains("the commit would not be applied"), "{body}");
}
