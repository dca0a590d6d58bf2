//! The CloudFormation port per stack: its region, and its account through
//! `assumeRoleArn`; with SSM and Secrets Manager of that account and region.

use super::SdkCloudFormation;
use crate::ports::PortResult;

/// The session tag naming the entry the calls are made for.
pub const ENTRY_SESSION_TAG: &str = "stacksync:entry";
/// The session tag naming the installation (its registry table).
pub const INSTALLATION_SESSION_TAG: &str = "stacksync:installation";

/// Builds the CloudFormation port per stack: its region, and its account
/// through `assumeRoleArn` (STS AssumeRole on top of the base credentials).
///
/// A target role is assumed with the installation's `ExternalId` (its
/// registry table's name), so that a target role's trust policy can name
/// the one installation it serves (`sts:ExternalId`), and a session named
/// after the entry and tagged with it (`stacksync:entry`,
/// `stacksync:installation`), so that CloudTrail in the target account says
/// which entry made each call and the role's policies can condition on
/// `aws:PrincipalTag/stacksync:entry`. The trust policy must allow
/// `sts:TagSession` (README "Deploying to AWS").
#[derive(Debug, Clone)]
pub struct SdkCloudFormationFactory {
    base: aws_config::SdkConfig,
    /// The installation: the `ExternalId` and the installation tag.
    installation: Option<String>,
    /// The session name of calls made for no one entry (a scheduler's or a
    /// drift pass's health checks, grouped by account and region).
    unnamed: &'static str,
}

impl SdkCloudFormationFactory {
    pub fn new(base: aws_config::SdkConfig) -> Self {
        Self {
            base,
            installation: None,
            unnamed: SCHEDULER_SESSION,
        }
    }

    /// Names the sessions of calls made for no one entry `name` (by
    /// default [`SCHEDULER_SESSION`]).
    pub fn unnamed_sessions(mut self, name: &'static str) -> Self {
        self.unnamed = name;
        self
    }

    /// Assumes target roles as the installation `installation` (its
    /// registry table): its `ExternalId` and session tag.
    pub fn for_installation(mut self, installation: impl Into<String>) -> Self {
        self.installation = Some(installation.into()).filter(|i: &String| !i.is_empty());
        self
    }
}

/// The session name of the scheduler's calls for no one entry.
pub const SCHEDULER_SESSION: &str = "stacksync-scheduler";
/// The session name of the drift function's calls for no one entry.
pub const DRIFT_SESSION: &str = "stacksync-drift";

/// An assumed role's session name for `entry` (`None`: `unnamed`): STS
/// allows 2 to 64 of `[A-Za-z0-9+=,.@_-]`, so anything else becomes `-`
/// and a longer name is cut.
pub fn session_name(entry: Option<&str>, unnamed: &str) -> String {
    let name: String = entry
        .unwrap_or(unnamed)
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "+=,.@_-".contains(c) {
                c
            } else {
                '-'
            }
        })
        .take(64)
        .collect();
    if name.len() < 2 {
        format!("stacksync-{name}")
    } else {
        name
    }
}

impl crate::ports::CloudFormationFactory for SdkCloudFormationFactory {
    type Port = SdkCloudFormation;

    async fn for_stack(
        &self,
        region: Option<&str>,
        assume_role: Option<&str>,
        entry: Option<&str>,
    ) -> PortResult<SdkCloudFormation> {
        let mut config = self.base.to_builder();
        if let Some(region) = region {
            config = config.region(aws_config::Region::new(region.to_owned()));
        }
        if let Some(role) = assume_role {
            let mut tags = Vec::new();
            if let Some(entry) = entry {
                tags.push((
                    ENTRY_SESSION_TAG,
                    entry.chars().take(256).collect::<String>(),
                ));
            }
            let mut provider = aws_config::sts::AssumeRoleProvider::builder(role)
                .session_name(session_name(entry, self.unnamed))
                .configure(&self.base);
            if let Some(installation) = &self.installation {
                tags.push((INSTALLATION_SESSION_TAG, installation.clone()));
                provider = provider.external_id(installation.clone());
            }
            if !tags.is_empty() {
                provider = provider.tags(tags);
            }
            config = config.credentials_provider(
                aws_sdk_cloudformation::config::SharedCredentialsProvider::new(
                    provider.build().await,
                ),
            );
        }
        Ok(SdkCloudFormation::new(&config.build()))
    }

    fn home_region(&self) -> Option<String> {
        self.base.region().map(|r| r.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_names_keep_to_what_sts_allows() {
        let named = |entry| session_name(entry, SCHEDULER_SESSION);
        assert_eq!(named(Some("orders-queue")), "orders-queue");
        assert_eq!(named(None), "stacksync-scheduler");
        assert_eq!(session_name(None, DRIFT_SESSION), "stacksync-drift");
        assert_eq!(named(Some("a")), "stacksync-a");
        assert_eq!(named(Some("a b/c")), "a-b-c");
        assert_eq!(named(Some(&"x".repeat(100))).len(), 64);
    }
}
