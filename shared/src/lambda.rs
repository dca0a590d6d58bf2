//! The glue every function shares: configuration read once, clients built
//! once, and failures turned into Lambda errors whose `errorType` is a
//! stable name: a step's is the one the state machine's `Retry` and `Catch`
//! match ([`crate::reconcile::run::error_names`]), a trigger's one of
//! [`error_types`], which alarms and log filters can match. None is ever a
//! Rust type's name (what the runtime reports of a boxed error).

use std::future::Future;

use lambda_runtime::{Diagnostic, LambdaEvent, service_fn};
use serde_json::{Value, json};

use crate::adapters::secrets::{SecretLocation, Secrets};
use crate::adapters::stepfunctions::Executions;
use crate::aws::{AwsOptions, check_endpoints, environment, load_config};
use crate::reconcile::run::StepError;
use crate::reconcile::steps::StepName;
use crate::registry::Registry;
use crate::wiring::sdk_steps;

mod errors;
mod preview;
mod settings;

pub use errors::{FunctionError, error_types};
use errors::{drift_answer, events_answer, invocation, scheduler_answer};
pub use preview::serve_preview;
use settings::{installation_policy, max_runs_per_account, stack_events};

/// A required environment variable, or an error that names it.
fn required(name: &str) -> Result<String, lambda_runtime::Error> {
    std::env::var(name)
        .ok()
        .filter(|v| !v.is_empty())
        .ok_or_else(|| format!("the environment variable {name} is not set").into())
}

fn diagnostic(e: StepError) -> Diagnostic {
    Diagnostic {
        error_type: e.name(),
        error_message: e.message().to_owned(),
    }
}

/// Runs the Lambda function of one step: the whole `main` of a step's binary.
///
/// Environment: `STACKSYNC_TABLE`, `STACKSYNC_BUCKET` (required);
/// `AWS_ENDPOINT_URL` (a local emulator), `STACKSYNC_TEMPLATE_URL_BASE`,
/// `STACKSYNC_LOG`, and the installation's policy
/// (`STACKSYNC_STACK_NAME_PREFIX`, `STACKSYNC_SERVICE_ROLE_ARNS`,
/// `STACKSYNC_REQUIRE_ROLE_ARN`), its sync windows (`STACKSYNC_WINDOWS`),
/// its runs at once per account and region
/// (`STACKSYNC_MAX_RUNS_PER_ACCOUNT`) (optional).
///
/// Not `async` on purpose: the runtime is built and driven here, so the whole
/// future is compiled once, in this crate. An `async fn` awaited from each
/// binary's `#[tokio::main]` made every release build of every binary compile
/// the SDK's code paths again (about 10 minutes per binary on 2 cores).
pub fn serve_step(step: StepName) -> Result<(), lambda_runtime::Error> {
    block_on(serve(step))
}

/// Drives one function's `main` future on a multi-threaded runtime.
fn block_on(
    main: impl std::future::Future<Output = Result<(), lambda_runtime::Error>>,
) -> Result<(), lambda_runtime::Error> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(main)
}

/// What every trigger function starts from: logs on, the AWS configuration,
/// the registry (`STACKSYNC_TABLE`) and the state machine's executions
/// (`STACKSYNC_STATE_MACHINE_ARN`).
async fn trigger_parts()
-> Result<(aws_config::SdkConfig, Registry, Executions), lambda_runtime::Error> {
    init_logs();
    let table = required("STACKSYNC_TABLE")?;
    let machine = required("STACKSYNC_STATE_MACHINE_ARN")?;
    let config = aws_config().await?;
    let registry = Registry::new(aws_sdk_dynamodb::Client::new(&config), table);
    let executions = Executions::new(aws_sdk_sfn::Client::new(&config), machine);
    Ok((config, registry, executions))
}

/// The AWS configuration, its endpoints checked first (`AWS_ENDPOINT_URL`:
/// a local emulator): a bad one fails the start in one line, not every call
/// with the SDK's request in the message.
async fn aws_config() -> Result<aws_config::SdkConfig, lambda_runtime::Error> {
    check_endpoints(None, environment())?;
    Ok(load_config(&AwsOptions::default()).await)
}

