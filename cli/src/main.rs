//! `stacksync`: manage the registry of stacks and see their status.
//!
//! Exit codes: 0 success, 1 error (the message says what and where), 2 usage,
//! 3 (`sync`) only entries its file does not name failed.

// First: its print macros (`say!`, `put!`, `warn_user!`) serve every module below.
#[macro_use]
mod output;

mod checkout;
mod commands;
mod connect;
mod deployed;
mod error;
mod local;
mod watch;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

/// Serverless GitOps for AWS CloudFormation: keep every registered stack in step with its template in Git.
#[derive(Debug, Parser)]
#[command(name = "stacksync", version, propagate_version = true)]
pub struct Cli {
    /// A deployed stacksync: the name of its CloudFormation stack (`sam
    /// deploy`'s stack name). Table, bucket and state machine are read from its
    /// outputs, unless given on their own.
    #[arg(long, env = "STACKSYNC_INSTALLATION", global = true)]
    pub installation: Option<String>,
    /// The registry's DynamoDB table [default: the installation's, else `stacksync`].
    #[arg(long, env = "STACKSYNC_TABLE", global = true)]
    pub table: Option<String>,
    /// The artifact and template bucket [default: the installation's, else `stacksync-artifacts`].
    #[arg(long, env = "STACKSYNC_BUCKET", global = true)]
    pub bucket: Option<String>,
    /// The reconcile state machine of a deployed stacksync [default: the installation's].
    #[arg(long, env = "STACKSYNC_STATE_MACHINE_ARN", global = true)]
    pub state_machine_arn: Option<String>,
    /// AWS region (default: the standard chain: AWS_REGION, the profile).
    #[arg(long, global = true)]
    pub region: Option<String>,
    /// AWS named profile (default: AWS_PROFILE, else `default`).
    #[arg(long, global = true)]
    pub profile: Option<String>,
    /// Endpoint for every AWS service, e.g. a local emulator (default: AWS_ENDPOINT_URL).
    #[arg(long, global = true)]
    pub endpoint_url: Option<String>,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Output::Table, global = true)]
    pub output: Output,
    #[command(subcommand)]
    pub command: Command,
}

