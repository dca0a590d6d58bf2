//! Notices in memory: what the steps would have put on the bus, in order.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, PoisonError};

use crate::notice::Notice;
use crate::ports::{Notices, PortResult};

#[derive(Debug, Default)]
pub struct MemoryNotices {
    put: Mutex<Vec<Notice>>,
}

impl MemoryNotices {
    /// Every notice put so far, in order.
    pub fn all(&self) -> Vec<Notice> {
        self.put
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Their detail types, in order.
    pub fn kinds(&self) -> Vec<&'static str> {
        self.all().iter().map(Notice::detail_type).collect()
    }
}

impl Notices for MemoryNotices {
    fn put<'a>(
        &'a self,
        notice: &'a Notice,
    ) -> Pin<Box<dyn Future<Output = PortResult<()>> + Send + 'a>> {
        self.put
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(notice.clone());
        Box::pin(std::future::ready(Ok(())))
    }
}
