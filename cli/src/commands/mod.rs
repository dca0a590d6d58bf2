//! The dispatcher: one function per command, in the module of its kind.
//!
//! - `validate`: reading and checking a stacks file, offline;
//! - `apply`: registering a stacks file's entries (`apply`, and the first half of `sync`);
//! - `registry`: the other commands that read or change entries (`init`,
//!   `list`, `get`, `delete`, `suspend`, `resume`);
//! - `status`: the status table (`status`, and the end of `reconcile` and `sync`);
//! - `run`: running the reconcile (`reconcile`, `sync`, `history`);
//! - `unlock`: ending a stuck run's hold on a stack;
//! - `approval`: answering a change set that waits for approval (`approve`, `reject`);
//! - `diff`: previewing what a run would do;
//! - `drift`: what the last drift detection found;
//! - `rollout`: a fleet's rollout in waves (`rollout resume`, and its line in `status`).

mod apply;
mod approval;
mod diff;
mod drift;
mod fleet;
mod fleet_approval;
mod registry;
mod rollout;
mod run;
mod source;
mod status;
mod unlock;
mod validate;

use crate::connect::connect;
use crate::error::Result;
use crate::{Cli, Command, RolloutCommand, SourceCommand};

pub async fn run(cli: Cli) -> Result {
    let format = cli.output;
    // Checking a file needs no AWS at all (its templates: reading the sources only).
    if let Command::Validate {
        file,
        templates,
        policy,
        checkout,
    } = &cli.command
    {
        if *templates || policy.is_some() || checkout.is_some() {
            let checks = validate::Checks {
                policy: policy.as_deref(),
                checkout: checkout.as_deref(),
            };
            return validate::validate_templates(&cli, file, format, checks).await;
        }
        return validate::validate(file, format);
    }
    let aws = connect(&cli).await?;
    match cli.command {
        Command::Validate { file, .. } => validate::validate(&file, format),
        Command::Init => registry::init(&aws.registry, format).await,
        Command::Apply {
            file,
            prune,
            yes,
            dry_run,
        } => apply::apply(&aws, &file, apply::Prune::of(prune, yes), dry_run, format)
            .await
            .map(drop),
        Command::List => registry::list(&aws.registry, format).await,
        Command::Get {
            name,
            target,
            explain,
        } => registry::get(&aws.registry, &name, target.as_deref(), explain, format).await,
        Command::Delete { name, force } => {
            registry::delete(&aws.registry, &name, force, format).await
        }
        Command::Suspend { name } => registry::suspend(&aws.registry, &name, format).await,
        Command::Resume { name } => registry::resume(&aws.registry, &name, format).await,
        Command::Unlock { name, yes } => unlock::unlock(&aws, &name, yes, format).await,
        Command::Diff { name, reference } => {
            diff::run(&aws, &name, reference.as_deref(), format).await
        }
        Command::Approve { name, change_set } => approve(&aws, &name, &change_set, format).await,
        Command::Reject { name, reason } => approval::reject(&aws, &name, &reason, format).await,
        Command::Status { names } => status::status(&aws.registry, &names, format).await,
        Command::Drift { name } => drift::drift(&aws.registry, &name, format).await,
        Command::Reconcile {
            name,
            local,
            wait,
            timeout,
            force,
            speedup,
        } => {
            let mode = run::Mode::new(local, wait, timeout, speedup);
            run::reconcile(&aws, &name, mode, force, format).await
        }
        Command::Sync {
            file,
            prune,
            yes,
            local,
            wait,
            timeout,
            speedup,
        } => {
            let mode = run::Mode::new(local, wait, timeout, speedup);
            run::sync(&aws, &file, apply::Prune::of(prune, yes), mode, format).await
        }
        Command::History { name, limit } => run::history(&aws, &name, limit, format).await,
        Command::Source { command } => source_command(&aws, command, format).await,
        Command::Rollout { command } => rollout_command(&aws, command, format).await,
    }
}

/// `approve NAME`: an entry's change set, or a fleet's targets' with the
/// same changes.
async fn approve(
    aws: &crate::connect::Connection,
    name: &str,
    change_set: &str,
    format: crate::Output,
) -> Result {
    match fleet_approval::approve_fleet(aws, name, change_set, format).await {
        Some(done) => done,
        None => approval::approve(aws, name, change_set, format).await,
    }
}

async fn rollout_command(
    aws: &crate::connect::Connection,
    command: RolloutCommand,
    format: crate::Output,
) -> Result {
    match command {
        RolloutCommand::Resume {
            name,
            local,
            speedup,
        } => rollout::resume(aws, &name, local, speedup, format).await,
    }
}

async fn source_command(
    aws: &crate::connect::Connection,
    command: SourceCommand,
    format: crate::Output,
) -> Result {
    match command {
        SourceCommand::Add {
            name,
            git,
            s3,
            reference,
            path,
            credentials_secret,
            signed_by,
            insecure,
        } => {
            let url = git.or(s3).unwrap_or_default();
            let reference = if url.starts_with("s3://") {
                String::new()
            } else {
                reference
            };
            let spec = stacksync::registry_source::SourceSpec {
                name,
                url,
                reference,
                path,
                credentials_secret,
                signed_by,
                insecure,
            };
            source::add(aws, spec, format).await
        }
        SourceCommand::List => source::list(&aws.registry, format).await,
        SourceCommand::Get { name } => source::get(&aws.registry, &name, format).await,
        SourceCommand::Remove {
            name,
            keep_entries,
            yes,
        } => source::remove(&aws.registry, &name, keep_entries, yes, format).await,
        SourceCommand::Sync {
            name,
            local,
            speedup,
        } => {
            let changed = source::sync(aws, &name, format).await?;
            if local {
                run::reconcile_changed(aws, &changed, speedup).await?;
            }
            Ok(())
        }
        SourceCommand::ApprovePrune { name, commit } => {
            source::approve_prune(&aws.registry, &name, &commit, format).await
        }
    }
}
