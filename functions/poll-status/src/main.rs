//! The `poll-status` Lambda function: looks at the change set or stack and says: wait again, go on, or finish.
//! The logic is `stacksync::reconcile::steps::poll_status`; this is wiring only.

fn main() -> Result<(), lambda_runtime::Error> {
    stacksync::lambda::serve_step(stacksync::reconcile::steps::StepName::PollStatus)
}
