//! A status per run on the commit it deploys: pending when a run a push
//! started begins, success or failure (with the root cause) when it ends,
//! pending while it waits for an approval (with why), each linking to the
//! execution. Read from the run's own events on the bus (`Reconcile
//! Started`, `Reconcile Succeeded`, `Reconcile Failed`, `Approval
//! Requested`), so a run never waits for a Git host, and a host that is
//! down never fails one.
//!
//! Only runs a push started (trigger `webhook` or `event`) report: the
//! scheduler's checks of a commit already reported would repeat the same
//! status on every pass.

use serde::Deserialize;
use serde_json::Value;

use crate::ports::{CommitStatus, GitHost};
use crate::pull_request::{CommitState, MAX_STATUS_DESCRIPTION, shorten};
use crate::registry::Entries;

/// What a run's event says, as the preview function reads it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunEvent {
    pub installation: String,
    pub stack: String,
    #[serde(default)]
    pub stack_name: String,
    #[serde(default)]
    pub trigger: String,
    #[serde(default)]
    pub revision: Option<String>,
    #[serde(default)]
    pub execution_arn: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default)]
    pub root_cause: Option<String>,
    #[serde(default)]
    pub removed: bool,
}

/// Which moment of a run an event tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunMoment {
    Started,
    Succeeded,
    Failed,
    AwaitingApproval,
}

/// The run event in `event` (`None`: another detail type), for `installation`.
pub fn run_event(
    event: &Value,
    installation: &str,
) -> Result<Option<(RunMoment, RunEvent)>, String> {
    let moment = match event.get("detail-type").and_then(Value::as_str) {
        Some("Reconcile Started") => RunMoment::Started,
        Some("Reconcile Succeeded") => RunMoment::Succeeded,
        Some("Reconcile Failed") => RunMoment::Failed,
        Some("Approval Requested") => RunMoment::AwaitingApproval,
        _ => return Ok(None),
    };
    let detail = event
        .get("detail")
        .ok_or_else(|| "the event has no detail".to_owned())?;
    let run: RunEvent = serde_json::from_value(detail.clone())
        .map_err(|e| format!("the run event's detail: {e}"))?;
    if run.installation != installation {
        return Err(format!(
            "the event is for the installation {:?}, not {installation:?}",
            run.installation
        ));
    }
    Ok(Some((moment, run)))
}

/// What reporting a run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunReport {
    /// The status set on the commit.
    Set {
        commit: String,
        status: CommitStatus,
    },
    /// Nothing to report, and why.
    Skipped(String),
    /// The host refused or could not be reached (logged): the run is not
    /// affected.
    NotSet(String),
}

/// The status of a run's moment.
pub fn run_status(moment: RunMoment, run: &RunEvent, installation: &str) -> CommitStatus {
    let stack = if run.stack_name.is_empty() {
        &run.stack
    } else {
        &run.stack_name
    };
    let (state, description) = match moment {
        RunMoment::Started => (CommitState::Pending, format!("deploying {stack}")),
        RunMoment::AwaitingApproval => (
            CommitState::Pending,
            format!(
                "{stack} waits for approval: {}",
                run.message.as_deref().unwrap_or("see the run")
            ),
        ),
        RunMoment::Succeeded => (
            CommitState::Success,
            format!("{stack}: {}", run.message.as_deref().unwrap_or("in sync")),
        ),
        RunMoment::Failed => (
            CommitState::Failure,
            format!(
                "{stack} failed: {}",
                run.root_cause
                    .as_deref()
                    .or(run.message.as_deref())
                    .unwrap_or("see the run")
            ),
        ),
    };
    CommitStatus {
        state,
        context: format!("stacksync/{} ({installation})", run.stack),
        description: shorten(&description, MAX_STATUS_DESCRIPTION),
        url: run.execution_arn.as_deref().and_then(execution_url),
        summary: Some(description),
    }
}

