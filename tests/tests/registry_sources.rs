//! Registry sources against the emulator: the list of stacks in a Git
//! repository served by `git daemon` on 127.0.0.1, read by the webhook (a
//! signed push) and by the scheduler, applied to the DynamoDB registry, and
//! the runs it starts carried out by the real state machine (the local
//! interpreter, the steps on the emulator's CloudFormation). Starts are
//! recorded (`RecordingStarter`, named as Step Functions names them) and
//! then run here: the webhook's own tests prove the starts in Step Functions.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::time::Duration;

use serde_json::{Value, json};
use stacksync::adapters::cloudformation::SdkCloudFormationFactory;
use stacksync::adapters::secrets::{SecretLocation, Secrets};
use stacksync::asl::Outcome as RunOutcome;
use stacksync::clock::now_millis;
use stacksync::fakes::{Failing, RecordingStarter};
use stacksync::ports::PortError;
use stacksync::ports::Trigger;
use stacksync::registry::{Entries, Registry, RegistrySources, Specs};
use stacksync::registry_source::{SourceSpec, SourceState};
use stacksync::triggers::events::from_value;
use stacksync::triggers::events::handler::EventHandler;
use stacksync::triggers::registry_source::{Installation, Outcome, PushApplier, sync_source};
use stacksync::triggers::scheduler::{Config, Scheduler};
use stacksync::triggers::webhook::Headers;
use stacksync::triggers::webhook::handler::Webhook;
use stacksync::triggers::webhook::verify::sign;
use stacksync_testkit::backend::Backend;
use stacksync_testkit::bus::{queue_for_installation, received};
use stacksync_testkit::git::{GitDaemon, GitRepo, signing_key};
use stacksync_testkit::harness::Harness;
use stacksync_testkit::http::{Config as HttpConfig, GitHttpServer};
use stacksync_testkit::iam::as_function;
use stacksync_testkit::{Emulator, unique_name};

const SECRET: &str = "registry-sources-secret";
const QUEUE: &str = "Resources:\n  Queue:\n    Type: AWS::SQS::Queue\n";
const QUEUE_AND_TOPIC: &str =
    "Resources:\n  Queue:\n    Type: AWS::SQS::Queue\n  Topic:\n    Type: AWS::SNS::Topic\n";

type Sources = stacksync::adapters::sources::Sources;
type TestScheduler = Scheduler<Registry, RecordingStarter, Sources, SdkCloudFormationFactory>;

struct World {
    h: Harness<SdkCloudFormationFactory>,
    repo: GitRepo,
    _daemon: GitDaemon,
    url: String,
    webhook: Webhook<Registry, RecordingStarter, Secrets>,
    /// Executions already run (by name).
    ran: std::sync::Mutex<Vec<String>>,
    prefix: String,
}

fn sources() -> Sources {
    stacksync::wiring::sdk_sources(
        &Emulator::shared().sdk_config(),
        true,
        &std::env::temp_dir().join(unique_name("registry-sources")),
    )
}

fn installation(registry: &Registry) -> Installation {
    Installation {
        name: registry.table().to_owned(),
        home: registry.region(),
        policy: Default::default(),
    }
}

impl World {
    async fn new(prefix: &str) -> World {
        World::on(Backend::Moto, prefix).await
    }

    /// With CloudFormation (and S3) on `backend`; the registry, Git and the
    /// event bus as in [`World::new`].
    async fn on(backend: Backend, prefix: &str) -> World {
        let h = backend.harness(prefix).await;
        let repo = GitRepo::new(prefix);
        let daemon = GitDaemon::serve(&repo);
        let url = daemon.url(&repo);
        let config = Emulator::shared().sdk_config();
        let registry = h.steps.registry.clone();
        let applier = PushApplier {
            registry: registry.clone(),
            sources: sources(),
            notices: stacksync::wiring::event_bus(&config, "default"),
            installation: installation(&registry),
        };
        let webhook = Webhook {
            registry,
            starter: RecordingStarter::new(),
            secrets: Secrets::new(SecretLocation::Fixed(vec![SECRET.into()]), &config),
            registry_sources: Some(std::sync::Arc::new(applier)),
        };
        World {
            h,
            repo,
            _daemon: daemon,
            url,
            webhook,
            ran: std::sync::Mutex::default(),
            prefix: unique_name(prefix).to_lowercase(),
        }
    }

    fn name(&self, short: &str) -> String {
        format!("{}-{short}", self.prefix)
    }

    async fn add_source(&self, name: &str, path: &str) {
        self.add_source_at(name, &self.url, path, None).await;
    }

