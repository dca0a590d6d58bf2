//! What template-upload makes of the values the desired state gives
//! (`reconcile::desired` reads the files): the other stacks' outputs read,
//! and the count of tags; where packaged objects go, and their storing.

use std::collections::BTreeMap;

use super::invalid;
use crate::parameters;
use crate::reconcile::run::StepError;
use crate::spec::StackSpec;

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
    /// checked byte for byte, as the template is.
    pub(super) async fn store_objects(
        &self,
        objects: Vec<crate::package::Object>,
    ) -> Result<(), StepError> {
        use crate::ports::Blobs as _;
        for object in objects {
            if object.content_type == "text/plain" {
                self.store(&object.key, object.bytes, object.content_type)
                    .await?;
            } else if !self.blobs.exists(&object.key).await? {
                self.blobs
                    .put_if_absent(&object.key, object.bytes, object.content_type)
                    .await?;
            }
        }
        Ok(())
    }
}
