//! A pull request (a merge request on GitLab), as the webhook reads it from
//! a Git host's event and the preview function reviews it: which
//! repository and branch it merges into, which commit it proposes, whether
//! it comes from a fork, and whether it is open, merged or closed.
//!
//! Pure values: the parsers (`triggers/webhook/parse/pull_request.rs`)
//! build them, the review (`reconcile/review/`) reads them.

use serde::{Deserialize, Serialize};

/// The Git hosts whose pull requests are reviewed, each with its own API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Host {
    /// GitHub and GitHub Enterprise Server (REST API).
    GitHub,
    /// GitLab (REST API v4): merge requests.
    GitLab,
    /// Bitbucket Cloud (REST API 2.0).
    Bitbucket,
}

impl Host {
    /// Lower-case name: `github`, `gitlab`, `bitbucket`.
    pub fn as_str(self) -> &'static str {
        match self {
            Host::GitHub => "github",
            Host::GitLab => "gitlab",
            Host::Bitbucket => "bitbucket",
        }
    }

    /// What the host calls one: "pull request", or "merge request" on GitLab.
    pub fn noun(self) -> &'static str {
        match self {
            Host::GitLab => "merge request",
            _ => "pull request",
        }
    }

    /// The ref the base repository keeps a pull request's head at, where
    /// the host keeps one (GitHub `refs/pull/N/head`, GitLab
    /// `refs/merge-requests/N/head`, for forks too); Bitbucket Cloud keeps
    /// none, so its head is read from the source branch.
    pub fn head_ref(self, number: u64) -> Option<String> {
        match self {
            Host::GitHub => Some(format!("refs/pull/{number}/head")),
            Host::GitLab => Some(format!("refs/merge-requests/{number}/head")),
            Host::Bitbucket => None,
        }
    }
}

impl std::fmt::Display for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a pull request stands after the event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PrState {
    /// Opened, reopened, or pushed to: to preview.
    Open,
    /// Merged into its base.
    Merged,
    /// Closed without a merge (declined, rejected).
    Closed,
}

/// One pull request at one head commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PullRequest {
    pub host: Host,
    /// The base repository as its host names it: `owner/name` (GitLab:
    /// `group/…/project`; Bitbucket: `workspace/slug`).
    pub repository: String,
    /// The base repository's URLs (HTTPS and SSH, and the payload's
    /// spellings of the same repository): its registered entries are
    /// found by these.
    pub repository_urls: Vec<String>,
    /// The number the host shows (`#7`, GitLab's `!7`: the `iid`).
    pub number: u64,
    /// The branch it merges into: `refs/heads/main`.
    pub base_ref: String,
    /// The branch it proposes, in its own repository: `refs/heads/feature`.
    pub head_ref: String,
    /// The commit it proposes: 40 hex digits, or the shorter prefix
    /// Bitbucket Cloud sends (at least 7).
    pub head_commit: String,
    /// Its head is in another repository than its base.
    pub fork: bool,
    pub state: PrState,
    /// The commit the merge made, where the host says (40 hex digits or
    /// Bitbucket's prefix).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge_commit: Option<String>,
    /// Its page, for links.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

impl PullRequest {
    /// `github acme/infra#7` (GitLab: `!7`), for logs and messages.
    pub fn label(&self) -> String {
        let mark = if self.host == Host::GitLab { '!' } else { '#' };
        format!("{} {}{mark}{}", self.host, self.repository, self.number)
    }

    /// The short name of the base branch: `main`.
    pub fn base_branch(&self) -> &str {
        self.base_ref
            .strip_prefix("refs/heads/")
            .unwrap_or(&self.base_ref)
    }

    /// The source keys of the stacks that follow its base repository and
    /// branch (`crate::source::source_key`): the branch as a full ref, then
    /// its short name, for each URL of the repository.
    pub fn base_keys(&self) -> Vec<String> {
        let short = crate::source::normalize_ref(&self.base_ref);
        let mut keys: Vec<String> = Vec::new();
        for reference in [self.base_ref.as_str(), short] {
            for url in &self.repository_urls {
                let key = crate::source::source_key(url, Some(reference));
                if !keys.contains(&key) {
                    keys.push(key);
                }
            }
        }
        keys
    }

    /// Whether `commit` (40 hex digits) is this pull request's head: equal,
    /// or starting with Bitbucket's shorter prefix.
    pub fn is_head(&self, commit: &str) -> bool {
        !self.head_commit.is_empty()
            && commit
                .to_ascii_lowercase()
                .starts_with(&self.head_commit.to_ascii_lowercase())
    }
}

