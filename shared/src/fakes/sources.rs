//! Sources in memory: a repository is a map of refs to revisions, and of
//! revisions to files.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::ports::{PortError, PortResult, SourceFetcher};
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
    async fn resolve(&self, url: &str, reference: &str) -> PortResult<String> {
        bump(&self.resolves);
        let repos = self.repos.lock().unwrap_or_else(PoisonError::into_inner);
        let repo = repos
            .get(&normalize_url(url))
            .ok_or_else(|| PortError::Rejected(format!("repository {url} not found")))?;
        if repo.trees.contains_key(reference) {
            return Ok(reference.to_owned());
        }
        repo.refs.get(reference).cloned().ok_or_else(|| {
            PortError::Rejected(format!("reference {reference:?} not found on the remote"))
        })
    }

    async fn fetch(&self, url: &str, revision: &str) -> PortResult<Vec<(String, Vec<u8>)>> {
        bump(&self.fetches);
        let repos = self.repos.lock().unwrap_or_else(PoisonError::into_inner);
        repos
            .get(&normalize_url(url))
            .and_then(|r| r.trees.get(revision))
            .cloned()
            .ok_or_else(|| PortError::Rejected(format!("revision {revision} of {url} not found")))
    }
}
