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
