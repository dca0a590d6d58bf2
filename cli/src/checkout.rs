//! A checkout as a source (`validate --checkout DIR`): each entry's files
//! are read from a directory (the working tree a pre-commit hook or a CI
//! job has), not fetched. Paths are the entries' own, checked as a fetch
//! checks them: inside the directory (symbolic links resolved), each file
//! within the size a source may give. No commit, so `signedBy` is not
//! checked here.

use std::path::{Path, PathBuf};

use stacksync::content::{ContentError, Limits, Role, Wanted, check_file};
use stacksync::ports::{FetchError, Files, PortError, SourceFetcher, SourceLocation};

/// What a checkout "resolves" every ref to.
pub const REVISION: &str = "checkout";

#[derive(Debug, Clone)]
pub struct Checkout {
    root: PathBuf,
}

impl Checkout {
    pub fn new(root: &Path) -> Result<Self, String> {
        let root = std::fs::canonicalize(root)
            .map_err(|e| format!("--checkout {}: {e}", root.display()))?;
        Ok(Self { root })
    }

    /// `path` inside the checkout, links resolved; `None` when not there.
    fn inside(&self, path: &str) -> Result<Option<PathBuf>, FetchError> {
        let full = self.root.join(path);
        match std::fs::canonicalize(&full) {
            Ok(real) if real.starts_with(&self.root) => Ok(Some(real)),
            Ok(real) => Err(ContentError::LinkEscapes {
                path: path.to_owned(),
                target: real.display().to_string(),
            }
            .into()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(unreadable(path, &e)),
        }
    }

    fn read(&self, path: &str, real: &Path, files: &mut Files) -> Result<(), FetchError> {
        let bytes = std::fs::read(real).map_err(|e| unreadable(path, &e))?;
        check_file(path, &bytes)?;
        files.push((path.to_owned(), bytes));
        Ok(())
    }

    /// Every file under `folder` (as `folder/…`), in path order.
    fn walk(
        &self,
        folder: &str,
        real: &Path,
        files: &mut Files,
        limits: Limits,
    ) -> Result<(), FetchError> {
        let mut names: Vec<_> = std::fs::read_dir(real)
            .map_err(|e| unreadable(folder, &e))?
            .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect();
        names.sort();
        for name in names {
            if name == ".git" {
                continue;
            }
            let path = format!("{folder}/{name}");
            let Some(inner) = self.inside(&path)? else {
                continue;
            };
            if inner.is_dir() {
                self.walk(&path, &inner, files, limits)?;
            } else {
                self.read(&path, &inner, files)?;
            }
            if files.len() > limits.files {
                return Err(ContentError::TooMuch {
                    limit: format!("{} files", limits.files),
                    hint: limits.hint,
                }
                .into());
            }
        }
        Ok(())
    }
}

fn unreadable(path: &str, e: &std::io::Error) -> FetchError {
    FetchError::Port(PortError::Refused(format!("cannot read {path}: {e}")))
}

impl SourceFetcher for Checkout {
    async fn resolve(
        &self,
        _source: &SourceLocation,
        _reference: &str,
    ) -> Result<String, FetchError> {
        Ok(REVISION.to_owned())
    }

    async fn fetch(
        &self,
        _source: &SourceLocation,
        _revision: &str,
        wanted: &Wanted,
    ) -> Result<Files, FetchError> {
        let mut files = Files::new();
        for (path, role) in &wanted.paths {
            let Some(real) = self.inside(path)? else {
                return Err(ContentError::Missing {
                    path: path.clone(),
                    role: *role,
                }
                .into());
            };
            match (real.is_dir(), role) {
                (true, Role::Included) => self.walk(path, &real, &mut files, wanted.limits)?,
                (true, _) => {
                    return Err(ContentError::Folder {
                        path: path.clone(),
                        role: *role,
                    }
                    .into());
                }
                (false, _) => self.read(path, &real, &mut files)?,
            }
        }
        Ok(files)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn tree() -> (PathBuf, Checkout) {
        let dir = std::env::temp_dir().join(format!("checkout-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("policies/s3")).unwrap();
        std::fs::write(dir.join("t.yaml"), "Resources: {}\n").unwrap();
        std::fs::write(
            dir.join("policies/tags.guard"),
            "rule A { Resources exists }\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("policies/s3/b.guard"),
            "rule B { Resources exists }\n",
        )
        .unwrap();
        let checkout = Checkout::new(&dir).unwrap();
        (dir, checkout)
    }

    #[tokio::test]
    async fn files_and_folders_are_read_inside_the_checkout_and_nowhere_else() {
        let (dir, checkout) = tree();
        let source = SourceLocation {
            url: "https://git.example/infra.git".into(),
            credentials: None,
        };
        assert_eq!(checkout.resolve(&source, "main").await.unwrap(), REVISION);
        let wanted = Wanted::new(vec![
            ("t.yaml".into(), Role::Template),
            ("policies".into(), Role::Included),
        ]);
        let files = checkout.fetch(&source, REVISION, &wanted).await.unwrap();
        let paths: Vec<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            paths,
            ["policies/s3/b.guard", "policies/tags.guard", "t.yaml"]
        );

        let missing = Wanted::new(vec![("nope.yaml".into(), Role::Template)]);
        let err = checkout
            .fetch(&source, REVISION, &missing)
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("nope.yaml is not in the source"),
            "{err}"
        );
        let folder = Wanted::new(vec![("policies".into(), Role::Template)]);
        let err = checkout
            .fetch(&source, REVISION, &folder)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("is a folder"), "{err}");

        // A link out of the checkout is refused, not followed.
        std::os::unix::fs::symlink("/etc/hostname", dir.join("policies/out.guard")).unwrap();
        let err = checkout
            .fetch(
                &source,
                REVISION,
                &Wanted::new(vec![("policies".into(), Role::Included)]),
            )
            .await
            .unwrap_err();
        assert!(err.to_string().contains("leaves the source"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