fn init_logs() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("STACKSYNC_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .without_time()
        .with_ansi(false)
        .init();
}

async fn serve(step: StepName) -> Result<(), lambda_runtime::Error> {
    init_logs();
    let table = required("STACKSYNC_TABLE")?;
    let bucket = required("STACKSYNC_BUCKET")?;
    let endpoint = std::env::var("AWS_ENDPOINT_URL")
        .ok()
        .filter(|e| !e.is_empty());
    let config = aws_config().await?;
    let registry = Registry::new(aws_sdk_dynamodb::Client::new(&config), table);
    // A deployed function: unauthenticated transports need `insecure`.
    let mut steps = sdk_steps(&config, registry, &bucket, endpoint.as_deref(), false)
        .await
        .map_err(|e| e.to_string())?;
    steps.config.policy = installation_policy()?;
    // `SyncWindows`: when runs may change stacks.
    steps.config.windows = crate::window::installation_windows(
        &std::env::var("STACKSYNC_WINDOWS").unwrap_or_default(),
        crate::clock::now_millis(),
    )?;
    // `MaxRunsPerAccount`: runs at once per account and region.
    steps.config.max_runs_per_account = Some(max_runs_per_account(
        std::env::var("STACKSYNC_MAX_RUNS_PER_ACCOUNT")
            .ok()
            .as_deref(),
    )?);
    // `PolicySource`: the installation's Guard rules.
    steps.config.rules =
        crate::guard::policy_source(&std::env::var("STACKSYNC_POLICY_SOURCE").unwrap_or_default())?;
    // Where this installation's approvals are answered (the approval
    // function's IAM-authorised URL), recorded with each wait.
    steps.config.answer_url = std::env::var("STACKSYNC_ANSWER_URL")
        .ok()
        .filter(|u| !u.is_empty());
    // `EventBusName`: where the runs' events go (`none`: nowhere).
    steps.notices = crate::wiring::event_bus(
        &config,
        &std::env::var("STACKSYNC_EVENT_BUS").unwrap_or_default(),
    );
    // The events function wakes runs parked on this region's stacks;
    // poll-status parks them and answers its own token when done waiting.
    steps.config.stack_events = stack_events(&config);
    if step == StepName::PollStatus {
        steps.wakes = crate::ports::Wakes::by(std::sync::Arc::new(
            crate::adapters::stepfunctions::StepFunctionsTokens::new(aws_sdk_sfn::Client::new(
                &config,
            )),
        ));
    }
    // The steps that end runs `Ready` (but for change-set's rare in-sync
    // ends, whose dependents the scheduler starts) start the dependents they
    // make due, on the machine their own execution runs on.
    if matches!(step, StepName::TemplateUpload | StepName::PollStatus) {
        steps.starter = crate::ports::RunStarter::by(std::sync::Arc::new(
            crate::adapters::stepfunctions::MachineStarter::new(aws_sdk_sfn::Client::new(&config)),
        ));
    }
    let steps = &steps;
    serve_invocations(move |event| async move {
        steps.run(step, event.payload).await.map_err(diagnostic)
    })
    .await
}

/// Runs the webhook function (behind a Lambda Function URL).
///
/// Environment: `STACKSYNC_TABLE`, `STACKSYNC_STATE_MACHINE_ARN`, and the
/// secret's place: `STACKSYNC_WEBHOOK_SECRET_ARN` (Secrets Manager) or
/// `STACKSYNC_WEBHOOK_SECRET_PARAMETER` (SSM SecureString).
pub fn serve_webhook() -> Result<(), lambda_runtime::Error> {
    block_on(webhook())
}

