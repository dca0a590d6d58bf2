//! The client of the approval function's IAM-authorised Function URL: a
//! JSON POST signed with SigV4 (service `lambda`) with the caller's own AWS
//! credentials, so that the function learns who asks from AWS itself.
//!
//! The URL comes from the registry (the waiting run records it), so it is
//! checked before anything is signed: a Lambda Function URL host
//! (`*.lambda-url.REGION.on.aws`) over https, or a loopback address (the
//! local stand-in of the tests). A signature is bound to its host, so even a
//! request sent elsewhere could not be replayed to the function.

use std::time::{Duration, SystemTime};

use aws_credential_types::provider::ProvideCredentials;
use aws_sigv4::http_request::{
    PayloadChecksumKind, SignableBody, SignableRequest, SigningSettings, sign,
};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use serde_json::Value;

use crate::source::{host_of, is_loopback_host};

/// Longest wait for the approval function's answer.
const TIMEOUT: Duration = Duration::from_secs(30);

/// The region a Function URL is in (`ID.lambda-url.REGION.on.aws`, in any
/// case), or `None` for another host.
pub fn url_region(url: &str) -> Option<String> {
    let host = host_of(url).to_ascii_lowercase();
    let rest = host.split_once(".lambda-url.")?.1;
    let region = rest.strip_suffix(".on.aws")?;
    (!region.is_empty() && !region.contains('.')).then(|| region.to_owned())
}

/// Refuses a URL the CLI does not send signed requests to. The host is
/// read as the HTTP client will connect to it, and must be the one the
/// check looked at: no user info, query or fragment (`https://evil?x.
/// lambda-url…` connects to `evil`).
pub fn check_url(url: &str) -> Result<(), String> {
    let ok = reqwest::Url::parse(url).ok().is_some_and(|parsed| {
        let host = parsed.host_str().unwrap_or("").trim_matches(['[', ']']);
        let plain = parsed.username().is_empty()
            && parsed.password().is_none()
            && parsed.query().is_none()
            && parsed.fragment().is_none()
            && !url.contains('\\')
            && host.eq_ignore_ascii_case(host_of(url));
        let https_function_url = parsed.scheme() == "https" && url_region(url).is_some();
        let loopback = matches!(parsed.scheme(), "http" | "https") && is_loopback_host(host);
        plain && (https_function_url || loopback)
    });
    if ok {
        Ok(())
    } else {
        Err(format!(
            "the registry names {url:?} as where approvals are answered, which is no Lambda \
             Function URL (https://ID.lambda-url.REGION.on.aws/): nothing was sent"
        ))
    }
}

/// POSTs `body` to the approval function at `url`, signed with `config`'s
/// credentials; its answer (status, JSON body).
pub async fn post(
    config: &aws_config::SdkConfig,
    url: &str,
    body: &Value,
) -> Result<(u16, Value), String> {
    check_url(url)?;
    // Signed as sent: the client's own reading (host in lower case).
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("{url}: {e}"))?;
    let url = parsed.as_str();
    let region = url_region(url)
        .or_else(|| config.region().map(ToString::to_string))
        .ok_or("no AWS region to sign for")?;
    let provider = config
        .credentials_provider()
        .ok_or("no AWS credentials to sign the approval with")?;
    let credentials = provider
        .provide_credentials()
        .await
        .map_err(|e| format!("no AWS credentials to sign the approval with: {e}"))?;
    let payload = body.to_string().into_bytes();
    let headers = signed_headers(url, &payload, credentials, &region, SystemTime::now())?;
    let client = reqwest::Client::builder()
        .timeout(TIMEOUT)
        .build()
        .map_err(|e| e.to_string())?;
    let mut request = client
        .post(url)
        .header("content-type", "application/json")
        .body(payload);
    for (name, value) in headers {
        request = request.header(name, value);
    }
    let response = request
        .send()
        .await
        .map_err(|e| format!("POST {url}: {e}"))?;
    let status = response.status().as_u16();
    let bytes = response
        .bytes()
        .await
        .map_err(|e| format!("POST {url}: {e}"))?;
    let value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    Ok((status, value))
}

