//! Connecting to a stacksync: the AWS config, where its table, bucket and
//! state machine are (given on their own, or read from a deployed
//! installation's stack outputs), and its registry.

use std::collections::HashMap;

use aws_config::SdkConfig;
use stacksync::aws::{AwsOptions, check_endpoints, environment, load_config};
use stacksync::ownership::InstallationPolicy;
use stacksync::registry::{Entries, Registry, StackEntry};

use crate::Cli;
use crate::error::Result;

/// The outputs a stacksync installation stack has (template.yaml, infra/).
const TABLE_OUTPUT: &str = "RegistryTableName";
const BUCKET_OUTPUT: &str = "ArtifactBucketName";
const MACHINE_OUTPUT: &str = "StateMachineArn";
/// What the installation allows its entries (installations deployed before
/// these outputs have none: nothing is checked before the run).
const PREFIX_OUTPUT: &str = "StackNamePrefix";
const ROLES_OUTPUT: &str = "ServiceRoleArns";
const REQUIRE_OUTPUT: &str = "RequireRoleArn";
/// The installation's Guard rule source (`-`: none).
const POLICY_SOURCE_OUTPUT: &str = "PolicySource";
/// The role that reads fleets' organizational units (`-`: none).
const ORGANIZATIONS_ROLE_OUTPUT: &str = "OrganizationsRoleArn";

/// What every command but `validate` works with.
#[derive(Debug, Clone)]
pub struct Connection {
    pub config: SdkConfig,
    pub resources: Resources,
    pub registry: Registry,
}

/// Table, bucket and state machine: given on their own, else the
/// installation's outputs, else the defaults (table and bucket only).
#[derive(Debug, Clone)]
pub struct Resources {
    pub table: String,
    pub bucket: String,
    pub state_machine_arn: Option<String>,
    /// The installation's policy on stack names and service roles, where
    /// its outputs say it: `apply` and the local runner check it too.
    pub policy: Option<InstallationPolicy>,
    /// The installation's Guard rules (its output `PolicySource`, else
    /// `STACKSYNC_POLICY_SOURCE`): `diff` and the local runner check them.
    pub rules: Option<stacksync::spec::Source>,
    /// The role through which fleets' organizational units are read (its
    /// output `OrganizationsRoleArn`, else `STACKSYNC_ORGANIZATIONS_ROLE_ARN`;
    /// none: the caller's own credentials).
    pub organizations_role: Option<String>,
}

pub async fn connect(cli: &Cli) -> Result<Connection> {
    // Before any call: the SDK would take a bad endpoint and fail every call
    // with its whole request in the message (an empty one: a panic).
    check_endpoints(cli.endpoint_url.as_deref(), environment())?;
    let profile = cli
        .profile
        .clone()
        .or_else(|| std::env::var("AWS_PROFILE").ok().filter(|p| !p.is_empty()));
    if let Some(profile) = &profile {
        profile_exists(profile)?;
    }
    let config = load_config(&AwsOptions {
        region: cli.region.clone(),
        profile: cli.profile.clone(),
        endpoint_url: cli.endpoint_url.clone(),
    })
    .await;
    // Checked before any call, so that the message can say how to give one.
    if config.region().is_none() {
        return Err(
            "no AWS region: pass --region, set AWS_REGION, or set a region in your AWS profile"
                .into(),
        );
    }
    credentials_present(&config).await?;
    let resources = resolve(cli, &config).await?;
    let registry = Registry::new(aws_sdk_dynamodb::Client::new(&config), &resources.table);
    Ok(Connection {
        config,
        resources,
        registry,
    })
}

/// The entry named `name`, or an error naming the table it is missing from.
pub async fn registered(registry: &Registry, name: &str) -> Result<StackEntry> {
    registry
        .get(name)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| {
            format!(
                "no stack named {name:?} in the registry {:?}",
                registry.table()
            )
        })
}

async fn resolve(cli: &Cli, config: &SdkConfig) -> Result<Resources> {
    let mut outputs = match &cli.installation {
        Some(installation) => installation_outputs(config, installation).await?,
        None => HashMap::new(),
    };
    let policy = policy_of(&outputs)?;
    // An output cannot be empty: `-` says none.
    let rules = match outputs.remove(POLICY_SOURCE_OUTPUT) {
        Some(text) if text.trim() != "-" => Some(text),
        Some(_) => None,
        None => std::env::var("STACKSYNC_POLICY_SOURCE").ok(),
    };
    let rules = stacksync::guard::policy_source(rules.as_deref().unwrap_or_default())?;
    let organizations_role = match outputs.remove(ORGANIZATIONS_ROLE_OUTPUT) {
        Some(role) => Some(role).filter(|r| r.trim() != "-"),
        None => std::env::var(stacksync::wiring::ORGANIZATIONS_ROLE_ENV)
            .ok()
            .filter(|r| !r.is_empty()),
    };
    Ok(Resources {
        policy,
        rules,
        organizations_role,
        table: cli
            .table
            .clone()
            .or_else(|| outputs.remove(TABLE_OUTPUT))
            .unwrap_or_else(|| "stacksync".into()),
        bucket: cli
            .bucket
            .clone()
            .or_else(|| outputs.remove(BUCKET_OUTPUT))
            .unwrap_or_else(|| "stacksync-artifacts".into()),
        state_machine_arn: cli
            .state_machine_arn
            .clone()
            .or_else(|| outputs.remove(MACHINE_OUTPUT)),
    })
}

