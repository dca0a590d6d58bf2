//! The composition root: the ports on AWS and Git, put together once for the
//! Lambda functions (`crate::lambda`) and the local runner (the CLI).

use crate::adapters::cloudformation::SdkCloudFormationFactory;
use crate::adapters::credentials::Credentials;
use crate::adapters::git::GitFetcher;
use crate::adapters::s3::S3Store;
use crate::adapters::s3_source::S3Archives;
use crate::adapters::sources::Sources;
use crate::adapters::{s3_client, template_url_base};
use crate::reconcile::run::StepError;
use crate::reconcile::steps::{StepConfig, Steps, With};
use crate::registry::Registry;

/// The steps on DynamoDB, S3, CloudFormation and Git.
pub type SdkSteps = Steps<With<Registry, S3Store, SdkCloudFormationFactory, Sources>>;

/// Every kind of source, on AWS: Git (secrets from Secrets Manager and SSM,
/// CodeCommit signed with `config`'s credentials) and S3 archives, with
/// scratch space in `workdir`.
pub fn sdk_sources(
    config: &aws_config::SdkConfig,
    emulator: bool,
    workdir: &std::path::Path,
) -> Sources {
    sources_with(config, emulator, workdir, sdk_credentials(config))
}

/// The sources' credentials on AWS (Secrets Manager, SSM; CodeCommit
/// signed with `config`'s keys), one cache for whoever shares them.
fn sdk_credentials(config: &aws_config::SdkConfig) -> std::sync::Arc<Credentials> {
    std::sync::Arc::new(
        Credentials::aws(config)
            .with_codecommit_endpoint(std::env::var("STACKSYNC_CODECOMMIT_ENDPOINT").ok()),
    )
}

/// [`sdk_sources`] with `credentials`.
fn sources_with(
    config: &aws_config::SdkConfig,
    emulator: bool,
    workdir: &std::path::Path,
    credentials: std::sync::Arc<Credentials>,
) -> Sources {
    Sources {
        git: GitFetcher::new(workdir.join("git")).with_credentials(credentials),
        s3: Some(S3Archives::new(
            s3_client(config, emulator),
            workdir.join("s3"),
        )),
    }
}

/// The steps on the AWS SDK and gix, as the functions and the local runner
/// use them. `endpoint`: a local emulator's URL (path-style S3, localhost
/// template URLs, and the bucket created when missing).
pub async fn sdk_steps(
    config: &aws_config::SdkConfig,
    registry: Registry,
    bucket: &str,
    endpoint: Option<&str>,
    local: bool,
) -> Result<SdkSteps, StepError> {
    let region = config.region().map(|r| r.to_string()).unwrap_or_default();
    let installation = registry.table().to_owned();
    let blobs = S3Store::new(s3_client(config, endpoint.is_some()), bucket);
    if endpoint.is_some() {
        blobs.ensure_bucket().await?;
    }
    Ok(Steps {
        registry,
        blobs,
        cloudformation: SdkCloudFormationFactory::new(config.clone())
            .for_installation(installation.clone()),
        sources: sdk_sources(
            config,
            endpoint.is_some(),
            &std::env::temp_dir().join("stacksync"),
        ),
        notices: crate::ports::Notifier::none(),
        rule_cache: Default::default(),
        // A deployed function sets who answers parked runs (`crate::lambda`).
        wakes: crate::ports::Wakes::none(),
        starter: crate::ports::RunStarter::none(),
        config: StepConfig {
            answer_url: None,
            stack_events: None,
            windows: Vec::new(),
            clock: Default::default(),
            // A deployed function sets its installation's (`crate::lambda`).
            max_runs_per_account: Some(crate::registry::slots::DEFAULT_MAX_RUNS_PER_ACCOUNT),
            home_region: Some(region.clone()).filter(|r| !r.is_empty()),
            rules: None,
            local,
            installation,
            // A deployed function sets its installation's (`crate::lambda`).
            policy: Default::default(),
            bucket: bucket.to_owned(),
            template_url_base: template_url_base(
                bucket,
                &region,
                endpoint,
                std::env::var("STACKSYNC_TEMPLATE_URL_BASE").ok().as_deref(),
            ),
        },
    })
}

/// Notices on the EventBridge bus `bus` (a name or ARN; `default`: the
/// account's), or none when `bus` is empty or `none`.
pub fn event_bus(config: &aws_config::SdkConfig, bus: &str) -> crate::ports::Notifier {
    let bus = bus.trim();
    if bus.is_empty() || bus == "none" {
        return crate::ports::Notifier::none();
    }
    crate::ports::Notifier::to(std::sync::Arc::new(
        crate::adapters::eventbridge::EventBus::new(aws_sdk_eventbridge::Client::new(config), bus),
    ))
}

/// The review of pull requests on the AWS SDK, gix and the Git hosts'
/// APIs: one credentials cache for the sources and the hosts.
pub type SdkReviewer = crate::reconcile::review::Reviewer<
    Registry,
    crate::adapters::sources::Sources,
    SdkCloudFormationFactory,
    S3Store,
    crate::adapters::git_host::GitHosts,