    async fn add_source_at(&self, name: &str, url: &str, path: &str, secret: Option<String>) {
        let spec = SourceSpec {
            name: name.into(),
            url: url.into(),
            reference: "main".into(),
            path: path.into(),
            credentials_secret: secret,
            signed_by: vec![],
            insecure: true,
        };
        let added = self.h.steps.registry.add_registry_source(&spec).await;
        assert!(added.unwrap());
    }

    /// Commits `files` to `main` and delivers its push: the commit.
    async fn commit_and_push(&self, files: &[(&str, &[u8])], message: &str) -> String {
        let commit = self.repo.commit(files, message);
        self.push(&commit).await;
        commit
    }

    /// A signed push of `commit` to `main`, as a Git host delivers it.
    async fn push(&self, commit: &str) -> Value {
        self.push_to(&self.url, commit).await
    }

    /// The same, naming the repository by `url`.
    async fn push_to(&self, url: &str, commit: &str) -> Value {
        let body = json!({"repository": url, "ref": "refs/heads/main", "after": commit})
            .to_string()
            .into_bytes();
        let headers: Headers = [
            ("X-Stacksync-Event", "push".to_owned()),
            ("X-Stacksync-Delivery", unique_name("delivery")),
            ("X-Stacksync-Signature-256", sign(SECRET.as_bytes(), &body)),
        ]
        .into_iter()
        .collect();
        let response = as_function(
            "webhook",
            self.webhook.handle(&headers, &body, now_millis()),
        )
        .await;
        assert!(response.status < 300, "{response:?}");
        response.body
    }

    /// The installation's scheduler over the world's registry, its starts
    /// recorded, its events on the emulator's default bus.
    fn scheduler(&self) -> TestScheduler {
        let registry = &self.h.steps.registry;
        Scheduler {
            registry: registry.clone(),
            starter: RecordingStarter::new(),
            sources: sources(),
            cloudformation: SdkCloudFormationFactory::new(Emulator::shared().sdk_config())
                .for_installation(registry.table()),
            config: Config {
                installation: installation(registry),
                notices: stacksync::wiring::event_bus(&Emulator::shared().sdk_config(), "default"),
                ..Config::default()
            },
        }
    }

    /// The events function over the world's registry, its starts recorded,
    /// reading registry sources.
    fn events_handler(&self) -> EventHandler<Registry, RecordingStarter> {
        let registry = self.h.steps.registry.clone();
        EventHandler {
            registry: registry.clone(),
            starter: RecordingStarter::new(),
            region: "us-east-1".into(),
            registry_sources: Some(std::sync::Arc::new(PushApplier {
                registry: registry.clone(),
                sources: sources(),
                notices: stacksync::wiring::event_bus(&Emulator::shared().sdk_config(), "default"),
                installation: installation(&registry),
            })),
        }
    }

    /// Runs every execution started and not run yet: the stacks it ran.
    async fn run_started(&self) -> Vec<String> {
        let mut names = Vec::new();
        for (execution, stack, trigger) in self.webhook.starter.started() {
            if self.ran.lock().unwrap().contains(&execution) {
                continue;
            }
            self.ran.lock().unwrap().push(execution);
            let input = json!({"stackId": stack, "trigger": trigger});
            let outcome = self.h.reconcile_with(&stack, input).await;
            assert!(
                matches!(outcome, RunOutcome::Succeeded(_)),
                "{stack}: {outcome:?}"
            );
            names.push(stack);
        }
        names.sort();
        names
    }

    async fn source(&self, name: &str) -> stacksync::registry_source::RegistrySource {
        self.h
            .steps
            .registry
            .registry_source(name)
            .await
            .unwrap()
            .unwrap()
    }

    fn stacks_file(&self, entries: &[(&str, &str)]) -> String {
        let mut text = String::from("stacks:\n");
        for (short, extra) in entries {
            text.push_str(&format!(
                "  - name: {}\n    source: {{ path: ./templates/{short}.yaml }}\n    destroyOnDelete: true\n{extra}",
                self.name(short)
            ));
        }
        text
    }
}

async fn stack(backend: Backend, name: &str) -> Option<aws_sdk_cloudformation::types::Stack> {
    let cfn = backend.cloudformation();
    match cfn.describe_stacks().stack_name(name).send().await {
        Ok(out) => out.stacks().first().cloned(),
        Err(_) => None,
    }
}

stacksync_testkit::scenarios!(a_push_adds_edits_moves_and_removes_a_stack_through_the_webhook);