/// The headers SigV4 adds to a JSON POST of `payload` to `url` (service
/// `lambda`): `authorization`, `x-amz-date`, `x-amz-content-sha256`
/// (Lambda takes no unsigned payload) and, for temporary credentials,
/// `x-amz-security-token`.
pub fn signed_headers(
    url: &str,
    payload: &[u8],
    credentials: aws_credential_types::Credentials,
    region: &str,
    at: SystemTime,
) -> Result<Vec<(String, String)>, String> {
    let identity: Identity = credentials.into();
    let mut settings = SigningSettings::default();
    settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name("lambda")
        .time(at)
        .settings(settings)
        .build()
        .map_err(|e| e.to_string())?
        .into();
    let signable = SignableRequest::new(
        "POST",
        url,
        [("content-type", "application/json")].into_iter(),
        SignableBody::Bytes(payload),
    )
    .map_err(|e| e.to_string())?;
    let (instructions, _) = sign(signable, &params)
        .map_err(|e| e.to_string())?
        .into_parts();
    let mut request = http::Request::builder()
        .method("POST")
        .uri(url)
        .body(())
        .map_err(|e| e.to_string())?;
    instructions.apply_to_request_http1x(&mut request);
    Ok(request
        .headers()
        .iter()
        .filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned())))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_function_urls_and_this_machine_get_a_signed_request() {
        for url in [
            "https://abc123.lambda-url.eu-west-1.on.aws/",
            "https://ABC123.LAMBDA-URL.EU-WEST-1.ON.AWS/",
            "http://127.0.0.1:8123/",
        ] {
            assert_eq!(check_url(url), Ok(()), "{url}");
        }
        for url in [
            "https://evil.example/",
            "http://abc.lambda-url.eu-west-1.on.aws/",
            "https://abc.lambda-url.eu-west-1.on.aws.evil.example/",
            "ftp://127.0.0.1/",
            // Hosts the client would read otherwise than the check.
            "https://evil.example?x.lambda-url.eu-west-1.on.aws/",
            "https://evil.example#x.lambda-url.eu-west-1.on.aws/",
            "https://evil.example\\x.lambda-url.eu-west-1.on.aws/",
            "https://x.lambda-url.eu-west-1.on.aws@evil.example/",
            "https://user@abc.lambda-url.eu-west-1.on.aws/",
            "https://abc.lambda-url.eu-west-1.on.aws/?x=1",
            "http://127.0.0.1:8123@evil.example/",
        ] {
            let err = check_url(url).unwrap_err();
            assert!(err.contains("nothing was sent"), "{url}: {err}");
        }
        assert_eq!(
            url_region("https://abc.lambda-url.eu-west-1.on.aws/").as_deref(),
            Some("eu-west-1")
        );
    }

    #[test]
    fn the_signature_covers_the_body_and_names_lambda() {
        let credentials = aws_credential_types::Credentials::new("AKID", "SECRET", None, None, "t");
        let headers = signed_headers(
            "https://abc.lambda-url.eu-west-1.on.aws/",
            b"{}",
            credentials,
            "eu-west-1",
            SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000),
        )
        .unwrap();
        let get = |name: &str| {
            headers
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
                .unwrap_or_default()
        };
        let authorization = get("authorization");
        assert!(
            authorization.starts_with(
                "AWS4-HMAC-SHA256 Credential=AKID/20270115/eu-west-1/lambda/aws4_request"
            ),
            "{authorization}"
        );
        assert!(
            authorization.contains("x-amz-content-sha256"),
            "{authorization}"
        );
        assert_eq!(get("x-amz-content-sha256"), crate::hash::sha256_hex(b"{}"));
    }
}
