//! The `answer` Lambda function, behind an IAM-authorised Function URL:
//! approves or rejects a change set that waits for a person, for a caller
//! whose identity AWS verified and who is among the approvers. The logic is
//! `stacksync::triggers::answer`; this is wiring only.

fn main() -> Result<(), lambda_runtime::Error> {
    stacksync::lambda::serve_answer()
}