/// The push scenario's end: `web` removed from its file, `keep` kept.
async fn removed_and_deleted(w: &World, backend: Backend, web: &str, keep: &str) {
    // Removed: its entry pruned, its stack deleted (destroyOnDelete).
    w.commit_and_push(&[("deploy/more.yaml", b"stacks:\n")], "web goes")
        .await;
    assert!(w.run_started().await.iter().any(|s| s == web));
    assert!(
        w.h.steps.registry.get(web).await.unwrap().is_none(),
        "the entry is gone"
    );
    let gone = stack(backend, web).await;
    assert!(
        gone.as_ref()
            .is_none_or(|s| s.stack_status().unwrap().as_str() == "DELETE_COMPLETE"),
        "{gone:?}"
    );
    assert!(
        stack(backend, keep).await.is_some(),
        "the other stack stays"
    );
    assert_eq!(w.source("platform").await.status.entries, 1);
}

/// A scenario of CloudFormation's: on both emulators.
async fn a_push_adds_edits_moves_and_removes_a_stack_through_the_webhook(backend: Backend) {
    let w = World::on(backend, "regsrc-push").await;
    w.add_source("platform", "deploy/*.yaml").await;
    let (web, keep) = (w.name("web"), w.name("keep"));
    let first = w.stacks_file(&[("web", ""), ("keep", "")]);
    let c1 = w.repo.commit(
        &[
            ("deploy/stacks.yaml", first.as_bytes()),
            ("deploy/templates/web.yaml", QUEUE.as_bytes()),
            ("deploy/templates/keep.yaml", QUEUE.as_bytes()),
        ],
        "two stacks",
    );
    let answer = w.push(&c1).await;
    assert_eq!(answer["result"], "started", "{answer}");
    assert_eq!(w.run_started().await, [keep.clone(), web.clone()]);
    let entry = w.h.entry(&web).await;
    let owner = entry.owner.clone().unwrap();
    assert_eq!(
        (
            owner.source.as_str(),
            owner.file.as_str(),
            owner.commit.as_str()
        ),
        ("platform", "deploy/stacks.yaml", c1.as_str())
    );
    assert_eq!(
        entry.status.applied.last_applied_revision.as_deref(),
        Some(c1.as_str())
    );
    assert_eq!(
        stack(backend, &web)
            .await
            .unwrap()
            .stack_status()
            .unwrap()
            .as_str(),
        "CREATE_COMPLETE"
    );
    let source = w.source("platform").await;
    assert_eq!(
        (
            source.status.state,
            source.status.applied_revision.as_deref(),
            source.status.entries
        ),
        (SourceState::Ready, Some(c1.as_str()), 2)
    );

    // The stacks file and the template change in one commit: one revision.
    let tagged = w.stacks_file(&[("web", "    tags: { team: platform }\n"), ("keep", "")]);
    let c2 = w
        .commit_and_push(
            &[
                ("deploy/stacks.yaml", tagged.as_bytes()),
                ("deploy/templates/web.yaml", QUEUE_AND_TOPIC.as_bytes()),
            ],
            "web grows a topic and a tag",
        )
        .await;
    assert!(w.run_started().await.contains(&web));
    let entry = w.h.entry(&web).await;
    assert_eq!(entry.spec_version, 2);
    assert_eq!(
        entry.status.applied.last_applied_revision.as_deref(),
        Some(c2.as_str())
    );
    let deployed = stack(backend, &web).await.unwrap();
    assert!(
        deployed
            .tags()
            .iter()
            .any(|t| t.key() == Some("team") && t.value() == Some("platform"))
    );
    let updated_at = deployed.last_updated_time().cloned();

    // Moved to another file: the entry's owner changes, the stack does not.
    let without_web = w.stacks_file(&[("keep", "")]);
    let web_alone = w.stacks_file(&[("web", "    tags: { team: platform }\n")]);
    w.commit_and_push(
        &[
            ("deploy/stacks.yaml", without_web.as_bytes()),
            ("deploy/more.yaml", web_alone.as_bytes()),
        ],
        "web moves to its own file",
    )
    .await;
    w.run_started().await;
    let entry = w.h.entry(&web).await;
    assert_eq!(entry.spec_version, 2, "a move is not a change");
    assert_eq!(entry.owner.unwrap().file, "deploy/more.yaml");
    assert_eq!(
        stack(backend, &web)
            .await
            .unwrap()
            .last_updated_time()
            .cloned(),
        updated_at,
        "the stack is untouched"
    );

    removed_and_deleted(&w, backend, &web, &keep).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_broken_file_a_cycle_and_anothers_entry_change_nothing_and_say_why() {
    let w = World::new("regsrc-bad").await;
    let queue = queue_for_installation(w.h.steps.registry.table()).await;
    w.add_source("platform", "deploy/stacks.yaml").await;
    w.add_source("team", "team/stacks.yaml").await;
    let theirs = w.name("theirs");
    let team_file = format!("stacks:\n  - name: {theirs}\n    source: {{ path: ./q.yaml }}\n");
    let good = w.stacks_file(&[("web", "")]);
    let c1 = w
        .commit_and_push(
            &[
                ("deploy/stacks.yaml", good.as_bytes()),
                ("deploy/templates/web.yaml", QUEUE.as_bytes()),
                ("team/stacks.yaml", team_file.as_bytes()),
                ("team/q.yaml", QUEUE.as_bytes()),
            ],
            "good",
        )
        .await;
    let before = w.h.entry(&w.name("web")).await;

    let web = w.name("web");
    let cycle = format!(
        "stacks:\n  - name: {web}\n    dependsOn: [{web}-b]\n    source: {{ path: ./templates/web.yaml }}\n  - name: {web}-b\n    dependsOn: [{web}]\n    source: {{ path: ./templates/web.yaml }}\n"
    );
    let stolen =
        format!("{good}  - name: {theirs}\n    source: {{ path: ./templates/web.yaml }}\n");
    let bad: [(&str, String, &str); 3] = [
        (
            "broken",
            "stacks:\n  - name: [unclosed\n".to_owned(),
            "not valid YAML",
        ),
        ("cycle", cycle, "cycle"),
        (
            "stolen",
            stolen,
            "the registry source \"team\" (team/stacks.yaml)",
        ),
    ];
    for (what, text, says) in &bad {
        let commit = w
            .commit_and_push(&[("deploy/stacks.yaml", text.as_bytes())], what)
            .await;
        assert_eq!(
            w.h.entry(&web).await.spec_version,
            before.spec_version,
            "{what}"
        );
        assert_eq!(w.h.entry(&web).await.owner, before.owner, "{what}");
        let source = w.source("platform").await;
        assert_eq!(source.status.state, SourceState::Failed, "{what}");
        assert_eq!(
            source.status.applied_revision.as_deref(),
            Some(c1.as_str()),
            "{what}"
        );
        let failure = source.status.failure.unwrap();
        assert_eq!(failure.commit, commit, "{what}");
        let said = failure.problems.join("\n");
        assert!(
            said.contains("deploy/stacks.yaml") && said.contains(says),
            "{what}: {said}"
        );
    }
    assert_eq!(
        w.h.entry(&theirs).await.owner.unwrap().source,
        "team",
        "still the team's"
    );
    assert!(
        w.h.steps
            .registry
            .get(&format!("{web}-b"))
            .await
            .unwrap()
            .is_none()
    );

    let events = received(&queue, 3, Duration::from_secs(20)).await;
    let failed: Vec<&Value> = events
        .iter()
        .filter(|e| e["detail-type"] == "Registry Source Failed")
        .collect();
    assert_eq!(failed.len(), 3, "{events:?}");
    assert_eq!(failed[0]["detail"]["registrySource"]["name"], "platform");
    assert!(
        failed[2]["detail"]["registrySource"]["problems"][0]
            .as_str()
            .unwrap()
            .contains("team")
    );

    // The next good commit recovers, without any command.
    w.commit_and_push(&[("deploy/stacks.yaml", good.as_bytes())], "fixed")
        .await;
    let source = w.source("platform").await;
    assert_eq!(
        (source.status.state, source.status.failure),
        (SourceState::Ready, None)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_push_pruning_most_entries_is_held_until_a_commit_restores_them_or_an_approval() {
    let w = World::new("regsrc-guard").await;
    w.add_source("platform", "deploy/stacks.yaml").await;
    let shorts: Vec<String> = (0..10).map(|i| format!("s{i}")).collect();
    let all: Vec<(&str, &str)> = shorts.iter().map(|s| (s.as_str(), "")).collect();
    let full = w.stacks_file(&all);
    let few = w.stacks_file(&all[..2]);
    w.commit_and_push(&[("deploy/stacks.yaml", full.as_bytes())], "ten")
        .await;

    // A stack renamed: its entry claims the new stack and gives the old one up.
    let renamed_name = format!("{}-renamed", w.name("s0"));
    let renamed = full.replacen(
        "    destroyOnDelete: true\n",
        &format!("    destroyOnDelete: true\n    stackName: {renamed_name}\n"),
        1,
    );
    w.commit_and_push(&[("deploy/stacks.yaml", renamed.as_bytes())], "s0 renamed")
        .await;
    let s0 = w.h.entry(&w.name("s0")).await;
    assert_eq!(
        (s0.spec.stack_name.as_deref(), s0.spec_version),
        (Some(renamed_name.as_str()), 2)
    );

    let c2 = w
        .commit_and_push(&[("deploy/stacks.yaml", few.as_bytes())], "eight go")
        .await;
    let source = w.source("platform").await;
    assert_eq!(source.status.state, SourceState::Held);
    assert_eq!(source.status.hold.as_ref().unwrap().entries.len(), 8);
    assert!(
        source.status.summary().contains(&c2),
        "{}",
        source.status.summary()
    );
    assert!(
        w.h.entry(&w.name("s9"))
            .await
            .deletion_requested_at
            .is_none()
    );

    w.commit_and_push(&[("deploy/stacks.yaml", full.as_bytes())], "back")
        .await;
    let source = w.source("platform").await;
    assert_eq!(
        (source.status.state, source.status.hold),
        (SourceState::Ready, None)
    );

    // Held again; approved; no push comes (a lost webhook): the scheduler
    // reads the source within one period.
    let c4 = w
        .commit_and_push(
            &[("deploy/stacks.yaml", few.as_bytes())],
            "eight go, really",
        )
        .await;
    let source = w.source("platform").await;
    let mut status = source.status.clone();
    status.approved_prune = Some(c4.clone());
    assert!(
        w.h.steps
            .registry
            .write_source_status("platform", source.version, &status)
            .await
            .unwrap()
    );
    let scheduler = w.scheduler();
    let report = as_function("scheduler", scheduler.run(now_millis()))
        .await
        .unwrap();
    assert!(
        matches!(&report.registry_source_outcomes[..], [(_, Outcome::Applied { pruned, .. })] if pruned.len() == 8),
        "{report:?}"
    );
    assert!(
        w.h.entry(&w.name("s9"))
            .await
            .deletion_requested_at
            .is_some()
    );
    let started: Vec<String> = scheduler
        .starter
        .started()
        .into_iter()
        .map(|(_, s, _)| s)
        .collect();
    assert!(
        started.contains(&w.name("s9")),
        "the pruned entries' runs start in that run: {started:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_installations_own_source_is_registered_once_from_its_parameters() {
    let w = World::new("regsrc-boot").await;
    let env = |name: &str| match name {
        "STACKSYNC_REGISTRY_SOURCE_URL" => Some(w.url.clone()),
        "STACKSYNC_REGISTRY_SOURCE_PATH" => Some("deploy/stacks.yaml".into()),
        _ => None,
    };
    let spec = stacksync::registry_source::bootstrap_spec(env)
        .unwrap()
        .unwrap();
    assert_eq!(
        (spec.name.as_str(), spec.reference.as_str()),
        ("installation", "main")
    );
    let registry = &w.h.steps.registry;
    let boot = || {
        as_function(
            "scheduler",
            stacksync::triggers::registry_source::bootstrap(registry, &spec),
        )
    };
    assert!(boot().await.unwrap(), "registered at the first run");
    assert!(!boot().await.unwrap(), "read, not written, at the next");
    assert_eq!(w.source("installation").await.spec, spec);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_apply_killed_between_batches_of_350_entries_is_finished_by_the_next_run() {
    let w = World::new("regsrc-kill").await;
    w.add_source("platform", "deploy/stacks.yaml").await;
    let shorts: Vec<String> = (0..350).map(|i| format!("k{i:03}")).collect();
    let all: Vec<(&str, &str)> = shorts.iter().map(|s| (s.as_str(), "")).collect();
    let c1 = w.repo.commit(
        &[("deploy/stacks.yaml", w.stacks_file(&all).as_bytes())],
        "350",
    );
    let registry = &w.h.steps.registry;
    let installation = installation(registry);
    // The applier stops after three transactions, as one killed there does.
    let killed = Failing::new(registry.clone());
    killed.fail(
        "TransactWriteItems",
        4,
        PortError::Transient("killed".into()),
    );
    let source = w.source("platform").await;
    let notices = stacksync::ports::Notifier::none();
    let stopped = sync_source(
        &killed,
        &sources(),
        &notices,
        &installation,
        &source,
        Some(&c1),
        now_millis(),
    )
    .await;
    assert!(stopped.is_err(), "{stopped:?}");
    let ours = |entries: Vec<stacksync::registry::StackEntry>| {
        entries
            .into_iter()
            .filter(|e| e.name.starts_with(&w.prefix))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        ours(registry.list().await.unwrap()).len(),
        150,
        "three whole batches, no part of a fourth"
    );
    let source = w.source("platform").await;
    assert_eq!(
        source
            .status
            .applying
            .as_ref()
            .map(|a| (a.commit.as_str(), a.changes)),
        Some((c1.as_str(), 350))
    );
    assert_eq!(source.status.applied_revision, None);

    let outcome = sync_source(
        registry,
        &sources(),
        &notices,
        &installation,
        &source,
        Some(&c1),
        now_millis(),
    )
    .await
    .unwrap();
    let Outcome::Applied {
        created, unchanged, ..
    } = outcome
    else {
        panic!("{outcome:?}")
    };
    assert_eq!((created.len(), unchanged), (200, 150));
    let entries = ours(registry.list().await.unwrap());
    assert_eq!(entries.len(), 350, "none lost, none doubled");
    assert!(
        entries
            .iter()
            .all(|e| e.spec_version == 1 && e.owner.is_some())
    );
    let source = w.source("platform").await;
    assert_eq!(
        (
            source.status.applying,
            source.status.entries,
            source.status.state
        ),
        (None, 350, SourceState::Ready)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn private_registry_sources_are_read_with_a_token_or_a_password_by_the_webhook_and_the_scheduler()
 {
    let w = World::new("regsrc-private").await;
    let token = unique_name("tok");
    let server = GitHttpServer::serve_repo(
        &w.repo,
        HttpConfig {
            accounts: vec![
                ("ci-bot".into(), token.clone()),
                ("deploy".into(), "pass-word".into()),
            ],
            ..HttpConfig::default()
        },
    );
    let url = server.url(&w.repo);
    let emulator = Emulator::shared();
    let secret = emulator
        .put_secret(
            "regsrc-token",
            &format!(r#"{{"token": "{token}", "username": "ci-bot", "hosts": ["127.0.0.1"]}}"#),
        )
        .await;
    let parameter = emulator
        .put_parameter(
            "regsrc-password",
            r#"{"username": "deploy", "password": "pass-word", "hosts": ["127.0.0.1"]}"#,
        )
        .await;
    w.add_source_at("by-token", &url, "a/stacks.yaml", Some(secret))
        .await;
    w.add_source_at("by-password", &url, "b/stacks.yaml", Some(parameter))
        .await;
    let (a, b) = (w.name("a"), w.name("b"));
    let file =
        |name: &str| format!("stacks:\n  - name: {name}\n    source: {{ path: ./t.yaml }}\n");
    let c1 = w.repo.commit(
        &[
            ("a/stacks.yaml", file(&a).as_bytes()),
            ("b/stacks.yaml", file(&b).as_bytes()),
            ("a/t.yaml", QUEUE.as_bytes()),
            ("b/t.yaml", QUEUE.as_bytes()),
        ],
        "two private sources",
    );
    // The push names the repository as the HTTP server serves it.
    w.push_to(&url, &c1).await;
    for (source, entry) in [("by-token", &a), ("by-password", &b)] {
        let read = w.source(source).await;
        assert_eq!(
            read.status.applied_revision.as_deref(),
            Some(c1.as_str()),
            "{source}: {:?}",
            read.status
        );
        let spec = w.h.entry(entry).await.spec;
        assert!(
            spec.source.credentials_secret.is_some(),
            "a relative entry takes its source's secret"
        );
    }
    assert_eq!(w.run_started().await, [a.clone(), b.clone()]);

    // The scheduler lists and reads them with the same secrets.
    let c2 = w
        .repo
        .commit(&[("a/stacks.yaml", b"stacks:\n")], "a's entry goes");
    let scheduler = w.scheduler();
    let report = as_function("scheduler", scheduler.run(now_millis()))
        .await
        .unwrap();
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    // Its only entry: the guard holds (every entry of the source).
    assert_eq!(w.source("by-token").await.status.state, SourceState::Held);
    assert_eq!(w.source("by-token").await.status.hold.unwrap().commit, c2);
    assert_eq!(
        w.source("by-password")
            .await
            .status
            .applied_revision
            .as_deref(),
        Some(c2.as_str())
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_lost_push_and_a_broken_commit_are_read_by_the_scheduler_and_an_idle_ref_costs_nothing() {
    let w = World::new("regsrc-lost").await;
    w.add_source("platform", "deploy/stacks.yaml").await;
    let few = w.stacks_file(&[("s0", ""), ("s1", "")]);
    w.commit_and_push(&[("deploy/stacks.yaml", few.as_bytes())], "two")
        .await;
    let scheduler = w.scheduler();
    // A lost push of a new entry: the scheduler applies it and starts it.
    let more = format!(
        "{few}  - name: {}\n    source: {{ path: ./templates/new.yaml }}\n",
        w.name("new")
    );
    let c5 = w
        .repo
        .commit(&[("deploy/stacks.yaml", more.as_bytes())], "a new one");
    let report = as_function("scheduler", scheduler.run(now_millis()))
        .await
        .unwrap();
    assert!(
        matches!(&report.registry_source_outcomes[..], [(_, Outcome::Applied { created, .. })] if created == &[w.name("new")]),
        "{report:?}"
    );
    let started: Vec<String> = scheduler
        .starter
        .started()
        .into_iter()
        .map(|(_, s, _)| s)
        .collect();
    assert!(started.contains(&w.name("new")), "{started:?}");
    assert_eq!(
        w.source("platform")
            .await
            .status
            .applied_revision
            .as_deref(),
        Some(c5.as_str())
    );

    // A broken commit no push announced: the scheduler finds it, and tells.
    let c6 = w
        .repo
        .commit(&[("deploy/stacks.yaml", b"stacks: [unclosed\n")], "broken");
    let report = as_function("scheduler", scheduler.run(now_millis()))
        .await
        .unwrap();
    assert!(
        matches!(&report.registry_source_outcomes[..], [(_, Outcome::Failed { revision, .. })] if revision == &c6),
        "{report:?}"
    );
    assert_eq!(
        w.source("platform")
            .await
            .status
            .applied_revision
            .as_deref(),
        Some(c5.as_str())
    );

    // Idle (its head failed already): nothing is read or written.
    let version = w.source("platform").await.version;
    let report = as_function("scheduler", scheduler.run(now_millis()))
        .await
        .unwrap();
    assert!(report.registry_source_outcomes.is_empty(), "{report:?}");
    assert_eq!(w.source("platform").await.version, version);
}

/// An S3 "Object Created" event, as EventBridge delivers it (`version`:
/// the object's version id, absent for an unversioned bucket).
fn object_created(bucket: &str, key: &str, version: Option<&str>) -> Value {
    let mut object = json!({"key": key, "size": 1024, "etag": unique_name("etag")});
    if let Some(version) = version {
        object["version-id"] = json!(version);
    }
    json!({
        "version": "0", "id": unique_name("event"), "detail-type": "Object Created",
        "source": "aws.s3", "account": "123456789012", "time": "2026-11-26T10:20:44Z",
        "region": "us-east-1", "resources": [format!("arn:aws:s3:::{bucket}")],
        "detail": {"version": "0", "bucket": {"name": bucket}, "object": object, "reason": "PutObject"}
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn an_s3_registry_source_is_applied_from_its_object_created_events() {
    let w = World::new("regsrc-s3").await;
    let emulator = Emulator::shared();
    let bucket = emulator.source_bucket(true).await;
    let key = "platform/stacks.zip";
    let url = format!("s3://{bucket}/{key}");
    let spec = SourceSpec {
        name: "archive".into(),
        url: url.clone(),
        reference: String::new(),
        path: "deploy/stacks.yaml".into(),
        credentials_secret: None,
        signed_by: vec![],
        insecure: false,
    };
    assert!(w.h.steps.registry.add_registry_source(&spec).await.unwrap());
    let handler = w.events_handler();
    let archive = |names: &[&str]| {
        let stacks: String = names
            .iter()
            .map(|n| format!("  - name: {n}\n    source: {{ path: ./t.yaml }}\n"))
            .collect();
        let stacks = format!("stacks:\n{stacks}");
        stacksync_testkit::archives::zip(&[
            (b"deploy/stacks.yaml", stacks.as_bytes()),
            (b"deploy/t.yaml", QUEUE.as_bytes()),
        ])
    };
    let (one, two) = (w.name("one"), w.name("two"));
    let v1 = emulator
        .put_object(&bucket, key, archive(&[&one]))
        .await
        .unwrap();
    let event = from_value(object_created(&bucket, key, Some(&v1))).unwrap();
    as_function("events", handler.handle(&event, now_millis()))
        .await
        .unwrap();
    let entry = w.h.entry(&one).await;
    assert_eq!(
        (
            entry.spec.source.s3.as_deref(),
            entry.spec.source.path.as_str()
        ),
        (Some(url.as_str()), "deploy/t.yaml")
    );
    let started: Vec<(String, String, Trigger)> = handler.starter.started();
    assert!(started.iter().any(|(_, s, _)| s == &one), "{started:?}");
    let run = w.h.reconcile(&one).await;
    assert!(matches!(run, RunOutcome::Succeeded(_)), "{run:?}");
    assert_eq!(
        w.h.entry(&one)
            .await
            .status
            .applied
            .last_applied_revision
            .as_deref(),
        Some(v1.as_str())
    );

    // An event that names no version (an ETag only): the source is read at
    // its latest version.
    let v2 = emulator
        .put_object(&bucket, key, archive(&[&one, &two]))
        .await
        .unwrap();
    let event = from_value(object_created(&bucket, key, None)).unwrap();
    as_function("events", handler.handle(&event, now_millis()))
        .await
        .unwrap();
    assert!(w.h.steps.registry.get(&two).await.unwrap().is_some());
    assert_eq!(
        w.source("archive").await.status.applied_revision.as_deref(),
        Some(v2.as_str())
    );

    // Renamed, then broken: the rename gives the old stack's claim up, the
    // broken archive changes nothing and is told.
    let renamed = format!("{one}-renamed");
    let stacks = format!(
        "stacks:\n  - name: {one}\n    stackName: {renamed}\n    source: {{ path: ./t.yaml }}\n"
    );
    let zip = |stacks: &str| {
        stacksync_testkit::archives::zip(&[
            (b"deploy/stacks.yaml", stacks.as_bytes()),
            (b"deploy/t.yaml", QUEUE.as_bytes()),
        ])
    };
    let v3 = emulator
        .put_object(&bucket, key, zip(&stacks))
        .await
        .unwrap();
    let event = from_value(object_created(&bucket, key, Some(&v3))).unwrap();
    as_function("events", handler.handle(&event, now_millis()))
        .await
        .unwrap();
    assert_eq!(
        w.h.entry(&one).await.spec.stack_name.as_deref(),
        Some(renamed.as_str())
    );
    let v4 = emulator
        .put_object(&bucket, key, zip("stacks: ["))
        .await
        .unwrap();
    let event = from_value(object_created(&bucket, key, Some(&v4))).unwrap();
    as_function("events", handler.handle(&event, now_millis()))
        .await
        .unwrap();
    let source = w.source("archive").await;
    assert_eq!(source.status.state, SourceState::Failed);
    assert_eq!(source.status.applied_revision.as_deref(), Some(v3.as_str()));
}

/// `--signed-by`: a source's commit is read only if signed by a listed key,
/// and its entries without a repository take the same rule.
#[tokio::test(flavor = "multi_thread")]
async fn a_signed_source_reads_only_commits_signed_by_a_listed_key() {
    let w = World::new("regsrc-signed").await;
    let keys = std::env::temp_dir().join(unique_name("regsrc-keys"));
    std::fs::create_dir_all(&keys).unwrap();
    let (trusted, trusted_pub) = signing_key(&keys, "release");
    let spec = SourceSpec {
        name: "signed".into(),
        url: w.url.clone(),
        reference: "main".into(),
        path: "stacks.yaml".into(),
        credentials_secret: None,
        signed_by: vec![trusted_pub.clone()],
        insecure: true,
    };
    assert!(w.h.steps.registry.add_registry_source(&spec).await.unwrap());
    let name = w.name("signed");
    let file = format!("stacks:\n  - name: {name}\n    source: {{ path: ./t.yaml }}\n");
    let unsigned = w
        .commit_and_push(
            &[
                ("stacks.yaml", file.as_bytes()),
                ("t.yaml", QUEUE.as_bytes()),
            ],
            "unsigned",
        )
        .await;
    let source = w.source("signed").await;
    assert_eq!(source.status.state, SourceState::Failed);
    let failure = source.status.failure.unwrap();
    assert_eq!(failure.commit, unsigned);
    assert!(
        failure.problems[0].contains("is not signed"),
        "{:?}",
        failure.problems
    );
    assert!(
        w.h.steps.registry.get(&name).await.unwrap().is_none(),
        "nothing of it written"
    );

    let signed = w.repo.commit_signed(&[], "signed by release", &trusted);
    w.push(&signed).await;
    let source = w.source("signed").await;
    assert_eq!(
        source.status.applied_revision.as_deref(),
        Some(signed.as_str()),
        "{:?}",
        source.status
    );
    assert_eq!(
        w.h.entry(&name).await.spec.source.signed_by,
        [trusted_pub],
        "the entry takes its source's keys"
    );
}
