//! The `artifact-fetch` Lambda function: takes the stack's lease, resolves the source revision and stores the artifact in S3.
//! The logic is `stacksync::reconcile::steps::artifact_fetch`; this is wiring only.

fn main() -> Result<(), lambda_runtime::Error> {
    stacksync::lambda::serve_step(stacksync::reconcile::steps::StepName::ArtifactFetch)
}