/// How results are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    Table,
    Json,
    Yaml,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create the registry table (if it does not exist) and wait until it is ready.
    Init,
    /// Register or update the stacks of a stacks.yaml file.
    Apply {
        /// The stacks file (YAML, a `stacks:` list).
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
        /// Mark registry entries that are not in the file for deletion.
        #[arg(long)]
        prune: bool,
        /// With --prune: go ahead even when it would mark every entry, or
        /// more than 5 and a fifth of them, for deletion; without: even when
        /// a fleet's units no longer hold as many of its targets' accounts.
        #[arg(long)]
        yes: bool,
        /// Show what would change; write nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Check a stacks.yaml file without touching AWS (with --templates, its templates too).
    Validate {
        /// The stacks file.
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
        /// Also fetch each entry's template and parameter file at its ref, as a run reads them
        /// (reading the sources only), and check what they make certain to fail: a template
        /// that does not parse, a parameter without Default that nothing gives, a parameter
        /// given that the template does not declare, an IAM resource without its capability.
        #[arg(long)]
        templates: bool,
        /// Also check each entry's template against the Guard rules (`.guard` files) under
        /// this folder, and the entry's own `policy:` rules, as a run checks them before any
        /// change set (implies --templates; no AWS needed for Git sources). Parameters read
        /// at run time (`{ssm:}`, `{secret:}`, `{fromStack:}`) are given to the rules as
        /// `****`. A broken blocking rule fails; a warning is shown.
        #[arg(long, value_name = "DIR")]
        policy: Option<PathBuf>,
        /// Read the entries' files (templates, parameter files, own policy folders) from this
        /// checkout instead of fetching their sources: a pre-commit hook's or a CI job's
        /// working tree (with --templates or --policy).
        #[arg(long, value_name = "DIR")]
        checkout: Option<PathBuf>,
    },
    /// List the registered stacks and their specs.
    List,
    /// Show one registered stack: spec, status, lease.
    Get {
        /// The entry's name (a fleet's: the fleet and its targets).
        name: String,
        /// One target of the fleet NAME: ACCOUNT/REGION.
        #[arg(long, value_name = "ACCOUNT/REGION")]
        target: Option<String>,
        /// Where each parameter and tag of the last run came from (the
        /// entry, a parameter or deployment file, SSM, Secrets Manager,
        /// another stack's output), with secrets and `NoEcho` values
        /// masked; and the stack's outputs and dependencies.
        #[arg(long)]
        explain: bool,
    },
    /// Remove an entry: its stack is deleted only if the entry says `destroyOnDelete: true`.
    Delete {
        /// The entry's name.
        name: String,
        /// Delete it even though other entries depend on it (`dependsOn`,
        /// `fromStack`): they then wait, or fail, until it is back; or
        /// though a registry source owns it (its next commit puts it back).
        #[arg(long)]
        force: bool,
    },
    /// Stop reconciling a stack until `resume` (whatever stacks.yaml says).
    Suspend {
        /// The entry's name.
        name: String,
    },
    /// Reconcile a suspended stack again, at once.
    Resume {
        /// The entry's name.
        name: String,
    },
    /// Preview what a run would do to the stack: a change set of the desired state (at --ref, or
    /// the entry's ref), described and deleted again; never executed.
    Diff {
        /// The entry's name.
        name: String,
        /// A branch, tag or commit (S3: a version) to preview instead of the entry's ref.
        #[arg(long = "ref")]
        reference: Option<String>,
    },
    /// Approve the change set that waits for approval (approval gates): it runs, if nothing moved
    /// since it was previewed (else a new one asks again).
    ///
    /// A deployed run's wait is answered by the installation's approval function, which takes
    /// who you are from AWS (the request is signed with your AWS credentials) and lets only its
    /// approvers through (the entry's `approvers`, else the installation's `Approvers`).
    /// A local run's wait (`reconcile --local`) is answered through the registry: there,
    /// whoever can write the registry can approve.
    Approve {
        /// The entry's name; or a fleet's: the target waiting with the change set, and every
        /// other target of the fleet waiting at the same revision with the same changes.
        name: String,
        /// The change set approved, by name: exactly the one `stacksync get NAME` shows waiting.
        #[arg(long = "change-set")]
        change_set: String,
    },
    /// Reject the change set that waits for approval: it is deleted, and the stack stays
    /// Failed (Rejected) until a push or a spec change.
    ///
    /// As for `approve`: a deployed run's wait is answered by the approval function, for an
    /// approver only; a local run's through the registry (whoever can write it).
    Reject {
        /// The entry's name.
        name: String,
        /// Why (recorded in the status, with who rejected it).
        #[arg(long)]
        reason: String,
    },
    /// End the hold of a run that will not end it itself (a killed local run, a stuck execution):
    /// names the holder and since when, asks, stops the execution (deployed), releases the stack.
    Unlock {
        /// The entry's name.
        name: String,
        /// Do not ask.
        #[arg(long)]
        yes: bool,
    },
    /// Reconcile one stack now: start the deployed state machine for it (or, with --local, run it in-process).
    Reconcile {
        /// The entry's name.
        name: String,
        /// Run the state machine in-process (statemachine/reconcile.asl.json)
        /// against the configured AWS endpoint, instead of starting it in Step Functions.
        #[arg(long)]
        local: bool,
        /// Follow the execution: print its states and the stack's events; exit 1 if it fails.
        #[arg(long)]
        wait: bool,
        /// With --wait: stop following after this long (the execution goes
        /// on) and exit 1.
        #[arg(long, default_value = "1h")]
        timeout: stacksync::Duration,
        /// Make a change set even if the stack looks in sync (it runs only
        /// if CloudFormation finds something to change).
        #[arg(long)]
        force: bool,
        /// Divide every Wait and retry delay by this (for tests and demos).
        #[arg(long, env = "STACKSYNC_SPEEDUP", default_value_t = 1.0, hide = true)]
        speedup: f64,
    },
    /// Apply a stacks file, then reconcile every entry in it (and every pruned one).
    Sync {
        /// The stacks file.
        #[arg(short = 'f', long = "file")]
        file: PathBuf,
        /// Mark registry entries that are not in the file for deletion, and delete them.
        #[arg(long)]
        prune: bool,
        /// With --prune: go ahead even when it would mark every entry, or
        /// more than 5 and a fifth of them, for deletion.
        #[arg(long)]
        yes: bool,
        /// Run the state machine in-process against the configured AWS endpoint.
        #[arg(long)]
        local: bool,
        /// Follow the executions one after another; exit 1 if any fails.
        #[arg(long)]
        wait: bool,
        /// With --wait: stop following one execution after this long (it
        /// goes on) and exit 1.
        #[arg(long, default_value = "1h")]
        timeout: stacksync::Duration,
        /// Divide every Wait and retry delay by this (for tests and demos).
        #[arg(long, env = "STACKSYNC_SPEEDUP", default_value_t = 1.0, hide = true)]
        speedup: f64,
    },
    /// Recent reconcile executions of one stack in the deployed state machine, newest first.
    History {
        /// The entry's name.
        name: String,
        /// How many to show.
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
    /// A table of every stack's sync status (or only the named ones).
    Status {
        /// Entries to show (default: all); a fleet's name shows its targets.
        names: Vec<String>,
    },
    /// What the last drift detection found of a stack: each drifted
    /// resource's properties, expected and actual (less `drift.ignore`).
    Drift {
        /// The entry's name.
        name: String,
    },
    /// Registry sources: stacks files in Git (or S3) that the installation
    /// follows, so that adding, changing and removing a stack is a commit.
    Source {
        #[command(subcommand)]
        command: SourceCommand,
    },
    /// A fleet's rollout in waves (`rollout:`).
    Rollout {
        #[command(subcommand)]
        command: RolloutCommand,
    },
}

#[derive(Debug, Subcommand)]
pub enum RolloutCommand {
    /// Let a halted rollout go on past the targets that failed at its revision (until a new
    /// revision, whose failures count again): records it on the fleet and starts the next wave.
    Resume {
        /// The fleet's name.
        name: String,
        /// Run the next wave's targets in-process, one after another, instead of starting them
        /// in Step Functions.
        #[arg(long)]
        local: bool,
        /// Divide every Wait and retry delay by this (for tests and demos).
        #[arg(long, env = "STACKSYNC_SPEEDUP", default_value_t = 1.0, hide = true)]
        speedup: f64,
    },
}

#[derive(Debug, Subcommand)]
pub enum SourceCommand {
    /// Follow the stacks files of a repository (or an S3 archive).
    Add {
        /// The source's name (letters, digits, - and _).
        name: String,
        /// The Git repository.
        #[arg(long, conflicts_with = "s3", required_unless_present = "s3")]
        git: Option<String>,
        /// An S3 archive (zip or tar.gz): s3://bucket/key.
        #[arg(long)]
        s3: Option<String>,
        /// The branch or tag followed (Git).
        #[arg(long = "ref", default_value = "main")]
        reference: String,
        /// A stacks file, a folder, or a glob (`stacks/**/*.yaml`).
        #[arg(long, default_value = "stacks.yaml")]
        path: String,
        /// Secrets Manager secret or SSM parameter (ARN) that opens the source.
        #[arg(long)]
        credentials_secret: Option<String>,
        /// Read a commit only if signed by this OpenSSH public key (repeat for more).
        #[arg(long)]
        signed_by: Vec<String>,
        /// Fetch an http:// or git:// source in a deployed installation too.
        #[arg(long)]
        insecure: bool,
    },
    /// Every registry source: where it is, what it applied, its state.
    List,
    /// One registry source: its revision applied, last error, the entries it owns.
    Get { name: String },
    /// Stop following a source: its entries pruned (with --yes), or kept (--keep-entries).
    Remove {
        name: String,
        /// Keep its entries: the CLI owns them from now on.
        #[arg(long)]
        keep_entries: bool,
        /// Prune every entry it owns (their stacks deleted where destroyOnDelete).
        #[arg(long)]
        yes: bool,
    },
    /// Read the source now, as a push would.
    Sync {
        name: String,
        /// Also run the entries it changed through the local runner.
        #[arg(long)]
        local: bool,
        /// Divide every Wait and retry delay by this (for tests and demos).
        #[arg(long, env = "STACKSYNC_SPEEDUP", default_value_t = 1.0, hide = true)]
        speedup: f64,
    },
    /// Let a commit held by the prune guard prune what it prunes.
    ApprovePrune {
        name: String,
        /// The commit held (`stacksync source get NAME` shows it).
        #[arg(long)]
        commit: String,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("STACKSYNC_LOG")
                // By default only stacksync's own warnings: the SDK's (IMDS
                // probes, retried calls) show with STACKSYNC_LOG=debug.
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("error,stacksync=warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(commands::run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(error::exit_code())
        }
    }
}
