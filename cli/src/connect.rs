//! Connecting to a stacksync: the AWS config, where its table, bucket and
//! state machine are (given on their own, or read from a deployed
//! installation's stack outputs), and its registry.

use std::collections::HashMap;

use aws_config::SdkConfig;
use aws_smithy_types::error::display::DisplayErrorContext;
use stacksync::aws::{AwsOptions, load_config};
use stacksync::registry::{Entries, Registry, StackEntry};

use crate::Cli;
use crate::error::Result;

/// The outputs a stacksync installation stack has (template.yaml, infra/).
const TABLE_OUTPUT: &str = "RegistryTableName";
const BUCKET_OUTPUT: &str = "ArtifactBucketName";
const MACHINE_OUTPUT: &str = "StateMachineArn";

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
}

pub async fn connect(cli: &Cli) -> Result<Connection> {
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
    Ok(Resources {
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
                DisplayErrorContext(&e)
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
