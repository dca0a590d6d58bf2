use std::sync::Arc;

use super::*;
use crate::fakes::{Failing, MemoryNotices, MemorySources};
use crate::registry::memory::MemoryRegistry;
use crate::registry::{Entries, FleetRecords as _, StackEntry};
use crate::registry_source::{SourceSpec, SourceState};

const URL: &str = "https://git.example/platform.git";

fn spec(name: &str, path: &str) -> SourceSpec {
    SourceSpec {
        name: name.into(),
        url: URL.into(),
        reference: "main".into(),
        path: path.into(),
        credentials_secret: None,
        signed_by: vec![],
        insecure: false,
    }
}

fn entries(names: &[&str]) -> String {
    let mut text = String::from("stacks:\n");
    for name in names {
        text.push_str(&format!(
            "  - name: {name}\n    source: {{ path: ./{name}.yaml }}\n    destroyOnDelete: true\n"
        ));
    }
    text
}

struct World {
    /// No fault planned, unless a test plans one.
    registry: Failing<MemoryRegistry>,
    sources: MemorySources,
    bus: Arc<MemoryNotices>,
    notifier: Notifier,
    installation: Installation,
}

impl World {
    fn new() -> Self {
        let bus = Arc::new(MemoryNotices::default());
        Self {
            registry: Failing::new(MemoryRegistry::new()),
            sources: MemorySources::new(),
            notifier: Notifier::to(bus.clone()),
            bus,
            installation: Installation {
                name: "stacksync".into(),
                ..Installation::default()
            },
        }
    }

    async fn add(&self, spec: &SourceSpec) {
        assert!(self.registry.add_registry_source(spec).await.unwrap());
    }

    fn push(&self, commit: &str, files: &[(&str, String)]) {
        let files: Vec<(&str, &[u8])> = files.iter().map(|(p, t)| (*p, t.as_bytes())).collect();
        self.sources.commit(URL, "main", commit, &files);
    }

    async fn sync(&self, name: &str) -> Outcome {
        self.try_sync(name).await.unwrap()
    }

    async fn try_sync(&self, name: &str) -> Result<Outcome, SyncError> {
        let source = self.registry.registry_source(name).await.unwrap().unwrap();
        sync_source(
            &self.registry,
            &self.sources,
            &self.notifier,
            &self.installation,
            &source,
            None,
            1_000,
        )
        .await
    }

    async fn source(&self, name: &str) -> RegistrySource {
        self.registry.registry_source(name).await.unwrap().unwrap()
    }

    async fn entry(&self, name: &str) -> StackEntry {
        self.registry.get(name).await.unwrap().unwrap()
    }
}

#[tokio::test]
async fn a_commit_is_applied_with_its_owners_and_an_unmoved_ref_costs_no_fetch_and_no_write() {
    let world = World::new();
    world.add(&spec("platform", "stacks/**/*.yaml")).await;
    world.push(
        "c1",
        &[
            ("stacks/a.yaml", entries(&["web", "db"])),
            ("stacks/team/b.yaml", entries(&["queue"])),
            ("README.md", "not a stacks file".into()),
        ],
    );
    let outcome = world.sync("platform").await;
    let Outcome::Applied { created, .. } = &outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(created, &["db", "queue", "web"]);
    let queue = world.entry("queue").await;
    let owner = queue.owner.unwrap();
    assert_eq!(
        (
            owner.source.as_str(),
            owner.file.as_str(),
            owner.commit.as_str()
        ),
        ("platform", "stacks/team/b.yaml", "c1")
    );
    assert_eq!(queue.spec.source.git.as_deref(), Some(URL));
    assert_eq!(
        queue.spec.source.path, "stacks/team/queue.yaml",
        "relative to its file"
    );
    let source = world.source("platform").await;
    assert_eq!(source.status.state, SourceState::Ready);
    assert_eq!(source.status.applied_revision.as_deref(), Some("c1"));
    assert_eq!(source.status.entries, 3);
    assert_eq!(source.status.applying, None);

    let (_, fetches) = world.sources.calls();
    let version = source.version;
    assert_eq!(
        world.sync("platform").await,
        Outcome::Unchanged {
            revision: "c1".into()
        }
    );
    assert_eq!(world.sources.calls().1, fetches, "no fetch");
    assert_eq!(world.source("platform").await.version, version, "no write");
}

