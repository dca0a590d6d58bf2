//! Where a template names local files: each site found by the rules of
//! [`super::rules`], with the path it names resolved against the
//! template's folder and checked to stay inside the source.

use serde_json::Value;

use super::PackageError;
use super::rules::{self, Form, Rule};

/// What a site packages the path as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// By a resource's property.
    Property(&'static Rule),
    /// `Fn::Transform` `AWS::Include`'s `Location`: a file, as an `s3://` URI.
    Include,
    /// A `Metadata` entry's URL: a file or folder, as an `s3://` URI.
    Metadata,
}

impl Kind {
    pub fn form(self) -> Form {
        match self {
            Kind::Property(rule) => rule.form,
            Kind::Include | Kind::Metadata => Form::S3Uri,
        }
    }

    pub fn force_zip(self) -> bool {
        matches!(self, Kind::Property(rule) if rule.force_zip)
    }
}

/// A local path a template names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Site {
    /// JSON pointer to the mapping that holds the property.
    pub parent: String,
    /// The property's name in that mapping.
    pub key: String,
    /// Where, for messages and records: `resource Fn property Code`.
    pub at: String,
    /// The path, normal, from the source's root (`""`: the root).
    pub path: String,
    pub kind: Kind,
}

impl Site {
    /// Whether the path names a nested template (packaged itself).
    pub fn nested(&self) -> bool {
        self.kind.form() == Form::Template
    }
}

/// The folder of a template at `path` (normal): `""` at the root.
pub fn folder_of(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(folder, _)| folder)
}

/// `relative`, read from `folder` (normal, from the root), in normal form;
/// refused when absolute or when it leaves the source.
pub fn resolve(folder: &str, relative: &str, at: &str) -> Result<String, PackageError> {
    let refused = |why: &'static str| PackageError::Escapes {
        at: at.to_owned(),
        path: relative.to_owned(),
        why,
    };
    if relative.starts_with('/') || relative.as_bytes().get(1) == Some(&b':') {
        return Err(refused(
            "is an absolute path: name it relative to the template",
        ));
    }
    if relative.contains('\\') {
        return Err(refused("has a backslash (write paths with /)"));
    }
    if relative.chars().any(char::is_control) {
        return Err(refused("has a control character"));
    }
    let mut parts: Vec<&str> = folder.split('/').filter(|p| !p.is_empty()).collect();
    for part in relative.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts
                    .pop()
                    .ok_or_else(|| refused("leaves the source (`..` above its root)"))?;
            }
            name => parts.push(name),
        }
    }
    Ok(parts.join("/"))
}

