//! The steps by name, as the state machine, the functions and the
//! deployments name them.

/// The steps by name: the state machine's Task states, the Lambda functions
/// and the local runner's `local:<function>` resources all name them so.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StepName {
    ArtifactFetch,
    TemplateUpload,
    ChangeSet,
    PollStatus,
    Approval,
    Delete,
    Finalize,
}

impl StepName {
    pub const ALL: [StepName; 7] = [
        Self::ArtifactFetch,
        Self::TemplateUpload,
        Self::ChangeSet,
        Self::PollStatus,
        Self::Approval,
        Self::Delete,
        Self::Finalize,
    ];

    /// The function's name: its `functions/` folder, binary and local resource.
    pub fn function(self) -> &'static str {
        match self {
            Self::ArtifactFetch => "artifact-fetch",
            Self::TemplateUpload => "template-upload",
            Self::ChangeSet => "change-set",
            Self::PollStatus => "poll-status",
            Self::Approval => "approval",
            Self::Delete => "delete",
            Self::Finalize => "finalize",
        }
    }

    /// Its placeholder in the state machine's definition (`${…}`), bound to
    /// the function's ARN by `template.yaml` and the CDK app.
    pub fn placeholder(self) -> &'static str {
        match self {
            Self::ArtifactFetch => "ArtifactFetchFunctionArn",
            Self::TemplateUpload => "TemplateUploadFunctionArn",
            Self::ChangeSet => "ChangeSetFunctionArn",
            Self::PollStatus => "PollStatusFunctionArn",
            Self::Approval => "ApprovalFunctionArn",
            Self::Delete => "DeleteFunctionArn",
            Self::Finalize => "FinalizeFunctionArn",
        }
    }

    /// Its Task state in the state machine.
    pub fn state(self) -> &'static str {
        match self {
            Self::ArtifactFetch => "FetchArtifact",
            Self::TemplateUpload => "UploadTemplate",
            Self::ChangeSet => "ChangeSet",
            Self::PollStatus => "PollStatus",
            Self::Approval => "AwaitApproval",
            Self::Delete => "DeleteStack",
            Self::Finalize => "RecordFailure",
        }
    }

    /// The step of a function name.
    pub fn of_function(name: &str) -> Option<StepName> {
        Self::ALL.into_iter().find(|s| s.function() == name)
    }
}

impl std::fmt::Display for StepName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.function())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::StepName;

    /// One name per step, everywhere a step is named: its `functions/`
    /// folder (and its `main`), its Task state and placeholder in the state
    /// machine, and its resource in `template.yaml`.
    #[test]
    fn every_step_has_its_folder_its_state_its_placeholder_and_its_resource() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let asl: Value =
            serde_json::from_str(include_str!("../../../../statemachine/reconcile.asl.json"))
                .unwrap_or_else(|e| panic!("the ASL: {e}"));
        let template = std::fs::read_to_string(root.join("template.yaml")).unwrap_or_default();
        for step in StepName::ALL {
            let main = std::fs::read_to_string(
                root.join("functions")
                    .join(step.function())
                    .join("src/main.rs"),
            )
            .unwrap_or_else(|e| panic!("functions/{step}: {e}"));
            let variant = format!("{step:?}");
            assert!(
                main.contains(&format!("StepName::{variant}")),
                "functions/{step}/src/main.rs serves StepName::{variant}"
            );
            // Called directly, or (waiting for a task token) through the
            // Lambda integration, which names the function in its Parameters.
            let state = &asl["States"][step.state()];
            let resource = match state["Resource"].as_str() {
                Some(r) if r.starts_with("arn:aws:states:::lambda:invoke") => {
                    &state["Parameters"]["FunctionName"]
                }
                _ => &state["Resource"],
            };
            assert_eq!(
                resource.as_str(),
                Some(format!("${{{}}}", step.placeholder()).as_str()),
                "{}",
                step.state()
            );
            assert!(
                template.contains(&format!("BuildProperties: {{ Binary: {step} }}")),
                "template.yaml builds {step}"
            );
            assert!(
                template.contains(&format!("{}: !GetAtt ", step.placeholder())),
                "template.yaml binds {}",
                step.placeholder()
            );
            assert_eq!(StepName::of_function(step.function()), Some(step));
        }
        assert_eq!(StepName::of_function("webhook"), None);
    }
}
