//! What a stack that keeps failing costs: a create that fails at every
//! try, at one revision, run through the reconcile state machine (the local
//! runner's interpreter) against the scripted CloudFormation, with the
//! registry, the bucket and Git real (emulator, `file://` repository). Each
//! run starts when the last one said the next try is due, on a clock that
//! jumps ahead (the waits are read from the registry, not slept), until no
//! try is due or a day has passed. Run by `scripts/bench failures` (and by
//! `scripts/bench`); prints Markdown.
#![recursion_limit = "256"]

use stacksync::asl::Outcome;
use stacksync::stack_status::StackStatus as S;
use stacksync::status::StallReason;
use stacksync_testkit::git::GitRepo;
use stacksync_testkit::harness::Harness;
use stacksync_testkit::scripted::ScriptedCloudFormation;
use stacksync_testkit::unique_name;

const DAY_SECS: i64 = 86_400;

/// One policy's day: the tries, the stacks created and deleted, the
/// minutes until it stopped trying (if it did), and how it ended.
struct Day {
    runs: usize,
    creates: usize,
    deletes: usize,
    stopped_after_secs: Option<i64>,
    last: Option<StallReason>,
}

/// What fails: a create (rolled back), or an update of a stack that
/// exists (rolled back to where it was).
#[derive(Clone, Copy)]
enum Failing {
    Create,
    Update,
}

async fn day(failing: Failing, extra: &str) -> Day {
    let fake = ScriptedCloudFormation::with_stack(&[match failing {
        Failing::Create => None,
        Failing::Update => Some(S::UpdateComplete),
    }]);
    {
        let mut s = fake.script();
        s.after_execute = match failing {
            Failing::Create => vec![
                Some(S::CreateInProgress),
                Some(S::RollbackInProgress),
                Some(S::RollbackComplete),
            ],
            Failing::Update => vec![
                Some(S::UpdateInProgress),
                Some(S::UpdateRollbackInProgress),
                Some(S::UpdateRollbackComplete),
            ],
        };
        s.after_delete = vec![Some(S::DeleteInProgress), None];
    }
    let h: Harness<ScriptedCloudFormation> =
        Harness::with_port("bench-failures", fake.clone()).await;
    let repo = GitRepo::new("bench-failures");
    repo.commit(
        &[(
            "t.yaml",
            b"Resources:\n  Db: {Type: AWS::RDS::DBInstance}\n",
        )],
        "a database that never comes up",
    );
    let name = unique_name("f").replace('-', "x");
    h.apply(&format!(
        "stacks:\n  - name: {name}\n    source: {{git: '{}', path: t.yaml}}\n{extra}",
        repo.file_url()
    ))
    .await;
    let mut clock = 0_i64;
    let mut runs = 0;
    let mut stopped_after_secs = None;
    while clock < DAY_SECS {
        let outcome = h.reconcile(&name).await;
        runs += 1;
        assert!(matches!(outcome, Outcome::Failed(_)), "{outcome:?}");
        let status = h.entry(&name).await.status;
        match (
            status.times.next_reconcile_at,
            status.times.last_reconcile_at,
        ) {
            (Some(next), Some(last)) => clock += (next.0 - last.0) / 1000,
            _ => {
                stopped_after_secs = Some(clock);
                break;
            }
        }
    }
    let ops = fake.operations();
    let count = |op: &str| ops.iter().filter(|o| *o == op).count();
    Day {
        runs,
        creates: count("ExecuteChangeSet"),
        deletes: count("DeleteStack"),
        stopped_after_secs,
        last: h.entry(&name).await.status.stall_reason,
    }
}

#[tokio::main]
async fn main() {
    println!("## A stack that keeps failing (issue \"Fail safely\")\n");
    println!(
        "A create, or an update, that fails at every try at one revision \
         (`tests/examples/bench_failures.rs`): the runs the retry schedule starts in a day, \
         through the real state machine. Before this version, a failed stack was tried again \
         every `retryInterval` (2 minutes) for as long as it failed: 720 tries a day, each a \
         create, a rollback and a delete (or an update and its rollback).\n"
    );
    println!(
        "| what fails, policy | tries in a day | change sets executed | stacks deleted | stops trying after | ends |"
    );
    println!("|---|---|---|---|---|---|");
    let before = DAY_SECS / 120;
    println!(
        "| a create, before (every 2m, no limit) | {before} | {before} | {before} | never | `Failed`, due again |"
    );
    println!("| an update, before | {before} | {before} | 0 | never | `Failed`, due again |");
    for (label, failing, extra) in [
        (
            "a create, default (`maxAttempts: 5`, `onFailedCreate: delete`)",
            Failing::Create,
            "",
        ),
        (
            "a create, `onFailedCreate: keep`",
            Failing::Create,
            "    onFailedCreate: keep\n",
        ),
        ("an update, default", Failing::Update, ""),
        (
            "an update, `maxAttempts: 10`, `retryInterval: 1m`",
            Failing::Update,
            "    maxAttempts: 10\n    retryInterval: 1m\n",
        ),
    ] {
        let d = day(failing, extra).await;
        let stops = d
            .stopped_after_secs
            .map_or("never".to_owned(), |s| format!("{} min", s / 60));
        let ends = d.last.map_or("-".to_owned(), |r| format!("`Failed ({r})`"));
        println!(
            "| {label} | {} | {} | {} | {stops} | {ends}, out of the queue |",
            d.runs, d.creates, d.deletes
        );
    }
}
