//! A world for the registry-source tests (`tests/tests/registry_sources.rs`,
//! `registry_source_reads.rs`): a registry on the emulator, a Git
//! repository served by `git daemon` on 127.0.0.1, the webhook, the
//! scheduler and the events function reading registry sources, and the runs
//! they start carried out by the real state machine (the local interpreter).
//! Starts are recorded (`RecordingStarter`, named as Step Functions names
//! them) and run by [`World::run_started`].

use serde_json::{Value, json};
use stacksync::adapters::cloudformation::SdkCloudFormationFactory;
use stacksync::adapters::secrets::{SecretLocation, Secrets};
use stacksync::asl::Outcome as RunOutcome;
use stacksync::clock::now_millis;
use stacksync::fakes::RecordingStarter;
use stacksync::registry::{Registry, RegistrySources};
use stacksync::registry_source::SourceSpec;
use stacksync::triggers::events::from_value;
use stacksync::triggers::events::handler::EventHandler;
use stacksync::triggers::registry_source::{Installation, PushApplier};
use stacksync::triggers::scheduler::{Config, Scheduler};
use stacksync::triggers::webhook::Headers;
use stacksync::triggers::webhook::handler::{Relay, Webhook};
use stacksync::triggers::webhook::verify::sign;

use crate::backend::Backend;
use crate::bus::{queue_for, received};
use crate::git::{GitDaemon, GitRepo};
use crate::harness::Harness;
use crate::iam::as_function;
use crate::{Emulator, unique_name};

pub const SECRET: &str = "registry-sources-secret";
pub const QUEUE: &str = "Resources:\n  Queue:\n    Type: AWS::SQS::Queue\n";
pub const QUEUE_AND_TOPIC: &str =
    "Resources:\n  Queue:\n    Type: AWS::SQS::Queue\n  Topic:\n    Type: AWS::SNS::Topic\n";

pub type Sources = stacksync::adapters::sources::Sources;
pub type TestScheduler = Scheduler<Registry, RecordingStarter, Sources, SdkCloudFormationFactory>;

/// One test's registry, repository, webhook and recorded starts.
#[derive(Debug)]
pub struct World {
    pub h: Harness<SdkCloudFormationFactory>,
    pub repo: GitRepo,
    pub daemon: GitDaemon,
    pub url: String,
    pub webhook: Webhook<Registry, RecordingStarter, Secrets>,
    /// The events function, reading registry sources: the pushes the
    /// webhook relays reach it through the emulator's bus.
    pub events: EventHandler<Registry, RecordingStarter>,
    /// The queue a rule sends this installation's relayed pushes to.
    pub relayed: String,
    /// Executions already run (by name).
    pub ran: std::sync::Mutex<Vec<String>>,
    pub prefix: String,
}

pub fn sources() -> Sources {
    stacksync::wiring::sdk_sources(
        &Emulator::shared().sdk_config(),
        true,
        &std::env::temp_dir().join(unique_name("registry-sources")),
    )
}

pub fn installation(registry: &Registry) -> Installation {
    Installation {
        name: registry.table().to_owned(),
        home: registry.region(),
        policy: Default::default(),
    }
}

impl World {
    pub async fn new(prefix: &str) -> World {
        World::on(Backend::Moto, prefix).await
    }

    /// With CloudFormation (and S3) on `backend`; the registry, Git and the
    /// event bus as in [`World::new`].
    pub async fn on(backend: Backend, prefix: &str) -> World {
        let h = backend.harness(prefix).await;
        let repo = GitRepo::new(prefix);
        let daemon = GitDaemon::serve(&repo);
        let url = daemon.url(&repo);
        let config = Emulator::shared().sdk_config();
        let registry = h.steps.registry.clone();
        let table = registry.table().to_owned();
        let relayed = queue_for(json!({
            "source": ["stacksync"], "detail-type": ["Registry Source Pushed"],
            "detail": {"installation": [table]}
        }))
        .await;
        let webhook = Webhook {
            queue: Default::default(),
            registry: registry.clone(),
            starter: RecordingStarter::new(),
            secrets: Secrets::new(SecretLocation::Fixed(vec![SECRET.into()]), &config),
            registry_sources: Some(Relay {
                bus: stacksync::wiring::event_bus(&config, "default"),
                installation: table,
                preview_forks: false,
            }),
        };
        let events = events_handler(&registry);
        World {
            h,
            repo,
            daemon,
            url,
            webhook,
            events,
            relayed,
            ran: std::sync::Mutex::default(),
            prefix: unique_name(prefix).to_lowercase(),
        }
    }

