//! Adapters: the AWS SDK (and Git) behind the ports of [`crate::ports`].
//! AWS quirks (and the emulator's) are turned into domain values here, once.

pub mod answer_url;
pub mod archive;
pub mod cloudformation;
pub mod credentials;
pub mod eventbridge;
pub mod git;
pub mod git_host;
pub mod organizations;
pub mod s3;
pub mod s3_source;
pub mod secrets;
pub mod sources;
pub mod sqs;
pub mod stepfunctions;

use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;

use crate::ports::PortError;

/// Classifies an SDK error: transient (retry) or rejected (do not).
pub fn port_error<E>(operation: &str, err: &SdkError<E, HttpResponse>) -> PortError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    match err {
        SdkError::ServiceError(service) => {
            let status = service.raw().status().as_u16();
            let (code, message) = (err.code(), err.message());
            let text = crate::ports::aws_error::service_error(operation, code, message, status);
            // Unsupported before transient: a 501 is a 5xx that the same
            // request will always get.
            if crate::ports::is_unsupported(code, message, Some(status)) {
                PortError::Unsupported(text)
            } else if crate::ports::is_transient(code, Some(status)) {
                PortError::Transient(text)
            } else if crate::ports::is_not_found(code, message, Some(status)) {
                PortError::NotFound(text)
            } else {
                PortError::Refused(text)
            }
        }
        // Timeouts, connection failures, unreadable responses: try again.
        other => PortError::Transient(format!(
            "{operation}: {}",
            crate::ports::aws_error::failure(operation, other)
        )),
    }
}

/// Where CloudFormation fetches templates from: `TemplateURL` = this + `/` + key.
///
/// In AWS: the bucket's regional URL, in the region's partition
/// (`amazonaws.com.cn` in China, …). With a local emulator (`endpoint` set):
/// the emulator's own S3, and moto resolves a `TemplateURL` inside its S3
/// only when the URL says `localhost`, so 127.0.0.1 is written as localhost.
/// `configured` (`STACKSYNC_TEMPLATE_URL_BASE`; the deployed functions get the
/// bucket's `RegionalDomainName` from CloudFormation) overrides both.
pub fn template_url_base(
    bucket: &str,
    region: &str,
    endpoint: Option<&str>,
    configured: Option<&str>,
) -> String {
    if let Some(base) = configured.filter(|b| !b.is_empty()) {
        return base.to_owned();
    }
    match endpoint {
        Some(endpoint) => format!(
            "{}/{bucket}",
            endpoint
                .trim_end_matches('/')
                .replace("127.0.0.1", "localhost")
        ),
        None => crate::partition::s3_bucket_url(bucket, region),
    }
}

/// An S3 client; path-style addressing when talking to an emulator.
pub fn s3_client(config: &aws_config::SdkConfig, emulator: bool) -> aws_sdk_s3::Client {
    let conf = aws_sdk_s3::config::Builder::from(config)
        .force_path_style(emulator)
        .build();
    aws_sdk_s3::Client::from_conf(conf)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue "Every message true": an endpoint's bare HTTP 500 (the
    /// emulator's answer to an operation it does not implement) made the
    /// cause `UpdateTerminationProtection: : `.
    #[test]
    fn a_refusal_without_code_or_message_is_said_with_its_operation_and_http_status() {
        use aws_sdk_cloudformation::operation::update_termination_protection::UpdateTerminationProtectionError as E;
        use aws_smithy_types::body::SdkBody;
        use aws_smithy_types::error::ErrorMetadata;
        let refusal = |status: u16, meta: ErrorMetadata| {
            let raw = HttpResponse::new(
                status.try_into().expect("a status"),
                SdkBody::from("<!doctype html><title>500 Internal Server Error</title>"),
            );
            port_error(
                "UpdateTerminationProtection",
                &SdkError::service_error(E::generic(meta), raw),
            )
        };
        let bare = refusal(500, ErrorMetadata::builder().build());
        assert_eq!(
            bare,
            PortError::Transient(
                "UpdateTerminationProtection: HTTP 500 Internal Server Error, with no error code \
                 or message"
                    .into()
            )
        );
        let coded = refusal(501, ErrorMetadata::builder().code("NotImplemented").build());
        assert!(
            coded.to_string().contains(
                "UpdateTerminationProtection: NotImplemented (HTTP 501 Not Implemented, no message)"
            ),
            "{coded}"
        );
        let said = refusal(
            400,
            ErrorMetadata::builder()
                .code("ValidationError")
                .message("Stack x does not exist")
                .build(),
        );
        assert_eq!(
            said,
            PortError::NotFound(
                "UpdateTerminationProtection: ValidationError: Stack x does not exist".into()
            )
        );
    }

    /// Issue "Records with a shape…": callers match a kind, never the text.
    #[test]
    fn each_answer_gets_the_kind_its_code_says() {
        use aws_sdk_cloudformation::operation::create_change_set::CreateChangeSetError as E;
        use aws_smithy_types::body::SdkBody;
        use aws_smithy_types::error::ErrorMetadata;
        let kind = |status: u16, code: &str, message: &str| {
            let raw = HttpResponse::new(status.try_into().expect("a status"), SdkBody::empty());
            let meta = ErrorMetadata::builder().code(code).message(message).build();
            match port_error(
                "CreateChangeSet",
                &SdkError::service_error(E::generic(meta), raw),
            ) {
                PortError::Transient(_) => "transient",
                PortError::Refused(_) => "refused",
                PortError::NotFound(_) => "not found",
                PortError::Unsupported(_) => "unsupported",
            }
        };
        let cases = [
            (400, "Throttling", "Rate exceeded", "transient"),
            (503, "ServiceUnavailable", "try later", "transient"),
            (
                400,
                "ValidationError",
                "Template format error: bad",
                "refused",
            ),
            (403, "AccessDenied", "not authorized", "refused"),
            (
                400,
                "ValidationError",
                "Stack with id s does not exist",
                "not found",
            ),
            (
                404,
                "ChangeSetNotFound",
                "ChangeSet [c] does not exist",
                "not found",
            ),
            (
                404,
                "NoSuchBucket",
                "The specified bucket does not exist",
                "not found",
            ),
            (400, "ParameterNotFound", "", "not found"),
            (
                400,
                "ValidationError",
                "Unexpected parameter DeploymentMode",
                "unsupported",
            ),
            (501, "NotImplemented", "not emulated", "unsupported"),
        ];
        for (status, code, message, wanted) in cases {
            assert_eq!(
                kind(status, code, message),
                wanted,
                "{status} {code}: {message}"
            );
        }
    }

    #[test]
    fn template_urls_are_in_the_partition_of_the_region() {
        assert_eq!(
            template_url_base("b", "eu-west-1", None, None),
            "https://b.s3.eu-west-1.amazonaws.com"
        );
        assert_eq!(
            template_url_base("b", "cn-north-1", None, None),
            "https://b.s3.cn-north-1.amazonaws.com.cn"
        );
    }

    #[test]
    fn the_emulator_is_named_localhost_and_configuration_wins() {
        assert_eq!(
            template_url_base("b", "us-east-1", Some("http://127.0.0.1:5000/"), None),
            "http://localhost:5000/b"
        );
        assert_eq!(
            template_url_base(
                "b",
                "us-east-1",
                None,
                Some("https://b.s3.us-east-1.amazonaws.com")
            ),
            "https://b.s3.us-east-1.amazonaws.com"
        );
        assert_eq!(
            template_url_base("b", "cn-north-1", None, Some("")),
            "https://b.s3.cn-north-1.amazonaws.com.cn"
        );
    }
}