/// Escapes a mapping key for a JSON pointer.
fn token(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// Whether a string is left alone: an S3 URI (and for a template, a URL).
fn left_alone(value: &str, form: Form) -> bool {
    let lower = value.to_ascii_lowercase();
    lower.starts_with("s3://")
        || (form == Form::Template
            && (lower.starts_with("https://") || lower.starts_with("http://")))
}

/// Every site of the template at `path` (its value `template`).
pub fn sites(path: &str, template: &Value) -> Result<Vec<Site>, PackageError> {
    let folder = folder_of(path);
    let mut found = Vec::new();
    let Some(resources) = template.get("Resources").and_then(Value::as_object) else {
        return Ok(found);
    };
    metadata(path, folder, template, &mut found)?;
    includes(path, folder, template, String::new(), &mut found)?;
    for (id, resource) in resources {
        resource_sites(
            path,
            folder,
            &format!("/Resources/{}", token(id)),
            id,
            resource,
            &mut found,
        )?;
    }
    Ok(found)
}

/// A resource's sites; `Fn::ForEach::` loops are looked into, as the CLI does.
fn resource_sites(
    path: &str,
    folder: &str,
    pointer: &str,
    id: &str,
    resource: &Value,
    found: &mut Vec<Site>,
) -> Result<(), PackageError> {
    if id.starts_with("Fn::ForEach::") {
        if let Some(Value::Object(body)) = resource.as_array().and_then(|a| a.get(2)) {
            for (inner, r) in body {
                let at = format!("{pointer}/2/{}", token(inner));
                resource_sites(path, folder, &at, inner, r, found)?;
            }
        }
        return Ok(());
    }
    let Some(kind) = resource.get("Type").and_then(Value::as_str) else {
        return Ok(());
    };
    let Some(properties) = resource.get("Properties").filter(|p| p.is_object()) else {
        return Ok(());
    };
    for rule in rules::of(kind) {
        let (parents, key) = match rule.property.rsplit_once('.') {
            Some((parents, key)) => (Some(parents), key),
            None => (None, rule.property),
        };
        let mut holder = properties;
        let mut parent = format!("{pointer}/Properties");
        if let Some(parents) = parents {
            let Some(inner) = holder.get(parents).filter(|v| v.is_object()) else {
                continue;
            };
            holder = inner;
            parent = format!("{parent}/{}", token(parents));
        }
        let at = format!("{path}: resource {id} property {}", rule.property);
        let local = match holder.get(key) {
            Some(Value::String(s)) if left_alone(s, rule.form) => continue,
            Some(Value::String(s)) if s.is_empty() && !rule.when_absent => continue,
            Some(Value::String(s)) => resolve(folder, s, &at)?,
            Some(_) => continue,
            None if rule.when_absent && !inline_code(properties) && parents.is_none() => {
                folder.to_owned()
            }
            None => continue,
        };
        found.push(Site {
            parent,
            key: key.to_owned(),
            at,
            path: local,
            kind: Kind::Property(rule),
        });
    }
    Ok(())
}

/// A function that needs no package: inline code, or an image.
fn inline_code(properties: &Value) -> bool {
    properties.get("InlineCode").is_some()
        || properties.get("ImageUri").is_some()
        || properties.get("PackageType").and_then(Value::as_str) == Some("Image")
}

/// `Fn::Transform` `AWS::Include` with a local `Location`, anywhere.
fn includes(
    path: &str,
    folder: &str,
    value: &Value,
    pointer: String,
    found: &mut Vec<Site>,
) -> Result<(), PackageError> {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                let here = format!("{pointer}/{}", token(key));
                if key == "Fn::Transform" {
                    include(path, folder, inner, &here, found)?;
                } else {
                    includes(path, folder, inner, here, found)?;
                }
            }
        }
        Value::Array(items) => {
            for (i, inner) in items.iter().enumerate() {
                includes(path, folder, inner, format!("{pointer}/{i}"), found)?;
            }
        }
        _ => {}
    }
    Ok(())
}

fn include(
    path: &str,
    folder: &str,
    transform: &Value,
    pointer: &str,
    found: &mut Vec<Site>,
) -> Result<(), PackageError> {
    if transform.get("Name").and_then(Value::as_str) != Some("AWS::Include") {
        return Ok(());
    }
    let Some(Value::String(location)) = transform.get("Parameters").and_then(|p| p.get("Location"))
    else {
        return Ok(());
    };
    if location.is_empty() || left_alone(location, Form::S3Uri) {
        return Ok(());
    }
    let at = format!("{path}: AWS::Include Location");
    found.push(Site {
        parent: format!("{pointer}/Parameters"),
        key: "Location".into(),
        path: resolve(folder, location, &at)?,
        at,
        kind: Kind::Include,
    });
    Ok(())
}

/// `Metadata` `AWS::ServerlessRepo::Application`'s `LicenseUrl`, `ReadmeUrl`.
fn metadata(
    path: &str,
    folder: &str,
    template: &Value,
    found: &mut Vec<Site>,
) -> Result<(), PackageError> {
    for (kind, property) in rules::METADATA {
        let Some(Value::String(local)) = template
            .get("Metadata")
            .and_then(|m| m.get(*kind))
            .and_then(|m| m.get(*property))
        else {
            continue;
        };
        if local.is_empty() || left_alone(local, Form::S3Uri) {
            continue;
        }
        let at = format!("{path}: Metadata {kind} {property}");
        found.push(Site {
            parent: format!("/Metadata/{}", token(kind)),
            key: (*property).to_owned(),
            path: resolve(folder, local, &at)?,
            at,
            kind: Kind::Metadata,
        });
    }
    Ok(())
}