/// What a pull request's head does to a registry source's entries (its
/// stacks files planned as the applier plans them, nothing written): the
/// entries it would add, change, move and prune, or why the commit would
/// not be applied.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StacksFiles {
    /// The registry source.
    pub source: String,
    /// Why the commit would not be applied (each names file, entry and
    /// field); empty: it would be.
    pub problems: Vec<String>,
    /// The entries it adds and changes, as they would be.
    pub created: Vec<crate::spec::StackSpec>,
    pub updated: Vec<crate::spec::StackSpec>,
    /// The entries it moves to another file (nothing else changes) and
    /// prunes.
    pub moved: Vec<String>,
    pub pruned: Vec<String>,
    /// The prune guard would hold the commit (too many entries pruned).
    pub held: bool,
}

impl StacksFiles {
    /// Nothing to say: no problem, and no entry added, changed, moved or
    /// pruned.
    pub fn is_empty(&self) -> bool {
        self.problems.is_empty()
            && self.created.is_empty()
            && self.updated.is_empty()
            && self.moved.is_empty()
            && self.pruned.is_empty()
    }
}

/// The last preview of a stack posted on a pull request, recorded on the
/// stack's entry (attribute `reviewed`): what `approval: pullRequest`
/// executes after the merge, and only that.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Reviewed {
    /// [`PullRequest::label`]: `github acme/infra#7`.
    pub pull_request: String,
    /// The head commit previewed.
    pub head: String,
    /// The desired state previewed (`template::desired_hash`: template,
    /// parameters' values, tags, settings), as a run computes it.
    pub desired_hash: String,
    /// [`rows_hash`] of the preview's change set.
    pub rows_hash: String,
    /// The pull request was merged at `head` (its preview is what the
    /// merge's run may execute).
    #[serde(default)]
    pub merged: bool,
    /// When the preview was posted (epoch milliseconds).
    pub at: i64,
}

/// A hash of a change set's rows, normalized: each row's action, logical
/// id, type, replacement and changed properties (sorted), the rows sorted.
/// Equal hashes: the same resources change the same way.
pub fn rows_hash(changes: &[crate::preview::ResourceChange]) -> String {
    let mut rows: Vec<String> = changes
        .iter()
        .map(|c| {
            let mut changed = c.changed.clone();
            changed.sort();
            serde_json::json!([
                c.action,
                c.logical_id,
                c.resource_type,
                c.replacement,
                changed
            ])
            .to_string()
        })
        .collect();
    rows.sort();
    crate::hash::sha256_hex(rows.join("\n").as_bytes())
}

/// The number of the pull request a [`PullRequest::label`] names
/// (`github acme/infra#7`, `gitlab g/p!7`).
pub fn number_of_label(label: &str) -> Option<u64> {
    label.rsplit(['#', '!']).next()?.parse().ok()
}

/// A commit status, as every host has one: where a check stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CommitState {
    Pending,
    Success,
    Failure,
}

/// The longest description a status carries (GitHub's limit: 140
/// characters; the others allow more).
pub const MAX_STATUS_DESCRIPTION: usize = 140;

/// `text` cut to `max` characters, with `…` when it was cut.
pub fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pr(host: Host, head: &str) -> PullRequest {
        PullRequest {
            host,
            repository: "acme/infra".into(),
            repository_urls: vec!["https://github.com/acme/infra.git".into()],
            number: 7,
            base_ref: "refs/heads/main".into(),
            head_ref: "refs/heads/feature".into(),
            head_commit: head.into(),
            fork: false,
            state: PrState::Open,
            merge_commit: None,
            url: None,
        }
    }

    #[test]
    fn a_short_head_matches_its_full_commit_only() {
        let full = "0123456789abcdef0123456789abcdef01234567";
        assert!(pr(Host::Bitbucket, "0123456789ab").is_head(full));
        assert!(!pr(Host::Bitbucket, "0123456789ac").is_head(full));
        assert!(pr(Host::GitHub, full).is_head(&full.to_uppercase()));
        assert!(!pr(Host::GitHub, "").is_head(full));
    }

    #[test]
    fn labels_and_head_refs_follow_each_host() {
        assert_eq!(pr(Host::GitHub, "a").label(), "github acme/infra#7");
        assert_eq!(pr(Host::GitLab, "a").label(), "gitlab acme/infra!7");
        assert_eq!(
            Host::GitHub.head_ref(7).as_deref(),
            Some("refs/pull/7/head")
        );
        assert_eq!(
            Host::GitLab.head_ref(7).as_deref(),
            Some("refs/merge-requests/7/head")
        );
        assert_eq!(Host::Bitbucket.head_ref(7), None);
        assert_eq!(pr(Host::GitHub, "a").base_branch(), "main");
        assert_eq!(number_of_label("github acme/infra#7"), Some(7));
        assert_eq!(number_of_label("gitlab g/p!12"), Some(12));
        assert_eq!(number_of_label("nonsense"), None);
    }

    #[test]
    fn descriptions_are_cut_on_characters() {
        assert_eq!(shorten("abc", 3), "abc");
        assert_eq!(shorten("abcd", 3), "ab…");
        assert_eq!(shorten("ééé", 2).chars().count(), 2);
    }
}
