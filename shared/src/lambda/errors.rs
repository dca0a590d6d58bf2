//! How the functions' failures reach the Lambda runtime: each with a
//! stable `errorType` ([`error_types`], or a step's
//! [`StepError::name`](crate::reconcile::run::StepError::name)) and an
//! `errorMessage` that says what failed, never a Rust type's name (what the
//! runtime reports of a boxed error, or of a panic).

use std::future::Future;

use lambda_runtime::Diagnostic;
use serde::Serialize;
use serde_json::Value;

use crate::ports::PortError;
use crate::registry::RegistryError;
use crate::triggers::TriggerError;

/// The `errorType` of the other functions' failures (the scheduler, drift
/// and events functions; the webhook and the answer function reply with
/// HTTP errors instead, and fail only by a panic). The steps' own are
/// [`crate::reconcile::run::error_names`]. README.md ("Troubleshooting")
/// documents both.
pub mod error_types {
    /// A service it calls failed in a way another try can mend (throttling,
    /// a 5xx, a timeout, no connection): the next invocation (the schedule's
    /// next run, EventBridge's or Lambda's retry) tries again.
    pub const TRANSIENT: &str = crate::reconcile::run::error_names::TRANSIENT;
    /// Anything else: a refusal (access denied, a missing table), a bad
    /// configuration, a bug (a panic). Another try fails the same way.
    pub const FAILED: &str = "StackSync.Failed";
}

/// Why one invocation of a trigger function failed: what the runtime
/// reports as `errorType` ([`error_types`]) and `errorMessage`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct FunctionError {
    transient: bool,
    message: String,
}

impl FunctionError {
    /// Worth another try: `StackSync.Transient`.
    pub fn transient(message: impl Into<String>) -> Self {
        Self {
            transient: true,
            message: message.into(),
        }
    }

    /// Not worth another try as things are: `StackSync.Failed`.
    pub fn failed(message: impl Into<String>) -> Self {
        Self {
            transient: false,
            message: message.into(),
        }
    }

    /// The `errorType`: one of [`error_types`].
    pub fn error_type(&self) -> &'static str {
        if self.transient {
            error_types::TRANSIENT
        } else {
            error_types::FAILED
        }
    }

    /// A registry call that failed, after `what` (what the function could
    /// not do).
    fn registry(what: &str, e: RegistryError) -> Self {
        let message = format!("{what}: {e}");
        if e.is_transient() {
            Self::transient(message)
        } else {
            Self::failed(message)
        }
    }

    /// A trigger's failure (the registry's, or starting an execution),
    /// after `what`.
    fn trigger(what: &str, e: TriggerError) -> Self {
        match e {
            TriggerError::Registry(e) => Self::registry(what, e),
            TriggerError::Start(PortError::Transient(m)) => {
                Self::transient(format!("{what}: starting an execution: {m}"))
            }
            TriggerError::Start(other) => Self::failed(format!(
                "{what}: starting an execution: {}",
                other.message()
            )),
        }
    }
}

impl From<FunctionError> for Diagnostic {
    fn from(e: FunctionError) -> Self {
        Diagnostic {
            error_type: e.error_type().to_owned(),
            error_message: e.message,
        }
    }
}

/// One invocation of a handler, as the runtime is to report it: its answer,
/// or its failure named ([`crate::reconcile::run::StepError::name`],
/// [`error_types`]). A panic is `StackSync.Failed` with the panic's message
/// (the runtime would name it by its Rust type).
pub(super) async fn invocation<E: Into<Diagnostic>>(
    handler: impl Future<Output = Result<Value, E>>,
) -> Result<Value, Diagnostic> {
    use futures_util::FutureExt;
    match std::panic::AssertUnwindSafe(handler).catch_unwind().await {
        Ok(answer) => answer.map_err(Into::into),
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
                .unwrap_or("no message");
            Err(FunctionError::failed(format!("the function panicked: {what}")).into())
        }
    }
}

/// A function's report as its answer (JSON).
fn answer_of(report: &impl Serialize) -> Result<Value, FunctionError> {
    serde_json::to_value(report)
        .map_err(|e| FunctionError::failed(format!("the report cannot be written as JSON: {e}")))
}

/// The scheduler's answer to one invocation: its report, or why it failed.
pub(super) fn scheduler_answer(
    run: Result<crate::triggers::scheduler::Report, RegistryError>,
) -> Result<Value, FunctionError> {
    let report =
        run.map_err(|e| FunctionError::registry("the scheduler could not read the registry", e))?;
    answer_of(&report)
}

/// The drift function's answer to one invocation.
pub(super) fn drift_answer(
    run: Result<crate::triggers::drift::DriftReport, RegistryError>,
) -> Result<Value, FunctionError> {
    let report =
        run.map_err(|e| FunctionError::registry("the drift pass could not read the registry", e))?;
    answer_of(&report)
}

