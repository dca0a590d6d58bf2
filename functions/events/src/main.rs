//! The `events` Lambda function, target of stacksync's EventBridge rules:
//! a CodeCommit reference update or an S3 object created starts the stacks
//! that follow it; a CloudFormation status change that stacksync did not make
//! marks the stack for reconcile. The logic is `stacksync::events`; this is
//! wiring only.

fn main() -> Result<(), lambda_runtime::Error> {
    stacksync::lambda::serve_events()
}
