//! Templates as teams write them: the local files a template names (nested
//! templates, Lambda code, layers, API definitions, `AWS::Include`
//! snippets…) packaged in-process, as `aws cloudformation package` does
//! ([`rules`] lists the properties and the CLI's rules), into objects
//! stored by content: the same files give the same key, whichever stack or
//! revision names them.
//!
//! Pure: [`references`] says which paths a template names (the fetch takes
//! them, and the nested templates' own, transitively); [`package`] turns the
//! template and those files into the rewritten template and the objects to
//! store. A template that names no local file is left byte for byte as it
//! is (its hash, so its stack, unchanged); one that does is written as JSON.

use std::collections::BTreeMap;
use std::ops::Bound;

use serde_json::Value;

use crate::hash::sha256_hex;

pub mod rules;
mod sites;
mod zip;

pub use sites::{Kind, Site, folder_of};

/// Most files the paths a stack's templates name may hold, all together.
pub const MAX_PACKAGED_FILES: usize = 5_000;
/// Most bytes those files may hold, all together: template-upload (256 MB
/// of memory) holds the run's artifact, these files and one zip at a time.
/// Bigger code belongs in S3, built by CI (README "No build step").
pub const MAX_PACKAGED_BYTES: u64 = 64 * 1024 * 1024;
/// Deepest chain of nested templates followed.
pub const MAX_NESTING: usize = 10;

/// Why a template could not be packaged: each names the template, the
/// resource and property, and the path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PackageError {
    #[error("{at} names {path:?}, which {why}")]
    Escapes {
        at: String,
        path: String,
        why: &'static str,
    },
    #[error("{at} names {path}, which is not in the source")]
    Missing { at: String, path: String },
    #[error("{at} names {path}, a folder: a nested template must be a file")]
    NotAFile { at: String, path: String },
    #[error(
        "{at} names the source's root folder: name the folder to package (stacksync does not zip a whole source)"
    )]
    WholeSource { at: String },
    #[error("nested templates form a cycle: {}", chain.join(" → "))]
    Cycle { chain: Vec<String> },
    #[error("nested templates go deeper than {MAX_NESTING}: {}", chain.join(" → "))]
    TooDeep { chain: Vec<String> },
    #[error("nested template {path} (named by {at}): {message}")]
    Template {
        at: String,
        path: String,
        message: String,
    },
    #[error("{at}: {message}")]
    Archive { at: String, message: String },
}

/// Where packaged objects go: the installation's bucket, its URL, and the
/// prefix of the keys (`templates/`, `templates/accounts/<id>/` for a stack
/// in another account, `previews/` for a preview).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    pub bucket: String,
    /// `https://…/bucket`: a template URL is this + `/` + key.
    pub url_base: String,
    pub prefix: String,
}

impl Destination {
    /// A nested template's key: beside the templates, by its SHA-256.
    pub fn template_key(&self, sha256: &str) -> String {
        format!("{}{sha256}", self.prefix)
    }

    /// Any other object's key: `packages/` there, by its SHA-256.
    pub fn object_key(&self, sha256: &str) -> String {
        format!("{}packages/{sha256}", self.prefix)
    }
}

/// An object to store: its key, and how its bytes are made again
/// ([`Packaged::bytes`]) when it must be stored, so that a packager holds
/// one zip at a time, not all of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    pub key: String,
    pub content_type: &'static str,
    made: Made,
}

/// How an object's bytes are made.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Made {
    /// A nested template, packaged (small: kept).
    Kept(Vec<u8>),
    /// A file, as it is.
    File(String),
    /// A file zipped alone, named as it is.
    ZippedFile(String),
    /// A folder zipped.
    Folder(String),
}

/// One local path packaged: where it was named, what, and the key it got.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    /// `parent.yaml: resource Fn property Code`.
    pub at: String,
    /// The path, from the source's root.
    pub path: String,
    pub key: String,
}

/// A template packaged.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Packaged {
    /// The root template: as it was when it names no local file.
    pub template: Vec<u8>,
    /// What to store first, each key once.
    pub objects: Vec<Object>,
    /// What was packaged, in the order found.
    pub artifacts: Vec<Artifact>,
    /// The source's files the objects are made of.
    files: Vec<(String, Vec<u8>)>,
}