/// The events function's answer to one event it could read.
pub(super) fn events_answer(
    handled: Result<crate::triggers::events::handler::EventAnswer, TriggerError>,
) -> Result<Value, FunctionError> {
    let answer =
        handled.map_err(|e| FunctionError::trigger("the event could not be handled", e))?;
    answer_of(&answer)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No DynamoDB reachable: what the registry says then.
    fn unreachable() -> RegistryError {
        RegistryError::Aws {
            operation: "Scan",
            code: None,
            message: "cannot connect (Connection refused (os error 111))".into(),
            transient: true,
        }
    }

    fn refused() -> RegistryError {
        RegistryError::Aws {
            operation: "Scan",
            code: Some("AccessDeniedException".into()),
            message: "AccessDeniedException: not authorized".into(),
            transient: false,
        }
    }

    fn missing() -> RegistryError {
        RegistryError::TableMissing {
            table: "stacksync".into(),
        }
    }

    /// What the runtime reports of a failure: its `errorType` must be one
    /// of the documented names, never a Rust type's.
    fn reported(error: impl Into<Diagnostic>, expected: &str) -> Diagnostic {
        let d: Diagnostic = error.into();
        assert!(
            !d.error_type.contains("::") && !d.error_type.contains("alloc"),
            "errorType is a Rust type name: {:?} ({:?})",
            d.error_type,
            d.error_message
        );
        assert_eq!(d.error_type, expected, "{d:?}");
        let json = serde_json::to_value(&d).unwrap();
        assert_eq!(json["errorType"], expected);
        assert_eq!(json["errorMessage"], d.error_message.as_str());
        d
    }

    #[tokio::test]
    async fn a_panic_is_reported_as_failed_with_its_message() {
        let d = invocation(async {
            if "x".len() == 1 {
                panic!("boom");
            }
            Ok::<Value, lambda_runtime::Error>(Value::Null)
        })
        .await
        .unwrap_err();
        let d = reported(d, "StackSync.Failed");
        assert!(d.error_message.contains("boom"), "{d:?}");
    }

    #[test]
    fn scheduler_failures_carry_a_documented_error_type() {
        let d = reported(
            scheduler_answer(Err(unreachable())).unwrap_err(),
            "StackSync.Transient",
        );
        assert!(
            d.error_message.contains("scheduler")
                && d.error_message.contains("registry")
                && d.error_message.contains("Connection refused"),
            "says what failed: {}",
            d.error_message
        );
        reported(
            scheduler_answer(Err(refused())).unwrap_err(),
            "StackSync.Failed",
        );
        let d = reported(
            scheduler_answer(Err(missing())).unwrap_err(),
            "StackSync.Failed",
        );
        assert!(
            d.error_message.contains("\"stacksync\" does not exist"),
            "{d:?}"
        );
    }

    #[test]
    fn drift_failures_carry_a_documented_error_type() {
        let d = reported(
            drift_answer(Err(unreachable())).unwrap_err(),
            "StackSync.Transient",
        );
        assert!(
            d.error_message.contains("drift") && d.error_message.contains("Connection refused"),
            "says what failed: {}",
            d.error_message
        );
        reported(
            drift_answer(Err(refused())).unwrap_err(),
            "StackSync.Failed",
        );
    }

    #[test]
    fn events_failures_carry_a_documented_error_type() {
        let d = reported(
            events_answer(Err(TriggerError::Registry(unreachable()))).unwrap_err(),
            "StackSync.Transient",
        );
        assert!(
            d.error_message.contains("event") && d.error_message.contains("Connection refused"),
            "says what failed: {}",
            d.error_message
        );
        reported(
            events_answer(Err(TriggerError::Start(PortError::Transient(
                "ThrottlingException: slow down".into(),
            ))))
            .unwrap_err(),
            "StackSync.Transient",
        );
        let d = reported(
            events_answer(Err(TriggerError::Start(PortError::Refused(
                "AccessDeniedException: no states:StartExecution".into(),
            ))))
            .unwrap_err(),
            "StackSync.Failed",
        );
        assert!(d.error_message.contains("StartExecution"), "{d:?}");
        reported(
            events_answer(Err(TriggerError::Registry(refused()))).unwrap_err(),
            "StackSync.Failed",
        );
    }

    #[test]
    fn the_readme_documents_every_error_type() {
        let readme = include_str!("../../../README.md");
        for name in [error_types::TRANSIENT, error_types::FAILED] {
            assert!(
                !name.contains("::") && readme.contains(&format!("`{name}`")),
                "README.md documents {name}"
            );
        }
    }
}
