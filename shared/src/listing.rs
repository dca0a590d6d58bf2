//! What an archive holds, by path, and where each wanted path leads in it:
//! through symbolic links (inside the archive only) and included folders.
//! Pure: the archive adapters list entries into a [`Listing`], ask
//! [`Listing::locate`] which entries to read, and read only those.

use std::collections::BTreeMap;

use crate::content::{Budget, ContentError, MAX_LINK_HOPS, Role, Wanted, link_target};

/// One entry of an archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    File {
        size: u64,
    },
    Folder,
    /// A symbolic link, with its target as the archive gives it.
    Link(Vec<u8>),
}

/// An archive's entries by normal path; folders that only appear as the
/// parents of files count as folders.
#[derive(Debug, Default, Clone)]
pub struct Listing {
    nodes: BTreeMap<String, Node>,
}

/// A wanted file found: the name the run knows it by, the entry to read,
/// and its size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    pub name: String,
    pub entry: String,
    pub size: u64,
}

impl Listing {
    /// Adds an entry (a later entry of one name replaces an earlier one,
    /// as unpacking would).
    pub fn add(&mut self, path: String, node: Node) {
        if !path.is_empty() {
            self.nodes.insert(path, node);
        }
    }

    fn node(&self, path: &str) -> Option<Node> {
        if path.is_empty() {
            return Some(Node::Folder);
        }
        if let Some(node) = self.nodes.get(path) {
            return Some(node.clone());
        }
        let prefix = format!("{path}/");
        self.nodes
            .range(prefix.clone()..)
            .next()
            .filter(|(p, _)| p.starts_with(&prefix))
            .map(|_| Node::Folder)
    }

    /// Where `path` leads: its final path and node, links followed.
    fn follow(&self, name: &str, path: &str) -> Result<Option<(String, Node)>, ContentError> {
        let mut path = path.to_owned();
        for _ in 0..=MAX_LINK_HOPS {
            let parts: Vec<&str> = path.split('/').collect();
            let mut moved = None;
            for i in 0..parts.len() {
                let prefix = parts[..=i].join("/");
                match self.node(&prefix) {
                    None => return Ok(None),
                    Some(Node::Link(target)) => {
                        let target = link_target(&prefix, &target)?;
                        let rest = parts[i + 1..].join("/");
                        moved = Some(if rest.is_empty() {
                            target
                        } else {
                            format!("{target}/{rest}")
                        });
                        break;
                    }
                    Some(Node::File { .. }) if i + 1 < parts.len() => return Ok(None),
                    Some(node) if i + 1 == parts.len() => return Ok(Some((path.clone(), node))),
                    Some(_) => {}
                }
            }
            match moved {
                Some(next) => path = next,
                None => return Ok(None),
            }
        }
        Err(ContentError::LinkLoop {
            path: name.to_owned(),
        })
    }

    /// The entries to read for `wanted`, each within the run's budget.
    pub fn locate(&self, wanted: &Wanted) -> Result<Vec<Located>, ContentError> {
        let mut found = Vec::new();
        let mut budget = Budget::new(wanted.limits);
        for (path, role) in &wanted.paths {
            let missing = || ContentError::Missing {
                path: path.clone(),
                role: *role,
            };
            match self.follow(path, path)?.ok_or_else(missing)? {
                (entry, Node::File { size }) => found.push(Located {
                    name: path.clone(),
                    entry,
                    size,
                }),
                (folder, Node::Folder) if *role == Role::Included => {
                    found.extend(self.under(path, &folder, wanted.limits)?);
                }
                (_, Node::Folder) => {
                    return Err(ContentError::Folder {
                        path: path.clone(),
                        role: *role,
                    });
                }
                (_, Node::Link(_)) => return Err(missing()),
            }
        }
        for located in &found {
            budget.take(&located.name, located.size)?;
        }
        Ok(found)
    }

    /// Every file under `folder` (links followed), named under `name`.
    fn under(
        &self,
        name: &str,
        folder: &str,
        limits: crate::content::Limits,
    ) -> Result<Vec<Located>, ContentError> {
        let prefix = format!("{folder}/");
        let mut found = Vec::new();
        for (path, node) in self.nodes.range(prefix.clone()..) {
            let Some(relative) = path.strip_prefix(&prefix) else {
                break;
            };
            if matches!(node, Node::Folder) {
                continue;
            }
            let named = format!("{name}/{relative}");
            match self.follow(&named, path)? {
                Some((entry, Node::File { size })) => found.push(Located {
                    name: named,
                    entry,
                    size,
                }),
                Some(_) => {}
                None => {
                    return Err(ContentError::Missing {
                        path: named,
                        role: Role::Included,
                    });
                }
            }
            if found.len() > limits.files {
                return Err(ContentError::TooMuch {
                    limit: format!("{} files", limits.files),
                    hint: limits.hint,
                });
            }
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listing() -> Listing {
        let mut l = Listing::default();
        l.add("envs/prod.yaml".into(), Node::File { size: 10 });
        l.add("t.yaml".into(), Node::Link(b"envs/prod.yaml".to_vec()));
        l.add("alias".into(), Node::Link(b"envs".to_vec()));
        l.add("nested/a.yaml".into(), Node::File { size: 1 });
        l.add("nested/deep/b.yaml".into(), Node::File { size: 2 });
        l.add("out".into(), Node::Link(b"../../etc/passwd".to_vec()));
        l.add("loop1".into(), Node::Link(b"loop2".to_vec()));
        l.add("loop2".into(), Node::Link(b"loop1".to_vec()));
        l
    }

    fn wanted(path: &str, role: Role) -> Wanted {
        Wanted::new(vec![(path.into(), role)])
    }

    #[test]
    fn files_are_found_through_links_to_files_and_to_folders() {
        let l = listing();
        let found = l.locate(&wanted("t.yaml", Role::Template)).unwrap();
        assert_eq!(
            found,
            [Located {
                name: "t.yaml".into(),
                entry: "envs/prod.yaml".into(),
                size: 10
            }]
        );
        let found = l
            .locate(&wanted("alias/prod.yaml", Role::Template))
            .unwrap();
        assert_eq!(found[0].entry, "envs/prod.yaml");
    }

    #[test]
    fn an_included_folder_brings_everything_under_it() {
        let found = listing().locate(&wanted("nested", Role::Included)).unwrap();
        let names: Vec<&str> = found.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["nested/a.yaml", "nested/deep/b.yaml"]);
    }

    #[test]
    fn missing_folders_escapes_and_loops_are_each_refused_by_name() {
        let l = listing();
        let cases = [
            (
                wanted("nope.yaml", Role::Template),
                "template nope.yaml is not in the source",
            ),
            (
                wanted("nested", Role::Template),
                "template nested is a folder",
            ),
            (wanted("out", Role::Template), "leaves the source"),
            (wanted("loop1", Role::Template), "symbolic links in a row"),
            (
                wanted("envs/prod.yaml/x", Role::Template),
                "is not in the source",
            ),
        ];
        for (w, message) in cases {
            let err = l.locate(&w).unwrap_err().to_string();
            assert!(err.contains(message), "{w:?}: {err}");
        }
    }

    #[test]
    fn the_files_a_run_takes_are_budgeted() {
        let mut l = Listing::default();
        l.add(
            "big".into(),
            Node::File {
                size: crate::content::MAX_FILE_BYTES + 1,
            },
        );
        let err = l.locate(&wanted("big", Role::Template)).unwrap_err();
        assert!(matches!(err, ContentError::FileTooLarge { .. }), "{err}");
    }
}