>;

/// The registry sources of a pull request's base branch, planned at its
/// head as the applier plans them (`triggers::registry_source`), written
/// nowhere.
pub struct SdkStacksFiles {
    registry: Registry,
    sources: Sources,
    installation: crate::triggers::registry_source::Installation,
}

impl std::fmt::Debug for SdkStacksFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SdkStacksFiles")
            .field("installation", &self.installation.name)
            .finish_non_exhaustive()
    }
}

impl crate::ports::stacks_files::StacksFilesPlanner for SdkStacksFiles {
    fn locations<'a>(
        &'a self,
        pr: &'a crate::pull_request::PullRequest,
    ) -> crate::ports::stacks_files::Planned<'a, Vec<crate::ports::SourceLocation>> {
        Box::pin(async move {
            use crate::registry::RegistrySources;
            let keys = pr.base_keys();
            Ok(self
                .registry
                .registry_sources()
                .await
                .map_err(|e| e.to_string())?
                .into_iter()
                .filter(|s| keys.contains(&s.spec.key()))
                .map(|s| crate::ports::SourceLocation {
                    url: s.spec.url.clone(),
                    credentials: s.spec.credentials_secret.clone(),
                })
                .collect())
        })
    }

    fn plan<'a>(
        &'a self,
        pr: &'a crate::pull_request::PullRequest,
        head: &'a str,
    ) -> crate::ports::stacks_files::Planned<'a, Vec<crate::pull_request::StacksFiles>> {
        Box::pin(crate::triggers::registry_source::stacks_files_at(
            &self.registry,
            &self.sources,
            &self.installation,
            pr,
            head,
        ))
    }
}

/// The preview function's reviewer (and a test's): the installation's
/// registry, bucket and template URLs, and what it allows its entries
/// (`policy`: its registry sources' commits are checked against it);
/// `endpoint`: a local emulator.
pub fn sdk_reviewer(
    config: &aws_config::SdkConfig,
    registry: Registry,
    bucket: &str,
    endpoint: Option<&str>,
    policy: crate::ownership::InstallationPolicy,
) -> SdkReviewer {
    let region = config.region().map(|r| r.to_string()).unwrap_or_default();
    let installation = registry.table().to_owned();
    // One credentials cache for the sources and the hosts' APIs.
    let credentials = sdk_credentials(config);
    let workdir = std::env::temp_dir().join("stacksync");
    let sources = sources_with(config, endpoint.is_some(), &workdir, credentials.clone());
    let planner = SdkStacksFiles {
        registry: registry.clone(),
        sources: sources.clone(),
        installation: crate::triggers::registry_source::Installation {
            name: installation.clone(),
            home: registry.region(),
            policy,
        },
    };
    crate::reconcile::review::Reviewer {
        stacks_files: Some(std::sync::Arc::new(planner)),
        registry,
        sources,
        cloudformation: SdkCloudFormationFactory::new(config.clone())
            .for_installation(installation.clone()),
        blobs: S3Store::new(s3_client(config, endpoint.is_some()), bucket),
        hosts: crate::adapters::git_host::GitHosts::new(credentials),
        config: crate::reconcile::review::ReviewConfig {
            installation,
            bucket: bucket.to_owned(),
            template_url_base: template_url_base(
                bucket,
                &region,
                endpoint,
                std::env::var("STACKSYNC_TEMPLATE_URL_BASE").ok().as_deref(),
            ),
            waiting: if endpoint.is_some() {
                crate::reconcile::diff::Waiting {
                    poll: std::time::Duration::from_millis(200),
                    deadline: std::time::Duration::from_secs(120),
                }
            } else {
                crate::reconcile::review::DEFAULT_WAITING
            },
            per_account: 4,
            rules: None,
        },
    }
}

/// The environment variable (and the installation's output
/// `OrganizationsRoleArn`) naming the role through which fleets'
/// organizational units are read; none: the caller's own credentials.
pub const ORGANIZATIONS_ROLE_ENV: &str = "STACKSYNC_ORGANIZATIONS_ROLE_ARN";

/// AWS Organizations, read through `role` when given (a role in the
/// management account, or in a delegated administrator's), else with
/// `config`'s own credentials.
pub async fn organizations(
    config: &aws_config::SdkConfig,
    role: Option<&str>,
) -> crate::adapters::organizations::SdkOrganizations {
    let mut builder = aws_sdk_organizations::config::Builder::from(config);
    if let Some(role) = role.filter(|r| !r.is_empty() && *r != "-") {
        let provider = aws_config::sts::AssumeRoleProvider::builder(role)
            .session_name("stacksync-organizations")
            .configure(config)
            .build()
            .await;
        builder = builder.credentials_provider(
            aws_sdk_organizations::config::SharedCredentialsProvider::new(provider),
        );
    }
    crate::adapters::organizations::SdkOrganizations::new(aws_sdk_organizations::Client::from_conf(
        builder.build(),
    ))
}