async fn webhook() -> Result<(), lambda_runtime::Error> {
    use crate::triggers::webhook::handler::{Webhook, function_url_request, function_url_response};
    let (config, registry, starter) = trigger_parts().await?;
    let location = match (
        required("STACKSYNC_WEBHOOK_SECRET_ARN"),
        required("STACKSYNC_WEBHOOK_SECRET_PARAMETER"),
    ) {
        (Ok(arn), _) => SecretLocation::SecretsManager(arn),
        (_, Ok(name)) => SecretLocation::Parameter(name),
        _ => {
            // Fail closed: with no secret, every delivery is refused (401).
            tracing::warn!(
                "no webhook secret configured (STACKSYNC_WEBHOOK_SECRET_ARN or \
                 STACKSYNC_WEBHOOK_SECRET_PARAMETER): every delivery is refused"
            );
            SecretLocation::Fixed(Vec::new())
        }
    };
    let relay = crate::triggers::webhook::handler::Relay {
        bus: crate::wiring::event_bus(
            &config,
            &std::env::var("STACKSYNC_EVENT_BUS").unwrap_or_default(),
        ),
        installation: registry.table().to_owned(),
        preview_forks: std::env::var("STACKSYNC_PREVIEW_FORKS")
            .is_ok_and(|v| v.trim().eq_ignore_ascii_case("true")),
    };
    // `STACKSYNC_DELIVERY_QUEUE_URL`: deliveries are queued and answered at
    // once; this function consumes the queue too.
    let queue = match std::env::var("STACKSYNC_DELIVERY_QUEUE_URL") {
        Ok(url) if !url.trim().is_empty() => crate::ports::DeliveryQueue::to(std::sync::Arc::new(
            crate::adapters::sqs::SqsQueue::new(aws_sdk_sqs::Client::new(&config), url.trim()),
        )),
        _ => crate::ports::DeliveryQueue::default(),
    };
    let webhook = Webhook {
        queue,
        registry,
        starter,
        secrets: Secrets::new(location, &config),
        registry_sources: Some(relay),
    };
    let webhook = &webhook;
    serve_invocations(move |event| async move {
        if let Some(records) = sqs_records(&event.payload) {
            return Ok::<Value, FunctionError>(consume_batch(webhook, records).await);
        }
        let response = match function_url_request(&event.payload) {
            Ok((headers, body)) => {
                webhook
                    .handle(&headers, &body, crate::clock::now_millis())
                    .await
            }
            Err(response) => response,
        };
        Ok::<Value, FunctionError>(function_url_response(&response))
    })
    .await
}

/// The registry sources as a trigger applies them: the registry, every
/// kind of source, the event bus (`STACKSYNC_EVENT_BUS`) and the
/// installation's policy.
fn registry_source_applier(
    config: &aws_config::SdkConfig,
    registry: &crate::registry::Registry,
) -> Result<
    crate::triggers::registry_source::PushApplier<
        crate::registry::Registry,
        crate::adapters::sources::Sources,
    >,
    lambda_runtime::Error,
> {
    Ok(crate::triggers::registry_source::PushApplier {
        registry: registry.clone(),
        sources: crate::wiring::sdk_sources(
            config,
            std::env::var("AWS_ENDPOINT_URL").is_ok_and(|e| !e.is_empty()),
            &std::env::temp_dir().join("stacksync"),
        ),
        notices: crate::wiring::event_bus(
            config,
            &std::env::var("STACKSYNC_EVENT_BUS").unwrap_or_default(),
        ),
        installation: registry_installation(registry)?,
    })
}

/// What registry sources are applied under: the table, its region, the
/// installation's policy.
fn registry_installation(
    registry: &crate::registry::Registry,
) -> Result<crate::triggers::registry_source::Installation, lambda_runtime::Error> {
    Ok(crate::triggers::registry_source::Installation {
        name: registry.table().to_owned(),
        home: registry.region(),
        policy: installation_policy()?,
    })
}

/// The installation's first registry source, named by its parameters
/// (`STACKSYNC_REGISTRY_SOURCE_URL`, `_REF`, `_PATH`, `_CREDENTIALS`;
/// `_NAME`, default `installation`): registered at the scheduler's cold
/// start if it is not yet (a read; a write only the first time), so that
/// deploying the installation is the last command anyone runs by hand.
async fn bootstrap_registry_source(
    registry: &crate::registry::Registry,
) -> Result<(), lambda_runtime::Error> {
    let Some(spec) = crate::registry_source::bootstrap_spec(|name| std::env::var(name).ok())?
    else {
        return Ok(());
    };
    crate::triggers::registry_source::bootstrap(registry, &spec).await?;
    Ok(())
}

