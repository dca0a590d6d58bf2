//! A queue in memory: what was put on it, in order.

use std::sync::{Mutex, PoisonError};

use crate::ports::{Enqueue, PortResult};

#[derive(Debug, Default)]
pub struct MemoryQueue {
    messages: Mutex<Vec<String>>,
}

impl MemoryQueue {
    /// The messages put since the last take, oldest first.
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.messages.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

impl Enqueue for MemoryQueue {
    fn enqueue<'a>(
        &'a self,
        body: &'a str,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = PortResult<()>> + Send + 'a>> {
        self.messages
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(body.to_owned());
        Box::pin(async { Ok(()) })
    }
}
