//! SDK configuration from the standard chain, with the overrides the CLI offers.

use aws_config::{BehaviorVersion, Region, SdkConfig};

/// Overrides on top of the standard chain (environment, profile, IMDS).
#[derive(Debug, Clone, Default)]
pub struct AwsOptions {
    /// Region; otherwise `AWS_REGION` / the profile's region.
    pub region: Option<String>,
    /// Named profile; otherwise `AWS_PROFILE` / `default`.
    pub profile: Option<String>,
    /// Endpoint for every service (a local emulator); otherwise `AWS_ENDPOINT_URL`.
    pub endpoint_url: Option<String>,
}

/// How long an AWS call may take: to connect, per attempt, and in all
/// (attempts and the backoff between them). A service that stops answering
/// costs a step at most `OPERATION`, well under the functions' timeout,
/// instead of holding it until Lambda ends it.
pub mod timeouts {
    use std::time::Duration;

    pub const CONNECT: Duration = Duration::from_secs(5);
    pub const ATTEMPT: Duration = Duration::from_secs(30);
    pub const OPERATION: Duration = Duration::from_secs(100);
}

/// The SDK's timeouts, from [`timeouts`].
pub fn timeout_config() -> aws_config::timeout::TimeoutConfig {
    aws_config::timeout::TimeoutConfig::builder()
        .connect_timeout(timeouts::CONNECT)
        .operation_attempt_timeout(timeouts::ATTEMPT)
        .operation_timeout(timeouts::OPERATION)
        .build()
}

/// Where the SDK takes an endpoint from the environment: `AWS_ENDPOINT_URL`,
/// and `AWS_ENDPOINT_URL_<SERVICE>` for one service.
const ENDPOINT_ENV: &str = "AWS_ENDPOINT_URL";

/// Refuses an endpoint the SDK cannot send to: anything but an absolute
/// `http://` or `https://` URL with a host. `source` says where it was
/// given (`--endpoint-url`, `AWS_ENDPOINT_URL`…), for the message. The SDK
/// would take it, and fail every call with its whole request in the
/// message (an empty one: panic).
pub fn check_endpoint_url(source: &str, url: &str) -> Result<(), String> {
    let ok = url == url.trim()
        && reqwest::Url::parse(url).is_ok_and(|u| {
            matches!(u.scheme(), "http" | "https") && u.host_str().is_some_and(|h| !h.is_empty())
        });
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{source} {url:?} is not a URL: it needs a scheme (http:// or https://) and a host, \
             like http://127.0.0.1:5000"
        ))
    }
}

/// Checks every endpoint the SDK would use ([`check_endpoint_url`]): `flag`
/// (the CLI's `--endpoint-url`) if given, which the SDK takes over any
/// other; else those `env` sets (`AWS_ENDPOINT_URL`,
/// `AWS_ENDPOINT_URL_<SERVICE>`), unless `AWS_IGNORE_CONFIGURED_ENDPOINT_URLS`
/// is `true`.
pub fn check_endpoints(
    flag: Option<&str>,
    env: impl IntoIterator<Item = (String, String)>,
) -> Result<(), String> {
    if let Some(url) = flag {
        return check_endpoint_url("--endpoint-url", url);
    }
    let mut endpoints: Vec<(String, String)> = Vec::new();
    let mut ignored = false;
    for (name, value) in env {
        if name == "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS" {
            ignored = value.trim().eq_ignore_ascii_case("true");
        } else if name == ENDPOINT_ENV
            || name
                .strip_prefix(ENDPOINT_ENV)
                .is_some_and(|rest| rest.starts_with('_'))
        {
            endpoints.push((name, value));
        }
    }
    if ignored {
        return Ok(());
    }
    endpoints.sort();
    endpoints
        .iter()
        .try_for_each(|(name, url)| check_endpoint_url(name, url))
}

/// The process's environment, for [`check_endpoints`]: names and values
/// that are not UTF-8 read lossily (so refused, where they are endpoints).
pub fn environment() -> impl Iterator<Item = (String, String)> {
    std::env::vars_os().map(|(name, value)| {
        (
            name.to_string_lossy().into_owned(),
            value.to_string_lossy().into_owned(),
        )
    })
}

/// Loads the SDK configuration once, for every client to share.
pub async fn load_config(options: &AwsOptions) -> SdkConfig {
    let mut loader =
        aws_config::defaults(BehaviorVersion::latest()).timeout_config(timeout_config());
    if let Some(region) = &options.region {
        loader = loader.region(Region::new(region.clone()));
    }
    if let Some(profile) = &options.profile {
        loader = loader.profile_name(profile);
    }
    if let Some(endpoint) = &options.endpoint_url {
        loader = loader.endpoint_url(endpoint);
    }
    loader.load().await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> Vec<(String, String)> {
        vars.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn endpoints_are_absolute_http_urls_with_a_host() {
        for good in [
            "http://127.0.0.1:5000",
            "https://dynamodb.us-east-1.amazonaws.com",
            "http://localhost:4566/",
            "http://[::1]:5000",
        ] {
            assert_eq!(check_endpoint_url("--endpoint-url", good), Ok(()), "{good}");
        }
        for bad in [
            "notaurl",
            "localhost:5000",
            "127.0.0.1:5000",
            "ftp://127.0.0.1",
            "http://",
            "file:///tmp/x",
            " http://127.0.0.1:5000",
            "",
        ] {
            assert_eq!(
                check_endpoint_url("--endpoint-url", bad),
                Err(format!(
                    "--endpoint-url {bad:?} is not a URL: it needs a scheme (http:// or \
                     https://) and a host, like http://127.0.0.1:5000"
                )),
                "{bad}"
            );
        }
    }

    #[test]
    fn the_flag_is_checked_alone_else_every_endpoint_variable() {
        let bad_env = env(&[("AWS_ENDPOINT_URL_DYNAMODB", "notaurl")]);
        // The SDK takes the flag over the environment.
        assert_eq!(
            check_endpoints(Some("http://127.0.0.1:5000"), bad_env.clone()),
            Ok(())
        );
        let err = check_endpoints(None, bad_env).unwrap_err();
        assert!(
            err.starts_with("AWS_ENDPOINT_URL_DYNAMODB \"notaurl\""),
            "{err}"
        );
        let err = check_endpoints(None, env(&[("AWS_ENDPOINT_URL", "")])).unwrap_err();
        assert!(err.starts_with("AWS_ENDPOINT_URL \"\""), "{err}");
        assert_eq!(
            check_endpoints(
                None,
                env(&[
                    ("AWS_ENDPOINT_URL", "http://127.0.0.1:5000"),
                    ("AWS_ENDPOINT_URLS", "not one of them"),
                    ("AWS_REGION", "us-east-1"),
                ])
            ),
            Ok(())
        );
        assert_eq!(
            check_endpoints(
                None,
                env(&[
                    ("AWS_ENDPOINT_URL", "notaurl"),
                    ("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true"),
                ])
            ),
            Ok(())
        );
        assert!(check_endpoints(Some("notaurl"), env(&[])).is_err());
    }
}
