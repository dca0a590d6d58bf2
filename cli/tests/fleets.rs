//! Fleets through the `stacksync` binary, against the emulator (moto's
//! Organizations, CloudFormation in several accounts through
//! `assumeRoleArn`, two regions): an entry over two organizational units
//! and two regions makes one stack per account and region, each with its
//! own entry and status; an account that joins a unit gets its stacks at
//! the next read of the units, one that leaves has them deleted
//! (`destroyOnDelete`); a unit that cannot be read stops the apply.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use std::process::{Command, Output};

use common::{Cli, stderr, stdout};
use stacksync::clock::now_millis;
use stacksync::registry::{Entries, FleetRecords as _, Fleets, Registry, Specs};
use stacksync::triggers::fleets::{Reread, reread};
use stacksync_testkit::git::GitRepo;
use stacksync_testkit::organizations::{Organization, stack_in};
use stacksync_testkit::{Emulator, unique_name};

const TEMPLATE: &[u8] = b"Parameters:\n  Size: {Type: String, Default: large}\nResources:\n  Queue:\n    Type: AWS::SQS::Queue\nOutputs:\n  Size: {Value: !Ref Size}\n";
const REGIONS: [&str; 2] = ["us-east-1", "eu-west-1"];

/// The stack `name` in `account` and `region`: its status and its output
/// `Size` (`None`: there is none).
async fn stack(account: &str, region: &str, name: &str) -> Option<(String, String)> {
    let stack = stack_in(account, region, name).await?;
    let status = stack.stack_status()?.as_str().to_owned();
    if status == "DELETE_COMPLETE" {
        return None;
    }
    let size = stack
        .outputs()
        .iter()
        .find(|o| o.output_key() == Some("Size"))
        .and_then(|o| o.output_value())
        .unwrap_or_default()
        .to_owned();
    Some((status, size))
}

struct World {
    cli: Cli,
    registry: Registry,
    bucket: String,
}

