//! The `approval` Lambda function: records a change set that waits for a person's approval, with the task token that answers it.
//! The logic is `stacksync::reconcile::steps::approval`; this is wiring only.

fn main() -> Result<(), lambda_runtime::Error> {
    stacksync::lambda::serve_step(stacksync::reconcile::steps::StepName::Approval)
}
