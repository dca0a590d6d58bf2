//! Sync windows against the emulator, through the scheduler and the real
//! state machine, on a clock the test moves: a denied window holds the runs
//! it catches (`Pending (Window)`, no stack touched, due at its end; the
//! scheduler does not start them again while it lasts, though their source
//! moved on), and they start and deploy at its end; `reconcile --force`
//! goes through it and says so in its outcome and its status.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use serde_json::{Value, json};
use stacksync::asl::Outcome;
use stacksync::clock::{Clock, now_millis};
use stacksync::registry::{Entries, StackEntry};
use stacksync::status::Phase;
use stacksync::triggers::scheduler::Report;
use stacksync_testkit::backend::Backend;
use stacksync_testkit::iam::as_function;
use stacksync_testkit::registry_world::{QUEUE, TestScheduler, World, stack};

const MINUTE: i64 = 60_000;

/// Runs the scheduler at `at`, then every execution it started: their
/// stacks and what each run's output said.
async fn schedule(w: &World, scheduler: &TestScheduler, at: i64) -> (Report, Vec<(String, Value)>) {
    w.h.steps.config.clock.set(at);
    let report = as_function("scheduler", scheduler.run(at)).await.unwrap();
    let mut ran = Vec::new();
    for (execution, stack, trigger) in scheduler.starter.started() {
        if w.ran.lock().unwrap().contains(&execution) {
            continue;
        }
        w.ran.lock().unwrap().push(execution);
        let input = json!({"stackId": stack, "trigger": trigger});
        match w.h.reconcile_with(&stack, input).await {
            Outcome::Succeeded(output) => ran.push((stack, output)),
            other => panic!("{stack}: {other:?}"),
        }
    }
    ran.sort_by(|a, b| a.0.cmp(&b.0));
    (report, ran)
}

async fn entry(w: &World, name: &str) -> StackEntry {
    w.h.steps.registry.get(name).await.unwrap().unwrap()
}

fn outcome(output: &Value) -> &str {
    output["outcome"].as_str().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_denied_window_holds_runs_until_its_end_and_a_forced_run_goes_through() {
    let mut w = World::new("windows").await;
    w.repo.commit(&[("q.yaml", QUEUE.as_bytes())], "q");
    // A window denying 30 minutes from the current minute (UTC).
    let at = now_millis() + 1000;
    let start = at / MINUTE * MINUTE;
    let (minute, hour) = ((start / MINUTE) % 60, (start / (60 * MINUTE)) % 24);
    w.h.steps.config.clock = Clock::manual(at);
    let (held, forced) = (w.name("held"), w.name("forced"));
    let mut text = String::from("stacks:\n");
    for name in [&held, &forced] {
        text.push_str(&format!(
            "  - name: {name}\n    source: {{git: '{}', path: q.yaml, insecure: true}}\n    \
             windows: [{{deny: '{minute} {hour} * * *', duration: 30m}}]\n",
            w.url
        ));
    }
    w.h.apply(&text).await;
    let scheduler = w.scheduler();

    // Both due: started, and both held at once.
    let (_, ran) = schedule(&w, &scheduler, at).await;
    assert_eq!(ran.len(), 2, "{ran:?}");
    for (name, output) in &ran {
        assert!(
            outcome(output).starts_with("held: inside the denied sync window deny"),
            "{name}: {output}"
        );
        let e = entry(&w, name).await;
        assert_eq!(e.status.phase, Phase::Pending);
        assert!(e.status.inputs.held_by_window, "{name}");
        assert_eq!(
            e.status.times.next_reconcile_at.map(|t| t.0),
            Some(start + 30 * MINUTE),
            "{name}: due at the window's end"
        );
        assert!(e.lease.is_none(), "{name}: lease given back");
        assert!(
            stack(Backend::Moto, name).await.is_none(),
            "{name}: no stack"
        );
    }

    // `reconcile --force` goes through, and says so.
    let input = json!({"stackId": forced, "trigger": {"kind": "manual", "force": true}});
    let Outcome::Succeeded(output) = w.h.reconcile_with(&forced, input).await else {
        panic!("the forced run succeeds");
    };
    assert!(
        outcome(&output).contains("forced through a closed sync window (inside the denied"),
        "{output}"
    );
    let e = entry(&w, &forced).await;
    assert_eq!(e.status.phase, Phase::Ready);
    assert!(!e.status.inputs.held_by_window);
    assert!(
        e.status
            .message
            .as_deref()
            .is_some_and(|m| m.contains("forced through a closed sync window")),
        "{:?}",
        e.status.message
    );
    let created = stack(Backend::Moto, &forced).await.unwrap();
    assert_eq!(
        created.stack_status().map(|s| s.as_str()),
        Some("CREATE_COMPLETE")
    );

    // While the window lasts, the held run is not started again, though its
    // source has moved on from where it last ran (it never ran).
    w.repo.commit(&[("q.yaml", QUEUE.as_bytes())], "again");
    let (report, ran) = schedule(&w, &scheduler, start + 20 * MINUTE).await;
    assert!(
        ran.iter().all(|(name, _)| name != &held),
        "held: {ran:?} ({report:?})"
    );
    assert!(entry(&w, &held).await.status.inputs.held_by_window);

    // At its end, the scheduler starts it and it deploys.
    let (report, ran) = schedule(&w, &scheduler, start + 30 * MINUTE).await;
    let started: Vec<&str> = ran.iter().map(|(name, _)| name.as_str()).collect();
    assert!(started.contains(&held.as_str()), "{report:?}");
    let e = entry(&w, &held).await;
    assert_eq!(e.status.phase, Phase::Ready, "{:?}", e.status.message);
    assert!(!e.status.inputs.held_by_window);
    assert!(
        !e.status.message.unwrap_or_default().contains("window"),
        "an ordinary run says nothing of windows"
    );
    let created = stack(Backend::Moto, &held).await.unwrap();
    assert_eq!(
        created.stack_status().map(|s| s.as_str()),
        Some("CREATE_COMPLETE")
    );
}
