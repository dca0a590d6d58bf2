//! A Git host in memory: comments per pull request and statuses per
//! commit, as the adapters leave them; calls counted; posts failed on
//! demand.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use crate::ports::{CommitStatus, GitHost, HostRepository, PortError, PortResult, Posted};

#[derive(Debug, Default)]
pub struct MemoryGitHost {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// (repository, number) → comments (id, body), in order.
    comments: BTreeMap<(String, u64), Vec<(String, String)>>,
    /// (repository, commit) → statuses, in the order set.
    statuses: BTreeMap<(String, String), Vec<CommitStatus>>,
    calls: Vec<String>,
    next_id: u64,
    failing: bool,
}

impl MemoryGitHost {
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every post fails from now on (a host that is down), or no more.
    pub fn fail(&self, failing: bool) {
        self.state().failing = failing;
    }

    /// The comments of a pull request: (id, body), in order.
    pub fn comments(&self, repository: &str, number: u64) -> Vec<(String, String)> {
        self.state()
            .comments
            .get(&(repository.to_owned(), number))
            .cloned()
            .unwrap_or_default()
    }

    /// The statuses set on a commit, in order.
    pub fn statuses(&self, repository: &str, commit: &str) -> Vec<CommitStatus> {
        self.state()
            .statuses
            .get(&(repository.to_owned(), commit.to_owned()))
            .cloned()
            .unwrap_or_default()
    }

    /// The calls, as `upsert_comment` and `set_status`, in order.
    pub fn calls(&self) -> Vec<String> {
        self.state().calls.clone()
    }
}

impl GitHost for MemoryGitHost {
    async fn repository_of(&self, url: &str, credentials: Option<&str>) -> Option<HostRepository> {
        Some(HostRepository {
            host: crate::ports::git_host::host_by_name(url, None)
                .unwrap_or(crate::pull_request::Host::GitHub),
            repository: crate::ports::git_host::repository_path(url)?,
            url: url.to_owned(),
            credentials: credentials.map(str::to_owned),
        })
    }

    async fn upsert_comment(
        &self,
        repository: &HostRepository,
        number: u64,
        marker: &str,
        body: &str,
        create: bool,
    ) -> PortResult<Option<Posted>> {
        let mut state = self.state();
        state.calls.push("upsert_comment".into());
        if state.failing {
            return Err(PortError::Transient("HTTP 502 (the host is down)".into()));
        }
        state.next_id += 1;
        let next = state.next_id.to_string();
        let comments = state
            .comments
            .entry((repository.repository.clone(), number))
            .or_default();
        if let Some((id, old)) = comments.iter_mut().find(|(_, b)| b.contains(marker)) {
            *old = body.to_owned();
            return Ok(Some(Posted {
                id: id.clone(),
                created: false,
            }));
        }
        if !create {
            return Ok(None);
        }
        comments.push((next.clone(), body.to_owned()));
        Ok(Some(Posted {
            id: next,
            created: true,
        }))
    }

    async fn edit_comment(
        &self,
        repository: &HostRepository,
        number: u64,
        marker: &str,
        edit: &(dyn Fn(&str) -> String + Send + Sync),
    ) -> PortResult<Option<Posted>> {
        let mut state = self.state();
        state.calls.push("edit_comment".into());
        if state.failing {
            return Err(PortError::Transient("HTTP 502 (the host is down)".into()));
        }
        let comments = state
            .comments
            .entry((repository.repository.clone(), number))
            .or_default();
        Ok(comments
            .iter_mut()
            .find(|(_, b)| b.contains(marker))
            .map(|(id, body)| {
                *body = edit(body);
                Posted {
                    id: id.clone(),
                    created: false,
                }
            }))
    }

    async fn set_status(
        &self,
        repository: &HostRepository,
        commit: &str,
        status: &CommitStatus,
    ) -> PortResult<()> {
        let mut state = self.state();
        state.calls.push("set_status".into());
        if state.failing {
            return Err(PortError::Transient("HTTP 502 (the host is down)".into()));
        }
        state
            .statuses
            .entry((repository.repository.clone(), commit.to_owned()))
            .or_default()
            .push(status.clone());
        Ok(())
    }
}
