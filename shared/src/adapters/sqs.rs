//! The delivery queue on SQS (`SendMessage`).

use aws_sdk_sqs::Client;

use super::port_error;
use crate::ports::{Enqueue, PortResult};

/// One SQS queue, by URL.
#[derive(Debug, Clone)]
pub struct SqsQueue {
    client: Client,
    url: String,
}

impl SqsQueue {
    pub fn new(client: Client, url: impl Into<String>) -> Self {
        Self {
            client,
            url: url.into(),
        }
    }
}

impl Enqueue for SqsQueue {
    fn enqueue<'a>(
        &'a self,
        body: &'a str,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = PortResult<()>> + Send + 'a>> {
        Box::pin(async move {
            self.client
                .send_message()
                .queue_url(&self.url)
                .message_body(body)
                .send()
                .await
                .map(|_| ())
                .map_err(|e| port_error("SendMessage", &e))
        })
    }
}
