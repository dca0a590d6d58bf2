//! Registry sources against the emulator: the list of stacks in a Git
//! repository served by `git daemon` on 127.0.0.1, read by the webhook (a
//! signed push) and by the scheduler, applied to the DynamoDB registry, and
//! the runs it starts carried out by the real state machine (the local
//! interpreter, the steps on the emulator's CloudFormation). Starts are
//! recorded (`RecordingStarter`, named as Step Functions names them) and
//! then run here: the webhook's own tests prove the starts in Step Functions.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::time::Duration;

use serde_json::Value;
use stacksync::clock::now_millis;
use stacksync::fakes::Failing;
use stacksync::ports::PortError;
use stacksync::registry::{Entries, RegistrySources, Specs};
use stacksync::registry_source::SourceState;
use stacksync::triggers::registry_source::{Outcome, sync_source};
use stacksync_testkit::backend::Backend;
use stacksync_testkit::bus::{queue_for_installation, received};
use stacksync_testkit::iam::as_function;
use stacksync_testkit::registry_world::{
    QUEUE, QUEUE_AND_TOPIC, World, installation, sources, stack,
};

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
    assert_eq!(
        answer["result"], "relayed",
        "to the events function: {answer}"
    );
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
