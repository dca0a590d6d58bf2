//! The `delete` Lambda function: deletes a stack (removed entry with destroyOnDelete, or a failed create) and drops the entry.
//! The logic is `stacksync::reconcile::steps::Steps`; this is wiring only.

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    stacksync::lambda::serve_step("delete").await
}
