//! The `delete` Lambda function: deletes a stack (removed entry with destroyOnDelete, or a failed create) and drops the entry.
//! The logic is `stacksync::reconcile::steps::delete`; this is wiring only.

fn main() -> Result<(), lambda_runtime::Error> {
    stacksync::lambda::serve_step(stacksync::reconcile::steps::StepName::Delete)
}
