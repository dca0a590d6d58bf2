//! The files template-upload takes out of the artifact besides the
//! template, and the checks on what they give.

use std::collections::BTreeMap;

use super::invalid;
use crate::artifact;
use crate::parameters;
use crate::reconcile::run::StepError;
use crate::spec::StackSpec;
use crate::template;

/// The template's path (`source.path`, or the one the deployment file
/// names) and the file of values, if any, with what kind of file it is.
#[allow(clippy::type_complexity)]
pub(super) fn values_file(
    archive: &[u8],
    spec: &StackSpec,
    at: &str,
) -> Result<(String, Option<(String, Vec<u8>)>, &'static str), StepError> {
    Ok(match (&spec.parameter_file, &spec.source.deployment_file) {
        (_, Some(file)) if spec.source.path.is_empty() => {
            let bytes = read_required(archive, file, "deployment file", at)?;
            let path = template::deployment_template_path(file, &bytes).map_err(invalid)?;
            (path, Some((file.clone(), bytes)), "deployment file")
        }
        (Some(file), _) => {
            let bytes = read_required(archive, file, "parameter file", at)?;
            (
                spec.source.path.clone(),
                Some((file.clone(), bytes)),
                "parameter file",
            )
        }
        (None, _) => (spec.source.path.clone(), None, "parameter file"),
    })
}

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

/// A file the entry names, out of the artifact.
fn read_required(archive: &[u8], file: &str, what: &str, at: &str) -> Result<Vec<u8>, StepError> {
    artifact::read_file(archive, file, template::MAX_PARAMETER_FILE_BYTES as u64)
        .map_err(invalid)?
        .ok_or_else(|| invalid(format!("{what} {file} not found {at}")))
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
