//! The `finalize` Lambda function: records a failure caught by the state machine and releases the stack's lease.
//! The logic is `stacksync::reconcile::steps::finalize`; this is wiring only.

fn main() -> Result<(), lambda_runtime::Error> {
    stacksync::lambda::serve_step(stacksync::reconcile::steps::StepName::Finalize)
}
