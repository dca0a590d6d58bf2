//! A fleet for the scheduler's tests and benchmark: many registered stacks
//! over many Git repositories served by one `git daemon` on 127.0.0.1, set up
//! in a steady state (every stack reconciled at its repository's head, due
//! in an hour, every source's head recorded) through the registry's own item
//! format, written with `BatchWriteItem` (`Registry::apply` would make them
//! all new, and due at once).

use std::time::Duration;

use aws_sdk_dynamodb::types::{PutRequest, WriteRequest};
use stacksync::StackSpec;
use stacksync::adapters::git::GitFetcher;
use stacksync::adapters::stepfunctions::Executions;
use stacksync::clock::{EpochMillis, now_millis};
use stacksync::registry::{Registry, Schedule, StackEntry, entry_item};
use stacksync::source::source_key;
use stacksync::status::{Phase, Status, Timestamp};
use stacksync::triggers::scheduler::{Config, Scheduler};

use crate::git::{GitDaemon, GitRepo};
use crate::{Emulator, unique_name};

/// Repositories, stacks and the installation's parts.
#[derive(Debug)]
pub struct Fleet {
    pub registry: Registry,
    pub machine: String,
    pub sfn: aws_sdk_sfn::Client,
    pub repos: Vec<GitRepo>,
    /// The URL each repository is registered under.
    pub urls: Vec<String>,
    /// The stack names following each repository.
    pub followers: Vec<Vec<String>>,
    pub daemon: GitDaemon,
    /// Prefix of every stack name (unique to this fleet).
    pub prefix: String,
}

impl Fleet {
    /// `sizes[i]` stacks follow repository `i` (its `main`); every stack is
    /// `Ready` at its repository's head and due an hour from now.
    pub async fn new(label: &str, sizes: &[usize]) -> Fleet {
        let emulator = Emulator::shared();
        let registry = emulator.new_registry(label).await;
        let config = emulator.sdk_config();
        let sfn = aws_sdk_sfn::Client::new(&config);
        let machine = emulator.pass_machine(label).await;
        let base = std::env::temp_dir().join(unique_name(label));
        let repos: Vec<GitRepo> = (0..sizes.len())
            .map(|i| {
                let repo = GitRepo::new_in(&base, &format!("infra-{i}.git"));
                let body = format!("Resources: {{}} # repository {i}\n");
                repo.commit(&[("stack.yaml", body.as_bytes())], "first");
                repo
            })
            .collect();
        let daemon = GitDaemon::serve_dir(&base);
        let urls: Vec<String> = repos.iter().map(|r| daemon.url(r)).collect();
        let prefix = format!("f{:x}", now_millis() % 0xffff_ffff);
        let now = now_millis();
        let mut entries = Vec::new();
        let mut followers = Vec::new();
        for (i, size) in sizes.iter().enumerate() {
            let head = repos[i].head();
            let names: Vec<String> = (0..*size).map(|n| format!("{prefix}-{i}-{n}")).collect();
            for name in &names {
                entries.push(steady_entry(name, &urls[i], &head, now));
            }
            followers.push(names);
        }
        let fleet = Fleet {
            registry,
            machine,
            sfn,
            repos,
            urls,
            followers,
            daemon,
            prefix,
        };
        fleet.write(&entries).await;
        for (i, url) in fleet.urls.iter().enumerate() {
            let key = source_key(url, Some("main"));
            fleet
                .registry
                .add_source(&key, url, "main")
                .await
                .expect("source added");
            fleet
                .registry
                .record_source_head(&key, None, &fleet.repos[i].head(), now)
                .await
                .expect("source head recorded");
        }
        fleet
    }

    /// Writes entries as they are, 25 per `BatchWriteItem`, 8 calls at a time.
    pub async fn write(&self, entries: &[StackEntry]) {
        let client = Emulator::shared().dynamodb();
        let mut tasks = tokio::task::JoinSet::new();
        for chunk in entries.chunks(25) {
            let requests: Vec<WriteRequest> = chunk
                .iter()
                .map(|e| {
                    WriteRequest::builder()
                        .put_request(
                            PutRequest::builder()
                                .set_item(Some(entry_item(e)))
                                .build()
                                .expect("put request"),
                        )
                        .build()
                })
                .collect();
            let (client, table) = (client.clone(), self.registry.table().to_owned());
            tasks.spawn(async move {
                let mut pending = requests;
                while !pending.is_empty() {
                    let out = client
                        .batch_write_item()
                        .request_items(&table, pending)
                        .send()
                        .await
                        .expect("batch written");
                    pending = out
                        .unprocessed_items()
                        .and_then(|u| u.get(&table))
                        .cloned()
                        .unwrap_or_default();
                }
            });
            while tasks.len() >= 8 {
                tasks.join_next().await;
            }
        }
        while tasks.join_next().await.is_some() {}
    }

    /// The scheduler of this fleet.
    pub fn scheduler(&self, max_starts: usize) -> Scheduler<Registry, Executions, GitFetcher> {
        Scheduler {
            registry: self.registry.clone(),
            starter: Executions::new(self.sfn.clone(), &self.machine),
            sources: GitFetcher::new(std::env::temp_dir()),
            config: Config {
                max_starts,
                ..Config::default()
            },
        }
    }

    /// Every execution of the machine, by name.
    pub async fn execution_names(&self) -> Vec<String> {
        let mut names = Vec::new();
        let mut token = None;
        loop {
            let out = self
                .sfn
                .list_executions()
                .state_machine_arn(&self.machine)
                .max_results(1000)
                .set_next_token(token)
                .send()
                .await
                .expect("executions listed");
            names.extend(out.executions().iter().map(|e| e.name().to_owned()));
            match out.next_token {
                Some(next) => token = Some(next),
                None => break,
            }
        }
        names.sort();
        names
    }
}

/// A stack reconciled at `head`, `Ready`, due an hour after `now`.
pub fn steady_entry(name: &str, url: &str, head: &str, now: EpochMillis) -> StackEntry {
    let spec: StackSpec = serde_json::from_value(serde_json::json!({
        "name": name,
        "source": {"git": url, "ref": "main", "path": "stack.yaml"}
    }))
    .expect("a valid spec");
    StackEntry {
        name: name.to_owned(),
        spec_version: 1,
        spec_hash: spec.content_hash(),
        spec,
        suspended: false,
        deletion_requested_at: None,
        created_at: Timestamp(now - 86_400_000),
        updated_at: Timestamp(now - 86_400_000),
        status: Status {
            phase: Phase::Ready,
            observed_spec_version: 1,
            last_attempted_revision: Some(head.to_owned()),
            last_applied_revision: Some(head.to_owned()),
            last_reconcile_at: Some(Timestamp(now - 60_000)),
            next_reconcile_at: Some(Timestamp(
                now + i64::try_from(Duration::from_secs(3600).as_millis()).unwrap_or(0),
            )),
            ..Status::default()
        },
        lease: None,
    }
}
