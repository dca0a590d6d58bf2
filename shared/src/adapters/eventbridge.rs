//! Notices on an EventBridge bus (`PutEvents`, source `stacksync`): one
//! event per notice, its `detail` the notice's JSON.

use std::future::Future;
use std::pin::Pin;

use aws_sdk_eventbridge::Client;
use aws_sdk_eventbridge::types::PutEventsRequestEntry;

use super::port_error;
use crate::notice::{Notice, SOURCE};
use crate::ports::{Notices, PortError, PortResult};

/// The bus notices go to, by name or ARN (`default`: the account's).
#[derive(Debug, Clone)]
pub struct EventBus {
    client: Client,
    bus: String,
}

impl EventBus {
    pub fn new(client: Client, bus: impl Into<String>) -> Self {
        Self {
            client,
            bus: bus.into(),
        }
    }

    async fn put_one(&self, notice: &Notice) -> PortResult<()> {
        let entry = PutEventsRequestEntry::builder()
            .event_bus_name(&self.bus)
            .source(SOURCE)
            .detail_type(notice.detail_type())
            .detail(notice.detail())
            .build();
        let out = self
            .client
            .put_events()
            .entries(entry)
            .send()
            .await
            .map_err(|e| port_error("PutEvents", &e))?;
        // PutEvents answers 200 with the entries it could not put.
        match out.entries().first() {
            Some(failed) if out.failed_entry_count() > 0 => Err(PortError::Refused(format!(
                "PutEvents to {}: the entry was refused: {}",
                self.bus,
                said(failed.error_code(), failed.error_message())
            ))),
            _ => Ok(()),
        }
    }
}

impl Notices for EventBus {
    fn put<'a>(
        &'a self,
        notice: &'a Notice,
    ) -> Pin<Box<dyn Future<Output = PortResult<()>> + Send + 'a>> {
        Box::pin(self.put_one(notice))
    }
}

/// An entry's refusal in words: its code and message, whichever it has.
fn said(code: Option<&str>, message: Option<&str>) -> String {
    let parts: Vec<&str> = [code, message]
        .into_iter()
        .flatten()
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect();
    if parts.is_empty() {
        "no error code or message".to_owned()
    } else {
        parts.join(": ")
    }
}