#[tokio::test]
async fn an_edit_updates_one_entry_a_move_touches_no_spec_and_a_removal_prunes() {
    let world = World::new();
    world.add(&spec("platform", "stacks/")).await;
    let names = ["a", "b", "c", "d", "e", "f", "g"];
    world.push("c1", &[("stacks/one.yaml", entries(&names))]);
    world.sync("platform").await;

    let edited = entries(&names).replace(
        "  - name: b\n    source: { path: ./b.yaml }\n",
        "  - name: b\n    source: { path: ./b2.yaml }\n",
    );
    world.push("c2", &[("stacks/one.yaml", edited.clone())]);
    let Outcome::Applied {
        updated, unchanged, ..
    } = world.sync("platform").await
    else {
        panic!()
    };
    assert_eq!((updated, unchanged), (vec!["b".to_owned()], 6));
    assert_eq!(world.entry("b").await.spec_version, 2);
    assert_eq!(
        world.entry("a").await.owner.unwrap().commit,
        "c1",
        "an unchanged entry is not rewritten"
    );

    // "c" moves to another file: its spec (and stack) stay.
    let without_c = edited.replace(
        "  - name: c\n    source: { path: ./c.yaml }\n    destroyOnDelete: true\n",
        "",
    );
    let c_alone = entries(&["c"]);
    world.push(
        "c3",
        &[
            ("stacks/one.yaml", without_c.clone()),
            ("stacks/two.yaml", c_alone),
        ],
    );
    let Outcome::Applied { moved, pruned, .. } = world.sync("platform").await else {
        panic!()
    };
    assert_eq!((moved, pruned), (vec!["c".to_owned()], vec![]));
    let c = world.entry("c").await;
    assert_eq!(
        (c.spec_version, c.owner.unwrap().file.as_str()),
        (1, "stacks/two.yaml")
    );

    world.push("c4", &[("stacks/one.yaml", without_c)]);
    let Outcome::Applied { pruned, .. } = world.sync("platform").await else {
        panic!()
    };
    assert_eq!(pruned, ["c"]);
    assert!(world.entry("c").await.deletion_requested_at.is_some());
}

#[tokio::test]
async fn a_bad_commit_writes_nothing_says_where_once_and_the_next_good_one_recovers() {
    let world = World::new();
    world.add(&spec("platform", "stacks.yaml")).await;
    world.push("c1", &[("stacks.yaml", entries(&["web"]))]);
    world.sync("platform").await;
    let before = world.entry("web").await;

    let broken = [
        ("stacks.yaml", "stacks:\n  - name: web\n    source: { path: [unclosed\n".to_owned()),
        (
            "stacks.yaml",
            "stacks:\n  - name: web\n    dependsOn: [db]\n    source: { path: ./w.yaml }\n  - name: db\n    dependsOn: [web]\n    source: { path: ./d.yaml }\n".to_owned(),
        ),
        ("stacks.yaml", "stacks:\n  - name: web\n    source: { path: ./w.yaml }\n    timeout: soon\n".to_owned()),
    ];
    for (i, (path, text)) in broken.iter().enumerate() {
        let commit = format!("bad{i}");
        world.push(&commit, &[(path, text.clone())]);
        let Outcome::Failed { problems, revision } = world.sync("platform").await else {
            panic!("{i}")
        };
        assert_eq!(revision, commit);
        assert!(
            problems.iter().all(|p| p.starts_with("stacks.yaml")),
            "{problems:?}"
        );
        assert_eq!(
            world.entry("web").await,
            before,
            "nothing of {commit} written"
        );
        let source = world.source("platform").await;
        assert_eq!(source.status.state, SourceState::Failed);
        assert_eq!(source.status.applied_revision.as_deref(), Some("c1"));
        assert_eq!(source.status.failure.as_ref().unwrap().commit, commit);
        // Read again: no second write, no second event.
        let events = world.bus.all().len();
        let version = source.version;
        assert!(matches!(
            world.sync("platform").await,
            Outcome::Unchanged { .. }
        ));
        assert_eq!(
            (
                world.bus.all().len(),
                world.source("platform").await.version
            ),
            (events, version)
        );
    }
    let sent = world.bus.all();
    assert_eq!(sent.len(), 3);
    assert_eq!(sent[0].detail_type(), "Registry Source Failed");
    assert_eq!(sent[0].registry_source.as_ref().unwrap().commit, "bad0");
    assert!(
        sent[1].message.as_deref().unwrap().contains("cycle"),
        "{:?}",
        sent[1].message
    );

    world.push("c2", &[("stacks.yaml", entries(&["web", "api"]))]);
    assert!(matches!(
        world.sync("platform").await,
        Outcome::Applied { .. }
    ));
    let source = world.source("platform").await;
    assert_eq!(
        (source.status.state, source.status.failure),
        (SourceState::Ready, None)
    );
}

