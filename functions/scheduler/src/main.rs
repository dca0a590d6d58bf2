//! The `scheduler` Lambda function, on an EventBridge schedule: reads the due
//! entries and the sources, checks each distinct source once, and starts the
//! reconcile only where something changed. The logic is `stacksync::scheduler`;
//! this is wiring only.

fn main() -> Result<(), lambda_runtime::Error> {
    stacksync::lambda::serve_scheduler()
}
