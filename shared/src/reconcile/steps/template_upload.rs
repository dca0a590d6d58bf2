//! `template-upload` (state `UploadTemplate`): takes the template (and the
//! parameter file) out of the artifact, checks it, stores it by content, and
//! computes the desired hash. Already applied to a healthy stack → the run
//! ends in sync, no change set made.

use std::collections::BTreeMap;

use super::{StepResult, Steps, short};
use crate::artifact;
use crate::hash::sha256_hex;
use crate::naming::{parameters_key, template_key};
use crate::ports::{Blobs, CloudFormation, CloudFormationFactory, SourceFetcher};
use crate::reconcile::decide::up_to_date;
use crate::reconcile::run::{Next, RunState, StepError};
use crate::registry::{StackEntry, StepRegistry};
use crate::status::StallReason;
use crate::template;

/// What the run deploys: the stored template and parameters, and their hash.
struct Desired {
    template_key: String,
    parameters_key: String,
    hash: String,
}

fn invalid(e: impl std::fmt::Display) -> StepError {
    StepError::stalled(StallReason::InvalidTemplate, e.to_string())
}

impl<R, B, F, S> Steps<R, B, F, S>
where
    R: StepRegistry,
    B: Blobs,
    F: CloudFormationFactory,
    S: SourceFetcher,
{
    pub async fn template_upload(&self, mut state: RunState) -> StepResult {
        let entry = self.resume(&state).await?;
        let desired = self.store_desired(&state, &entry).await?;
        state.parameters_key = Some(desired.parameters_key);
        state.template_key = Some(desired.template_key);
        let hash_matches = entry.status.applied_hash.as_deref() == Some(desired.hash.as_str());
        state.desired_hash = Some(desired.hash);
        if hash_matches {
            // Our own check first: nothing to deploy if the stack is healthy.
            let cfn = self.port(&entry.spec).await?;
            let stack = cfn
                .describe_stack(entry.spec.effective_stack_name())
                .await?;
            if up_to_date(hash_matches, stack.as_ref().map(|s| &s.status)) {
                return self
                    .in_sync(state, &entry, stack.as_ref(), "in sync: nothing to change")
                    .await;
            }
        }
        state.next = Next::ChangeSet;
        Ok(state)
    }

    /// Reads and checks the template and the parameters at the run's
    /// revision, and stores both by content.
    async fn store_desired(
        &self,
        state: &RunState,
        entry: &StackEntry,
    ) -> Result<Desired, StepError> {
        let spec = &entry.spec;
        let key = state
            .artifact_key
            .as_deref()
            .ok_or_else(|| StepError::missing("template-upload", "artifactKey"))?;
        let archive = self
            .blobs
            .get(key, artifact::MAX_UNPACKED_BYTES)
            .await
            .map_err(StepError::port(StallReason::ArtifactUnavailable))?;
        let at = format!(
            "at {}",
            short(state.revision.as_deref().unwrap_or_default())
        );
        let path = &spec.source.path;
        let template = artifact::read_file(&archive, path, template::MAX_TEMPLATE_BYTES as u64)
            .map_err(invalid)?
            .ok_or_else(|| {
                invalid(format!(
                    "template {path} not found in {} {at}",
                    spec.source.url()
                ))
            })?;
        template::check_template(path, &template).map_err(|e| invalid(format!("{e} ({at})")))?;
        let from_file = match &spec.parameter_file {
            Some(file) => {
                let bytes =
                    artifact::read_file(&archive, file, template::MAX_PARAMETER_FILE_BYTES as u64)
                        .map_err(invalid)?
                        .ok_or_else(|| invalid(format!("parameter file {file} not found {at}")))?;
                template::read_parameter_file(file, &bytes).map_err(invalid)?
            }
            None => BTreeMap::new(),
        };
        let parameters = template::merge_parameters(from_file, spec);
        let template_sha = sha256_hex(&template);
        let hash = template::desired_hash(&template_sha, &parameters, spec);
        // The merged parameters can be large (200 × 4 KB): they go to the
        // bucket, not into the run's state; change-set reads them back.
        let parameters_json = serde_json::to_vec(&parameters).map_err(invalid)?;
        let desired = Desired {
            template_key: template_key(&template_sha),
            parameters_key: parameters_key(&parameters_json),
            hash,
        };
        self.put_once(&desired.template_key, template, "text/plain")
            .await?;
        self.put_once(&desired.parameters_key, parameters_json, "application/json")
            .await?;
        Ok(desired)
    }

    /// Stores an object whose key names its content, unless it is there.
    async fn put_once(
        &self,
        key: &str,
        body: Vec<u8>,
        content_type: &str,
    ) -> Result<(), StepError> {
        if !self.blobs.exists(key).await? {
            self.blobs.put_if_absent(key, body, content_type).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::stack_status::StackStatus as S;
    use crate::status::Phase;

    async fn uploaded(t: &Test) -> StepResult {
        let state = t.steps.artifact_fetch(t.input("run-1")).await?;
        t.steps.template_upload(state).await
    }

    #[tokio::test]
    async fn the_template_and_parameters_are_stored_by_content_and_hashed() {
        let t = Test::new().await;
        let state = uploaded(&t).await.unwrap();
        assert_eq!(state.next, Next::ChangeSet);
        let template_key = state.template_key.clone().unwrap();
        assert_eq!(template_key, format!("templates/{}", sha256_hex(TEMPLATE)));
        assert_eq!(t.blob(&template_key).as_deref(), Some(TEMPLATE));
        assert!(t.blob(state.parameters_key.as_deref().unwrap()).is_some());
        assert_eq!(state.desired_hash.as_ref().map(String::len), Some(64));
        assert!(
            t.cfn.operations().is_empty(),
            "no CloudFormation call before the change set"
        );
    }

    #[tokio::test]
    async fn the_applied_hash_on_a_healthy_stack_ends_the_run_in_sync() {
        let t = Test::new().await;
        let desired = uploaded(&t).await.unwrap().desired_hash.unwrap();
        t.release("run-1").await;
        let mut entry = t.entry();
        entry.status.applied_hash = Some(desired);
        t.steps.registry.inner.insert(entry);
        t.stack_answers(&[Some(S::UpdateComplete)]);
        let state = uploaded(&t).await.unwrap();
        assert_eq!(state.next, Next::Done);
        let entry = t.entry();
        assert_eq!(entry.status.phase, Phase::Ready);
        assert_eq!(
            entry.status.message.as_deref(),
            Some("in sync: nothing to change")
        );
        assert!(entry.lease.is_none());
        assert_eq!(t.cfn.operations(), ["DescribeStacks"]);
    }

    #[tokio::test]
    async fn the_applied_hash_on_a_rolled_back_stack_goes_on_to_the_change_set() {
        let t = Test::new().await;
        let desired = uploaded(&t).await.unwrap().desired_hash.unwrap();
        t.release("run-1").await;
        let mut entry = t.entry();
        entry.status.applied_hash = Some(desired);
        t.steps.registry.inner.insert(entry);
        t.stack_answers(&[Some(S::UpdateRollbackComplete)]);
        assert_eq!(uploaded(&t).await.unwrap().next, Next::ChangeSet);
    }

    #[tokio::test]
    async fn a_missing_or_broken_template_stalls_naming_the_file_and_the_revision() {
        for (files, wants) in [
            (
                vec![("other.yaml", &b"x: 1"[..])],
                "template t.yaml not found",
            ),
            (vec![("t.yaml", &b"Resources: [unclosed"[..])], "t.yaml"),
        ] {
            let t = Test::new().await;
            t.steps.sources.commit(URL, "main", "feedface", &files);
            let err = uploaded(&t).await.unwrap_err();
            match err {
                StepError::Stalled { reason, message } => {
                    assert_eq!(reason, StallReason::InvalidTemplate);
                    assert!(
                        message.contains(wants) && message.contains("feedface"),
                        "{message}"
                    );
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[tokio::test]
    async fn a_state_without_its_artifact_key_is_a_contract_violation() {
        let t = Test::new().await;
        let mut state = t.steps.artifact_fetch(t.input("run-1")).await.unwrap();
        state.artifact_key = None;
        let err = t.steps.template_upload(state).await.unwrap_err();
        assert!(
            matches!(
                err,
                StepError::Stalled {
                    reason: StallReason::ContractViolated,
                    ..
                }
            ),
            "{err:?}"
        );
    }
}
