use super::*;
use crate::fakes::RecordingStarter;
use crate::registry::memory::MemoryRegistry;
use crate::registry::sample_entry;
use crate::status::Status;

/// The followers of the sample entries' source, started at `c1` by a
/// webhook: what the start returned, and the starts recorded.
async fn start_all<X: Starter>(
    registry: &MemoryRegistry,
    starter: &X,
) -> (Result<(), TriggerError>, Starts) {
    let keys = [source_key("https://git.example/infra.git", Some("main"))];
    let mut starts = Starts::default();
    let result = start_followers(
        registry,
        starter,
        &keys,
        TriggerKind::Webhook,
        "c1",
        &mut starts,
    )
    .await;
    (result, starts)
}

/// Issue "Real payloads and real templates" (1): a tag and a branch of
/// one name were one source. A push to the tag started the branch's
/// stack at the tag's commit; and once a branch push had started the
/// tag's stack at a commit, the tag moved there started nothing.
#[tokio::test]
async fn a_tag_and_a_branch_of_one_name_are_two_sources() {
    let registry = MemoryRegistry::new();
    for (name, reference) in [
        ("branch", "refs/heads/master"),
        ("tag", "refs/tags/master"),
        ("short", "master"),
    ] {
        let mut entry = sample_entry(name, Status::default());
        entry.spec.source.reference = Some(reference.into());
        registry.insert(entry);
    }
    let starter = RecordingStarter::new();
    let pushed = |reference: &str| RefMoved {
        repository_urls: vec!["https://git.example/infra.git".into()],
        reference: reference.into(),
        commit: "c".repeat(40),
    };
    let mut starts = Starts::default();
    start_ref_followers(
        &registry,
        &starter,
        &pushed("refs/tags/master"),
        TriggerKind::Webhook,
        &mut starts,
    )
    .await
    .unwrap();
    let started = |s: &Starts| {
        s.started
            .iter()
            .map(|s| s.stack.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(started(&starts), ["short", "tag"], "never the branch's");
    let pins: std::collections::BTreeMap<String, Option<String>> = starter
        .started()
        .into_iter()
        .map(|(_, stack, trigger)| (stack, trigger.revision))
        .collect();
    assert_eq!(pins["tag"].as_deref(), Some("c".repeat(40).as_str()));
    assert_eq!(pins["short"], None, "a short ref's run resolves it");

    // The branch moved to the same commit: its stack starts, and so
    // does the short one again (it may follow either).
    let mut starts = Starts::default();
    start_ref_followers(
        &registry,
        &starter,
        &pushed("refs/heads/master"),
        TriggerKind::Webhook,
        &mut starts,
    )
    .await
    .unwrap();
    assert_eq!(started(&starts), ["branch", "short"]);
    assert!(starts.skipped.is_empty(), "{:?}", starts.skipped);
}

#[tokio::test]
async fn followers_start_once_per_revision_and_suspended_ones_are_skipped() {
    let registry = MemoryRegistry::new();
    registry.insert(sample_entry("a", Status::default()));
    let mut suspended = sample_entry("b", Status::default());
    suspended.suspended = true;
    registry.insert(suspended);
    // Held by a sync window: the scheduler starts it when it opens.
    let mut held = sample_entry("c", Status::default());
    held.status.inputs.held_by_window = true;
    registry.insert(held);
    // Held by its fleet's rollout: the wave before starts it.
    let mut waiting = sample_entry("d", Status::default());
    waiting.status.inputs.held_by_rollout = Some(crate::status::RolloutHold {
        revision: "abc".into(),
        halted: false,
    });
    registry.insert(waiting);
    let starter = RecordingStarter::new();
    let (result, starts) = start_all(&registry, &starter).await;
    result.unwrap();
    assert_eq!(
        starts
            .started
            .iter()
            .map(|s| s.stack.as_str())
            .collect::<Vec<_>>(),
        ["a"]
    );
    assert_eq!(starts.skipped[0].reason, SkipReason::Suspended);
    assert_eq!(starts.skipped[1].reason, SkipReason::HeldByWindow);
    assert_eq!(starts.skipped[2].reason, SkipReason::HeldByRollout);
    let (result, again) = start_all(&registry, &starter).await;
    result.unwrap();
    assert!(again.started.is_empty());
    assert_eq!(again.skipped.len(), 4);
    assert_eq!(starter.started().len(), 1);
    let json = serde_json::to_value(&again).unwrap();
    assert_eq!(
        json["skipped"][0]["reason"],
        "already started for this revision"
    );
}

/// Counts the starts in flight at once; fails the stack named "bad".
#[derive(Default)]
struct Gauge {
    now: std::sync::atomic::AtomicUsize,
    most: std::sync::atomic::AtomicUsize,
}

impl Starter for Gauge {
    async fn start(
        &self,
        stack: &str,
        _trigger: &Trigger,
        key: &str,
    ) -> crate::ports::PortResult<crate::ports::Started> {
        use std::sync::atomic::Ordering::SeqCst;
        let now = self.now.fetch_add(1, SeqCst) + 1;
        self.most.fetch_max(now, SeqCst);
        tokio::task::yield_now().await;
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        self.now.fetch_sub(1, SeqCst);
        if stack == "bad" {
            return Err(PortError::Transient("StartExecution: throttled".into()));
        }
        Ok(crate::ports::Started {
            stack: stack.to_owned(),
            execution_name: format!("{stack}-{key}"),
            execution_arn: String::new(),
            new: true,
        })
    }
}

#[tokio::test]
async fn hundreds_of_followers_start_a_bounded_number_at_once_and_one_failure_stops_none() {
    let registry = MemoryRegistry::new();
    for i in 0..200 {
        registry.insert(sample_entry(&format!("s{i:03}"), Status::default()));
    }
    registry.insert(sample_entry("bad", Status::default()));
    let starter = Gauge::default();
    let (result, starts) = start_all(&registry, &starter).await;
    assert!(matches!(result, Err(TriggerError::Start(_))), "{result:?}");
    assert_eq!(starts.started.len(), 200, "every other follower started");
    let most = starter.most.load(std::sync::atomic::Ordering::SeqCst);
    assert!(most > 1 && most <= START_CONCURRENCY, "{most} at once");
}

#[tokio::test]
async fn one_trigger_starts_at_most_its_bound_and_leaves_the_rest_to_the_scheduler() {
    let registry = MemoryRegistry::new();
    for i in 0..MAX_STARTS_PER_TRIGGER + 3 {
        registry.insert(sample_entry(&format!("s{i:05}"), Status::default()));
    }
    let starter = RecordingStarter::new();
    let (result, starts) = start_all(&registry, &starter).await;
    result.unwrap();
    assert_eq!(starts.started.len(), MAX_STARTS_PER_TRIGGER);
    assert_eq!(starter.started().len(), MAX_STARTS_PER_TRIGGER);
    assert_eq!(starts.skipped.len(), 3);
    assert!(
        starts
            .skipped
            .iter()
            .all(|s| s.reason == SkipReason::Deferred)
    );
}
