//! The `template-upload` Lambda function: checks the template, stores it content-addressed, and ends the run when already in sync.
//! The logic is `stacksync::reconcile::steps::template_upload`; this is wiring only.

fn main() -> Result<(), lambda_runtime::Error> {
    stacksync::lambda::serve_step(stacksync::reconcile::steps::StepName::TemplateUpload)
}
