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

/// Loads the SDK configuration once, for every client to share.
pub async fn load_config(options: &AwsOptions) -> SdkConfig {
    let mut loader = aws_config::defaults(BehaviorVersion::latest());
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
