//! Relative templates: an entry of a registry source's stacks file may
//! leave out the repository (`source: { path: ./app/template.yaml }`). It
//! then follows the same repository and ref as the file, and its paths are
//! read from the file's folder, so a change to both is one revision.

use crate::spec::StackSpec;

/// The repository, ref and folder a stacks file was read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelativeBase {
    pub spec: super::SourceSpec,
    /// The file's folder inside the source (normal form; `""` at the top).
    pub dir: String,
}

impl RelativeBase {
    /// The base of the stacks file at `file` (normal path) of `spec`'s source.
    pub fn of(spec: &super::SourceSpec, file: &str) -> Self {
        Self {
            spec: spec.clone(),
            dir: file
                .rsplit_once('/')
                .map(|(d, _)| d.to_owned())
                .unwrap_or_default(),
        }
    }

    /// Fills in an entry that names no repository: the source's URL, ref,
    /// secret, signers and transport, and its paths read from the file's
    /// folder. An entry that names its own repository is left as it is.
    /// Returns the (field, message) of what cannot be resolved.
    pub fn resolve(&self, spec: &mut StackSpec) -> Vec<(String, String)> {
        let source = &mut spec.source;
        if source.git.is_some() || source.s3.is_some() {
            return Vec::new();
        }
        let mut problems = Vec::new();
        if source.reference.is_some() {
            problems.push((
                "source.ref".to_owned(),
                "an entry without `git` or `s3` follows the stacks file's repository at the \
                 file's own ref and commit: leave `ref` out, or name the repository"
                    .to_owned(),
            ));
        }
        let base = &self.spec;
        if base.url.starts_with("s3://") {
            source.s3 = Some(base.url.clone());
        } else {
            source.git = Some(base.url.clone());
            source.reference = Some(base.reference.clone());
        }
        if source.credentials_secret.is_none() {
            source
                .credentials_secret
                .clone_from(&base.credentials_secret);
        }
        if source.signed_by.is_empty() {
            source.signed_by.clone_from(&base.signed_by);
        }
        source.insecure |= base.insecure;
        let mut join = |field: &str, path: &mut String| match join(&self.dir, path) {
            Ok(joined) => *path = joined,
            Err(message) => problems.push((field.to_owned(), message)),
        };
        if !source.path.is_empty() {
            join("source.path", &mut source.path);
        }
        if let Some(file) = source.deployment_file.as_mut() {
            join("source.deploymentFile", file);
        }
        for (i, path) in source.include.iter_mut().enumerate() {
            join(&format!("source.include[{i}]"), path);
        }
        if let Some(file) = spec.parameter_file.as_mut() {
            join("parameterFile", file);
        }
        problems
    }
}

/// `dir` + `path`, with `.` and `..` read, never leaving the source.
fn join(dir: &str, path: &str) -> Result<String, String> {
    if path.starts_with('/') {
        return Err(format!(
            "{path:?}: a path of an entry without `git` or `s3` is read from the stacks file's \
             folder; write it relative (./template.yaml)"
        ));
    }
    let mut parts: Vec<&str> = dir.split('/').filter(|p| !p.is_empty()).collect();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err(format!("{path:?} leaves the source (`..` past its top)"));
                }
            }
            other => parts.push(other),
        }
    }
    Ok(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry_source::SourceSpec;

    fn base(file: &str) -> RelativeBase {
        RelativeBase::of(
            &SourceSpec {
                name: "infra".into(),
                url: "https://git.example/infra.git".into(),
                reference: "main".into(),
                path: "stacks/**/*.yaml".into(),
                credentials_secret: Some("arn:aws:secretsmanager:us-east-1:1:secret:t".into()),
                signed_by: vec![],
                insecure: false,
            },
            file,
        )
    }

    fn spec(source: serde_json::Value) -> StackSpec {
        serde_json::from_value(serde_json::json!({"name": "a", "source": source})).unwrap()
    }

    #[test]
    fn an_entry_without_a_repository_follows_the_files_repository_from_its_folder() {
        let mut s =
            spec(serde_json::json!({"path": "./app/template.yaml", "include": ["../shared"]}));
        assert!(base("stacks/team/a.yaml").resolve(&mut s).is_empty());
        assert_eq!(
            s.source.git.as_deref(),
            Some("https://git.example/infra.git")
        );
        assert_eq!(s.source.reference.as_deref(), Some("main"));
        assert_eq!(s.source.path, "stacks/team/app/template.yaml");
        assert_eq!(s.source.include, ["stacks/shared"]);
        assert!(s.source.credentials_secret.is_some());
    }

    #[test]
    fn an_entry_naming_its_repository_is_untouched_and_a_relative_one_cannot_leave() {
        let mut own = spec(serde_json::json!({"git": "https://other/x.git", "path": "t.yaml"}));
        let before = own.clone();
        assert!(base("a.yaml").resolve(&mut own).is_empty());
        assert_eq!(own, before);
        let mut out = spec(serde_json::json!({"path": "../../t.yaml", "ref": "dev"}));
        let problems = base("stacks/a.yaml").resolve(&mut out);
        let fields: Vec<&str> = problems.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(fields, ["source.ref", "source.path"]);
    }
}
