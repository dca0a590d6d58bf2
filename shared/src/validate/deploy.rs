//! How CloudFormation runs a stack's change sets (`onFailedCreate`,
//! `onStackFailure`, `deploymentConfig`, `rollback`): the combinations it
//! refuses, or that contradict each other, are refused when `stacks.yaml` is
//! read, not discovered at the stack's next run.

use super::Errors;
use crate::spec::{DeploymentMode, OnFailedCreate, OnStackFailure, StackSpec};

pub(super) fn check_deployment(spec: &StackSpec, errors: &mut Errors) {
    if spec.on_failed_create == OnFailedCreate::Keep
        && let Some(other @ (OnStackFailure::Rollback | OnStackFailure::Delete)) =
            spec.on_stack_failure
    {
        errors.push(
            "onStackFailure",
            format!(
                "{} contradicts onFailedCreate: keep (which is DO_NOTHING): give one of them",
                other.as_str()
            ),
        );
    }
    let Some(config) = &spec.deployment_config else {
        return;
    };
    // CloudFormation takes rollback from the deployment configuration and
    // refuses the older settings beside it.
    if spec.on_stack_failure.is_some() || spec.on_failed_create == OnFailedCreate::Keep {
        errors.push(
            "deploymentConfig",
            "CloudFormation refuses onStackFailure (and onFailedCreate: keep) beside a \
             deploymentConfig: say it with deploymentConfig.disableRollback instead",
        );
    }
    let rolls_back = match (config.mode, config.disable_rollback) {
        (_, Some(disabled)) => !disabled,
        // Express mode turns rollback off unless told otherwise.
        (DeploymentMode::Express, None) => false,
        (DeploymentMode::Standard, None) => true,
    };
    let watched = spec
        .rollback
        .as_ref()
        .is_some_and(|r| !r.triggers.is_empty() || r.monitoring_time.is_some());
    if watched && !rolls_back {
        errors.push(
            "rollback",
            "rollback triggers and monitoringTime need rollback, which this deploymentConfig \
             turns off (express mode does unless disableRollback: false)",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::fixtures::spec;
    use crate::spec::{DeploymentConfig, RollbackConfig};

    fn errors_of(change: impl FnOnce(&mut StackSpec)) -> Vec<String> {
        let mut s = spec("orders");
        change(&mut s);
        let mut errors = Errors::default();
        check_deployment(&s, &mut errors);
        errors
            .0
            .iter()
            .map(|e| format!("{}: {}", e.field, e.message))
            .collect()
    }

    fn express(disable_rollback: Option<bool>) -> Option<DeploymentConfig> {
        Some(DeploymentConfig {
            mode: DeploymentMode::Express,
            disable_rollback,
        })
    }

    #[test]
    fn settings_cloudformation_takes_together_pass() {
        assert!(errors_of(|_| {}).is_empty());
        assert!(errors_of(|s| s.on_stack_failure = Some(OnStackFailure::Delete)).is_empty());
        assert!(
            errors_of(|s| {
                s.on_failed_create = OnFailedCreate::Keep;
                s.on_stack_failure = Some(OnStackFailure::DoNothing);
            })
            .is_empty()
        );
        assert!(errors_of(|s| s.deployment_config = express(None)).is_empty());
        assert!(
            errors_of(|s| {
                s.deployment_config = express(Some(false));
                s.rollback = Some(RollbackConfig {
                    monitoring_time: Some(crate::Duration::from_mins(5)),
                    triggers: Vec::new(),
                });
            })
            .is_empty()
        );
    }

    #[test]
    fn combinations_cloudformation_refuses_or_that_contradict_are_named() {
        let found = errors_of(|s| {
            s.on_failed_create = OnFailedCreate::Keep;
            s.on_stack_failure = Some(OnStackFailure::Delete);
        });
        assert_eq!(
            found,
            [
                "onStackFailure: DELETE contradicts onFailedCreate: keep (which is DO_NOTHING): give one of them"
            ]
        );
        let found = errors_of(|s| {
            s.deployment_config = express(None);
            s.on_stack_failure = Some(OnStackFailure::Rollback);
        });
        assert!(
            found[0].starts_with("deploymentConfig: CloudFormation refuses onStackFailure"),
            "{found:?}"
        );
        let found = errors_of(|s| {
            s.deployment_config = express(None);
            s.rollback = Some(RollbackConfig {
                monitoring_time: Some(crate::Duration::from_mins(5)),
                triggers: Vec::new(),
            });
        });
        assert!(
            found[0].starts_with("rollback: rollback triggers and monitoringTime need rollback"),
            "{found:?}"
        );
    }
}
