//! Not a step: what a change set does not carry (termination protection,
//! the stack policy), compared with what CloudFormation reports and applied
//! where it differs, on every way a run ends `Ready` — a change set
//! executed, an empty one, or no change set at all. A spec that changes only
//! these makes an empty change set; a console edit of them changes no
//! `LastUpdatedTime`: both are caught here.

use serde_json::Value;

use super::{Port, Ports, Steps};
use crate::ports::{StackInfo, Stacks};
use crate::reconcile::run::StepError;
use crate::spec::StackSpec;

impl<P: Ports> Steps<P> {
    /// Brings the stack's termination protection and policy to the spec
    /// (a policy only when the spec has one: CloudFormation cannot remove
    /// one). Returns what it changed, in words.
    pub(super) async fn apply_settings(
        &self,
        cfn: &Port<P>,
        spec: &StackSpec,
        stack: &StackInfo,
    ) -> Result<Vec<&'static str>, StepError> {
        let name = spec.effective_stack_name();
        let mut changed = Vec::new();
        if stack.termination_protection != spec.termination_protection {
            cfn.set_termination_protection(name, spec.termination_protection)
                .await?;
            changed.push(if spec.termination_protection {
                "termination protection turned on"
            } else {
                "termination protection turned off"
            });
        }
        if let Some(policy) = &spec.stack_policy {
            let current = cfn.stack_policy(name).await?;
            let same = current
                .as_deref()
                .and_then(|text| serde_json::from_str::<Value>(text).ok())
                .is_some_and(|current| &current == policy);
            if !same {
                // Keys sorted: the same policy is always the same text.
                let text = crate::hash::canonical(policy.clone()).to_string();
                cfn.set_stack_policy(name, &text).await?;
                changed.push("stack policy set");
            }
        }
        Ok(changed)
    }
}

/// `message`, and what [`Steps::apply_settings`] changed, if anything.
pub(super) fn with_settings(message: String, changed: &[&str]) -> String {
    if changed.is_empty() {
        message
    } else {
        format!("{message}; {}", changed.join(", "))
    }
}
