//! What template-upload makes of the values the desired state gives
//! (`reconcile::desired` reads the files): the other stacks' outputs read,
//! and the count of tags; where packaged objects go, and their storing.

use std::collections::BTreeMap;

use super::{invalid, short};
use crate::ports::Blobs as _;
use crate::reconcile::desired;
use crate::reconcile::run::{RunState, StepError};
use crate::spec::StackSpec;
use crate::status::StallReason;
use crate::{artifact, parameters, template};

/// The other stacks' outputs among the parameters, as read (each as the
/// registry records an output), by stack and output.
pub(super) fn read_outputs(
    merged: &BTreeMap<String, crate::spec::ParameterValue>,
    values: &BTreeMap<String, String>,
) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut read: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for (name, value) in merged {
        if let Some(crate::spec::ValueRef::FromStack { from_stack, output }) = value.reference()
            && let Some(v) = values.get(name)
        {
            read.entry(from_stack.clone())
                .or_default()
                .insert(output.clone(), parameters::output_record(v));
        }
    }
    read
}

/// The parameter file's tags and the entry's, with stacksync's two, must
/// fit CloudFormation's 50.
pub(super) fn check_tag_count(
    tags: &BTreeMap<String, String>,
    spec: &StackSpec,
) -> Result<(), StepError> {
    let total = tags.len() + 2;
    if total > crate::validate::MAX_TAGS {
        return Err(invalid(format!(
            "{} tags with the parameter file's ({}) and stacksync's two: CloudFormation allows at most {} per stack",
            total,
            spec.parameter_file.as_deref().unwrap_or("-"),
            crate::validate::MAX_TAGS
        )));
    }
    Ok(())
}

impl<P: super::Ports> super::Steps<P> {
    /// The template at the run's revision, checked, with the parameter (or
    /// deployment) file's values and how messages name that file.
    pub(super) async fn read_template(
        &self,
        state: &RunState,
        spec: &StackSpec,
    ) -> Result<
        (
            crate::package::Packaged,
            template::FileValues,
            Option<String>,
        ),
        StepError,
    > {
        let key = state
            .fetched
            .as_ref()
            .and_then(|f| f.artifact_key.as_deref())
            .ok_or_else(|| StepError::missing("template-upload", "artifactKey"))?;
        let archive = self
            .blobs
            .get(key, artifact::MAX_UNPACKED_BYTES)
            .await
            .map_err(StepError::port(StallReason::ArtifactUnavailable))?;
        let at = format!("at {}", short(state.revision().unwrap_or_default()));
        let files = desired::read(spec, desired::in_artifact(&archive), &at).map_err(invalid)?;
        // What the template makes certain to fail, as `validate --templates`
        // says it: before any value is read or anything made.
        let problems = template::check(
            spec,
            &files.template_path,
            &files.template,
            &files.from_file.parameters,
        );
        if !problems.is_empty() {
            return Err(invalid(format!("{} ({at})", problems.join("; "))));
        }
        let all = || {
            artifact::read_all(&archive, artifact::MAX_UNPACKED_BYTES).map_err(|e| e.to_string())
        };
        let packaged = desired::packaged(&files, all, &self.destination(spec))
            .map_err(|e| invalid(format!("{e} ({at})")))?;
        Ok((packaged, files.from_file, files.file_label))
    }

    /// Where a stack's packaged objects go: beside its templates (under its
    /// account's prefix for a stack in another account, which may read only
    /// those).
    pub(super) fn destination(&self, spec: &StackSpec) -> crate::package::Destination {
        crate::package::Destination {
            bucket: self.config.bucket.clone(),
            url_base: self.config.template_url_base.clone(),
            prefix: crate::naming::template_key("", spec.target_account()),
        }
    }

    /// Stores the packaged objects, each unless there already: their keys
    /// name their content, so one there holds these bytes (only
    /// template-upload writes under `templates/`). Nested templates are
    /// checked byte for byte, as the template is. Each object is made just
    /// before it is stored, and dropped after.
    pub(super) async fn store_objects(
        &self,
        packaged: &crate::package::Packaged,
    ) -> Result<(), StepError> {
        for object in &packaged.objects {
            let text = object.content_type == "text/plain";
            if !text && self.blobs.exists(&object.key).await? {
                continue;
            }
            let bytes = packaged.bytes(object).map_err(invalid)?;
            if text {
                self.store(&object.key, bytes, object.content_type).await?;
            } else {
                self.blobs
                    .put_if_absent(&object.key, bytes, object.content_type)
                    .await?;
            }
        }
        Ok(())
    }
}
