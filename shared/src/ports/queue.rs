//! The delivery queue port: a verified webhook delivery put on a queue
//! (SQS, `adapters::sqs`) for the consumer that starts its stacks, so the
//! webhook answers at once whatever follows the pushed ref.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::PortResult;

/// Puts messages on a queue.
pub trait Enqueue: Send + Sync + std::fmt::Debug {
    /// Puts `body` on the queue.
    fn enqueue<'a>(
        &'a self,
        body: &'a str,
    ) -> Pin<Box<dyn Future<Output = PortResult<()>> + Send + 'a>>;
}

/// Where the webhook queues its deliveries; none: it starts their stacks
/// itself, before it answers (the local tests, an installation without the
/// queue).
#[derive(Debug, Clone, Default)]
pub struct DeliveryQueue(Option<Arc<dyn Enqueue>>);

impl DeliveryQueue {
    /// Deliveries go to `to`.
    pub fn to(to: Arc<dyn Enqueue>) -> Self {
        Self(Some(to))
    }

    /// The queue, if there is one.
    pub fn get(&self) -> Option<&dyn Enqueue> {
        self.0.as_deref()
    }
}
