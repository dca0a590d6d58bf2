//! Adapters: the AWS SDK behind the ports of [`crate::reconcile::ports`].
//! AWS quirks (and the emulator's) are turned into domain values here, once.

pub mod cloudformation;
pub mod s3;

use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;

use crate::reconcile::ports::PortError;

/// Error codes AWS uses for throttling and passing trouble.
const TRANSIENT_CODES: [&str; 9] = [
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "RequestLimitExceeded",
    "TooManyRequestsException",
    "RequestTimeout",
    "InternalFailure",
    "InternalError",
    "ServiceUnavailable",
];

/// Classifies an SDK error: transient (retry) or rejected (do not).
pub fn port_error<E>(operation: &str, err: &SdkError<E, HttpResponse>) -> PortError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    let code = err.code().unwrap_or("");
    let message = err.message().unwrap_or("");
    match err {
        SdkError::ServiceError(service) => {
            let status = service.raw().status().as_u16();
            let text = format!("{operation}: {code}: {message}");
            if TRANSIENT_CODES.contains(&code) || status >= 500 {
                PortError::Transient(text)
            } else {
                PortError::Rejected(text)
            }
        }
        // Timeouts, connection failures, unreadable responses: try again.
        other => PortError::Transient(format!(
            "{operation}: {}",
            aws_smithy_types::error::display::DisplayErrorContext(other)
        )),
    }
}
