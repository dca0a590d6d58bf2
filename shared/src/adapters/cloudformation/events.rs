//! `DescribeEvents`: what an operation or a change set reported as failed,
//! validations and hooks included (which `DescribeStackEvents` never
//! shows). Newer than the stack events: an endpoint that does not serve it
//! (the emulator answers 500; a region without it, an error) gives `None`,
//! and the caller reads the stack's events instead.

use aws_sdk_cloudformation::Client;
use aws_sdk_cloudformation::types::EventFilter;
use tracing::warn;

use super::millis;
use crate::ports::{EventsOf, OperationEvent};

/// The most pages read (an operation's failures fit in one or two).
const MAX_PAGES: usize = 10;

/// Every failure `of` reported, oldest first; `None` when it cannot be read.
pub(super) async fn failed_events(
    client: &Client,
    stack: &str,
    of: EventsOf<'_>,
) -> Option<Vec<OperationEvent>> {
    let mut events = Vec::new();
    let mut token = None;
    for _ in 0..MAX_PAGES {
        let request = client
            .describe_events()
            .filters(EventFilter::builder().failed_events(true).build())
            .set_next_token(token.take());
        // The stack's name scopes the call (and its IAM resource) in both.
        let request = match of {
            EventsOf::Operation(id) => request.stack_name(stack).operation_id(id),
            EventsOf::ChangeSet(name) => request.stack_name(stack).change_set_name(name),
        };
        let out = match request.send().await {
            Ok(out) => out,
            Err(e) => {
                warn!(stack, error = %crate::ports::aws_error::failure("DescribeEvents", &e), "operation events unavailable; reading stack events instead");
                return None;
            }
        };
        events.extend(out.operation_events().iter().map(|e| {
            OperationEvent {
                kind: e
                    .event_type()
                    .map(|k| k.as_str().to_owned())
                    .unwrap_or_default(),
                timestamp: millis(e.timestamp()),
                logical_id: e.logical_resource_id().map(str::to_owned),
                resource_type: e.resource_type().map(str::to_owned),
                status: e.resource_status().map(|s| s.as_str().to_owned()),
                reason: e
                    .validation_status_reason()
                    .or(e.hook_status_reason())
                    .or(e.resource_status_reason())
                    .map(str::to_owned),
                validation: e.validation_name().map(str::to_owned),
                path: e.validation_path().map(str::to_owned),
            }
        }));
        match out.next_token {
            Some(next) if !next.is_empty() => token = Some(next),
            _ => break,
        }
    }
    events.sort_by_key(|e| e.timestamp);
    Some(events)
}
