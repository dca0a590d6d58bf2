//! A chain of three stacks (network → database → app, each reading the
//! one before's output) through the reconcile state machine (the local
//! runner's interpreter) against the emulator: executions and state
//! transitions from empty, after a change of the network's output, after a
//! change of no output, and after a push all three follow, each run as the
//! scheduler runs what is due (every due stack at once; here in name
//! order, downstream first, the order that costs the most). Run by
//! `scripts/bench chain` (and by `scripts/bench`); prints Markdown.
#![recursion_limit = "256"]

use stacksync_testkit::git::GitRepo;
use stacksync_testkit::harness::Harness;
use stacksync_testkit::unique_name;

const NETWORK: &str = "Parameters:
  Cidr: {Type: String}
  Owner: {Type: String}
Resources:
  Queue: {Type: AWS::SQS::Queue}
Outputs:
  VpcId:
    Value: !Join ['-', [vpc, !Ref Cidr]]
";
const DATABASE: &str = "Parameters:
  Vpc: {Type: String}
Resources:
  Queue: {Type: AWS::SQS::Queue}
Outputs:
  Endpoint:
    Value: !Join ['.', [db, !Ref Vpc]]
";
const APP: &str = "Parameters:
  Endpoint: {Type: String}
Resources:
  Queue: {Type: AWS::SQS::Queue}
";

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
    let repo = GitRepo::new("bench-chain");
    repo.commit(
        &[
            ("net.yaml", NETWORK.as_bytes()),
            ("db.yaml", DATABASE.as_bytes()),
            ("app.yaml", APP.as_bytes()),
        ],
        "three stacks",
    );
    let id = unique_name("b").replace('-', "x");
    let (net, db, app) = (format!("{id}net"), format!("{id}db"), format!("{id}app"));
    let stacks = |cidr: &str, owner: &str| {
        format!(
            "stacks:\n  - name: {net}\n    source: {{git: '{url}', path: net.yaml}}\n    \
             parameters: {{Cidr: '{cidr}', Owner: {owner}}}\n  \
             - name: {db}\n    source: {{git: '{url}', path: db.yaml}}\n    \
             parameters: {{Vpc: {{fromStack: {net}, output: VpcId}}}}\n  \
             - name: {app}\n    source: {{git: '{url}', path: app.yaml}}\n    dependsOn: [{net}]\n    \
             parameters: {{Endpoint: {{fromStack: {db}, output: Endpoint}}}}\n",
            url = repo.file_url()
        )
    };
    let names = [net.as_str(), db.as_str(), app.as_str()];
    println!(
        "| scenario | executions | state transitions | executions in order (states entered) |"
    );
    println!("|---|---|---|---|");
    h.apply(&stacks("10", "a")).await;
    row("from empty (`apply`)", &h.run_due(&names).await, &id);
    h.apply(&stacks("20", "a")).await;
    row(
        "the network's output changes (`apply`)",
        &h.run_due(&names).await,
        &id,
    );
    h.apply(&stacks("20", "b")).await;
    row(
        "a network change that alters no output",
        &h.run_due(&names).await,
        &id,
    );
    // The webhook starts every follower at once (here downstream first).
    let head = repo.commit(
        &[("net.yaml", NETWORK.replace("[vpc,", "[net,").as_bytes())],
        "rename",
    );
    let mut ran = Vec::new();
    for name in [&app, &db, &net] {
        let pushed = serde_json::json!({
            "stackId": name,
            "trigger": {"kind": "webhook", "revision": head},
        });
        h.reconcile_with(name, pushed).await;
        ran.push((name.clone(), h.take_states().len()));
    }
    ran.extend(h.run_due(&names).await);
    row(
        "a push all three follow, changing the network's output",
        &ran,
        &id,
    );
}
