//! The ports: what the steps, the scheduler and the triggers need from the
//! outside world, as small traits that speak the domain, not the SDK.
//! Adapters (`crate::adapters`, `crate::registry`) implement them on AWS and
//! Git; the in-memory fakes (`crate::fakes`, feature `fakes`) implement them
//! for fast tests of the steps, the scheduler and the trigger handlers.
//!
//! | port | what for | on AWS | fake |
//! |---|---|---|---|
//! | [`CloudFormation`], [`CloudFormationFactory`] | stacks and change sets | `adapters::cloudformation` | `fakes::ScriptedCloudFormation` |
//! | [`SourceFetcher`] | revisions and files of a source | `adapters::git` | `fakes::MemorySources` |
//! | [`Blobs`] | artifacts, templates, parameters | `adapters::s3` | `fakes::MemoryBlobs` |
//! | [`Starter`] | reconcile executions | `adapters::stepfunctions` | `fakes::RecordingStarter` |
//! | [`Notices`] (through a [`Notifier`]) | runs' and approvals' events | `adapters::eventbridge` | `fakes::MemoryNotices` |
//! | [`SecretStore`] | the webhook's secret | `adapters::secrets` | `adapters::secrets::SecretLocation::Fixed` |
//! | `registry::{Entries, Specs, Leases, Schedule, Deliveries}` | the registry | `registry::Registry` (DynamoDB) | `registry::memory::MemoryRegistry` |

pub mod aws_error;
mod blobs;
mod cloudformation;
pub mod drift;
mod executions;
mod notices;
pub mod secrets;
pub mod source;

pub use blobs::{Blobs, Stored};
pub use cloudformation::*;
pub use executions::{Answer, Started, Starter, TaskTokens, Trigger, TriggerKind};
pub use notices::{Notices, Notifier};
pub use secrets::{Accepted, SecretStore};
pub use source::{FetchError, Files, SourceFetcher, SourceLocation};

/// What went wrong talking to a service, in the terms the steps act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PortError {
    /// Throttling, a timeout, a 5xx: worth retrying with backoff.
    #[error("{0} (transient)")]
    Transient(String),
    /// The request itself was refused: retrying the same request will not help.
    #[error("{0}")]
    Rejected(String),
}

pub type PortResult<T> = Result<T, PortError>;

/// AWS error codes that mean "try again later": throttling and passing
/// trouble on AWS's side. One list for every adapter.
const TRANSIENT_CODES: [&str; 15] = [
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "TooManyRequestsException",
    "RequestLimitExceeded",
    "ProvisionedThroughputExceededException",
    "TransactionInProgressException",
    "SlowDown",
    "RequestTimeout",
    "RequestTimeoutException",
    "InternalFailure",
    "InternalError",
    "InternalServerError",
    "ServiceUnavailable",
    "ServiceUnavailableException",
];

/// Whether an AWS error answer is worth retrying: a throttling or transient
/// error code, or any 5xx. Everything else (4xx: refused, not found, bad
/// request) would fail the same way again.
pub fn is_transient(code: Option<&str>, http_status: Option<u16>) -> bool {
    code.is_some_and(|c| TRANSIENT_CODES.contains(&c)) || http_status.is_some_and(|s| s >= 500)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throttling_and_5xx_are_transient_and_refusals_are_not() {
        assert!(is_transient(Some("ThrottlingException"), Some(400)));
        assert!(is_transient(
            Some("ProvisionedThroughputExceededException"),
            Some(400)
        ));
        assert!(is_transient(None, Some(503)));
        assert!(is_transient(Some("SlowDown"), Some(503)));
        assert!(!is_transient(Some("AccessDeniedException"), Some(400)));
        assert!(!is_transient(Some("ValidationError"), Some(400)));
        assert!(!is_transient(None, Some(404)));
    }
}
