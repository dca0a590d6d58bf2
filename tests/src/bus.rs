//! The events on an EventBridge bus, as a user's rule sees them: a rule on
//! the emulator's default bus matching one installation's events, an SQS
//! queue as its target, read back.

use std::time::{Duration, Instant};

use aws_sdk_eventbridge::types::Target;
use aws_sdk_sqs::types::QueueAttributeName;
use serde_json::{Value, json};

use crate::{Emulator, unique_name};

/// The queue a rule on the default bus sends this installation's events
/// to: its URL.
pub async fn queue_for_installation(installation: &str) -> String {
    // As the README's example: this installation's events, every type.
    queue_for(json!({"source": ["stacksync"], "detail": {"installation": [installation]}})).await
}

/// The queue a rule on the default bus with `pattern` sends its events to:
/// its URL.
pub async fn queue_for(pattern: Value) -> String {
    let config = Emulator::shared().sdk_config();
    let sqs = aws_sdk_sqs::Client::new(&config);
    let events = aws_sdk_eventbridge::Client::new(&config);
    let url = sqs
        .create_queue()
        .queue_name(unique_name("told"))
        .send()
        .await
        .expect("the emulator answers")
        .queue_url
        .expect("the emulator answers");
    let arn = sqs
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .expect("the emulator answers")
        .attributes
        .expect("the emulator answers")[&QueueAttributeName::QueueArn]
        .clone();
    let rule = unique_name("runs");
    events
        .put_rule()
        .name(&rule)
        .event_pattern(pattern.to_string())
        .send()
        .await
        .expect("the emulator answers");
    events
        .put_targets()
        .rule(&rule)
        .targets(
            Target::builder()
                .id("queue")
                .arn(arn)
                .build()
                .expect("the emulator answers"),
        )
        .send()
        .await
        .expect("the emulator answers");
    url
}

/// The events on the queue, until `want` came or `within` passed.
pub async fn received(url: &str, want: usize, within: Duration) -> Vec<Value> {
    let sqs = aws_sdk_sqs::Client::new(&Emulator::shared().sdk_config());
    let deadline = Instant::now() + within;
    let mut out = Vec::new();
    while out.len() < want && Instant::now() < deadline {
        let got = sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .wait_time_seconds(1)
            .send()
            .await
            .expect("the emulator answers");
        for message in got.messages() {
            out.push(
                serde_json::from_str(message.body().unwrap_or("null"))
                    .expect("the emulator answers"),
            );
            sqs.delete_message()
                .queue_url(url)
                .receipt_handle(message.receipt_handle().expect("the emulator answers"))
                .send()
                .await
                .expect("the emulator answers");
        }
    }
    out
}
