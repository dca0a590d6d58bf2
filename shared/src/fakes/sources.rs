//! Sources in memory: a repository is a map of refs to revisions, and of
//! revisions to files.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::content::{ContentError, Wanted, check_file, normal};
use crate::ports::source::{FetchError, Files, SourceFetcher, SourceLocation, rejected};
use crate::source::normalize_url;

#[derive(Debug, Default)]
struct Repo {
    refs: BTreeMap<String, String>,
    trees: BTreeMap<String, Vec<(String, Vec<u8>)>>,
}

/// Repositories by normal URL. Clones share them (the scheduler lists
/// sources from tasks of its own).
#[derive(Debug, Default, Clone)]
pub struct MemorySources {
    repos: Arc<Mutex<BTreeMap<String, Repo>>>,
    resolves: Arc<Mutex<usize>>,
    /// Repositories (normal URLs) that refuse every credential.
    denied: Arc<Mutex<Vec<String>>>,
    fetches: Arc<Mutex<usize>>,
}

impl MemorySources {
    pub fn new() -> Self {
        Self::default()
    }

    /// Commits `files` as `revision` and moves `reference` to it.
    pub fn commit(&self, url: &str, reference: &str, revision: &str, files: &[(&str, &[u8])]) {
        let mut repos = self.repos.lock().unwrap_or_else(PoisonError::into_inner);
        let repo = repos.entry(normalize_url(url)).or_default();
        repo.refs.insert(reference.to_owned(), revision.to_owned());
        repo.trees.insert(
            revision.to_owned(),
            files
                .iter()
                .map(|(p, b)| ((*p).to_owned(), b.to_vec()))
                .collect(),
        );
    }

    /// Makes the repository at `url` refuse credentials, as a server does
    /// with a wrong or expired token.
    pub fn deny(&self, url: &str) {
        self.denied
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(normalize_url(url));
    }

    /// How many times a ref was resolved, and a tree fetched.
    pub fn calls(&self) -> (usize, usize) {
        let count = |m: &Mutex<usize>| *m.lock().unwrap_or_else(PoisonError::into_inner);
        (count(&self.resolves), count(&self.fetches))
    }
}

fn bump(counter: &Mutex<usize>) {
    *counter.lock().unwrap_or_else(PoisonError::into_inner) += 1;
}

impl SourceFetcher for MemorySources {
    async fn resolve(
        &self,
        source: &SourceLocation,
        reference: &str,
    ) -> Result<String, FetchError> {
        bump(&self.resolves);
        let url = &source.url;
        let denied = self.denied.lock().unwrap_or_else(PoisonError::into_inner);
        if denied.contains(&normalize_url(url)) {
            return Err(FetchError::Authentication {
                url: url.clone(),
                detail: "HTTP 401".into(),
            });
        }
        drop(denied);
        let repos = self.repos.lock().unwrap_or_else(PoisonError::into_inner);
        let repo = repos
            .get(&normalize_url(url))
            .ok_or_else(|| rejected(format!("repository {url} not found")))?;
        if repo.trees.contains_key(reference) {
            return Ok(reference.to_owned());
        }
        repo.refs
            .get(reference)
            .cloned()
            .ok_or_else(|| rejected(format!("reference {reference:?} not found on the remote")))
    }

    /// The wanted files, each one that must be there (an included folder
    /// takes what is under it), as the Git adapter takes them.
    async fn fetch(
        &self,
        source: &SourceLocation,
        revision: &str,
        wanted: &Wanted,
    ) -> Result<Files, FetchError> {
        bump(&self.fetches);
        let repos = self.repos.lock().unwrap_or_else(PoisonError::into_inner);
        let url = &source.url;
        let tree = repos
            .get(&normalize_url(url))
            .and_then(|r| r.trees.get(revision))
            .ok_or_else(|| rejected(format!("revision {revision} of {url} not found")))?;
        let mut files: Files = tree
            .iter()
            .filter(|(path, _)| wanted.role_of(&normal(path)).is_some())
            .map(|(path, bytes)| (normal(path), bytes.clone()))
            .collect();
        for (path, role) in &wanted.paths {
            if !files
                .iter()
                .any(|(p, _)| wanted.role_of(p) == Some(*role) && p.starts_with(path.as_str()))
            {
                return Err(ContentError::Missing {
                    path: path.clone(),
                    role: *role,
                }
                .into());
            }
        }
        for (path, bytes) in &files {
            check_file(path, bytes)?;
        }
        files.sort();
        Ok(files)
    }
}