/// What the merged pull request's comment says of this run, for an entry
/// with `approval: pullRequest` whose preview was merged: the pull
/// request's number and the line (`None`: nothing to say).
fn after_merge_line(
    entry: &crate::registry::StackEntry,
    moment: RunMoment,
    run: &RunEvent,
) -> Option<(u64, String)> {
    let reviewed = entry.reviewed.as_ref().filter(|r| r.merged)?;
    if entry.spec.approval != crate::spec::Approval::PullRequest {
        return None;
    }
    let number = crate::pull_request::number_of_label(&reviewed.pull_request)?;
    let line = match moment {
        RunMoment::Started => return None,
        RunMoment::AwaitingApproval => format!(
            "waits for a person: {}",
            run.message.as_deref().unwrap_or("see `stacksync status`")
        ),
        RunMoment::Succeeded => format!(
            "{} (what this pull request previewed)",
            run.message.as_deref().unwrap_or("in sync")
        ),
        RunMoment::Failed => format!(
            "failed: {}",
            run.root_cause
                .as_deref()
                .or(run.message.as_deref())
                .unwrap_or("see the run")
        ),
    };
    Some((number, shorten(&line, 600)))
}

/// The Step Functions console's page of an execution, in its partition.
pub fn execution_url(arn: &str) -> Option<String> {
    let parts: Vec<&str> = arn.splitn(6, ':').collect();
    let ["arn", partition, "states", region, _, _] = parts.as_slice() else {
        return None;
    };
    let console = match *partition {
        "aws-cn" => "console.amazonaws.cn",
        "aws-us-gov" => "console.amazonaws-us-gov.com",
        _ => "console.aws.amazon.com",
    };
    Some(format!(
        "https://{region}.{console}/states/home?region={region}#/v2/executions/details/{arn}"
    ))
}

