//! A chain of three stacks (network → database → app, each reading the
//! one before's output) through the reconcile state machine (the local
//! runner's interpreter) against the emulator: executions and state
//! transitions from empty, after a change of the network's output, after a
//! change of no output, and after a push all three follow, each run as the
//! scheduler runs what is due (every due stack at once; here in name
//! order, downstream first, the order that costs the most). Run by
//! `scripts/bench chain` (and by `scripts/bench`); prints Markdown.
#![recursion_limit = "256"]

use stacksync_testkit::chain::Chain;
use stacksync_testkit::harness::Harness;

fn row(what: &str, ran: &[(String, usize)], id: &str) {
    let order: Vec<String> = ran
        .iter()
        .map(|(name, states)| format!("{} ({states})", name.trim_start_matches(id)))
        .collect();
    let transitions: usize = ran.iter().map(|(_, s)| s).sum();
    println!(
        "| {what} | {} | {transitions} | {} |",
        ran.len(),
        order.join(" → ")
    );
}

#[tokio::main]
async fn main() {
    let h = Harness::new("bench-chain").await;
    let chain = Chain::new("bench-chain");
    let (net, db, app) = (&chain.net, &chain.db, &chain.app);
    let id = net.trim_end_matches("net");
    let stacks = |cidr: &str, owner: &str| chain.stacks(cidr, owner);
    let names = chain.names();
    println!(
        "| scenario | executions | state transitions | executions in order (states entered) |"
    );
    println!("|---|---|---|---|");
    h.apply(&stacks("10", "a")).await;
    row("from empty (`apply`)", &h.run_due(&names).await, id);
    h.apply(&stacks("20", "a")).await;
    row(
        "the network's output changes (`apply`)",
        &h.run_due(&names).await,
        id,
    );
    h.apply(&stacks("20", "b")).await;
    row(
        "a network change that alters no output",
        &h.run_due(&names).await,
        id,
    );
    // The webhook starts every follower at once (here downstream first).
    let head = chain.push_new_output();
    let mut ran = Vec::new();
    for name in [app, db, net] {
        let pushed = serde_json::json!({
            "stackId": name,
            "trigger": {"kind": "webhook", "revision": head},
        });
        h.reconcile_with(name, pushed).await;
        ran.push((name.to_string(), h.take_states().len()));
    }
    ran.extend(h.run_due(&names).await);
    row(
        "a push all three follow, changing the network's output",
        &ran,
        id,
    );
}
