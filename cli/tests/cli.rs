//! The `stacksync` binary against the emulator: what a person types, what they see.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use std::process::Command;

use common::{Cli, stderr, stdout};
use stacksync::registry::{Registry, Specs, StackEntry};
use stacksync_testkit::{Emulator, unique_name};

const GOOD: &str = "\
stacks:
  - name: orders-queue
    stackName: prod-orders-queue
    source:
      git: https://github.com/acme/infra.git
      path: queues/orders.yaml
    parameters: { RetentionDays: 14 }
    tags: { team: orders }
  - name: billing
    source: { git: https://github.com/acme/infra.git, path: billing.yaml }
    destroyOnDelete: true
";

/// An entry to put after a good one, so errors must name the right entry.
fn with_bad_entry(entry: &str) -> String {
    format!("{GOOD}  - name: bad-one\n{entry}")
}

async fn snapshot(registry: &Registry) -> Vec<StackEntry> {
    registry.list().await.unwrap()
}

/// A file that is wrong, what is wrong with it, and what the one error
/// line must contain.
type BadFile = (&'static str, String, Vec<&'static str>);

/// Files wrong in their form: the YAML, a field, a name, an entry that
/// clashes with another, a path out of the source.
fn badly_formed(source: &str) -> Vec<BadFile> {
    vec![
        (
            "bad YAML",
            format!("{GOOD}  - name: [oops\n"),
            vec!["not valid YAML", "line 13"],
        ),
        (
            "unknown field",
            with_bad_entry(&format!("{source}    sorce: x\n")),
            vec!["stacks[2] (bad-one)", "unknown field `sorce`"],
        ),
        (
            "unknown field in source",
            with_bad_entry("    source: { git: https://h/r.git, pth: x.yaml }\n"),
            vec![
                "stacks[2] (bad-one)",
                "field source.pth",
                "unknown field `pth`",
            ],
        ),
        (
            "missing source",
            with_bad_entry("    region: us-east-1\n"),
            vec!["stacks[2] (bad-one)", "missing field `source`"],
        ),
        (
            "duplicate name",
            format!("{GOOD}  - name: billing\n{source}"),
            vec![
                "stacks[2] (billing)",
                "field name",
                "already the name of stacks[1]",
            ],
        ),
        (
            "two entries, one stack",
            format!("{GOOD}  - name: other\n    stackName: prod-orders-queue\n{source}"),
            vec!["stacks[2] (other)", "field stackName", "already manages"],
        ),
        (
            "bad stack name",
            format!("{GOOD}  - name: bad_one\n{source}"),
            vec!["stacks[2] (bad_one)", "field name", "contains '_'"],
        ),
        (
            "escaping path",
            with_bad_entry("    source: { git: https://h/r.git, path: ../../etc/passwd }\n"),
            vec![
                "stacks[2] (bad-one)",
                "field source.path",
                "leaves the source",
            ],
        ),
        (
            "absolute path",
            with_bad_entry("    source: { git: https://h/r.git, path: /etc/passwd }\n"),
            vec!["stacks[2] (bad-one)", "field source.path", "is absolute"],
        ),
        (
            "escaping parameter file",
            with_bad_entry(&format!("{source}    parameterFile: a/../../p.json\n")),
            vec!["field parameterFile", "leaves the source"],
        ),
    ]
}

/// Files whose fields hold values stacksync refuses.
fn bad_values(source: &str) -> Vec<BadFile> {
    let many_tags: String = (0..51).map(|i| format!("k{i}: v, ")).collect();
    vec![
        (
            "bad role ARN",
            with_bad_entry(&format!("{source}    roleArn: arn:aws:iam::12345:role/x\n")),
            vec!["stacks[2] (bad-one)", "field roleArn", "12 digits"],
        ),
        (
            "not a role",
            with_bad_entry(&format!(
                "{source}    assumeRoleArn: arn:aws:iam::111122223333:user/x\n"
            )),
            vec!["field assumeRoleArn", "does not name a role"],
        ),
        (
            "bad duration",
            with_bad_entry(&format!("{source}    interval: 10x\n")),
            vec!["stacks[2] (bad-one)", "field interval", "is not a duration"],
        ),
        (
            "duration without unit",
            with_bad_entry(&format!("{source}    retryInterval: 30\n")),
            vec!["field retryInterval", "has no unit"],
        ),
        (
            "duration out of range",
            with_bad_entry(&format!("{source}    pollInterval: 1h\n")),
            vec!["field pollInterval", "out of range"],
        ),
        (
            "too many tags",
            with_bad_entry(&format!("{source}    tags: {{ {many_tags} }}\n")),
            vec!["stacks[2] (bad-one)", "field tags", "at most 50"],
        ),
        (
            "reserved tag",
            with_bad_entry(&format!("{source}    tags: {{ 'aws:owner': me }}\n")),
            vec!["field tags.aws:owner", "reserved"],
        ),
        (
            "unknown capability",
            with_bad_entry(&format!(
                "{source}    capabilities: [CAPABILITY_EVERYTHING]\n"
            )),
            vec![
                "stacks[2] (bad-one)",
                "field capabilities[0]",
                "unknown variant `CAPABILITY_EVERYTHING`",
            ],
        ),
        (
            "bad region",
            with_bad_entry(&format!("{source}    region: moon-base-1\n")),
            vec!["stacks[2] (bad-one)", "field region", "not an AWS region"],
        ),
        (
            "git and s3",
            with_bad_entry(
                "    source: { git: https://h/r.git, s3: 's3://bkt/k.zip', path: t.yaml }\n",
            ),
            vec!["field source", "exactly one of"],
        ),
        (
            "credentials in URL",
            with_bad_entry(
                "    source: { git: 'https://user:s3cr3t@github.com/a/b.git', path: t.yaml }\n",
            ),
            vec!["field source.git", "credentialsSecret"],
        ),
        (
            "oversized parameter",
            with_bad_entry(&format!(
                "{source}    parameters: {{ Big: {} }}\n",
                "x".repeat(4097)
            )),
            vec!["field parameters.Big", "4096"],
        ),
        (
            "tags not a map",
            with_bad_entry(&format!("{source}    tags: [a, b]\n")),
            vec!["stacks[2] (bad-one)", "field tags"],
        ),
        (
            "no stacks list",
            "stack:\n  - name: a\n".to_owned(),
            vec!["no `stacks:` list"],
        ),
    ]
}

/// Each file refused by `apply` (with and without `--prune`): exit 1, one
/// error line naming the file and saying what is wrong, no secret echoed,
/// nothing printed as done, and the table as it was (`before`).
async fn refused_each_writing_nothing(
    cli: &Cli,
    registry: &Registry,
    before: &[StackEntry],
    cases: &[BadFile],
) {
    for (what, text, expected) in cases {
        assert!(!text.contains("s3cr3t") || *what == "credentials in URL");
        let path = cli.file("bad.yaml", text);
        for args in [
            vec!["apply", "-f", &path],
            vec!["apply", "-f", &path, "--prune"],
        ] {
            let out = cli.run(&args);
            let err = stderr(&out);
            assert_eq!(
                out.status.code(),
                Some(1),
                "{what}: exit code; stderr: {err}"
            );
            assert_eq!(err.lines().count(), 1, "{what}: one error line, got: {err}");
            assert!(
                err.starts_with("error: ") && err.contains("bad.yaml"),
                "{what}: names the file: {err}"
            );
            for fragment in expected {
                assert!(
                    err.contains(fragment),
                    "{what}: expected {fragment:?} in: {err}"
                );
            }
            assert!(!err.contains("s3cr3t"), "{what}: a secret echoed: {err}");
            assert!(
                err.trim_end().ends_with("nothing was applied"),
                "{what}: says nothing was applied: {err}"
            );
            assert!(stdout(&out).is_empty(), "{what}: nothing printed as done");
        }
        assert_eq!(
            snapshot(registry).await,
            before,
            "{what}: the table is unchanged"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn every_kind_of_bad_file_gets_one_clear_error_exit_1_and_writes_nothing() {
    let (cli, registry) = Cli::new("cli-bad").await;
    let good = cli.file("good.yaml", GOOD);
    assert!(cli.run(&["apply", "-f", &good]).status.success());
    let before = snapshot(&registry).await;
    assert_eq!(before.len(), 2);

    let source = "    source: { git: https://github.com/acme/infra.git, path: x.yaml }\n";
    let cases = [badly_formed(source), bad_values(source)].concat();
    assert!(cases.len() >= 12);
    refused_each_writing_nothing(&cli, &registry, &before, &cases).await;

    // validate only reads: it has nothing to say about applying.
    let bad = cli.file(
        "bad.yaml",
        &with_bad_entry("    source: { git: 'ftp://h/r', path: t.yaml }\n"),
    );
    let checked = stderr(&cli.run(&["validate", "-f", &bad]));
    assert!(
        checked.contains("ftp://") && !checked.contains("applied"),
        "{checked}"
    );

    let missing = cli.run(&["apply", "-f", "/nonexistent/stacks.yaml"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(stderr(&missing).contains("cannot read /nonexistent/stacks.yaml"));
    assert_eq!(snapshot(&registry).await, before);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_entry_that_would_take_over_another_entrys_stack_is_refused() {
    let (cli, registry) = Cli::new("cli-takeover").await;
    assert!(
        cli.run(&["apply", "-f", &cli.file("a.yaml", GOOD)])
            .status
            .success()
    );
    let before = snapshot(&registry).await;
    let other_team = "stacks:\n  - name: sneaky\n    stackName: prod-orders-queue\n    source: { git: https://h/r.git, path: t.yaml }\n";
    let out = cli.run(&["apply", "-f", &cli.file("b.yaml", other_team)]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("stacks[0] (sneaky): field stackName: the registry entry \"orders-queue\" already manages"), "{err}");
    assert_eq!(snapshot(&registry).await, before);
    // Naming the installation's region (the registry's) is the same stack
    // as naming none.
    let same_stack = format!("{other_team}    region: us-east-1\n");
    let out = cli.run(&["apply", "-f", &cli.file("c.yaml", &same_stack)]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("already manages the CloudFormation stack \"prod-orders-queue\" in us-east-1"),
        "{err}"
    );
    assert_eq!(snapshot(&registry).await, before);
    // Another region is another stack.
    let elsewhere = format!("{other_team}    region: eu-west-1\n");
    let out = cli.run(&["apply", "-f", &cli.file("d.yaml", &elsewhere)]);
    assert!(out.status.success(), "{}", stderr(&out));
}

/// Two applies started together, each registering one stack under its own
/// entry name: each planned from a registry without the other, so only the
/// stack's claim, written with the entry, can keep them apart.
#[tokio::test(flavor = "multi_thread")]
async fn two_applies_at_once_of_one_stack_leave_one_entry() {
    let (cli, registry) = Cli::new("cli-race").await;
    for round in 0..5 {
        let stack = format!("race-stack-{round}");
        let file = |name: &str| {
            cli.file(
                &format!("{name}-{round}.yaml"),
                &format!(
                    "stacks:\n  - name: {name}-{round}\n    stackName: {stack}\n    source: {{ git: https://h/r.git, path: t.yaml }}\n"
                ),
            )
        };
        let (a, b) = (file("team-a"), file("team-b"));
        let start = |file: &str| {
            cli.command(&["apply", "-f", file])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        };
        let (first, second) = (start(&a), start(&b));
        let outs = [
            first.wait_with_output().unwrap(),
            second.wait_with_output().unwrap(),
        ];
        let won: Vec<bool> = outs.iter().map(|o| o.status.success()).collect();
        assert_eq!(
            won.iter().filter(|w| **w).count(),
            1,
            "round {round}: {outs:?}"
        );
        let lost = outs.iter().find(|o| !o.status.success()).unwrap();
        assert!(
            stderr(lost).contains("already manages the CloudFormation stack")
                && stderr(lost).contains("nothing was applied"),
            "{}",
            stderr(lost)
        );
        let entries: Vec<String> = snapshot(&registry)
            .await
            .into_iter()
            .filter(|e| e.spec.effective_stack_name() == stack)
            .map(|e| e.name)
            .collect();
        assert_eq!(entries.len(), 1, "round {round}: {entries:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn apply_dry_run_prune_and_reapply_say_what_they_do() {
    let (cli, registry) = Cli::new("cli-apply").await;
    let good = cli.file("good.yaml", GOOD);

    let dry = cli.run(&["apply", "-f", &good, "--dry-run"]);
    assert!(dry.status.success(), "{}", stderr(&dry));
    assert!(stdout(&dry).contains("would create"), "{}", stdout(&dry));
    assert!(
        snapshot(&registry).await.is_empty(),
        "a dry run writes nothing"
    );

    let first = cli.run(&["apply", "-f", &good]);
    assert!(
        stdout(&first).contains("orders-queue  created"),
        "{}",
        stdout(&first)
    );
    let again = cli.run(&["-o", "json", "apply", "-f", &good]);
    let report: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(report["changes"][0]["action"], "unchanged");
    assert_eq!(report["changes"][1]["action"], "unchanged");

    let changed = GOOD.replace("team: orders", "team: payments").replace("  - name: billing\n    source: { git: https://github.com/acme/infra.git, path: billing.yaml }\n    destroyOnDelete: true\n", "");
    let changed = cli.file("changed.yaml", &changed);
    let plan = cli.run(&["apply", "-f", &changed, "--prune", "--dry-run"]);
    let text = stdout(&plan);
    assert!(
        text.contains("orders-queue  would update  specVersion 1 → 2 (changed: tags)"),
        "{text}"
    );
    assert!(
        text.contains(
            "billing       would prune   the stack billing would be deleted (destroyOnDelete)"
        ),
        "{text}"
    );
    let nothing = cli.file("nothing.yaml", "stacks: []\n");
    let text = stdout(&cli.run(&["apply", "-f", &nothing, "--prune", "--dry-run"]));
    assert!(
        text.contains("orders-queue  would prune  the entry would go; the stack prod-orders-queue would be kept"),
        "{text}"
    );
    assert_eq!(
        snapshot(&registry)
            .await
            .iter()
            .map(|e| e.spec_version)
            .collect::<Vec<_>>(),
        [1, 1]
    );
    // An empty (or wrong) file with --prune would take every entry: refused
    // without --yes, and nothing written.
    let refused = cli.run(&["apply", "-f", &nothing, "--prune"]);
    assert_eq!(refused.status.code(), Some(1));
    let err = stderr(&refused);
    assert!(
        err.contains(
            "would mark every registered entry (2) for deletion, 1 of them with destroyOnDelete"
        ) && err.contains("--yes")
            && err.contains("nothing was applied"),
        "{err}"
    );
    assert!(
        snapshot(&registry)
            .await
            .iter()
            .all(|e| e.deletion_requested_at.is_none()),
        "nothing marked"
    );

    let out = cli.run(&["-o", "yaml", "apply", "-f", &changed, "--prune"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let entries = snapshot(&registry).await;
    assert!(
        entries[0].deletion_requested_at.is_some(),
        "billing is marked for deletion"
    );
    assert_eq!(entries[1].spec_version, 2);
    assert_eq!(entries[1].spec.tags["team"], "payments");
}

#[tokio::test(flavor = "multi_thread")]
async fn get_list_status_suspend_resume_delete_from_the_command_line() {
    let (cli, _registry) = Cli::new("cli-ops").await;
    assert!(
        cli.run(&["apply", "-f", &cli.file("good.yaml", GOOD)])
            .status
            .success()
    );

    let status = stdout(&cli.run(&["status"]));
    let header = status.lines().next().unwrap();
    for column in [
        "NAME",
        "PHASE",
        "STACK STATUS",
        "REVISION",
        "LAST RECONCILE",
        "MESSAGE",
    ] {
        assert!(header.contains(column), "{header}");
    }
    assert!(status.contains("orders-queue  Pending"), "{status}");

    let list = stdout(&cli.run(&["list"]));
    assert!(list.contains("prod-orders-queue"), "{list}");
    let got: serde_json::Value =
        serde_json::from_slice(&cli.run(&["-o", "json", "get", "orders-queue"]).stdout).unwrap();
    assert_eq!(got["spec"]["parameters"]["RetentionDays"], "14");
    assert_eq!(got["specVersion"], 1);

    assert!(cli.run(&["suspend", "orders-queue"]).status.success());
    let rows: serde_json::Value =
        serde_json::from_slice(&cli.run(&["-o", "json", "status", "orders-queue"]).stdout).unwrap();
    assert_eq!(rows[0]["phase"], "Suspended");
    assert!(cli.run(&["resume", "orders-queue"]).status.success());
    let rows: serde_json::Value =
        serde_json::from_slice(&cli.run(&["-o", "json", "status"]).stdout).unwrap();
    assert_eq!(rows[1]["phase"], "Pending");

    let deleted = cli.run(&["delete", "billing"]);
    assert!(
        stdout(&deleted).contains("will be deleted (destroyOnDelete: true)"),
        "{}",
        stdout(&deleted)
    );
    let kept = cli.run(&["delete", "orders-queue"]);
    assert!(
        stdout(&kept).contains("will be left in place"),
        "{}",
        stdout(&kept)
    );
    let status = stdout(&cli.run(&["status"]));
    assert!(status.contains("billing       Deleting"), "{status}");

    let two = stderr(&cli.run(&["status", "nope", "orders-queue", "nada"]));
    assert!(
        two.contains("no stack named \"nope\" or \"nada\" in the registry"),
        "{two}"
    );
    for args in [
        vec!["get", "nope"],
        vec!["delete", "nope"],
        vec!["suspend", "nope"],
        vec!["status", "nope"],
    ] {
        let out = cli.run(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(
            stderr(&out).contains("no stack named"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn usage_errors_exit_2_and_missing_tables_or_regions_are_explained() {
    let (cli, _registry) = Cli::new("cli-usage").await;
    for args in [
        vec!["bogus"],
        vec!["apply"],
        vec!["get"],
        vec!["-o", "xml", "list"],
    ] {
        assert_eq!(cli.run(&args).status.code(), Some(2), "{args:?}");
    }
    let out = cli.run(&["--table", "no-such-table", "status"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("run `stacksync init`"),
        "{}",
        stderr(&out)
    );

    // Without region, credentials, profile or endpoint: one line each, that
    // says what is missing and what to do; no SDK dump, no IMDS warnings.
    let bare = |env: &[(&str, &str)]| {
        let out = Command::new(env!("CARGO_BIN_EXE_stacksync"))
            .args(["--table", "t", "status"])
            .env_clear()
            .env("AWS_CONFIG_FILE", "/dev/null")
            .env("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
            .envs(env.iter().copied())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{env:?}");
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{env:?}: one line: {err}");
        assert!(
            !err.contains("Error {") && !err.contains("DispatchFailure"),
            "{env:?}: no debug dump: {err}"
        );
        err
    };
    assert!(bare(&[]).contains("error: no AWS region: pass --region"));
    let keys = [
        ("AWS_REGION", "us-east-1"),
        ("AWS_ACCESS_KEY_ID", "a"),
        ("AWS_SECRET_ACCESS_KEY", "b"),
    ];
    let no_credentials = bare(&[
        ("AWS_REGION", "us-east-1"),
        ("AWS_EC2_METADATA_DISABLED", "true"),
    ]);
    assert!(
        no_credentials.contains("error: no AWS credentials found: set AWS_PROFILE"),
        "{no_credentials}"
    );
    let profile = bare(&[("AWS_REGION", "us-east-1"), ("AWS_PROFILE", "nope")]);
    assert!(
        profile.contains("error: AWS profile \"nope\" not found in /dev/null"),
        "{profile}"
    );
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let mut wrong = keys.to_vec();
    wrong.push(("AWS_ENDPOINT_URL", &endpoint));
    let unreachable = bare(&wrong);
    assert!(
        unreachable.contains("cannot connect (Connection refused")
            && unreachable.contains("AWS_ENDPOINT_URL"),
        "{unreachable}"
    );
    assert!(unreachable.len() < 300, "{unreachable}");

    let valid = cli.run(&["validate", "-f", &cli.file("v.yaml", GOOD)]);
    assert!(stdout(&valid).contains("2 entries, all valid"));
}

#[tokio::test(flavor = "multi_thread")]
async fn sync_local_creates_the_stack_and_reconcile_reports_failures_with_exit_1() {
    let (cli, _registry) = Cli::new("cli-sync").await;
    let repo = stacksync_testkit::git::GitRepo::new("cli-sync");
    repo.commit(
        &[(
            "q.yaml",
            b"Resources:\n  Queue:\n    Type: AWS::SQS::Queue\n",
        )],
        "queue",
    );
    let name = unique_name("clisync").replace('-', "x");
    let bucket = unique_name("cli-sync-bucket");
    let file = cli.file(
        "sync.yaml",
        &format!(
            "stacks:\n  - name: {name}\n    source: {{git: '{}', path: q.yaml}}\n",
            repo.file_url()
        ),
    );
    let sync = |args: &[&str]| {
        let mut all = vec!["--bucket", bucket.as_str()];
        all.extend_from_slice(args);
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_stacksync"));
        cmd.args(&all)
            .env("STACKSYNC_TABLE", &cli.table)
            .env("STACKSYNC_SPEEDUP", "1000");
        for (k, v) in Emulator::shared().env() {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    };

    let out = sync(&["sync", "-f", &file, "--local"]);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}\n{}", stderr(&out));
    assert!(
        text.contains("▸ FetchArtifact") && text.contains("▸ PollStatus"),
        "states are printed: {text}"
    );
    assert!(text.contains(&format!("✓ {name}: applied")), "{text}");
    let row = text
        .lines()
        .find(|l| l.starts_with(&name) && l.contains("Ready"))
        .unwrap_or_default();
    assert!(
        row.contains("CREATE_COMPLETE"),
        "the status table ends the run: {text}"
    );

    let again = sync(&["reconcile", &name, "--local"]);
    assert!(stdout(&again).contains("in sync"), "{}", stdout(&again));

    repo.commit(&[("q.yaml", b"not: [a template")], "broken");
    let failed = sync(&["reconcile", &name, "--local"]);
    assert_eq!(failed.status.code(), Some(1));
    assert!(
        stdout(&failed).contains("is not valid YAML"),
        "{}",
        stdout(&failed)
    );
    assert!(stderr(&failed).contains("failed"), "{}", stderr(&failed));
    let rows: serde_json::Value =
        serde_json::from_slice(&sync(&["-o", "json", "status", &name]).stdout).unwrap();
    assert_eq!(rows[0]["stallReason"], "invalidTemplate", "{rows}");
    let table = stdout(&sync(&["status", &name]));
    assert!(table.contains("(InvalidTemplate)"), "{table}");

    let deployed = sync(&["reconcile", &name]);
    assert_eq!(deployed.status.code(), Some(1));
    assert!(
        stderr(&deployed).contains("pass --installation STACK"),
        "{}",
        stderr(&deployed)
    );
    let missing = sync(&["reconcile", "nope", "--local"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(
        stderr(&missing).contains("no stack named"),
        "{}",
        stderr(&missing)
    );

    // A run that removes its entry says so, and what became of the stack
    // (kept: destroyOnDelete is false), while others remain registered.
    let other = cli.file(
        "other.yaml",
        &format!(
            "stacks:\n  - name: {name}-other\n    source: {{git: '{}', path: q.yaml}}\n",
            repo.file_url()
        ),
    );
    assert!(sync(&["apply", "-f", &other]).status.success());
    let deleting = stdout(&sync(&["delete", &name]));
    assert!(
        deleting.contains("will be left in place (destroyOnDelete: false)"),
        "{deleting}"
    );
    let gone = sync(&["reconcile", &name, "--local"]);
    let text = stdout(&gone);
    assert!(gone.status.success(), "{text}\n{}", stderr(&gone));
    let last = text.lines().last().unwrap_or_default();
    assert_eq!(
        last,
        format!(
            "{name}: entry removed from the registry; stack {name} left in place \
             (destroyOnDelete is false)"
        ),
        "{text}"
    );
    assert!(!text.contains("deleted"), "nothing was deleted: {text}");
    assert!(!text.contains("no stacks registered"), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_large_apply_goes_batch_by_batch_and_says_how_far_it_got() {
    let (cli, registry) = Cli::new("cli-bulk").await;
    let entries: String = (0..250)
        .map(|i| {
            format!("  - {{name: bulk-{i:03}, source: {{git: 'https://h/r.git', path: t.yaml}}}}\n")
        })
        .collect();
    let file = cli.file("bulk.yaml", &format!("stacks:\n{entries}"));
    let out = cli.run(&["apply", "-f", &file]);
    assert!(out.status.success(), "{}", stderr(&out));
    let progress = stderr(&out);
    assert_eq!(
        progress.lines().collect::<Vec<_>>(),
        // 50 new entries a transaction: each with the claim of its stack.
        [
            "applied 50 of 250 changes",
            "applied 100 of 250 changes",
            "applied 150 of 250 changes",
            "applied 200 of 250 changes",
            "applied 250 of 250 changes"
        ],
        "{progress}"
    );
    let done = format!("250 change(s) applied to {:?}\n", cli.table);
    assert!(stdout(&out).ends_with(&done), "{}", stdout(&out));
    assert_eq!(snapshot(&registry).await.len(), 250);
    // Again: nothing to write, nothing said on stderr.
    let again = cli.run(&["apply", "-f", &file]);
    assert!(stderr(&again).is_empty(), "{}", stderr(&again));
    assert!(
        stdout(&again).contains("0 change(s) applied"),
        "{}",
        stdout(&again)
    );
}
