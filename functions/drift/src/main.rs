//! The `drift` Lambda function, on an EventBridge schedule: starts the drift
//! detections that are due, asks about those running, and records what the
//! ended ones found. Its role carries the read policy CloudFormation reads
//! the stacks' resources with, and reaches no Git server. The logic is
//! `stacksync::triggers::drift`; this is wiring only.

fn main() -> Result<(), lambda_runtime::Error> {
    stacksync::lambda::serve_drift()
}
