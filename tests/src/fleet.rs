//! A fleet for the scheduler's tests and benchmark: many registered stacks
//! over many Git repositories served by one `git daemon` on 127.0.0.1, each
//! with its CloudFormation stack in the emulator (in one of
//! [`FLEET_REGIONS`], none the installation's: the health check lists each
//! region once; four regions also keep moto's CreateStack, which compares
//! each new name with every stack of its region, from growing quadratic),
//! set up in a steady state (every stack reconciled at its repository's
//! head and seen as it is, in no queue, every source's head recorded)
//! through the registry's own item format, written with `BatchWriteItem`
//! (`Registry::apply` would make them all new, and due at once).

use std::collections::BTreeMap;
use std::time::Duration;

use aws_sdk_dynamodb::types::{PutRequest, WriteRequest};
use stacksync::StackSpec;
use stacksync::adapters::cloudformation::SdkCloudFormationFactory;
use stacksync::adapters::git::GitFetcher;
use stacksync::adapters::stepfunctions::Executions;
use stacksync::clock::{EpochMillis, now_millis};
use stacksync::registry::{Registry, Schedule, StackEntry, entry_item};
use stacksync::seen::Seen;
use stacksync::source::source_key;
use stacksync::status::{Phase, Status, Timestamp};
use stacksync::triggers::scheduler::{Config, Scheduler};

use crate::counted::CallCounter;
use crate::git::{GitDaemon, GitRepo};
use crate::{Emulator, unique_name};

/// The regions the fleets' stacks live in, stack `n` of a repository in
/// `FLEET_REGIONS[n % 4]` (the installation's region is us-east-1).
pub const FLEET_REGIONS: [&str; 4] = [
    "ap-southeast-2",
    "eu-central-1",
    "sa-east-1",
    "ca-central-1",
];

/// The smallest template: one resource the emulator makes in no time.
const FLEET_TEMPLATE: &str =
    r#"{"Resources": {"Handle": {"Type": "AWS::CloudFormation::WaitConditionHandle"}}}"#;

/// The scheduler a fleet's tests run; its CloudFormation calls are counted
/// in [`Fleet::cfn_calls`].
pub type FleetScheduler = Scheduler<Registry, Executions, GitFetcher, SdkCloudFormationFactory>;

/// Repositories, stacks and the installation's parts.
#[derive(Debug)]
pub struct Fleet {
    pub registry: Registry,
    /// The registry's DynamoDB calls (the scheduler's included).
    pub calls: CallCounter,
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
    /// Each stack as created (what its last run would have recorded).
    pub seen: BTreeMap<String, Seen>,
    /// CloudFormation in each of [`FLEET_REGIONS`].
    pub cfn: Vec<aws_sdk_cloudformation::Client>,
    /// The CloudFormation calls of the schedulers of [`Fleet::scheduler`]
    /// (`cfn_calls.count_of("cloudformation:ListStacks")`).
    pub cfn_calls: CallCounter,
}