impl Packaged {
    /// A template that names no local file: as it is.
    pub fn as_is(template: Vec<u8>) -> Self {
        Self {
            template,
            ..Self::default()
        }
    }

    /// The bytes of one of [`Packaged::objects`], made again: the same
    /// bytes its key names.
    pub fn bytes(&self, object: &Object) -> Result<Vec<u8>, PackageError> {
        let files: BTreeMap<&str, &[u8]> = self
            .files
            .iter()
            .map(|(p, b)| (p.as_str(), b.as_slice()))
            .collect();
        made(&files, &object.made, &object.key)
    }
}

/// The local paths the template at `path` names (not those of the nested
/// templates it names: the caller reads those once fetched).
pub fn references(path: &str, template: &[u8]) -> Result<Vec<Site>, PackageError> {
    let value = parse(path, template, path)?;
    sites::sites(path, &value)
}

fn parse(path: &str, bytes: &[u8], at: &str) -> Result<Value, PackageError> {
    crate::template::check_template(path, bytes)
        .and_then(|()| crate::guard::parse_template(bytes))
        .map_err(|message| PackageError::Template {
            at: at.to_owned(),
            path: path.to_owned(),
            message,
        })
}

/// Packages the template at `path` with the source's `files` (normal
/// path, bytes).
pub fn package(
    path: &str,
    template: &[u8],
    files: Vec<(String, Vec<u8>)>,
    destination: &Destination,
) -> Result<Packaged, PackageError> {
    let mut packager = Packager {
        files: files
            .iter()
            .map(|(p, b)| (p.as_str(), b.as_slice()))
            .collect(),
        destination,
        chain: Vec::new(),
        out: Packaged::default(),
    };
    let root = packager.template(path, template, None)?;
    let mut out = packager.out;
    out.template = root;
    out.files = files;
    Ok(out)
}

/// An object's bytes, from the files.
fn made(files: &BTreeMap<&str, &[u8]>, made: &Made, at: &str) -> Result<Vec<u8>, PackageError> {
    let missing = |path: &str| PackageError::Missing {
        at: at.to_owned(),
        path: path.to_owned(),
    };
    let archive = |entries: &[(&str, &[u8])]| {
        zip::zip(entries).map_err(|message| PackageError::Archive {
            at: at.to_owned(),
            message,
        })
    };
    match made {
        Made::Kept(bytes) => Ok(bytes.clone()),
        Made::File(path) => files
            .get(path.as_str())
            .map(|b| b.to_vec())
            .ok_or_else(|| missing(path)),
        Made::ZippedFile(path) => {
            let bytes = files.get(path.as_str()).ok_or_else(|| missing(path))?;
            let name = path.rsplit('/').next().unwrap_or(path);
            archive(&[(name, bytes)])
        }
        Made::Folder(path) => archive(&under(files, path)),
    }
}

/// The files under `folder` (names relative to it).
fn under<'a>(files: &BTreeMap<&'a str, &'a [u8]>, folder: &str) -> Vec<(&'a str, &'a [u8])> {
    let prefix = format!("{folder}/");
    let mut found = Vec::new();
    let from = (Bound::Included(prefix.as_str()), Bound::Unbounded);
    for (path, bytes) in files.range::<str, _>(from) {
        let path: &'a str = path;
        let Some(name) = path.strip_prefix(prefix.as_str()) else {
            break;
        };
        found.push((name, *bytes));
    }
    found
}

struct Packager<'a> {
    files: BTreeMap<&'a str, &'a [u8]>,
    destination: &'a Destination,
    /// The nested templates being packaged, outermost first.
    chain: Vec<String>,
    out: Packaged,
}