#[tokio::test]
async fn another_owners_entry_is_refused_naming_both_owners() {
    let world = World::new();
    world.add(&spec("platform", "stacks.yaml")).await;
    world
        .add(&SourceSpec {
            path: "other.yaml".into(),
            ..spec("team", "other.yaml")
        })
        .await;
    let by_cli: crate::spec::StackSpec = serde_json::from_value(serde_json::json!({
        "name": "cli-stack", "source": {"git": URL, "path": "t.yaml"}
    }))
    .unwrap();
    world
        .registry
        .inner
        .insert(StackEntry::registered("cli-stack", &by_cli, 0));
    world.push(
        "c1",
        &[
            ("stacks.yaml", entries(&["web"])),
            ("other.yaml", entries(&["web"])),
        ],
    );
    world.sync("platform").await;
    let Outcome::Failed { problems, .. } = world.sync("team").await else {
        panic!()
    };
    assert!(
        problems[0].contains("the registry source \"platform\" (stacks.yaml)"),
        "{problems:?}"
    );
    assert!(
        problems[0].contains("the registry source \"team\" (other.yaml)"),
        "{problems:?}"
    );

    world.push("c2", &[("stacks.yaml", entries(&["web", "cli-stack"]))]);
    let Outcome::Failed { problems, .. } = world.sync("platform").await else {
        panic!()
    };
    assert!(problems[0].contains("the CLI"), "{problems:?}");
    assert_eq!(world.entry("cli-stack").await.owner, None);
}

#[tokio::test]
async fn a_commit_pruning_most_entries_is_held_until_restored_or_approved() {
    let world = World::new();
    world.add(&spec("platform", "stacks.yaml")).await;
    let all: Vec<String> = (0..10).map(|i| format!("s{i}")).collect();
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    world.push("c1", &[("stacks.yaml", entries(&all))]);
    world.sync("platform").await;

    world.push("c2", &[("stacks.yaml", entries(&all[..2]))]);
    let Outcome::Held { entries: held, .. } = world.sync("platform").await else {
        panic!()
    };
    assert_eq!(held.len(), 8);
    let source = world.source("platform").await;
    assert_eq!(source.status.state, SourceState::Held);
    assert!(
        source.status.summary().contains("approve-prune"),
        "{}",
        source.status.summary()
    );
    assert!(world.entry("s9").await.deletion_requested_at.is_none());
    assert_eq!(world.bus.all().len(), 1, "the hold is told");

    world.push("c3", &[("stacks.yaml", entries(&all))]);
    assert!(matches!(
        world.sync("platform").await,
        Outcome::Applied { .. }
    ));
    assert_eq!(
        world.source("platform").await.status.hold,
        None,
        "a commit that keeps them clears it"
    );

    world.push("c4", &[("stacks.yaml", entries(&all[..2]))]);
    assert!(matches!(world.sync("platform").await, Outcome::Held { .. }));
    let source = world.source("platform").await;
    let mut status = source.status.clone();
    status.approved_prune = Some("c4".into());
    assert!(
        world
            .registry
            .write_source_status("platform", source.version, &status)
            .await
            .unwrap()
    );
    let Outcome::Applied { pruned, .. } = world.sync("platform").await else {
        panic!()
    };
    assert_eq!(pruned.len(), 8);
    assert_eq!(world.source("platform").await.status.approved_prune, None);
}

