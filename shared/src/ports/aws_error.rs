//! AWS SDK errors said in one line for people: the service's code and
//! message, or what went wrong on the way (no credentials, no connection, a
//! timeout), never the SDK's debug dump (that is logged at debug).

use aws_credential_types::provider::error::CredentialsError;
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_types::error::display::DisplayErrorContext;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;

/// An SDK error in one line for people: the service's code and message, or
/// what went wrong on the way (no credentials, no connection, a timeout),
/// without the SDK's debug dump. The whole error is logged at debug
/// (`STACKSYNC_LOG=debug`).
pub fn failure<E>(operation: &str, err: &SdkError<E, HttpResponse>) -> String
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    tracing::debug!(operation, error = %DisplayErrorContext(err), "AWS call failed");
    match err {
        SdkError::ServiceError(service) => {
            refusal(err.code(), err.message(), service.raw().status().as_u16())
        }
        SdkError::DispatchFailure(dispatch) => match dispatch.as_connector_error() {
            Some(c) if c.is_timeout() => format!("timed out: {}", chain(c)),
            Some(c) if c.is_io() => format!(
                "cannot connect ({}): check the network, and the endpoint (--endpoint-url, \
                 AWS_ENDPOINT_URL) if one is set",
                innermost(c)
            ),
            Some(c) => credentials_error(c).map_or_else(|| chain(c), credentials_failed),
            None => chain(err),
        },
        SdkError::TimeoutError(_) => "timed out".to_owned(),
        other => chain(other),
    }
}

/// A service's refusal in one line: the operation, the error code and the
/// message, as `Operation: Code: message`. Where the endpoint sent no code
/// or no message (an emulator's bare HTTP 500 for an operation it does not
/// implement), the HTTP status says what is known, never an empty cause.
pub fn service_error(
    operation: &str,
    code: Option<&str>,
    message: Option<&str>,
    status: u16,
) -> String {
    format!("{operation}: {}", refusal(code, message, status))
}

/// The same without the operation: `Code: message`, or what the HTTP status
/// says where the code or the message is missing.
pub fn refusal(code: Option<&str>, message: Option<&str>, status: u16) -> String {
    let code = code.map(str::trim).filter(|c| !c.is_empty());
    let message = message.map(str::trim).filter(|m| !m.is_empty());
    let reason = http::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .map(|r| format!(" {r}"))
        .unwrap_or_default();
    match (code, message) {
        (Some(code), Some(message)) => format!("{code}: {message}"),
        (Some(code), None) => format!("{code} (HTTP {status}{reason}, no message)"),
        (None, Some(message)) => format!("HTTP {status}{reason}: {message}"),
        (None, None) => format!("HTTP {status}{reason}, with no error code or message"),
    }
}

/// What to say when no credential provider had credentials.
pub const NO_CREDENTIALS: &str = "no AWS credentials found: set AWS_PROFILE (or pass --profile), \
     run `aws configure` or `aws sso login`, or set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY";

/// What to say when a credential provider failed: what failed, then what to do.
pub fn credentials_failed(err: &CredentialsError) -> String {
    match err {
        CredentialsError::CredentialsNotLoaded(_) => NO_CREDENTIALS.to_owned(),
        other => {
            let to_do = NO_CREDENTIALS.split_once(": ").map_or("", |(_, t)| t);
            format!("cannot load AWS credentials ({}): {to_do}", chain(other))
        }
    }
}

fn credentials_error<'a>(
    err: &'a (dyn std::error::Error + 'static),
) -> Option<&'a CredentialsError> {
    let mut next = Some(err);
    while let Some(e) = next {
        if let Some(found) = e.downcast_ref::<CredentialsError>() {
            return Some(found);
        }
        next = e.source();
    }
    None
}

/// The error and its sources, each said once, one line.
pub fn chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = String::new();
    let mut next = Some(err);
    while let Some(e) = next {
        let part = e.to_string();
        let part = part.lines().next().unwrap_or("").trim();
        if !part.is_empty() && !text.contains(part) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(part);
        }
        next = e.source();
    }
    text
}

/// The last source of an error: the operating system's own word.
fn innermost(err: &(dyn std::error::Error + 'static)) -> String {
    let mut last = err;
    while let Some(source) = last.source() {
        last = source;
    }
    last.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Layer(&'static str, Option<Box<Layer>>);

    impl std::fmt::Display for Layer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl std::error::Error for Layer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|l| l as _)
        }
    }

    #[test]
    fn a_chain_says_each_part_once_on_one_line() {
        let err = Layer(
            "dispatch failure",
            Some(Box::new(Layer(
                "io error: refused",
                Some(Box::new(Layer("refused", None))),
            ))),
        );
        assert_eq!(chain(&err), "dispatch failure: io error: refused");
        assert_eq!(innermost(&err), "refused");
        let multi = Layer(
            "no credentials found. Attempted:\n  Environment: not set",
            None,
        );
        assert_eq!(chain(&multi), "no credentials found. Attempted:");
    }
}
