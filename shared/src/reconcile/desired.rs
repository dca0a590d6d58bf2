//! The desired state of a stack at a revision, as runs and previews alike
//! read it: which files the source gives (the template, the parameter or
//! Git sync deployment file, `source.include`), which of them holds the
//! values and where the template is, and the template and that file read
//! and checked. A run fetches them into its artifact (artifact-fetch) and
//! reads them out of it (template-upload); a preview (`stacksync diff`,
//! `validate --templates`) reads them from the source. Both through here.

use crate::content::{ContentError, Limits, Role, Wanted, normal};
use crate::package;
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
    let mut asked: Vec<String> = wanted.paths.iter().map(|(p, _)| p.clone()).collect();
    // The template: the spec's, or the one a deployment file alone names,
    // fetched once that is known (the same revision, the same signature check).
    let root = match deployment_file_alone(spec) {
        Some(file) => {
            let bytes = file_among(&files, file).unwrap_or_default();
            let named =
                template::deployment_template_path(file, bytes).map_err(FetchFailed::Invalid)?;
            let template = normal(&named);
            if file_among(&files, &template).is_none() {
                let more = Wanted {
                    signed_by: wanted.signed_by.clone(),
                    ..Wanted::new(vec![(template.clone(), Role::Template)])
                };
                files.extend(
                    sources
                        .fetch(&source, revision, &more)
                        .await
                        .map_err(FetchFailed::Source)?,
                );
                asked.push(template.clone());
            }
            template
        }
        None => normal(&spec.source.path),
    };
    referenced(
        sources,
        &source,
        revision,
        &wanted.signed_by,
        &root,
        asked,
        &mut files,
    )
    .await?;
    Ok(files)
}

fn file_among<'a>(files: &'a [(String, Vec<u8>)], path: &str) -> Option<&'a [u8]> {
    let path = normal(path);
    files
        .iter()
        .find(|(p, _)| *p == path)
        .map(|(_, b)| b.as_slice())
}

/// Whether `path` is among the paths fetched (as itself, or under a folder).
fn covered(asked: &[String], path: &str) -> bool {
    asked.iter().any(|q| {
        q == path || (path.starts_with(q.as_str()) && path.as_bytes().get(q.len()) == Some(&b'/'))
    })
}

/// Fetches the paths the template at `root` names (`crate::package`), and
/// those its nested templates name, in rounds, all within the packaging
/// limits. A path no template can take (outside the source, the root
/// folder, a cycle) is left for the packager to refuse with its message;
/// a template that does not read is left for [`read`].
async fn referenced<S: SourceFetcher>(
    sources: &S,
    source: &SourceLocation,
    revision: &str,
    signed_by: &[String],
    root: &str,
    mut asked: Vec<String>,
    files: &mut Vec<(String, Vec<u8>)>,
) -> Result<(), FetchFailed> {
    let mut templates = vec![root.to_owned()];
    let mut parsed: Vec<String> = Vec::new();
    let mut taken = (0usize, 0u64);
    for _round in 0..=package::MAX_NESTING {
        let mut sites = Vec::new();
        for path in templates.drain(..) {
            if parsed.contains(&path) {
                continue;
            }
            parsed.push(path.clone());
            let Some(bytes) = file_among(files, &path) else {
                continue;
            };
            match package::references(&path, bytes) {
                Ok(found) => sites.extend(found),
                Err(package::PackageError::Template { .. }) if path == root => return Ok(()),
                Err(e) => return Err(FetchFailed::Invalid(e.to_string())),
            }
        }
        // Every nested template is read next round, fetched now or before
        // (a folder that holds it, `source.include`).
        templates = sites
            .iter()
            .filter(|s| s.nested() && !parsed.contains(&s.path))
            .map(|s| s.path.clone())
            .collect();
        sites.retain(|site| !site.path.is_empty() && !covered(&asked, &site.path));
        if !sites.is_empty() {
            let mut wanted = Wanted::new(
                sites
                    .iter()
                    .map(|site| (site.path.clone(), Role::Included))
                    .collect(),
            );
            wanted.signed_by = signed_by.to_vec();
            wanted.limits = Limits {
                files: package::MAX_PACKAGED_FILES.saturating_sub(taken.0),
                bytes: package::MAX_PACKAGED_BYTES.saturating_sub(taken.1),
                hint: "the templates name too many local files: keep large artifacts in S3",
            };
            let more = sources
                .fetch(source, revision, &wanted)
                .await
                .map_err(|e| named(e, &sites))?;
            taken.0 += more.len();
            taken.1 += more.iter().map(|(_, b)| b.len() as u64).sum::<u64>();
            asked.extend(wanted.paths.into_iter().map(|(p, _)| p));
            files.extend(more);
        }
        if templates.is_empty() {
            return Ok(());
        }
    }
    Ok(())
}

/// A referenced path that is not there, told with where it is named.
fn named(e: FetchError, sites: &[package::Site]) -> FetchFailed {
    if let FetchError::Content(ContentError::Missing { path, .. }) = &e
        && let Some(site) = sites.iter().find(|s| s.path == *path)
    {
        return FetchFailed::Invalid(format!(
            "{} names {path}, which is not in the source",
            site.at
        ));
    }
    FetchFailed::Source(e)
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

/// The desired template packaged ([`crate::package`]) for `destination`:
/// `all` gives every file fetched, read only when the template names a
/// local file (else the template is as it is, and nothing to store).
pub fn packaged(
    files: &DesiredFiles,
    all: impl FnOnce() -> Result<Vec<(String, Vec<u8>)>, String>,
    destination: &package::Destination,
) -> Result<package::Packaged, String> {
    let path = &files.template_path;
    let named = package::references(path, &files.template).map_err(|e| e.to_string())?;
    if named.is_empty() {
        return Ok(package::Packaged::as_is(files.template.clone()));
    }
    package::package(path, &files.template, all()?, destination).map_err(|e| e.to_string())
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
