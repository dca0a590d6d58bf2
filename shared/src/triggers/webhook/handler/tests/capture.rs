//! The log lines a test writes, kept to be searched: a subscriber of this
//! thread only (`#[tokio::test]` runs on one), with `tracing` alone.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex, PoisonError};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::DefaultGuard;
use tracing::{Event, Metadata, Subscriber};

/// Every event, one line each: `LEVEL message field=value …`.
#[derive(Debug, Clone, Default)]
pub(super) struct Lines(Arc<Mutex<Vec<String>>>);

impl Lines {
    pub(super) fn all(&self) -> Vec<String> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The lines whose message is `message`.
    pub(super) fn with_message(&self, message: &str) -> Vec<String> {
        self.all()
            .into_iter()
            .filter(|l| {
                l.split_once(' ')
                    .is_some_and(|(_, rest)| rest.starts_with(message))
            })
            .collect()
    }

    pub(super) fn clear(&self) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}

/// Captures this thread's events until the guard is dropped.
pub(super) fn capture() -> (Lines, DefaultGuard) {
    let lines = Lines::default();
    let guard = tracing::subscriber::set_default(lines.clone());
    (lines, guard)
}

struct Line(String);

impl Visit for Line {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let _ = if field.name() == "message" {
            write!(self.0, " {value:?}")
        } else {
            write!(self.0, " {}={value:?}", field.name())
        };
    }
}

impl Subscriber for Lines {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut line = Line(event.metadata().level().to_string());
        event.record(&mut line);
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(line.0);
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}
