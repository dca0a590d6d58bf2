//! The `change-set` Lambda function: acts on the stack's status: creates or executes a change set, continues a rollback, or recreates.
//! The logic is `stacksync::reconcile::steps::change_set`; this is wiring only.

fn main() -> Result<(), lambda_runtime::Error> {
    stacksync::lambda::serve_step(stacksync::reconcile::steps::StepName::ChangeSet)
}