impl Fleet {
    /// `sizes[i]` stacks follow repository `i` (its `main`); every stack
    /// exists, is `Ready` at its repository's head, seen as it is, and in no
    /// queue: the scheduler's health check watches it.
    pub async fn new(label: &str, sizes: &[usize]) -> Fleet {
        let emulator = Emulator::shared();
        let calls = CallCounter::new("dynamodb");
        let registry = emulator
            .new_registry_with(emulator.dynamodb_counted(&calls), label)
            .await;
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
        let followers: Vec<Vec<String>> = sizes
            .iter()
            .enumerate()
            .map(|(i, size)| (0..*size).map(|n| format!("{prefix}-{i}-{n}")).collect())
            .collect();
        let cfn: Vec<_> = FLEET_REGIONS
            .iter()
            .map(|region| {
                aws_sdk_cloudformation::Client::from_conf(
                    aws_sdk_cloudformation::config::Builder::from(&config)
                        .region(aws_config::Region::new(*region))
                        .build(),
                )
            })
            .collect();
        let seen = create_stacks(&cfn, &prefix, &followers).await;
        let fleet = Fleet {
            registry,
            calls,
            machine,
            sfn,
            repos,
            urls,
            followers,
            daemon,
            prefix,
            seen,
            cfn,
            cfn_calls: CallCounter::new("cloudformation"),
        };
        let mut entries = Vec::new();
        for (i, names) in fleet.followers.iter().enumerate() {
            let head = fleet.repos[i].head();
            for name in names {
                entries.push(fleet.watched_entry(name, &fleet.urls[i], &head, now));
            }
        }
        fleet.write(&entries).await;
        for (i, url) in fleet.urls.iter().enumerate() {
            let key = source_key(url, Some("main"));
            fleet
                .registry
                .add_source(&key, url, "main", None)
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
        write_entries(self.registry.table(), entries).await;
    }

    /// CloudFormation where stack `name` of this fleet lives.
    pub fn cfn_of(&self, name: &str) -> &aws_sdk_cloudformation::Client {
        let region = self.seen[name].region.as_deref();
        let at = FLEET_REGIONS
            .iter()
            .position(|r| Some(*r) == region)
            .unwrap_or(0);
        &self.cfn[at]
    }

    /// The scheduler of this fleet.
    pub fn scheduler(&self, max_starts: usize) -> FleetScheduler {
        Scheduler {
            registry: self.registry.clone(),
            starter: Executions::new(self.sfn.clone(), &self.machine),
            sources: GitFetcher::new(std::env::temp_dir()),
            cloudformation: SdkCloudFormationFactory::new(
                Emulator::shared().sdk_config_counted(&self.cfn_calls),
            ),
            config: Config {
                max_starts,
                ..Config::default()
            },
        }
    }

    /// Stack `name` of this fleet as a run leaves it: `Ready` at `head`,
    /// its stack seen as created, in no queue.
    pub fn watched_entry(&self, name: &str, url: &str, head: &str, now: EpochMillis) -> StackEntry {
        let mut e = steady_entry(name, url, head, now);
        e.status.applied.seen = self.seen.get(name).cloned();
        e.spec.region = e
            .status
            .applied
            .seen
            .as_ref()
            .and_then(|s| s.region.clone());
        e.status.times.next_reconcile_at = None;
        e.status.stack.status = Some("CREATE_COMPLETE".into());
        e
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

    /// The input of every execution of the machine.
    pub async fn execution_inputs(&self) -> Vec<String> {
        let mut inputs = Vec::new();
        for name in self.execution_names().await {
            let arn = format!(
                "{}:{name}",
                self.machine.replacen(":stateMachine:", ":execution:", 1)
            );
            let out = self
                .sfn
                .describe_execution()
                .execution_arn(arn)
                .send()
                .await
                .expect("execution described");
            inputs.push(out.input().unwrap_or_default().to_owned());
        }
        inputs
    }
}

/// Creates every follower's stack (stack `n` of a repository in region
/// `n % 4`), 16 at a time, and returns each as CloudFormation then lists it.
async fn create_stacks(
    cfn: &[aws_sdk_cloudformation::Client],
    prefix: &str,
    followers: &[Vec<String>],
) -> BTreeMap<String, Seen> {
    let mut tasks = tokio::task::JoinSet::new();
    for names in followers {
        for (n, name) in names.iter().enumerate() {
            let (cfn, name) = (cfn[n % cfn.len()].clone(), name.clone());
            tasks.spawn(async move {
                cfn.create_stack()
                    .stack_name(&name)
                    .template_body(FLEET_TEMPLATE)
                    .send()
                    .await
                    .map_err(|e| format!("stack {name} created: {e:?}"))
            });
            while tasks.len() >= 16 {
                if let Some(done) = tasks.join_next().await {
                    done.expect("create task").expect("stack created");
                }
            }
        }
    }
    while let Some(done) = tasks.join_next().await {
        done.expect("create task").expect("stack created");
    }
    let mut seen = BTreeMap::new();
    for (client, region) in cfn.iter().zip(FLEET_REGIONS) {
        list_created(client, region, prefix, &mut seen).await;
    }
    seen
}

/// The fleet's stacks in one region, as `ListStacks` gives them.
async fn list_created(
    cfn: &aws_sdk_cloudformation::Client,
    region: &str,
    prefix: &str,
    seen: &mut BTreeMap<String, Seen>,
) {
    let mut token = None;
    loop {
        let out = cfn
            .list_stacks()
            .stack_status_filter(aws_sdk_cloudformation::types::StackStatus::CreateComplete)
            .set_next_token(token)
            .send()
            .await
            .expect("stacks listed");
        for s in out.stack_summaries() {
            let name = s.stack_name().unwrap_or_default();
            if !name.starts_with(&format!("{prefix}-")) {
                continue;
            }
            let created = s
                .last_updated_time()
                .or(s.creation_time())
                .and_then(|t| t.to_millis().ok())
                .unwrap_or(0);
            seen.insert(
                name.to_owned(),
                Seen {
                    region: Some(region.to_owned()),
                    assume_role_arn: None,
                    stack_id: s.stack_id().unwrap_or_default().to_owned(),
                    changed_at: Timestamp(created),
                    stack_status: "CREATE_COMPLETE".into(),
                    drift: None,
                    deployed_hash: String::new(),
                    interval_seconds: 600,
                    drift_seconds: None,
                },
            );
        }
        match out.next_token() {
            Some(t) if !t.is_empty() => token = Some(t.to_owned()),
            _ => break,
        }
    }
}

/// A stack reconciled at `head`, `Ready`, due an hour after `now` (in the
/// queue: the health check leaves it to the queue).
pub fn steady_entry(name: &str, url: &str, head: &str, now: EpochMillis) -> StackEntry {
    let spec: StackSpec = serde_json::from_value(serde_json::json!({
        "name": name,
        "source": {"git": url, "ref": "main", "path": "stack.yaml"}
    }))
    .expect("a valid spec");
    let mut status = Status {
        phase: Phase::Ready,
        ..Status::default()
    };
    status.run.observed_spec_version = 1;
    status.run.last_attempted_revision = Some(head.to_owned());
    status.applied.last_applied_revision = Some(head.to_owned());
    status.times.last_reconcile_at = Some(Timestamp(now - 60_000));
    status.times.next_reconcile_at = Some(Timestamp(
        now + i64::try_from(Duration::from_secs(3600).as_millis()).unwrap_or(0),
    ));
    // Its drift detected an hour ago: not due again for half a day.
    status.findings.drift = Some(stacksync::drift::DriftRecord {
        checked_at: Some(Timestamp(now - 3_600_000)),
        ..Default::default()
    });
    StackEntry {
        name: name.to_owned(),
        spec_version: 1,
        spec_hash: spec.content_hash(),
        spec,
        suspended: false,
        deletion_requested_at: None,
        created_at: Timestamp(now - 86_400_000),
        updated_at: Timestamp(now - 86_400_000),
        status,
        lease: None,
        unsupported: None,
        stored_source_key: None,
        owner: None,
        reviewed: None,
    }
}

/// Writes entries into the emulator's table `table` as they are, 25 per
/// `BatchWriteItem`, 8 calls at a time (moto's transactions copy the table:
/// large registries are written this way).
pub async fn write_entries(table: &str, entries: &[StackEntry]) {
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
        let (client, table) = (client.clone(), table.to_owned());
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
