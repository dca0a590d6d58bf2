//! Runs parked until their stack's CloudFormation event, locally: their
//! tokens answered as a deployment answers them (`SendTaskSuccess`,
//! recorded for the IAM test under the function that calls it), through
//! the registry's answers the local runner reads (it has no Step Functions).

use stacksync::clock::now_millis;
use stacksync::ports::{Answer, PortError, PortResult, TaskTokens};
use stacksync::registry::{Answers, Registry};

use crate::iam::call::Call;
use crate::iam::record::{record, recording};

/// Task tokens answered into `registry`'s answers.
#[derive(Debug, Clone)]
pub struct LocalWakes(pub Registry);

impl TaskTokens for LocalWakes {
    async fn answer_token(&self, token: &str, answer: &Answer) -> PortResult<bool> {
        if recording() {
            record(Call {
                service: "states".into(),
                operation: match answer {
                    Answer::Success { .. } => "SendTaskSuccess".into(),
                    Answer::Failure { .. } => "SendTaskFailure".into(),
                },
                region: "us-east-1".into(),
                status: 200,
                ..Call::default()
            });
        }
        // Step Functions' own write, not the caller's: outside its function.
        let (registry, token, answer) = (self.0.clone(), token.to_owned(), answer.clone());
        tokio::spawn(async move { registry.answer(&token, &answer, now_millis()).await })
            .await
            .map_err(|e| PortError::Transient(e.to_string()))?
            .map_err(|e| PortError::Transient(e.to_string()))
    }
}