impl World {
    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut all = vec!["--bucket", self.bucket.as_str()];
        all.extend_from_slice(args);
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_stacksync"));
        cmd.args(&all)
            .env("STACKSYNC_TABLE", &self.cli.table)
            .env("STACKSYNC_SPEEDUP", "1000")
            .env_remove("AWS_PROFILE");
        for (k, v) in Emulator::shared().env() {
            cmd.env(k, v);
        }
        cmd
    }

    /// Reads the fleet's units as the scheduler does, an interval later.
    async fn read_units(&self, fleet: &str) -> Reread {
        let record = self.registry.fleet(fleet).await.unwrap().unwrap();
        let organizations =
            stacksync::wiring::organizations(&Emulator::shared().sdk_config(), None).await;
        let later = now_millis() + 2 * 3_600_000;
        reread(&self.registry, Some(&organizations), &record, None, later)
            .await
            .unwrap()
    }

    fn reconcile(&self, names: &[String]) {
        for name in names {
            let out = self.run(&["reconcile", name, "--local"]);
            assert!(
                out.status.success(),
                "{name}: {}\n{}",
                stdout(&out),
                stderr(&out)
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fleet_over_two_units_and_two_regions_follows_its_accounts() {
    let (cli, registry) = Cli::new("cli-fleet").await;
    let world = World {
        cli,
        registry,
        bucket: unique_name("cli-fleet-bucket"),
    };
    let org = Organization::shared().await;
    let (east, west) = (org.unit(None).await, org.unit(None).await);
    let mut accounts = Vec::new();
    for unit in [&east, &east, &west, &west] {
        accounts.push(org.account(unit).await);
    }
    let repo = GitRepo::new("fleet");
    repo.commit(&[("baseline.yaml", TEMPLATE)], "baseline");
    let name = unique_name("fleet");
    let file = world.cli.file(
        "fleet.yaml",
        &format!(
            "stacks:\n  - name: {name}\n    source: {{git: '{}', path: baseline.yaml}}\n    \
             assumeRoleArn: 'arn:aws:iam::{{account}}:role/stacksync-target'\n    \
             destroyOnDelete: true\n    targets:\n      organizationalUnits: [{east}, {west}]\n      \
             regions: [us-east-1, eu-west-1]\n      overrides: {{'{}/eu-west-1': {{parameters: \
             {{Size: small}}}}}}\n",
            repo.file_url(),
            accounts[0]
        ),
    );

    let out = world.run(&["sync", "-f", &file, "--local"]);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}\n{}", stderr(&out));
    assert_eq!(text.matches(": applied").count(), 8, "{text}");
    for account in &accounts {
        for region in REGIONS {
            let small = account == &accounts[0] && region == "eu-west-1";
            let size = if small { "small" } else { "large" };
            assert_eq!(
                stack(account, region, &name).await,
                Some(("CREATE_COMPLETE".to_owned(), size.to_owned())),
                "{account}/{region}"
            );
        }
    }
    shown_under_the_fleets_name(&world, &name, &accounts[0]);

    // A new account in a unit gets its stacks at the next read.
    let joined = org.account(&east).await;
    let Reread::Applied { created, pruned } = world.read_units(&name).await else {
        panic!("the read is applied")
    };
    assert_eq!((created.len(), pruned.len()), (2, 0), "{created:?}");
    world.reconcile(&created);
    for region in REGIONS {
        assert!(
            stack(&joined, region, &name).await.is_some(),
            "{joined}/{region}"
        );
    }

    // An account that leaves its unit has its stacks deleted.
    org.move_account(&accounts[2], &west, &org.root).await;
    let Reread::Applied { created, pruned } = world.read_units(&name).await else {
        panic!("the read is applied")
    };
    assert_eq!((created.len(), pruned.len()), (0, 2), "{pruned:?}");
    world.reconcile(&pruned);
    for region in REGIONS {
        assert_eq!(
            stack(&accounts[2], region, &name).await,
            None,
            "deleted in {region}"
        );
    }
    assert!(
        stack(&accounts[3], "us-east-1", &name).await.is_some(),
        "the others stay"
    );
    let listed = world.registry.list().await.unwrap();
    assert_eq!(
        listed.iter().filter(|e| e.spec.target_of.is_some()).count(),
        8,
        "10 targets made, 2 gone"
    );
    emptied_units_need_yes(
        &world,
        &org,
        &file,
        &name,
        [&east, &west],
        [&accounts[0], &accounts[1], &joined],
        &accounts[3],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_unit_that_cannot_be_read_stops_the_apply() {
    let (cli, registry) = Cli::new("cli-fleet-bad").await;
    let file = cli.file(
        "fleet.yaml",
        "stacks:\n  - name: lost\n    source: {git: 'https://example.org/x.git', path: x.yaml}\n    \
         assumeRoleArn: 'arn:aws:iam::{account}:role/deploy'\n    targets: {organizationalUnits: \
         [ou-zzzz-zzzzzzzz], regions: [us-east-1]}\n",
    );
    Organization::shared().await;
    let out = cli.run(&["apply", "-f", &file]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(
        err.contains("lost: targets.organizationalUnits[0]: ou-zzzz-zzzzzzzz cannot be read")
            && err.contains("nothing was applied"),
        "{err}"
    );
    assert!(registry.list().await.unwrap().is_empty());
    assert!(registry.fleets().await.unwrap().is_empty());
}

/// One entry per target, shown under the fleet's name.
fn shown_under_the_fleets_name(world: &World, name: &str, first: &str) {
    let status = stdout(&world.run(&["status", name]));
    let rows = status
        .lines()
        .filter(|l| l.starts_with(name) && l.contains(" Ready "));
    assert_eq!(rows.count(), 8, "{status}");
    assert!(
        status.contains(&format!("fleet {name}: 8 target(s) (8 Ready)")),
        "{status}"
    );
    let one = world.run(&[
        "-o",
        "json",
        "get",
        name,
        "--target",
        &format!("{}/eu-west-1", first),
    ]);
    let entry: serde_json::Value = serde_json::from_slice(&one.stdout).unwrap();
    assert_eq!(entry["name"], format!("{name}-{}-eu-west-1", first));
    assert_eq!(entry["spec"]["targetOf"]["account"], first);
    assert_eq!(entry["spec"]["parameters"]["Size"], "small");
}

/// Units emptied: `apply` reads them, and would prune every target:
/// refused without --yes, and nothing written; with it, pruned.
async fn emptied_units_need_yes(
    world: &World,
    org: &Organization,
    file: &str,
    name: &str,
    [east, west]: [&String; 2],
    in_east: [&String; 3],
    in_west: &str,
) {
    for account in in_east {
        org.move_account(account, east, &org.root).await;
    }
    org.move_account(in_west, west, &org.root).await;
    let out = world.run(&["apply", "-f", file]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(
        err.contains("no longer hold the accounts of 8 of its 8 targets")
            && err.contains("apply again with --yes")
            && err.contains("nothing was applied"),
        "{err}"
    );
    let out = world.run(&["apply", "-f", file, "--yes"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let pruned = text
        .lines()
        .filter(|l| l.starts_with(name) && l.contains("pruned"));
    assert_eq!(pruned.count(), 8, "{text}");
}

/// Queues in every region, and in us-east-1 one that CloudFormation
/// refuses (a FIFO queue's name must end `.fifo`): the run there fails.
const FAILS_IN_US_EAST_1: &[u8] = b"Conditions:\n  East: !Equals [!Ref 'AWS::Region', us-east-1]\nResources:\n  Queue:\n    Type: AWS::SQS::Queue\n  Bad:\n    Type: AWS::SQS::Queue\n    Condition: East\n    Properties: {QueueName: not-a-fifo-name, FifoQueue: true}\nOutputs:\n  Size: {Value: two}\n";

#[tokio::test(flavor = "multi_thread")]
async fn a_rollout_halts_past_its_tolerance_and_resume_lets_it_go_on() {
    let (cli, registry) = Cli::new("cli-rollout").await;
    let world = World {
        cli,
        registry,
        bucket: unique_name("cli-rollout-bucket"),
    };
    let org = Organization::shared().await;
    let unit = org.unit(None).await;
    let accounts = [org.account(&unit).await, org.account(&unit).await];
    let repo = GitRepo::new("rollout");
    repo.commit(&[("baseline.yaml", TEMPLATE)], "baseline");
    let name = unique_name("rollout");
    let file = world.cli.file(
        "fleet.yaml",
        &format!(
            "stacks:\n  - name: {name}\n    source: {{git: '{}', path: baseline.yaml}}\n    \
             assumeRoleArn: 'arn:aws:iam::{{account}}:role/stacksync-target'\n    \
             targets: {{organizationalUnits: [{unit}], regions: [eu-west-1, us-east-1]}}\n    \
             rollout: {{maxConcurrent: 2, failureTolerance: 0, order: [us-east-1, eu-west-1]}}\n",
            repo.file_url(),
        ),
    );
    // Wave by wave: us-east-1's targets run first (the order), then
    // eu-west-1's, whatever the regions' order in `targets`.
    let out = world.run(&["sync", "-f", &file, "--local"]);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}\n{}", stderr(&out));
    let first_line = |region: &str| {
        text.lines()
            .position(|l| l.contains(&format!("-{region}")) && l.contains(": applied"))
            .unwrap_or_else(|| panic!("{region} applied: {text}"))
    };
    let east_last = accounts
        .iter()
        .map(|a| {
            text.lines()
                .position(|l| l.contains(&format!("{a}-us-east-1: applied")))
                .unwrap_or_else(|| panic!("{a}: {text}"))
        })
        .max()
        .unwrap();
    assert!(east_last < first_line("eu-west-1"), "{text}");

    // A revision that fails in us-east-1 (the first wave): past the
    // tolerance (0), the next wave is held at its old revision.
    let bad = repo.commit(
        &[("baseline.yaml", FAILS_IN_US_EAST_1)],
        "fails in us-east-1",
    );
    let out = world.run(&["sync", "-f", &file, "--local"]);
    assert!(!out.status.success(), "{}", stdout(&out));
    for account in &accounts {
        let (status, size) = stack(account, "eu-west-1", &name).await.unwrap();
        assert_eq!(
            (status.as_str(), size.as_str()),
            ("CREATE_COMPLETE", "large"),
            "untouched"
        );
        let target = format!("{name}-{account}-eu-west-1");
        let held = world.registry.get(&target).await.unwrap().unwrap();
        let hold = held.status.inputs.held_by_rollout.clone().expect("held");
        assert_eq!((hold.revision.as_str(), hold.halted), (bad.as_str(), true));
    }
    let status = stdout(&world.run(&["status", &name]));
    assert_eq!(status.matches("Pending (Halted)").count(), 2, "{status}");
    assert!(
        status.contains("Halted: rollout of ")
            && status.contains("1 of 2 wave(s) ended; 2 target(s) failed, failureTolerance is 0")
            && status.contains(&format!("stacksync rollout resume {name}")),
        "{status}"
    );
    // Each failed target's root cause, under the fleet.
    assert!(
        status.contains(&format!("  {name}-{}-us-east-1: ", accounts[0]))
            && status.contains(".fifo"),
        "{status}"
    );

    // Resumed: the next wave goes to the failing revision (which does not
    // fail there).
    let out = world.run(&["rollout", "resume", &name, "--local"]);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}\n{}", stderr(&out));
    assert!(
        text.contains(&format!("rollout of {name} resumed at ")),
        "{text}"
    );
    for account in &accounts {
        let (_, size) = stack(account, "eu-west-1", &name).await.unwrap();
        assert_eq!(size, "two", "{account}/eu-west-1 at the new revision");
    }
    let again = world.run(&["rollout", "resume", &name]);
    assert!(
        stderr(&again).contains("no target of") && stderr(&again).contains("nothing to resume"),
        "{}",
        stderr(&again)
    );
}

/// `approval:` on a fleet: its first target's change set, approved once
/// (`stacksync approve FLEET --change-set ID`), approves the same changes
/// for the fleet at that revision; the other targets (the same wave's, the
/// next wave's) run them without asking, and say by whose approval.
#[tokio::test(flavor = "multi_thread")]
async fn a_fleets_change_approved_once_runs_on_its_other_targets_without_asking() {
    let (cli, registry) = Cli::new("cli-fleet-approval").await;
    let world = World {
        cli,
        registry,
        bucket: unique_name("cli-fleet-approval-bucket"),
    };
    let org = Organization::shared().await;
    let unit = org.unit(None).await;
    let accounts = [org.account(&unit).await, org.account(&unit).await];
    let repo = GitRepo::new("fleet-approval");
    repo.commit(&[("baseline.yaml", TEMPLATE)], "baseline");
    let name = unique_name("approved");
    let file = world.cli.file(
        "fleet.yaml",
        &format!(
            "stacks:\n  - name: {name}\n    source: {{git: '{}', path: baseline.yaml}}\n    \
             assumeRoleArn: 'arn:aws:iam::{{account}}:role/stacksync-target'\n    \
             approval: always\n    \
             targets: {{organizationalUnits: [{unit}], regions: [us-east-1, eu-west-1]}}\n    \
             rollout: {{maxConcurrent: 2, order: [us-east-1, eu-west-1]}}\n",
            repo.file_url(),
        ),
    );
    // One target after another: the first waits for a person.
    let mut sync = world.command(&["sync", "-f", &file, "--local"]);
    let running = std::thread::spawn(move || sync.output().unwrap());
    // The first of the first wave (us-east-1) in the account order, which
    // is the ids' (moto's are random): whichever waits.
    let mut first = None;
    'looking: for _ in 0..600 {
        for account in &accounts {
            let target = format!("{name}-{account}-us-east-1");
            if let Some(entry) = world.registry.get(&target).await.unwrap()
                && let Some(a) = entry.status.approval.awaiting
            {
                first = Some((target, a));
                break 'looking;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let (first, awaiting) = first.expect("a first-wave target waits for approval");
    let out = world.run(&["approve", &name, "--change-set", &awaiting.change_set]);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}\n{}", stderr(&out));
    assert!(
        text.contains(&format!(
            "approved the change set {} of {first}",
            awaiting.change_set
        )) && text.contains(&format!(
            "fleet {name}: 1 target(s) approved with the same changes"
        )),
        "{text}"
    );
    let out = tokio::task::spawn_blocking(move || running.join().unwrap())
        .await
        .unwrap();
    assert!(out.status.success(), "{}\n{}", stdout(&out), stderr(&out));
    for account in &accounts {
        for region in REGIONS {
            let (status, _) = stack(account, region, &name).await.expect("created");
            assert_eq!(status, "CREATE_COMPLETE", "{account}/{region}");
            let target = format!("{name}-{account}-{region}");
            let entry = world.registry.get(&target).await.unwrap().unwrap();
            let asked = !entry.status.approval.records.is_empty();
            assert_eq!(asked, target == first, "{target}: only the first asked");
            let message = entry.status.message.unwrap_or_default();
            assert_eq!(
                message.contains("approved for its fleet by "),
                target != first,
                "{target}: {message}"
            );
        }
    }
}
