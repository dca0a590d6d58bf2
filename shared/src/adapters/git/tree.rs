//! Taking the wanted files out of a commit's tree: only the paths asked
//! for are walked and only their blobs read, so a monorepo costs what its
//! few wanted files cost. Blobs the first pack left out (a partial clone)
//! are fetched in rounds: the files, then the targets of symbolic links.

use std::collections::BTreeMap;

use gix::ObjectId;
use gix::bstr::ByteSlice;
use gix::object::tree::EntryKind;

use super::Error;
use crate::content::{
    Budget, ContentError, Limits, MAX_LINK_HOPS, Role, Wanted, check_file, entry_name, link_target,
};
use crate::ports::source::Files;

/// Where a path leads in a tree.
#[derive(Debug, PartialEq, Eq)]
enum Lookup {
    Missing,
    Folder(ObjectId),
    Blob(ObjectId),
    Submodule,
    /// A symbolic link at `at` (a prefix of the path, or the path itself),
    /// with `rest` of the path beyond it.
    Link {
        at: String,
        blob: ObjectId,
        rest: String,
    },
}

/// A path still to take: the name the run knows it by, and where it leads now.
#[derive(Debug, Clone)]
struct Pending {
    name: String,
    role: Role,
    path: String,
    hops: usize,
}

/// The wanted files of the tree `root`. `fetch_blobs` brings blobs the
/// repository lacks (a filtered first pack) into it.
pub(super) fn take(
    repo: &gix::Repository,
    root: ObjectId,
    wanted: &Wanted,
    mut fetch_blobs: impl FnMut(&[ObjectId]) -> Result<(), Error>,
) -> Result<Files, Error> {
    let mut files = BTreeMap::new();
    let mut budget = Budget::new(wanted.limits);
    let mut pending: Vec<Pending> = wanted
        .paths
        .iter()
        .map(|(path, role)| Pending {
            name: path.clone(),
            role: *role,
            path: path.clone(),
            hops: 0,
        })
        .collect();
    let mut asked: Vec<ObjectId> = Vec::new();
    while !pending.is_empty() {
        let mut missing = Vec::new();
        let mut next = Vec::new();
        for item in pending {
            step(
                repo,
                root,
                item,
                &mut files,
                &mut budget,
                &mut missing,
                &mut next,
            )?;
        }
        missing.sort();
        missing.dedup();
        if let Some(lost) = missing.iter().find(|id| asked.contains(id)) {
            return Err(Error::Refused(format!(
                "the server did not send object {lost}"
            )));
        }
        if !missing.is_empty() {
            fetch_blobs(&missing)?;
            asked.extend(missing);
        }
        pending = next;
    }
    Ok(files.into_iter().collect())
}

/// One path one step on: read, expanded (a folder), followed (a link), or
/// left for the next round (its blob is not here yet).
fn step(
    repo: &gix::Repository,
    root: ObjectId,
    item: Pending,
    files: &mut BTreeMap<String, Vec<u8>>,
    budget: &mut Budget,
    missing: &mut Vec<ObjectId>,
    next: &mut Vec<Pending>,
) -> Result<(), Error> {
    match lookup(repo, root, &item.path)? {
        Lookup::Missing => Err(ContentError::Missing {
            path: item.name,
            role: item.role,
        })?,
        Lookup::Submodule => Err(ContentError::Submodule { path: item.name })?,
        Lookup::Folder(tree) if item.role == Role::Included => {
            next.extend(folder(repo, tree, &item, budget.limits())?);
            Ok(())
        }
        Lookup::Folder(_) => Err(ContentError::Folder {
            path: item.name,
            role: item.role,
        })?,
        Lookup::Blob(blob) if !repo.has_object(blob) => {
            missing.push(blob);
            next.push(item);
            Ok(())
        }
        Lookup::Blob(blob) => {
            let size = repo
                .find_header(blob)
                .map_err(gix::Error::from_error)?
                .size();
            budget.take(&item.name, size)?;
            let data = repo
                .find_object(blob)
                .map_err(gix::Error::from_error)?
                .detach()
                .data;
            check_file(&item.name, &data)?;
            files.insert(item.name, data);
            Ok(())
        }
        Lookup::Link { blob, .. } if !repo.has_object(blob) => {
            missing.push(blob);
            next.push(item);
            Ok(())
        }
        Lookup::Link { at, blob, rest } => {
            if item.hops >= MAX_LINK_HOPS {
                return Err(ContentError::LinkLoop { path: item.name }.into());
            }
            let target = repo
                .find_object(blob)
                .map_err(gix::Error::from_error)?
                .detach()
                .data;
            let target = link_target(&at, &target)?;
            let path = if rest.is_empty() {
                target
            } else {
                format!("{target}/{rest}")
            };
            next.push(Pending {
                path,
                hops: item.hops + 1,
                ..item
            });
            Ok(())
        }
    }
}

/// Every file under an included folder, as paths still to take.
fn folder(
    repo: &gix::Repository,
    tree: ObjectId,
    item: &Pending,
    limits: Limits,
) -> Result<Vec<Pending>, Error> {
    let mut recorder = gix::traverse::tree::Recorder::default();
    repo.find_tree(tree)
        .map_err(gix::Error::from_error)?
        .traverse()
        .breadthfirst(&mut recorder)
        .map_err(gix::Error::from_error)?;
    let mut found = Vec::new();
    for entry in recorder.records {
        if entry.mode.kind() == EntryKind::Tree {
            continue;
        }
        let relative = entry_name(entry.filepath.as_bytes())?;
        found.push(Pending {
            name: format!("{}/{relative}", item.name),
            role: Role::Included,
            path: format!("{}/{relative}", item.path),
            hops: item.hops,
        });
        if found.len() > limits.files {
            Err(ContentError::TooMuch {
                limit: format!("{} files", limits.files),
                hint: limits.hint,
            })?;
        }
    }
    Ok(found)
}

/// Walks `path` down from the tree `root`, component by component, and
/// stops at the first symbolic link, submodule or missing name.
fn lookup(repo: &gix::Repository, root: ObjectId, path: &str) -> Result<Lookup, Error> {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let mut tree = root;
    for (i, part) in parts.iter().enumerate() {
        let data = repo.find_tree(tree).map_err(gix::Error::from_error)?;
        let decoded = data.decode().map_err(gix::Error::from_error)?;
        let Some(entry) = decoded
            .entries
            .iter()
            .find(|e| e.filename == part.as_bytes())
        else {
            return Ok(Lookup::Missing);
        };
        let last = i + 1 == parts.len();
        let id = entry.oid.to_owned();
        match entry.mode.kind() {
            EntryKind::Tree if last => return Ok(Lookup::Folder(id)),
            EntryKind::Tree => tree = id,
            EntryKind::Blob | EntryKind::BlobExecutable if last => return Ok(Lookup::Blob(id)),
            EntryKind::Blob | EntryKind::BlobExecutable => return Ok(Lookup::Missing),
            EntryKind::Commit => return Ok(Lookup::Submodule),
            EntryKind::Link => {
                return Ok(Lookup::Link {
                    at: parts[..=i].join("/"),
                    blob: id,
                    rest: parts[i + 1..].join("/"),
                });
            }
        }
    }
    Ok(Lookup::Folder(tree))
}
