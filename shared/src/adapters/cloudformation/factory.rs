//! The CloudFormation port per stack: its region, and its account through
//! `assumeRoleArn`; with SSM and Secrets Manager of that account and region.

use super::SdkCloudFormation;
use crate::ports::PortResult;

/// Builds the CloudFormation port per stack: its region, and its account
/// through `assumeRoleArn` (STS AssumeRole on top of the base credentials).
#[derive(Debug, Clone)]
pub struct SdkCloudFormationFactory {
    base: aws_config::SdkConfig,
}

impl SdkCloudFormationFactory {
    pub fn new(base: aws_config::SdkConfig) -> Self {
        Self { base }
    }
}

impl crate::ports::CloudFormationFactory for SdkCloudFormationFactory {
    type Port = SdkCloudFormation;

    async fn for_stack(
        &self,
        region: Option<&str>,
        assume_role: Option<&str>,
    ) -> PortResult<SdkCloudFormation> {
        let mut config = self.base.to_builder();
        if let Some(region) = region {
            config = config.region(aws_config::Region::new(region.to_owned()));
        }
        if let Some(role) = assume_role {
            let provider = aws_config::sts::AssumeRoleProvider::builder(role)
                .session_name("stacksync")
                .configure(&self.base)
                .build()
                .await;
            config = config.credentials_provider(
                aws_sdk_cloudformation::config::SharedCredentialsProvider::new(provider),
            );
        }
        Ok(SdkCloudFormation::new(&config.build()))
    }

    fn home_region(&self) -> Option<String> {
        self.base.region().map(|r| r.to_string())
    }
}
