//! The composition root: the ports on AWS and Git, put together once for the
//! Lambda functions (`crate::lambda`) and the local runner (the CLI).

use crate::adapters::cloudformation::SdkCloudFormationFactory;
use crate::adapters::git::GitFetcher;
use crate::adapters::s3::S3Store;
use crate::adapters::{s3_client, template_url_base};
use crate::reconcile::run::StepError;
use crate::reconcile::steps::{StepConfig, Steps};
use crate::registry::Registry;

/// The steps on DynamoDB, S3, CloudFormation and Git.
pub type SdkSteps = Steps<Registry, S3Store, SdkCloudFormationFactory, GitFetcher>;

/// The steps on the AWS SDK and gix, as the functions and the local runner
/// use them. `endpoint`: a local emulator's URL (path-style S3, localhost
/// template URLs, and the bucket created when missing).
pub async fn sdk_steps(
    config: &aws_config::SdkConfig,
    registry: Registry,
    bucket: &str,
    endpoint: Option<&str>,
) -> Result<SdkSteps, StepError> {
    let region = config.region().map(|r| r.to_string()).unwrap_or_default();
    let blobs = S3Store::new(s3_client(config, endpoint.is_some()), bucket);
    if endpoint.is_some() {
        blobs.ensure_bucket().await?;
    }
    Ok(Steps {
        registry,
        blobs,
        cloudformation: SdkCloudFormationFactory::new(config.clone()),
        sources: GitFetcher::new(std::env::temp_dir().join("stacksync-git")),
        config: StepConfig {
            template_url_base: template_url_base(
                bucket,
                &region,
                endpoint,
                std::env::var("STACKSYNC_TEMPLATE_URL_BASE").ok().as_deref(),
            ),
        },
    })
}
