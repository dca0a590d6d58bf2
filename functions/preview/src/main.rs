//! The `preview` Lambda function, target of the `Pull Request Changed`
//! rule: the logic is `stacksync::reconcile::review`; this is wiring only.

fn main() -> Result<(), lambda_runtime::Error> {
    stacksync::lambda::serve_preview()
}