/// Sets the status of `run`'s `moment` on the commit it deploys, on the
/// host of its entry's repository with its entry's secret.
pub async fn report_run<E: Entries, G: GitHost>(
    registry: &E,
    hosts: &G,
    installation: &str,
    moment: RunMoment,
    run: &RunEvent,
) -> Result<RunReport, String> {
    if !matches!(run.trigger.as_str(), "webhook" | "event") {
        return Ok(RunReport::Skipped(format!(
            "a run the {} trigger started reports no status",
            if run.trigger.is_empty() {
                "unknown"
            } else {
                &run.trigger
            }
        )));
    }
    let Some(commit) = run
        .revision
        .as_deref()
        .filter(|r| r.len() == 40 && r.bytes().all(|b| b.is_ascii_hexdigit()))
    else {
        return Ok(RunReport::Skipped("the run is at no Git commit".into()));
    };
    if run.removed {
        return Ok(RunReport::Skipped("the run removed the entry".into()));
    }
    let Some(entry) = registry.get(&run.stack).await.map_err(|e| e.to_string())? else {
        return Ok(RunReport::Skipped(format!("no entry {}", run.stack)));
    };
    let source = &entry.spec.source;
    let Some(repository) = hosts
        .repository_of(source.url(), source.credentials_secret.as_deref())
        .await
    else {
        return Ok(RunReport::Skipped(format!(
            "{} is on no Git host stacksync reports to",
            source.url()
        )));
    };
    let status = run_status(moment, run, installation);
    if let Some((number, line)) = after_merge_line(&entry, moment, run) {
        let stack = run.stack.clone();
        let edit = move |body: &str| super::comment::with_after_merge(body, &stack, &line);
        let marker = super::comment::marker(installation);
        if let Err(e) = hosts
            .edit_comment(&repository, number, &marker, &edit)
            .await
        {
            tracing::warn!(stack = %run.stack, error = %e, "the pull request's comment could not be updated");
        }
    }
    Ok(match hosts.set_status(&repository, commit, &status).await {
        Ok(()) => RunReport::Set {
            commit: commit.to_owned(),
            status,
        },
        Err(e) => {
            tracing::warn!(stack = %run.stack, error = %e, "the run's status could not be set");
            RunReport::NotSet(e.to_string())
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fakes::MemoryGitHost;
    use crate::registry::memory::MemoryRegistry;
    use serde_json::json;

    const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

    fn event(kind: &str, trigger: &str) -> Value {
        json!({
            "detail-type": kind, "source": "stacksync",
            "detail": {
                "installation": "prod", "stack": "orders", "stackName": "orders-stack",
                "trigger": trigger, "revision": COMMIT, "phase": "Failed",
                "executionArn": "arn:aws:states:eu-west-1:111111111111:execution:m:e",
                "rootCause": "Queue: CREATE_FAILED (the name is taken)",
            }
        })
    }

    fn registry() -> MemoryRegistry {
        let r = MemoryRegistry::new();
        let mut e = crate::registry::sample_entry("orders", Default::default());
        e.spec.source = serde_json::from_value(
            json!({"git": "https://github.com/acme/infra.git", "path": "t.yaml"}),
        )
        .unwrap();
        r.insert(e);
        r
    }

    #[tokio::test]
    async fn a_pushed_runs_end_is_a_status_on_its_commit_linking_its_execution() {
        let (registry, host) = (registry(), MemoryGitHost::new());
        let (moment, run) = run_event(&event("Reconcile Failed", "webhook"), "prod")
            .unwrap()
            .unwrap();
        let report = report_run(&registry, &host, "prod", moment, &run)
            .await
            .unwrap();
        let RunReport::Set { commit, status } = report else {
            panic!("{report:?}")
        };
        assert_eq!(commit, COMMIT);
        assert_eq!(status.state, CommitState::Failure);
        assert_eq!(status.context, "stacksync/orders (prod)");
        assert!(
            status
                .description
                .contains("orders-stack failed: Queue: CREATE_FAILED"),
            "{status:?}"
        );
        assert_eq!(
            status.url.as_deref(),
            Some(
                "https://eu-west-1.console.aws.amazon.com/states/home?region=eu-west-1#/v2/executions/details/arn:aws:states:eu-west-1:111111111111:execution:m:e"
            )
        );
        assert_eq!(host.statuses("acme/infra", COMMIT).len(), 1);
    }

    #[tokio::test]
    async fn the_schedulers_runs_and_other_events_report_nothing_and_a_host_down_is_said() {
        let (registry, host) = (registry(), MemoryGitHost::new());
        let (moment, run) = run_event(&event("Reconcile Started", "schedule"), "prod")
            .unwrap()
            .unwrap();
        let report = report_run(&registry, &host, "prod", moment, &run)
            .await
            .unwrap();
        assert!(matches!(report, RunReport::Skipped(_)), "{report:?}");
        assert!(
            run_event(&event("Drift Detected", "webhook"), "prod")
                .unwrap()
                .is_none()
        );
        assert!(run_event(&event("Reconcile Started", "webhook"), "other").is_err());

        host.fail(true);
        let (moment, run) = run_event(&event("Reconcile Started", "event"), "prod")
            .unwrap()
            .unwrap();
        let report = report_run(&registry, &host, "prod", moment, &run)
            .await
            .unwrap();
        assert!(
            matches!(report, RunReport::NotSet(ref e) if e.contains("502")),
            "{report:?}"
        );
    }

    #[test]
    fn each_moment_has_its_state() {
        let run: RunEvent =
            serde_json::from_value(event("x", "webhook")["detail"].clone()).unwrap();
        assert_eq!(
            run_status(RunMoment::Started, &run, "p").state,
            CommitState::Pending
        );
        assert_eq!(
            run_status(RunMoment::AwaitingApproval, &run, "p").state,
            CommitState::Pending
        );
        assert_eq!(
            run_status(RunMoment::Succeeded, &run, "p").state,
            CommitState::Success
        );
        assert_eq!(execution_url("local:x"), None);
        assert!(
            execution_url("arn:aws-cn:states:cn-north-1:1:execution:m:e")
                .unwrap()
                .contains("console.amazonaws.cn")
        );
    }
}
