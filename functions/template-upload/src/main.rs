//! The `template-upload` Lambda function: checks the template, stores it content-addressed, and ends the run when already in sync.
//! The logic is `stacksync::reconcile::steps::Steps`; this is wiring only.

fn main() -> Result<(), lambda_runtime::Error> {
    stacksync::lambda::serve_step("template-upload")
}
