//! The `webhook` Lambda function, behind a Function URL: verifies a Git host's
//! delivery and starts the reconcile of every stack that follows the pushed
//! repository and ref. The logic is `stacksync::webhook`; this is wiring only.

fn main() -> Result<(), lambda_runtime::Error> {
    stacksync::lambda::serve_webhook()
}
