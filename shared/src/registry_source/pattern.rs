//! Which files of a registry source are stacks files: one file, a folder
//! (every `.yaml` and `.yml` under it), or a glob (`stacks/**/*.yaml`).
//!
//! A glob's `*` matches within one path segment, `?` one character of it,
//! and a segment `**` any number of segments (none included). Every pattern
//! must begin with a literal folder or name, so that only that part of the
//! source is fetched (lean fetch), never the whole repository.

use crate::content::{Role, Wanted, normal};

/// A validated stacks-file pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    /// As written, in normal form (`./stacks//x.yaml` → `stacks/x.yaml`).
    text: String,
    kind: Kind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    /// One file.
    File,
    /// A folder: every `.yaml` and `.yml` under it.
    Folder,
    /// A glob under the literal folder `prefix`.
    Glob { prefix: String },
}

fn is_glob(segment: &str) -> bool {
    segment.contains(['*', '?', '[', ']', '{', '}'])
}

impl Pattern {
    /// Reads a pattern: a path inside the source, relative, without `..`.
    pub fn parse(path: &str) -> Result<Self, String> {
        if path.trim().is_empty() {
            return Err("the path is empty: name a stacks file, a folder or a glob".into());
        }
        if path.starts_with('/') || path.contains('\\') {
            return Err(format!(
                "{path:?} must be a relative path inside the source, written with /"
            ));
        }
        let text = normal(path);
        let segments: Vec<&str> = text.split('/').collect();
        if segments.contains(&"..") {
            return Err(format!("{path:?} leaves the source (`..`)"));
        }
        if let Some(bad) = segments.iter().find(|s| s.contains(['[', ']', '{', '}'])) {
            return Err(format!(
                "{path:?}: the segment {bad:?} uses [ ] or {{ }}, which stacksync's globs do not \
                 read (use *, ? and **)"
            ));
        }
        let literal: Vec<&str> = segments
            .iter()
            .copied()
            .take_while(|s| !is_glob(s))
            .collect();
        let kind = if literal.len() == segments.len() {
            if path.ends_with('/') || !has_yaml_extension(&text) {
                Kind::Folder
            } else {
                Kind::File
            }
        } else if literal.is_empty() {
            return Err(format!(
                "{path:?} begins with a wildcard: begin it with a folder (`stacks/**/*.yaml`), so \
                 that only that folder is fetched"
            ));
        } else {
            Kind::Glob {
                prefix: literal.join("/"),
            }
        };
        Ok(Self { text, kind })
    }

    /// The pattern in normal form.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// What to fetch: the file, or the folder the pattern lies under.
    pub fn wanted(&self, signed_by: &[String]) -> Wanted {
        let path = match &self.kind {
            Kind::File | Kind::Folder => self.text.clone(),
            Kind::Glob { prefix } => prefix.clone(),
        };
        let role = match self.kind {
            Kind::File => Role::StacksFile,
            Kind::Folder | Kind::Glob { .. } => Role::Included,
        };
        let mut wanted = Wanted::new(vec![(path, role)]);
        wanted.signed_by = signed_by.to_vec();
        wanted
    }

    /// Whether the fetched file `path` (normal) is a stacks file.
    pub fn matches(&self, path: &str) -> bool {
        match &self.kind {
            Kind::File => path == self.text,
            Kind::Folder => {
                path.strip_prefix(self.text.as_str())
                    .is_some_and(|rest| rest.starts_with('/'))
                    && has_yaml_extension(path)
            }
            Kind::Glob { .. } => {
                let pattern: Vec<&str> = self.text.split('/').collect();
                let path: Vec<&str> = path.split('/').collect();
                segments_match(&pattern, &path)
            }
        }
    }
}

fn has_yaml_extension(path: &str) -> bool {
    path.ends_with(".yaml") || path.ends_with(".yml")
}

fn segments_match(pattern: &[&str], path: &[&str]) -> bool {
    match pattern.split_first() {
        None => path.is_empty(),
        Some((&"**", rest)) => (0..=path.len()).any(|skip| segments_match(rest, &path[skip..])),
        Some((first, rest)) => path.split_first().is_some_and(|(segment, tail)| {
            crate::ownership::wildcard(first, segment) && segments_match(rest, tail)
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_a_folder_and_a_glob_each_match_what_they_say() {
        let file = Pattern::parse("./stacks.yaml").unwrap();
        assert!(file.matches("stacks.yaml"));
        assert!(!file.matches("other/stacks.yaml"));
        assert_eq!(
            file.wanted(&[]).paths,
            [("stacks.yaml".to_owned(), Role::StacksFile)]
        );

        let folder = Pattern::parse("stacks/").unwrap();
        assert!(folder.matches("stacks/a.yaml"));
        assert!(folder.matches("stacks/team/b.yml"));
        assert!(!folder.matches("stacks/README.md"));
        assert!(!folder.matches("stacksx/a.yaml"));
        assert_eq!(
            folder.wanted(&[]).paths,
            [("stacks".to_owned(), Role::Included)]
        );

        let glob = Pattern::parse("stacks/**/*.yaml").unwrap();
        for yes in ["stacks/a.yaml", "stacks/x/y/b.yaml"] {
            assert!(glob.matches(yes), "{yes}");
        }
        for no in ["stacks/a.yml", "other/a.yaml", "stacks/a.yaml.bak"] {
            assert!(!glob.matches(no), "{no}");
        }
        assert_eq!(
            glob.wanted(&[]).paths,
            [("stacks".to_owned(), Role::Included)]
        );
        let one = Pattern::parse("envs/*/stacks-?.yaml").unwrap();
        assert!(one.matches("envs/prod/stacks-1.yaml"));
        assert!(!one.matches("envs/prod/eu/stacks-1.yaml"));
    }

    #[test]
    fn patterns_that_leave_the_source_or_fetch_all_of_it_are_refused() {
        for bad in [
            "",
            "/etc/stacks.yaml",
            "../x.yaml",
            "a/../../x.yaml",
            "**/*.yaml",
            "*.yaml",
            "a\\b.yaml",
            "s/[ab].yaml",
        ] {
            let error = Pattern::parse(bad).expect_err(bad);
            assert!(!error.is_empty(), "{bad}");
        }
    }
}