/// Runs the scheduler function (on an EventBridge schedule).
///
/// Environment: `STACKSYNC_TABLE`, `STACKSYNC_STATE_MACHINE_ARN`;
/// `STACKSYNC_MAX_STARTS` (optional, default 50); `STACKSYNC_SCHEDULE`
/// (optional: the schedule expression it runs on, for the interval warning);
/// `STACKSYNC_ORGANIZATIONS_ROLE_ARN` (optional: the role fleets' units are
/// read through; else the function's own).
pub fn serve_scheduler() -> Result<(), lambda_runtime::Error> {
    block_on(scheduler())
}

async fn scheduler() -> Result<(), lambda_runtime::Error> {
    use crate::triggers::scheduler::{Config, Scheduler, health::schedule_period};
    let (aws, registry, starter) = trigger_parts().await?;
    let mut config = Config::default();
    if let Ok(text) = required("STACKSYNC_MAX_STARTS") {
        config.max_starts = text.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
            format!("STACKSYNC_MAX_STARTS must be a whole number above 0, not {text:?}")
        })?;
    }
    config.period = required("STACKSYNC_SCHEDULE")
        .ok()
        .and_then(|e| schedule_period(&e));
    config.notices = crate::wiring::event_bus(
        &aws,
        &std::env::var("STACKSYNC_EVENT_BUS").unwrap_or_default(),
    );
    config.installation = registry_installation(&registry)?;
    // Fleets' units, through the installation's Organizations role if any.
    let role = std::env::var(crate::wiring::ORGANIZATIONS_ROLE_ENV).ok();
    config.organizations = Some(std::sync::Arc::new(
        crate::wiring::organizations(&aws, role.as_deref()).await,
    ));
    bootstrap_registry_source(&registry).await?;
    let installation = registry.table().to_owned();
    let scheduler = Scheduler {
        registry,
        starter,
        sources: crate::wiring::sdk_sources(
            &aws,
            std::env::var("AWS_ENDPOINT_URL").is_ok_and(|e| !e.is_empty()),
            &std::env::temp_dir().join("stacksync"),
        ),
        cloudformation: crate::adapters::cloudformation::SdkCloudFormationFactory::new(aws)
            .for_installation(installation),
        config,
    };
    let scheduler = &scheduler;
    serve_invocations(move |_event| async move {
        scheduler_answer(scheduler.run(crate::clock::now_millis()).await)
    })
    .await
}

/// Runs the drift function (on the scheduler's EventBridge schedule).
///
/// Environment: `STACKSYNC_TABLE`; `STACKSYNC_MAX_DETECTIONS` (optional,
/// default 10); `STACKSYNC_EVENT_BUS` (where drift notices go; `none`:
/// nowhere).
pub fn serve_drift() -> Result<(), lambda_runtime::Error> {
    block_on(drift())
}

async fn drift() -> Result<(), lambda_runtime::Error> {
    use crate::triggers::drift::{Config, DriftPass};
    init_logs();
    let table = required("STACKSYNC_TABLE")?;
    let aws = aws_config().await?;
    let registry = Registry::new(aws_sdk_dynamodb::Client::new(&aws), table);
    let mut config = Config::default();
    if let Ok(text) = required("STACKSYNC_MAX_DETECTIONS") {
        config.max_detections = text.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
            format!("STACKSYNC_MAX_DETECTIONS must be a whole number above 0, not {text:?}")
        })?;
    }
    config.installation = registry.table().to_owned();
    // Drift notices, as the runs' (`EventBusName`; `none`: nowhere).
    config.notices = crate::wiring::event_bus(
        &aws,
        &std::env::var("STACKSYNC_EVENT_BUS").unwrap_or_default(),
    );
    let pass = DriftPass {
        registry,
        cloudformation: crate::adapters::cloudformation::SdkCloudFormationFactory::new(aws)
            .for_installation(config.installation.clone())
            .unnamed_sessions(crate::adapters::cloudformation::DRIFT_SESSION),
        config,
    };
    let pass = &pass;
    serve_invocations(move |_event| async move {
        drift_answer(pass.run(crate::clock::now_millis()).await)
    })
    .await
}

