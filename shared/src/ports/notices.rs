//! The notice port: putting what happened to a stack on an event bus
//! (`crate::notice`). Best effort by design: a notice that cannot be put is
//! logged, never a reason to fail or repeat a run.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::PortResult;
use crate::notice::Notice;

/// Where notices go: an EventBridge bus (`adapters::eventbridge`), or a
/// list in memory (`fakes::MemoryNotices`).
pub trait Notices: Send + Sync {
    fn put<'a>(
        &'a self,
        notice: &'a Notice,
    ) -> Pin<Box<dyn Future<Output = PortResult<()>> + Send + 'a>>;
}

/// The steps' notifier: where their notices go, or nowhere.
#[derive(Clone, Default)]
pub struct Notifier(Option<Arc<dyn Notices>>);

impl Notifier {
    /// Notices go to `to`.
    pub fn to(to: Arc<dyn Notices>) -> Self {
        Self(Some(to))
    }

    /// No notices (the local runner without a bus, most tests).
    pub fn none() -> Self {
        Self(None)
    }

    /// Puts `notice`, saying whether it was put (`Ok(false)`: no bus).
    pub async fn try_send(&self, notice: &Notice) -> super::PortResult<bool> {
        match &self.0 {
            Some(to) => to.put(notice).await.map(|()| true),
            None => Ok(false),
        }
    }

    /// Puts `notice`; a failure is logged and swallowed: the run's status
    /// in the registry is the record, the notice only its echo.
    pub async fn send(&self, notice: &Notice) {
        let Some(to) = &self.0 else { return };
        if let Err(e) = to.put(notice).await {
            tracing::warn!(
                stack = %notice.stack,
                detail_type = notice.detail_type(),
                error = %e,
                "the notice could not be put on the event bus"
            );
        }
    }
}

impl fmt::Debug for Notifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "Notifier(bus)"
        } else {
            "Notifier(none)"
        })
    }
}
