//! The events a run puts on the bus (`crate::notice`): started, succeeded,
//! failed, awaiting approval, approved, rejected. Sent after the registry
//! write they echo, best effort (`ports::Notifier`).

use super::{Ports, Steps};
use crate::notice::{Notice, NoticeApproval, NoticeKind};
use crate::reconcile::run::RunState;
use crate::registry::StackEntry;
use crate::status::Status;

impl<P: Ports> Steps<P> {
    /// Puts a notice of `kind` about the run `state` of `entry`, whose
    /// status is now `status`.
    pub(super) async fn notify(
        &self,
        kind: NoticeKind,
        state: &RunState,
        entry: &StackEntry,
        status: &Status,
        approval: Option<NoticeApproval>,
    ) {
        let notice = Notice {
            installation: self.config.installation.clone(),
            stack: state.entry.clone(),
            stack_name: entry.spec.effective_stack_name().to_owned(),
            region: entry.spec.region.clone(),
            execution: state.execution.name.clone(),
            execution_arn: state.execution.arn.clone(),
            trigger: state.trigger.kind.as_str().to_owned(),
            revision: state.revision().map(str::to_owned),
            approval,
            ..Notice::about(kind, status)
        };
        // The run's own change set, never one an earlier run left named.
        let notice = Notice {
            change_set: state.change_set_name().map(str::to_owned),
            ..notice
        };
        self.notices.send(&notice).await;
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use crate::fakes::ScriptedCloudFormation;
    use crate::reconcile::run::{CaughtError, FinalizeInput, Next, RunState};
    use crate::stack_status::StackStatus as S;

    /// Runs the steps as the state machine would, until done or failed
    /// (then `finalize`, as `RecordFailure` does).
    async fn run(t: &Test, execution: &str) -> RunState {
        let mut state = t.input(execution);
        state.execution.arn = Some(format!(
            "arn:aws:states:us-east-1:1:execution:m:{execution}"
        ));
        let mut result = t.steps.artifact_fetch(state.clone()).await;
        for _ in 0..20 {
            match result {
                Ok(next) if next.next == Next::Done => return next,
                Ok(next) => {
                    state = next.clone();
                    result = match next.next {
                        Next::Upload => t.steps.template_upload(next).await,
                        Next::ChangeSet => t.steps.change_set(next).await,
                        Next::Wait => t.steps.poll_status(next).await,
                        _ => t.steps.delete(next).await,
                    };
                }
                Err(e) => {
                    let input = FinalizeInput {
                        state,
                        error: CaughtError {
                            error: e.name(),
                            cause: e.message().to_owned(),
                        },
                    };
                    return t.steps.finalize(input).await.unwrap();
                }
            }
        }
        panic!("the run did not end");
    }

    #[tokio::test]
    async fn a_run_tells_that_it_started_and_how_it_ended_and_a_run_that_changes_nothing_is_quiet()
    {
        let t = Test::with(ScriptedCloudFormation::with_stack(&[None]), |_| {}).await;
        t.cfn.script().after_execute = vec![Some(S::CreateInProgress), Some(S::CreateComplete)];
        run(&t, "run-1").await;
        assert_eq!(
            t.notices.kinds(),
            ["Reconcile Started", "Reconcile Succeeded"]
        );
        let done = t.notices.all().pop().unwrap();
        assert_eq!(done.stack, NAME);
        assert_eq!(done.revision.as_deref(), Some(HEAD));
        assert_eq!(done.applied_revision.as_deref(), Some(HEAD));
        assert_eq!(done.installation, crate::fakes::TEST_INSTALLATION);
        assert_eq!(
            done.execution_arn.as_deref(),
            Some("arn:aws:states:us-east-1:1:execution:m:run-1")
        );
        assert!(done.change_set.is_some() && done.stack_id.is_some());
        assert_eq!((done.stall_reason, done.root_cause), (None, None));
    }

    #[tokio::test]
    async fn a_failed_run_tells_its_root_cause_and_a_run_that_ends_as_it_found_the_stack_tells_nothing()
     {
        let t = Test::with(ScriptedCloudFormation::with_stack(&[None]), |e| {
            e.spec.max_attempts = 1;
        })
        .await;
        t.cfn.script().after_execute = vec![
            Some(S::CreateInProgress),
            Some(S::RollbackInProgress),
            Some(S::RollbackComplete),
        ];
        t.cfn.script().events = vec![crate::fakes::failure_event(
            "Bucket",
            "CREATE_FAILED",
            "bucket name taken",
        )];
        run(&t, "run-1").await;
        assert_eq!(t.notices.kinds(), ["Reconcile Started", "Reconcile Failed"]);
        let failed = t.notices.all().pop().unwrap();
        assert_eq!(failed.stall_reason.as_deref(), Some("StackFailed"));
        let cause = failed.root_cause.unwrap();
        assert!(cause.contains("bucket name taken"), "{cause}");
        // Given up at this revision: the next run ends at once, and quietly.
        run(&t, "run-2").await;
        assert_eq!(t.notices.kinds().len(), 2, "{:?}", t.notices.kinds());
    }
}