#[tokio::test]
async fn a_plan_stopped_between_batches_is_finished_by_the_next_run_and_nothing_doubles() {
    let world = World::new();
    world.add(&spec("platform", "stacks.yaml")).await;
    let names: Vec<String> = (0..350).map(|i| format!("s{i:03}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    world.push("c1", &[("stacks.yaml", entries(&names))]);
    // The applier stops after three transactions, as a killed one does.
    world.registry.fail(
        "TransactWriteItems",
        4,
        crate::ports::PortError::Transient("killed".into()),
    );
    let stopped = world.try_sync("platform").await;
    assert!(
        matches!(stopped, Err(SyncError::Registry { .. })),
        "{stopped:?}"
    );
    let written = world.registry.list().await.unwrap().len();
    assert_eq!(written, 150, "three batches of 50 creates (100 items each)");
    let source = world.source("platform").await;
    assert_eq!(
        source.status.applying.as_ref().unwrap().changes,
        350,
        "the plan was recorded first"
    );
    assert_eq!(source.status.applied_revision, None);

    let Outcome::Applied {
        created, unchanged, ..
    } = world.sync("platform").await
    else {
        panic!()
    };
    assert_eq!((created.len(), unchanged), (200, 150));
    let all = world.registry.list().await.unwrap();
    assert_eq!(all.len(), 350);
    assert!(all.iter().all(|e| e.spec_version == 1));
    let source = world.source("platform").await;
    assert_eq!((source.status.applying, source.status.entries), (None, 350));
}

#[tokio::test]
async fn a_push_applies_every_source_it_moved_though_one_cannot_be_read_now() {
    let world = World::new();
    world.push(
        "c1",
        &[
            ("a/stacks.yaml", entries(&["from-a"])),
            ("b/stacks.yaml", entries(&["from-b"])),
        ],
    );
    // The first fetch (source "a", read first by name) fails for now.
    let sources = Failing::new(world.sources.clone());
    sources.fail(
        "Fetch",
        1,
        crate::ports::PortError::Transient("timed out".into()),
    );
    let applier = PushApplier {
        registry: MemoryRegistry::new(),
        sources,
        notices: Notifier::none(),
        installation: world.installation.clone(),
    };
    for source in [spec("a", "a/stacks.yaml"), spec("b", "b/stacks.yaml")] {
        applier.registry.add_registry_source(&source).await.unwrap();
    }
    let moved = crate::triggers::RefMoved {
        repository_urls: vec![URL.into()],
        reference: "refs/heads/main".into(),
        commit: "c1".into(),
    };
    let to_start = applier.apply_pushed(&moved, true, 1_000).await.unwrap();
    let names: Vec<&str> = to_start.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["from-b"], "b is applied though a could not be read");
    // It follows `main` (its source's ref) by the short name: named as the
    // push's own start of such a follower, so it starts once.
    assert_eq!(
        (to_start[0].pinned, to_start[0].naming.as_str()),
        (false, "refs/heads/main@c1")
    );
    let registry = &applier.registry;
    assert!(registry.get("from-a").await.unwrap().is_none());
    let a = registry.registry_source("a").await.unwrap().unwrap();
    assert_eq!(a.status.applied_revision, None, "a waits for the scheduler");
}

/// Two readers of one commit at once (a relayed push and a scheduler run,
/// each from the status it read): one records it; the other's write is
/// refused (`Raced`), and nothing is written twice.
#[tokio::test]
async fn two_readers_of_one_commit_record_it_once_and_write_nothing_twice() {
    let world = World::new();
    world.add(&spec("platform", "stacks.yaml")).await;
    world.push("c1", &[("stacks.yaml", entries(&["web", "db"]))]);
    let read_by_both = world.source("platform").await;
    let world = &world;
    let read = |source: RegistrySource| async move {
        sync_source(
            &world.registry,
            &world.sources,
            &world.notifier,
            &world.installation,
            &source,
            Some("c1"),
            1_000,
        )
        .await
    };
    let first = read(read_by_both.clone()).await.unwrap();
    assert!(matches!(first, Outcome::Applied { ref created, .. } if created.len() == 2));
    let second = read(read_by_both).await;
    assert!(matches!(second, Err(SyncError::Raced(_))), "{second:?}");
    let all = world.registry.inner.list().await.unwrap();
    assert_eq!(all.len(), 2);
    assert!(
        all.iter().all(|e| e.spec_version == 1),
        "nothing written twice"
    );
    let source = world.source("platform").await;
    assert_eq!(
        (
            source.status.state,
            source.status.applied_revision.as_deref()
        ),
        (SourceState::Ready, Some("c1"))
    );
}

#[tokio::test]
async fn a_fleet_in_a_source_is_expanded_owned_by_the_source_and_its_units_read_by_the_scheduler() {
    use crate::fakes::MemoryOrganizations;
    use crate::registry::{Fleets, Specs};
    let world = World::new();
    world.add(&spec("platform", "stacks.yaml")).await;
    let fleet = "stacks:\n  - name: web\n    source: { path: ./w.yaml }\n  - name: base\n    \
                 source: { path: ./b.yaml }\n    assumeRoleArn: 'arn:aws:iam::{account}:role/d'\n    \
                 destroyOnDelete: true\n    targets: { accounts: ['111122223333'], \
                 organizationalUnits: [ou-ab12-cd34ef56], regions: [us-east-1] }\n";
    world.push("c1", &[("stacks.yaml", fleet.to_owned())]);
    let Outcome::Applied { created, .. } = world.sync("platform").await else {
        panic!("the commit is applied")
    };
    assert_eq!(created, ["base-111122223333-us-east-1", "web"]);
    let target = world.entry("base-111122223333-us-east-1").await;
    assert_eq!(
        target.owner.as_ref().map(|o| o.file.as_str()),
        Some("stacks.yaml")
    );
    let recorded = world.registry.fleet("base").await.unwrap().unwrap();
    assert_eq!(
        recorded.owner.as_ref().map(|o| o.source.as_str()),
        Some("platform")
    );
    assert_eq!(recorded.read.at, None, "its unit not read yet");
    assert_eq!(
        world.registry.due_fleets(0).await.unwrap().len(),
        1,
        "due at once"
    );

    // The scheduler reads the unit: its account's target is the source's too.
    let org = MemoryOrganizations::default();
    org.put_unit("r-ab12", "ou-ab12-cd34ef56");
    org.put_account("ou-ab12-cd34ef56", "444455556666");
    let outcome = crate::triggers::fleets::reread(&world.registry, Some(&org), &recorded, None, 1)
        .await
        .unwrap();
    assert!(
        matches!(&outcome, crate::triggers::fleets::Reread::Applied { created, .. }
        if created == &["base-444455556666-us-east-1"]),
        "{outcome:?}"
    );
    let joined = world.entry("base-444455556666-us-east-1").await;
    assert_eq!(
        joined.owner.as_ref().map(|o| o.source.as_str()),
        Some("platform")
    );

    // A pull request's preview of the stacks file expands the fleet from
    // the units as last read, as applying it would.
    let pr = crate::pull_request::PullRequest {
        host: crate::pull_request::Host::GitHub,
        repository: "platform/stacks".into(),
        repository_urls: vec![URL.into()],
        number: 7,
        base_ref: "refs/heads/main".into(),
        head_ref: "refs/heads/more".into(),
        head_commit: "c1b".into(),
        fork: false,
        state: crate::pull_request::PrState::Open,
        merge_commit: None,
        url: None,
    };
    let more = fleet.replace("regions: [us-east-1]", "regions: [us-east-1, eu-west-1]");
    world.push("c1b", &[("stacks.yaml", more)]);
    let previewed = stacks_files_at(
        &world.registry,
        &world.sources,
        &world.installation,
        &pr,
        "c1b",
    )
    .await
    .unwrap();
    let created: Vec<&str> = previewed[0]
        .created
        .iter()
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(
        created,
        ["base-111122223333-eu-west-1", "base-444455556666-eu-west-1"],
        "{previewed:?}"
    );

    // A commit without the fleet prunes its targets and forgets it.
    world.push("c2", &[("stacks.yaml", entries(&["web"]))]);
    let Outcome::Applied { pruned, .. } = world.sync("platform").await else {
        panic!("applied")
    };
    assert_eq!(
        pruned,
        ["base-111122223333-us-east-1", "base-444455556666-us-east-1"]
    );
    assert!(world.registry.fleet("base").await.unwrap().is_none());
    assert_eq!(world.registry.list().await.unwrap().len(), 3);
}
