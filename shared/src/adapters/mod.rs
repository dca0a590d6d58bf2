//! Adapters: the AWS SDK behind the ports of [`crate::reconcile::ports`].
//! AWS quirks (and the emulator's) are turned into domain values here, once.

pub mod cloudformation;
pub mod git;
pub mod s3;
pub mod stepfunctions;

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

/// Where CloudFormation fetches templates from: `TemplateURL` = this + `/` + key.
///
/// In AWS: the bucket's regional URL. With a local emulator (`endpoint` set):
/// the emulator's own S3, and moto resolves a `TemplateURL` inside its S3
/// only when the URL says `localhost`, so 127.0.0.1 is written as localhost.
/// `STACKSYNC_TEMPLATE_URL_BASE` overrides both.
pub fn template_url_base(bucket: &str, region: &str, endpoint: Option<&str>) -> String {
    if let Ok(base) = std::env::var("STACKSYNC_TEMPLATE_URL_BASE")
        && !base.is_empty()
    {
        return base;
    }
    match endpoint {
        Some(endpoint) => format!(
            "{}/{bucket}",
            endpoint
                .trim_end_matches('/')
                .replace("127.0.0.1", "localhost")
        ),
        None => format!("https://{bucket}.s3.{region}.amazonaws.com"),
    }
}

/// An S3 client; path-style addressing when talking to an emulator.
pub fn s3_client(config: &aws_config::SdkConfig, emulator: bool) -> aws_sdk_s3::Client {
    let conf = aws_sdk_s3::config::Builder::from(config)
        .force_path_style(emulator)
        .build();
    aws_sdk_s3::Client::from_conf(conf)
}