impl<'a> Packager<'a> {
    /// A template packaged: its bytes as they are when it names nothing.
    fn template(
        &mut self,
        path: &str,
        bytes: &[u8],
        named_by: Option<&str>,
    ) -> Result<Vec<u8>, PackageError> {
        let mut chain = self.chain.clone();
        chain.push(path.to_owned());
        if self.chain.iter().any(|p| p == path) {
            return Err(PackageError::Cycle { chain });
        }
        if self.chain.len() >= MAX_NESTING {
            return Err(PackageError::TooDeep { chain });
        }
        let mut value = parse(path, bytes, named_by.unwrap_or(path))?;
        let found = sites::sites(path, &value)?;
        if found.is_empty() {
            return Ok(bytes.to_vec());
        }
        self.chain.push(path.to_owned());
        for site in found {
            let replacement = self.site(&site)?;
            if let Some(Value::Object(holder)) = value.pointer_mut(&site.parent) {
                holder.insert(site.key.clone(), replacement);
            }
        }
        self.chain.pop();
        let text = serde_json::to_vec_pretty(&value).map_err(|e| PackageError::Template {
            at: named_by.unwrap_or(path).to_owned(),
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        Ok(text)
    }

    /// The value a site's property gets, its object stored.
    fn site(&mut self, site: &Site) -> Result<Value, PackageError> {
        let destination = self.destination;
        if site.nested() {
            let bytes = self.file(site)?;
            let packaged = self.template(&site.path, bytes, Some(&site.at))?;
            let key = destination.template_key(&sha256_hex(&packaged));
            self.keep(site, &key, Made::Kept(packaged), "text/plain");
            let url = crate::naming::template_url(&destination.url_base, &key, None);
            return Ok(Value::String(url));
        }
        let (how, content_type) = self.object(site)?;
        // Made once for its key, dropped: made again only to be stored.
        let key = destination.object_key(&sha256_hex(&made(&self.files, &how, &site.at)?));
        self.keep(site, &key, how, content_type);
        Ok(match site.kind.form() {
            rules::Form::Mapping { bucket, key: name } => serde_json::json!({
                bucket: destination.bucket,
                name: key,
            }),
            rules::Form::S3Uri | rules::Form::Template => {
                Value::String(format!("s3://{}/{key}", destination.bucket))
            }
        })
    }

    fn keep(&mut self, site: &Site, key: &str, made: Made, content_type: &'static str) {
        self.out.artifacts.push(Artifact {
            at: site.at.clone(),
            path: site.path.clone(),
            key: key.to_owned(),
        });
        if !self.out.objects.iter().any(|o| o.key == key) {
            self.out.objects.push(Object {
                key: key.to_owned(),
                content_type,
                made,
            });
        }
    }

    /// A nested template's bytes: a file, which must be there.
    fn file(&self, site: &Site) -> Result<&'a [u8], PackageError> {
        if let Some(bytes) = self.files.get(site.path.as_str()) {
            return Ok(*bytes);
        }
        if self.folder(&site.path).is_empty() {
            Err(PackageError::Missing {
                at: site.at.clone(),
                path: site.path.clone(),
            })
        } else {
            Err(PackageError::NotAFile {
                at: site.at.clone(),
                path: site.path.clone(),
            })
        }
    }

    /// The files under `folder` (names relative to it).
    fn folder(&self, folder: &str) -> Vec<(&'a str, &'a [u8])> {
        under(&self.files, folder)
    }

    /// How a site's object is made: a folder zipped; a file as it is, or
    /// zipped alone where the property wants a zip.
    fn object(&self, site: &Site) -> Result<(Made, &'static str), PackageError> {
        if site.path.is_empty() {
            return Err(PackageError::WholeSource {
                at: site.at.clone(),
            });
        }
        if let Some(bytes) = self.files.get(site.path.as_str()) {
            let path = site.path.clone();
            return Ok(match (zip::is_zip(bytes), site.kind.force_zip()) {
                (true, _) => (Made::File(path), "application/zip"),
                (false, true) => (Made::ZippedFile(path), "application/zip"),
                (false, false) => (Made::File(path), "application/octet-stream"),
            });
        }
        if self.folder(&site.path).is_empty() {
            return Err(PackageError::Missing {
                at: site.at.clone(),
                path: site.path.clone(),
            });
        }
        Ok((Made::Folder(site.path.clone()), "application/zip"))
    }
}

#[cfg(test)]
mod tests;
