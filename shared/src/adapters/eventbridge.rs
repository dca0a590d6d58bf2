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
            Some(failed) if out.failed_entry_count() > 0 => Err(PortError::Rejected(format!(
                "PutEvents to {}: {}: {}",
                self.bus,
                failed.error_code().unwrap_or("?"),
                failed.error_message().unwrap_or("")
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