/// The installation's policy from its outputs (`*`: any stack name; `-`:
/// no service role, since an output cannot be empty), if it has them.
fn policy_of(outputs: &HashMap<String, String>) -> Result<Option<InstallationPolicy>> {
    let (Some(prefix), Some(roles), Some(require)) = (
        outputs.get(PREFIX_OUTPUT),
        outputs.get(ROLES_OUTPUT),
        outputs.get(REQUIRE_OUTPUT),
    ) else {
        return Ok(None);
    };
    Ok(Some(InstallationPolicy {
        stack_name_prefix: if prefix == "*" {
            String::new()
        } else {
            prefix.clone()
        },
        service_roles: Some(
            roles
                .split(',')
                .map(str::trim)
                .filter(|r| !r.is_empty() && *r != "-")
                .map(str::to_owned)
                .collect(),
        ),
        require_role_arn: match require.as_str() {
            "true" => true,
            "false" => false,
            other => {
                return Err(format!(
                    "the installation's output {REQUIRE_OUTPUT} is {other:?}, not true or false"
                ));
            }
        },
        // Not an output: the functions check it (a local run publishes
        // with the caller's own permissions).
        publish_path: None,
    }))
}

/// The installation stack's outputs; all three a stacksync has must be there,
/// so that a wrong stack name fails here rather than at some later call.
async fn installation_outputs(
    config: &SdkConfig,
    installation: &str,
) -> Result<HashMap<String, String>> {
    let out = aws_sdk_cloudformation::Client::new(config)
        .describe_stacks()
        .stack_name(installation)
        .send()
        .await
        .map_err(|e| {
            format!(
                "cannot read the installation stack {installation:?}: {}",
                stacksync::ports::aws_error::failure("DescribeStacks", &e)
            )
        })?;
    let stack = out
        .stacks()
        .first()
        .ok_or_else(|| format!("no stack named {installation:?}"))?;
    let mut outputs = HashMap::new();
    for output in stack.outputs() {
        if let (Some(key), Some(value)) = (output.output_key(), output.output_value()) {
            outputs.insert(key.to_owned(), value.to_owned());
        }
    }
    for key in [TABLE_OUTPUT, BUCKET_OUTPUT, MACHINE_OUTPUT] {
        if !outputs.contains_key(key) {
            return Err(format!(
                "the stack {installation:?} has no output {key}: is it a stacksync installation \
                 (template.yaml or infra/)?"
            ));
        }
    }
    Ok(outputs)
}

/// A profile named on the command line or in `AWS_PROFILE` must exist: the
/// SDK would otherwise go on to the next source of credentials and fail
/// later, and elsewhere.
fn profile_exists(profile: &str) -> Result {
    let home = std::env::var("HOME").unwrap_or_default();
    let file = |var: &str, default: &str| {
        std::env::var(var)
            .ok()
            .filter(|f| !f.is_empty())
            .unwrap_or_else(|| format!("{home}/.aws/{default}"))
    };
    let config = file("AWS_CONFIG_FILE", "config");
    let credentials = file("AWS_SHARED_CREDENTIALS_FILE", "credentials");
    let in_config = sections(&config).any(|s| {
        s.strip_prefix("profile")
            .is_some_and(|name| name.trim() == profile)
            || (s == "default" && profile == "default")
    });
    if in_config || sections(&credentials).any(|s| s == profile) {
        return Ok(());
    }
    Err(format!(
        "AWS profile {profile:?} not found in {config} or {credentials}: check --profile or \
         AWS_PROFILE (`aws configure list-profiles` lists them)"
    ))
}

/// The section names (`[name]`) of an INI file; none when it is unreadable.
fn sections(path: &str) -> impl Iterator<Item = String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| {
            let line = line.trim();
            line.strip_prefix('[')?
                .strip_suffix(']')
                .map(|s| s.trim().to_owned())
        })
        .collect::<Vec<_>>()
        .into_iter()
}

/// Credentials are looked for once, before any call, so that their absence
/// reads as such rather than as the failure of whichever call came first.
async fn credentials_present(config: &SdkConfig) -> Result {
    use aws_credential_types::provider::ProvideCredentials;
    let Some(provider) = config.credentials_provider() else {
        return Err(stacksync::ports::aws_error::NO_CREDENTIALS.into());
    };
    provider.provide_credentials().await.map(drop).map_err(|e| {
        tracing::debug!(error = ?e, "loading AWS credentials");
        stacksync::ports::aws_error::credentials_failed(&e)
    })
}
