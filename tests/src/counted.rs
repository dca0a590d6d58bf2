//! Counting a client's calls in the test process: an SDK interceptor that
//! notes each attempt's operation, or, for a port built from an `SdkConfig`
//! (CloudFormation's, per stack), the HTTP client that sends its requests
//! ([`crate::iam::record::counting_http_client`]). The scheduler's tests
//! count their registry's DynamoDB calls and their CloudFormation listings
//! with it, per run and without downloading the emulator's whole recording
//! (which every test of the run adds to).

use std::sync::{Arc, Mutex};

use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::BeforeTransmitInterceptorContextRef;
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;

/// The operations sent by the clients this counter is attached to, as
/// `service:Operation`, oldest first (one per attempt: a retried call
/// counts twice, as AWS bills it).
#[derive(Clone, Debug)]
pub struct CallCounter {
    service: &'static str,
    calls: Arc<Mutex<Vec<String>>>,
}

impl CallCounter {
    /// A counter for calls of `service` (the prefix of each name).
    pub fn new(service: &'static str) -> Self {
        CallCounter {
            service,
            calls: Arc::default(),
        }
    }

    /// Every call so far.
    pub fn calls(&self) -> Vec<String> {
        self.calls
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The calls made since the counter stood at `mark` (a [`Self::len`]).
    pub fn since(&self, mark: usize) -> Vec<String> {
        self.calls()
            .get(mark..)
            .map(<[_]>::to_vec)
            .unwrap_or_default()
    }

    /// How many calls of `op` (`"cloudformation:ListStacks"`) so far.
    pub fn count_of(&self, op: &str) -> usize {
        count(&self.calls(), op)
    }

    /// Whether this counter counts calls of `service`.
    pub(crate) fn counts(&self, service: &str) -> bool {
        self.service == service
    }

    /// Notes a call of `operation` (of this counter's service).
    pub(crate) fn note(&self, operation: &str) {
        self.calls
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(format!("{}:{operation}", self.service));
    }

    /// How many calls so far.
    pub fn len(&self) -> usize {
        self.calls
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len()
    }

    /// Whether no call was made yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Intercept for CallCounter {
    fn name(&self) -> &'static str {
        "CallCounter"
    }

    fn read_before_transmit(
        &self,
        _context: &BeforeTransmitInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        self.note(cfg.load::<Metadata>().map_or("?", Metadata::name));
        Ok(())
    }
}

/// How many of `calls` are `op` (`"dynamodb:Query"`).
pub fn count(calls: &[String], op: &str) -> usize {
    calls.iter().filter(|c| c.as_str() == op).count()
}
