//! Runs at once per account and region (`MaxRunsPerAccount`), against the
//! emulator and the real state machine: 30 runs due in one account and
//! region, started together, hold at most 10 slots at any time (the slot
//! item, sampled while they run), the others wait (`WaitForSlot`) and then
//! go on, and every one ends `Ready` with its stack made and its slot given
//! back.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use futures_util::future::join_all;
use stacksync::asl::{Outcome, Progress};
use stacksync::reconcile::steps::slot_of;
use stacksync::registry::{Entries, Slots};
use stacksync::status::Phase;
use stacksync_testkit::backend::Backend;
use stacksync_testkit::registry_world::{QUEUE, World, stack};

const RUNS: usize = 30;
const CAP: u32 = 10;

#[tokio::test(flavor = "multi_thread")]
async fn thirty_runs_due_in_one_account_hold_at_most_ten_slots_and_all_end_ready() {
    let mut w = World::new("slots").await;
    w.h.steps.config.max_runs_per_account = Some(CAP);
    w.repo.commit(&[("q.yaml", QUEUE.as_bytes())], "q");
    let names: Vec<String> = (0..RUNS).map(|i| w.name(&format!("s{i:02}"))).collect();
    let mut text = String::from("stacks:\n");
    for name in &names {
        text.push_str(&format!(
            "  - name: {name}\n    source: {{git: '{}', path: q.yaml, insecure: true}}\n",
            w.url
        ));
    }
    w.h.apply(&text).await;
    let registry = w.h.steps.registry.clone();
    let first = registry.get(&names[0]).await.unwrap().unwrap();
    let key = slot_of(&first.spec, w.h.steps.config.home_region.as_deref());

    // The slot item, sampled while the runs go.
    let most = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (registry, key, most, done) =
            (registry.clone(), key.clone(), most.clone(), done.clone());
        tokio::spawn(async move {
            while !done.load(Ordering::SeqCst) {
                let held = registry.slot_holders(&key).await.unwrap().len();
                most.fetch_max(held, Ordering::SeqCst);
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
        })
    };
    let outcomes = join_all(names.iter().map(|name| w.h.reconcile(name))).await;
    done.store(true, Ordering::SeqCst);
    sampler.await.unwrap();

    for (name, outcome) in names.iter().zip(&outcomes) {
        assert!(
            matches!(outcome, Outcome::Succeeded(_)),
            "{name}: {outcome:?}"
        );
        let entry = registry.get(name).await.unwrap().unwrap();
        assert_eq!(
            entry.status.phase,
            Phase::Ready,
            "{name}: {:?}",
            entry.status.message
        );
        let made = stack(Backend::Moto, name).await.unwrap();
        assert_eq!(
            made.stack_status().map(|s| s.as_str()),
            Some("CREATE_COMPLETE")
        );
    }
    let most = most.load(Ordering::SeqCst);
    assert!(most <= CAP as usize, "{most} slots held at once");
    assert!(most > 1, "the runs overlapped ({most} at most)");
    let waits =
        w.h.events
            .lock()
            .unwrap()
            .iter()
            .filter(|p| matches!(p, Progress::StateEntered { name, .. } if name == "WaitForSlot"))
            .count();
    println!("{RUNS} runs: at most {most} slots held at once, {waits} waits for a slot");
    assert!(waits > 0, "some runs waited for a slot");
    assert!(
        registry.slot_holders(&key).await.unwrap().is_empty(),
        "every slot given back"
    );
}