    pub fn name(&self, short: &str) -> String {
        format!("{}-{short}", self.prefix)
    }

    pub async fn add_source(&self, name: &str, path: &str) {
        self.add_source_at(name, &self.url, path, None).await;
    }

    pub async fn add_source_at(&self, name: &str, url: &str, path: &str, secret: Option<String>) {
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
        assert!(added.expect("the emulator answers"));
    }

    /// Commits `files` to `main` and delivers its push: the commit.
    pub async fn commit_and_push(&self, files: &[(&str, &[u8])], message: &str) -> String {
        let commit = self.repo.commit(files, message);
        self.push(&commit).await;
        commit
    }

    /// A signed push of `commit` to `main`, as a Git host delivers it.
    pub async fn push(&self, commit: &str) -> Value {
        self.push_to(&self.url, commit).await
    }

    /// The same, naming the repository by `url`.
    pub async fn push_to(&self, url: &str, commit: &str) -> Value {
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
        if response.body["result"] == "relayed" {
            self.deliver_relayed().await;
        }
        response.body
    }

    /// The pushes the webhook relayed, taken from the bus (a rule and a
    /// queue, as EventBridge delivers them) and handed to the events
    /// function.
    pub async fn deliver_relayed(&self) {
        let events = received(&self.relayed, 1, std::time::Duration::from_secs(20)).await;
        assert!(!events.is_empty(), "the relayed push reached no queue");
        for event in events {
            let event = from_value(event).expect("a relayed push");
            as_function("events", self.events.handle(&event, now_millis()))
                .await
                .expect("the events function handles it");
        }
    }

    /// The installation's scheduler over the world's registry, its starts
    /// recorded, its events on the emulator's default bus.
    pub fn scheduler(&self) -> TestScheduler {
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

    /// The events function over the world's registry (as [`World::events`]).
    pub fn events_handler(&self) -> EventHandler<Registry, RecordingStarter> {
        events_handler(&self.h.steps.registry)
    }

    /// Runs every execution started and not run yet: the stacks it ran.
    pub async fn run_started(&self) -> Vec<String> {
        let mut names = Vec::new();
        let mut started = self.webhook.starter.started();
        started.extend(self.events.starter.started());
        for (execution, stack, trigger) in started {
            if self
                .ran
                .lock()
                .expect("the emulator answers")
                .contains(&execution)
            {
                continue;
            }
            self.ran
                .lock()
                .expect("the emulator answers")
                .push(execution);
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

    pub async fn source(&self, name: &str) -> stacksync::registry_source::RegistrySource {
        self.h
            .steps
            .registry
            .registry_source(name)
            .await
            .expect("the emulator answers")
            .expect("the emulator answers")
    }

    pub fn stacks_file(&self, entries: &[(&str, &str)]) -> String {
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

pub async fn stack(backend: Backend, name: &str) -> Option<aws_sdk_cloudformation::types::Stack> {
    let cfn = backend.cloudformation();
    match cfn.describe_stacks().stack_name(name).send().await {
        Ok(out) => out.stacks().first().cloned(),
        Err(_) => None,
    }
}

/// The events function over `registry`, its starts recorded, reading
/// registry sources (its events on the emulator's default bus).
pub fn events_handler(registry: &Registry) -> EventHandler<Registry, RecordingStarter> {
    EventHandler {
        registry: registry.clone(),
        starter: RecordingStarter::new(),
        region: "us-east-1".into(),
        registry_sources: Some(std::sync::Arc::new(PushApplier {
            registry: registry.clone(),
            sources: sources(),
            notices: stacksync::wiring::event_bus(&Emulator::shared().sdk_config(), "default"),
            installation: installation(registry),
        })),
        waker: None,
        drift: None,
    }
}
