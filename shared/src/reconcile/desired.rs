//! The desired state of a stack at a revision, as runs and previews alike
//! read it: which files the source gives (the template, the parameter or
//! Git sync deployment file, `source.include`), which of them holds the
//! values and where the template is, and the template and that file read
//! and checked. A run fetches them into its artifact (artifact-fetch) and
//! reads them out of it (template-upload); a preview (`stacksync diff`,
//! `validate --templates`) reads them from the source. Both through here.

use crate::content::{Role, Wanted, normal};
use crate::ports::{FetchError, SourceFetcher, SourceLocation};
use crate::spec::StackSpec;
use crate::template::{self, FileValues, MAX_PARAMETER_FILE_BYTES, MAX_TEMPLATE_BYTES};

/// Why the files could not be fetched: the source's failure, or a
/// deployment file that names no template.
#[derive(Debug)]
pub enum FetchFailed {
    Source(FetchError),
    /// What is wrong with the deployment file.
    Invalid(String),
}

/// The files a run takes from the source at `revision`: those the spec
/// names ([`Wanted::of`]), and, for a deployment file alone, the template
/// it names, fetched once that is known (the same revision, the same
/// signature check).
pub async fn fetch<S: SourceFetcher>(
    sources: &S,
    spec: &StackSpec,
    revision: &str,
) -> Result<Vec<(String, Vec<u8>)>, FetchFailed> {
    let source = SourceLocation::of(&spec.source);
    let wanted = Wanted::of(spec);
    let mut files = sources
        .fetch(&source, revision, &wanted)
        .await
        .map_err(FetchFailed::Source)?;
    if let Some(file) = deployment_file_alone(spec) {
        let normal = normal(file);
        let bytes = files
            .iter()
            .find(|(p, _)| *p == normal)
            .map(|(_, b)| b.as_slice())
            .unwrap_or_default();
        let template =
            template::deployment_template_path(file, bytes).map_err(FetchFailed::Invalid)?;
        let template = crate::content::normal(&template);
        if !files.iter().any(|(p, _)| *p == template) {
            let more = Wanted {
                signed_by: wanted.signed_by.clone(),
                ..Wanted::new(vec![(template, Role::Template)])
            };
            files.extend(
                sources
                    .fetch(&source, revision, &more)
                    .await
                    .map_err(FetchFailed::Source)?,
            );
        }
    }
    Ok(files)
}

/// The deployment file, when it alone says where the template is.
fn deployment_file_alone(spec: &StackSpec) -> Option<&str> {
    spec.source
        .deployment_file
        .as_deref()
        .filter(|_| spec.source.path.is_empty())
}

/// The file that gives a stack's values besides its own: its name, what
/// kind of file it is, its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValuesFile {
    pub name: String,
    /// `parameter file` or `deployment file`, as messages name it.
    pub kind: &'static str,
    pub bytes: Vec<u8>,
}

/// The template and the file of values at a revision, read and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DesiredFiles {
    /// The template's path (`source.path`, or the one the deployment file
    /// names).
    pub template_path: String,
    pub template: Vec<u8>,
    /// The parameter or deployment file, if any: `"parameter file p.json"`.
    pub file_label: Option<String>,
    /// What that file gives.
    pub from_file: FileValues,
}

/// Reads the template and the file of values of `spec` through `file`
/// (a path's bytes, at most `max`; `None`: not there), and checks them:
/// the template's form, the file's. `at` says where, for messages (`at
/// 0123456789ab`).
pub fn read(
    spec: &StackSpec,
    file: impl Fn(&str, u64) -> Result<Option<Vec<u8>>, String>,
    at: &str,
) -> Result<DesiredFiles, String> {
    let required = |name: &str, kind: &'static str| {
        file(name, MAX_PARAMETER_FILE_BYTES as u64)?
            .map(|bytes| ValuesFile {
                name: name.to_owned(),
                kind,
                bytes,
            })
            .ok_or_else(|| format!("{kind} {name} not found {at}"))
    };
    let (template_path, values) = match (&spec.parameter_file, deployment_file_alone(spec)) {
        (_, Some(name)) => {
            let values = required(name, "deployment file")?;
            let path = template::deployment_template_path(name, &values.bytes)?;
            (path, Some(values))
        }
        (Some(name), None) => (
            spec.source.path.clone(),
            Some(required(name, "parameter file")?),
        ),
        (None, None) => (spec.source.path.clone(), None),
    };
    let path = template_path.as_str();
    let template = file(path, MAX_TEMPLATE_BYTES as u64)?
        .ok_or_else(|| format!("template {path} not found in {} {at}", spec.source.url()))?;
    template::check_template(path, &template).map_err(|e| format!("{e} ({at})"))?;
    let from_file = match &values {
        Some(v) => template::read_parameter_file(&v.name, &v.bytes, path)?,
        None => FileValues::default(),
    };
    Ok(DesiredFiles {
        file_label: values.map(|v| format!("{} {}", v.kind, v.name)),
        template_path,
        template,
        from_file,
    })
}

/// `file` for [`read`] over files fetched from the source (paths
/// normalised as the fetch gives them).
pub fn among(files: &[(String, Vec<u8>)]) -> impl Fn(&str, u64) -> Result<Option<Vec<u8>>, String> {
    move |path: &str, _max: u64| {
        let path = normal(path);
        Ok(files
            .iter()
            .find(|(p, _)| *p == path)
            .map(|(_, bytes)| bytes.clone()))
    }
}

/// `file` for [`read`] over a run's artifact (an archive of those files).
pub fn in_artifact(archive: &[u8]) -> impl Fn(&str, u64) -> Result<Option<Vec<u8>>, String> {
    move |path: &str, max: u64| {
        crate::artifact::read_file(archive, path, max).map_err(|e| e.to_string())
    }
}