/// Runs the approval function (behind an IAM-authorised Function URL).
///
/// Environment: `STACKSYNC_TABLE`, `STACKSYNC_BUCKET`; `STACKSYNC_APPROVERS`
/// (the installation's `Approvers`: IAM principal ARN patterns,
/// comma-separated; optional).
pub fn serve_answer() -> Result<(), lambda_runtime::Error> {
    block_on(answer())
}

async fn answer() -> Result<(), lambda_runtime::Error> {
    use crate::adapters::s3::S3Store;
    use crate::adapters::stepfunctions::StepFunctionsTokens;
    use crate::triggers::answer::{AnswerHandler, caller_of};
    use crate::triggers::webhook::handler::{function_url_request, function_url_response};
    init_logs();
    let table = required("STACKSYNC_TABLE")?;
    let bucket = required("STACKSYNC_BUCKET")?;
    let approvers: Vec<String> = std::env::var("STACKSYNC_APPROVERS")
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(str::to_owned)
        .collect();
    for pattern in &approvers {
        crate::approvers::check_pattern(pattern)
            .map_err(|e| format!("STACKSYNC_APPROVERS (Approvers): {e}"))?;
    }
    let aws = aws_config().await?;
    let handler = AnswerHandler {
        registry: Registry::new(aws_sdk_dynamodb::Client::new(&aws), table),
        blobs: S3Store::new(
            crate::adapters::s3_client(
                &aws,
                std::env::var("AWS_ENDPOINT_URL").is_ok_and(|e| !e.is_empty()),
            ),
            &bucket,
        ),
        tokens: StepFunctionsTokens::new(aws_sdk_sfn::Client::new(&aws)),
        approvers,
    };
    let handler = &handler;
    serve_invocations(move |event| async move {
        let caller = caller_of(&event.payload).map(str::to_owned);
        let response = match function_url_request(&event.payload) {
            Ok((_, body)) => {
                handler
                    .handle(caller.as_deref(), &body, crate::clock::now_millis())
                    .await
            }
            Err(response) => response,
        };
        Ok::<Value, FunctionError>(function_url_response(&response))
    })
    .await
}

/// Runs the events function (target of the EventBridge rules).
///
/// Environment: `STACKSYNC_TABLE`, `STACKSYNC_STATE_MACHINE_ARN`,
/// `STACKSYNC_BUCKET` (the parked runs' tokens; without it, none is woken).
pub fn serve_events() -> Result<(), lambda_runtime::Error> {
    block_on(events())
}

async fn events() -> Result<(), lambda_runtime::Error> {
    use crate::triggers::events::{from_value, handler::EventHandler};
    let (aws, registry, starter) = trigger_parts().await?;
    let registry_sources = registry_source_applier(&aws, &registry)?;
    let drift = std::sync::Arc::new(drift_on_events(&aws, &registry)?);
    let handler = EventHandler {
        registry,
        starter,
        region: aws
            .region()
            .map(ToString::to_string)
            .unwrap_or_else(|| "us-east-1".into()),
        registry_sources: Some(std::sync::Arc::new(registry_sources)),
        waker: parked_run_waker(&aws),
        drift: Some(drift),
    };
    let handler = &handler;
    serve_invocations(move |event| async move {
        let answer = match from_value(event.payload) {
            // Not worth a retry: the same bytes would fail the same way.
            Err(e) => {
                tracing::error!(error = %e, "event rejected");
                json!({"result": "rejected", "error": e.to_string()})
            }
            Ok(event) => events_answer(handler.handle(&event, crate::clock::now_millis()).await)?,
        };
        tracing::info!(%answer, "event handled");
        Ok::<Value, FunctionError>(answer)
    })
    .await
}

/// The messages of an SQS event (`Records` from `aws:sqs`), if it is one.
fn sqs_records(payload: &Value) -> Option<&Vec<Value>> {
    let records = payload.get("Records")?.as_array()?;
    records
        .iter()
        .all(|r| r["eventSource"] == "aws:sqs")
        .then_some(records)
}

