//! The steps as Task resources of the local interpreter: `local:<function>`.
//!
//! The same handlers the Lambda functions run, called in-process; errors
//! carry the same names, so `Retry` and `Catch` behave as in Step Functions.

use std::collections::BTreeMap;

use serde_json::Value;

use super::ports::{CloudFormationFactory, SourceFetcher};
use super::run::{FinalizeInput, RunState, StepError};
use super::steps::{StepConfig, Steps};
use crate::adapters::cloudformation::SdkCloudFormationFactory;
use crate::adapters::git::GitFetcher;
use crate::adapters::s3::S3Store;
use crate::adapters::{s3_client, template_url_base};
use crate::asl::{AslError, StateMachine, TaskRunner};
use crate::registry::Registry;

/// The reconcile state machine, built in, so the CLI runs the very file
/// that is deployed.
pub const RECONCILE_ASL: &str = include_str!("../../../statemachine/reconcile.asl.json");

/// The reconcile definition, loaded for the in-process handlers.
pub fn reconcile_machine() -> Result<StateMachine, AslError> {
    StateMachine::load(RECONCILE_ASL, &local_substitutions())
}

/// The steps on the AWS SDK and gix, as the functions and the local runner use them.
///
/// `endpoint`: a local emulator's URL (path-style S3, localhost template
/// URLs, and the bucket created when missing).
pub async fn sdk_steps(
    config: &aws_config::SdkConfig,
    registry: Registry,
    bucket: &str,
    endpoint: Option<&str>,
) -> Result<Steps<SdkCloudFormationFactory, GitFetcher>, StepError> {
    let region = config.region().map(|r| r.to_string()).unwrap_or_default();
    let store = S3Store::new(s3_client(config, endpoint.is_some()), bucket);
    if endpoint.is_some() {
        store.ensure_bucket().await?;
    }
    Ok(Steps {
        registry,
        store,
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

/// The functions: (substitution in the definition, function name).
pub const FUNCTIONS: [(&str, &str); 6] = [
    ("ArtifactFetchFunctionArn", "artifact-fetch"),
    ("TemplateUploadFunctionArn", "template-upload"),
    ("ChangeSetFunctionArn", "change-set"),
    ("PollStatusFunctionArn", "poll-status"),
    ("DeleteFunctionArn", "delete"),
    ("FinalizeFunctionArn", "finalize"),
];

/// The substitutions that point every Task at the in-process handlers.
pub fn local_substitutions() -> BTreeMap<String, String> {
    FUNCTIONS
        .iter()
        .map(|(sub, name)| ((*sub).to_owned(), format!("local:{name}")))
        .collect()
}

/// Runs one step by function name on a JSON input: what a Lambda does with
/// its event, and what the local runner does for a Task state.
pub async fn run_step<F: CloudFormationFactory, S: SourceFetcher>(
    steps: &Steps<F, S>,
    function: &str,
    input: Value,
) -> Result<Value, StepError> {
    let parse = |v: Value| {
        serde_json::from_value::<RunState>(v)
            .map_err(|e| StepError::stalled(format!("{function}: bad input: {e}")))
    };
    let state = match function {
        "artifact-fetch" => steps.artifact_fetch(parse(input)?).await?,
        "template-upload" => steps.template_upload(parse(input)?).await?,
        "change-set" => steps.change_set(parse(input)?).await?,
        "poll-status" => steps.poll_status(parse(input)?).await?,
        "delete" => steps.delete(parse(input)?).await?,
        "finalize" => {
            let input: FinalizeInput = serde_json::from_value(input)
                .map_err(|e| StepError::stalled(format!("finalize: bad input: {e}")))?;
            steps.finalize(input).await?
        }
        other => return Err(StepError::stalled(format!("no function named {other}"))),
    };
    serde_json::to_value(state).map_err(|e| StepError::stalled(e.to_string()))
}

impl<F: CloudFormationFactory, S: SourceFetcher> TaskRunner for Steps<F, S> {
    async fn run(&self, resource: &str, input: Value) -> Result<Value, AslError> {
        let function = resource.strip_prefix("local:").unwrap_or(resource);
        run_step(self, function, input)
            .await
            .map_err(|e| AslError::new(e.name, e.message))
    }
}
