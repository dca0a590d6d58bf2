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
pub mod git_host;
mod notices;
pub mod organizations;
mod queue;
pub mod secrets;
pub mod source;
pub mod stacks_files;

pub use blobs::{Blobs, Stored};
pub use cloudformation::*;
pub use drift::DriftDetections;
pub use executions::{
    Answer, MAX_PARKED_TOKEN_BYTES, ParkedToken, RunStarter, StartOn, Started, Starter, TaskTokens,
    Trigger, TriggerKind, Wake, Wakes, state_machine_of,
};
pub use git_host::{CommitStatus, GitHost, HostRepository, Posted};
pub use notices::{Notices, Notifier};
pub use organizations::Organizations;
pub use queue::{DeliveryQueue, Enqueue};
pub use secrets::{Accepted, SecretStore};
pub use source::{FetchError, Files, SourceFetcher, SourceLocation};

/// What went wrong talking to a service, in the terms the steps act on: a
/// kind to match on, and the service's own words for people. The adapter
/// that meets an answer decides its kind (a caller never reads the text).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PortError {
    /// Throttling, a timeout, a 5xx: worth retrying with backoff.
    #[error("{0} (transient)")]
    Transient(String),
    /// The request itself was refused: retrying the same request will not help.
    #[error("{0}")]
    Refused(String),
    /// What the request names is not there (a stack, a change set, an
    /// object, a parameter), where the method does not answer that as a
    /// value (`None`).
    #[error("{0}")]
    NotFound(String),
    /// The endpoint does not serve the request as asked: an operation or an
    /// option it does not know (a drift-aware change set where there are
    /// none). The same request will not work; another may.
    #[error("{0}")]
    Unsupported(String),
}

impl PortError {
    /// Worth retrying as it is.
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Transient(_))
    }

    /// The same kind, its words prefixed with `what` (`"parameter Pw: …"`).
    pub fn context(self, what: &str) -> Self {
        match self {
            Self::Transient(m) => Self::Transient(format!("{what}: {m}")),
            Self::Refused(m) => Self::Refused(format!("{what}: {m}")),
            Self::NotFound(m) => Self::NotFound(format!("{what}: {m}")),
            Self::Unsupported(m) => Self::Unsupported(format!("{what}: {m}")),
        }
    }

    /// The service's words.
    pub fn message(&self) -> &str {
        match self {
            Self::Transient(m) | Self::Refused(m) | Self::NotFound(m) | Self::Unsupported(m) => m,
        }
    }
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

/// AWS error codes that mean "not there", across the services stacksync
/// calls. CloudFormation says it of a stack with a `ValidationError` whose
/// message says "does not exist" (see [`is_not_found`]).
const NOT_FOUND_CODES: [&str; 10] = [
    "NotFound",
    "NoSuchKey",
    "NoSuchBucket",
    "NoSuchVersion",
    "ResourceNotFoundException",
    "ParameterNotFound",
    "ParameterVersionNotFound",
    "ChangeSetNotFound",
    "ChangeSetNotFoundException",
    "StackSetNotFoundException",
];

/// Whether an AWS error answer says that what the request names is not
/// there: a not-found error code, CloudFormation's "Stack with id … does
/// not exist" (a `ValidationError`; the emulator says it of change sets
/// too), or an HTTP 404 (a `HeadObject` has no body to say more).
pub fn is_not_found(code: Option<&str>, message: Option<&str>, http_status: Option<u16>) -> bool {
    code.is_some_and(|c| NOT_FOUND_CODES.contains(&c))
        || (code == Some("ValidationError")
            && message.is_some_and(|m| m.contains("does not exist")))
        || http_status == Some(404)
}

/// Whether an AWS error answer says the endpoint does not serve the request
/// as asked: `NotImplemented` (or HTTP 501), or a CloudFormation
/// `ValidationError` naming a parameter it does not know (`Unexpected
/// parameter DeploymentMode`, where drift-aware change sets are not served).
pub fn is_unsupported(code: Option<&str>, message: Option<&str>, http_status: Option<u16>) -> bool {
    code == Some("NotImplemented")
        || http_status == Some(501)
        || (code == Some("ValidationError")
            && message.is_some_and(|m| {
                m.contains("Unexpected parameter") || m.contains("DeploymentMode")
            }))
}

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