/// Consumes one batch of queued deliveries: the messages that failed are
/// named (`batchItemFailures`), so SQS gives only those again (and keeps
/// them in the dead-letter queue after its tries).
async fn consume_batch<R, X, K>(
    webhook: &crate::triggers::webhook::handler::Webhook<R, X, K>,
    records: &[Value],
) -> Value
where
    R: crate::registry::Entries + crate::registry::Deliveries + crate::registry::RegistrySources,
    X: crate::ports::Starter,
    K: crate::ports::SecretStore,
{
    let mut failures = Vec::new();
    for record in records {
        let id = record["messageId"].as_str().unwrap_or_default();
        let body = record["body"].as_str().unwrap_or_default();
        match webhook.consume(body, crate::clock::now_millis()).await {
            Ok(answer) => tracing::info!(message = id, answer = ?answer, "queued delivery handled"),
            Err(e) => {
                tracing::error!(message = id, error = %e, "queued delivery not handled; SQS gives it again");
                failures.push(json!({"itemIdentifier": id}));
            }
        }
    }
    json!({"batchItemFailures": failures})
}

/// The findings of a drift detection that ended, read on its event, and the
/// revert they make due started (`STACKSYNC_STATE_MACHINE_ARN`): the events
/// function's, as the drift function (whose role reads every resource)
/// starts no execution.
fn drift_on_events(
    aws: &aws_config::SdkConfig,
    registry: &Registry,
) -> Result<
    crate::triggers::drift::DriftPass<
        Registry,
        crate::adapters::cloudformation::SdkCloudFormationFactory,
    >,
    lambda_runtime::Error,
> {
    let mut config = crate::triggers::drift::Config {
        installation: registry.table().to_owned(),
        notices: crate::wiring::event_bus(
            aws,
            &std::env::var("STACKSYNC_EVENT_BUS").unwrap_or_default(),
        ),
        ..Default::default()
    };
    let starter = crate::ports::RunStarter::by(std::sync::Arc::new(
        crate::adapters::stepfunctions::MachineStarter::new(aws_sdk_sfn::Client::new(aws)),
    ));
    config.reverts = Some((required("STACKSYNC_STATE_MACHINE_ARN")?, starter));
    Ok(crate::triggers::drift::DriftPass {
        registry: registry.clone(),
        cloudformation: crate::adapters::cloudformation::SdkCloudFormationFactory::new(aws.clone())
            .for_installation(config.installation.clone()),
        config,
    })
}

/// Wakes runs parked until their stack's event: their tokens in the bucket
/// (`STACKSYNC_BUCKET`), answered through Step Functions.
fn parked_run_waker(
    aws: &aws_config::SdkConfig,
) -> Option<std::sync::Arc<dyn crate::triggers::events::wake::WakeParked>> {
    let bucket = std::env::var("STACKSYNC_BUCKET")
        .ok()
        .filter(|b| !b.is_empty())?;
    let emulator = std::env::var("AWS_ENDPOINT_URL").is_ok_and(|e| !e.is_empty());
    Some(std::sync::Arc::new(
        crate::triggers::events::wake::TokenWaker {
            blobs: crate::adapters::s3::S3Store::new(
                crate::adapters::s3_client(aws, emulator),
                &bucket,
            ),
            wakes: crate::ports::Wakes::by(std::sync::Arc::new(
                crate::adapters::stepfunctions::StepFunctionsTokens::new(aws_sdk_sfn::Client::new(
                    aws,
                )),
            )),
        },
    ))
}

/// Serves one function's invocations until the runtime stops, each through
/// [`invocation`].
async fn serve_invocations<F, Fut, E>(handler: F) -> Result<(), lambda_runtime::Error>
where
    F: Fn(LambdaEvent<Value>) -> Fut,
    Fut: Future<Output = Result<Value, E>>,
    E: Into<Diagnostic>,
{
    lambda_runtime::run(service_fn(move |event| invocation(handler(event)))).await
}
