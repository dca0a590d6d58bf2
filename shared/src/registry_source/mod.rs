//! Registry sources: the list of stacks kept in Git (or S3). An
//! installation follows `stacks.yaml` files in repositories; each commit of
//! a source is read, validated and planned as a whole, then written, so that
//! adding, changing and removing a stack is a pull request.
//!
//! Pure values here (what a source is, what it owns, its state, the prune
//! guard, relative templates); the applier that reads a source and writes
//! the registry is `triggers::registry_source`.

pub mod pattern;
pub mod relative;

use serde::{Deserialize, Serialize};

use crate::source::source_key;
use crate::status::Timestamp;

pub use pattern::Pattern;
pub use relative::RelativeBase;

/// Who owns a registry entry: the registry source, its file and the commit
/// the entry was last written from. An entry without one is the CLI's
/// (`stacksync apply`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Owner {
    pub source: String,
    pub file: String,
    pub commit: String,
}

impl Owner {
    /// The owner in words, for messages: `registry source "infra" (stacks/a.yaml)`.
    pub fn describe(owner: Option<&Owner>) -> String {
        match owner {
            Some(o) => format!("the registry source {:?} ({})", o.source, o.file),
            None => "the CLI (`stacksync apply`)".to_owned(),
        }
    }
}

/// What an operator registers (`stacksync source add`): where the stacks
/// files are.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SourceSpec {
    pub name: String,
    /// A Git URL, or `s3://bucket/key` of an archive.
    pub url: String,
    /// The branch or tag followed (Git); for S3, empty: the latest version.
    #[serde(rename = "ref", default)]
    pub reference: String,
    /// A stacks file, a folder, or a glob ([`Pattern`]).
    pub path: String,
    /// Secrets Manager secret or SSM parameter (ARN) that opens the source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_secret: Option<String>,
    /// When given, a commit is read only if signed by one of these keys.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signed_by: Vec<String>,
    /// Fetch an `http://` or `git://` source in a deployed installation.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure: bool,
}

/// The most characters of a source's name.
pub const MAX_NAME_LEN: usize = 64;

impl SourceSpec {
    /// Every problem with the spec, as one message; `None` when it is good.
    pub fn problems(&self) -> Option<String> {
        let mut problems = Vec::new();
        let name_ok = !self.name.is_empty()
            && self.name.len() <= MAX_NAME_LEN
            && self
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !name_ok {
            problems.push(format!(
                "name {:?}: 1 to {MAX_NAME_LEN} letters, digits, - or _",
                self.name
            ));
        }
        if let Err(e) = Pattern::parse(&self.path) {
            problems.push(format!("path: {e}"));
        }
        let git = !self.url.starts_with("s3://");
        let spec = crate::spec::Source {
            git: git.then(|| self.url.clone()),
            s3: (!git).then(|| self.url.clone()),
            reference: (!self.reference.is_empty()).then(|| self.reference.clone()),
            path: "stacks.yaml".into(),
            credentials_secret: self.credentials_secret.clone(),
            insecure: self.insecure,
            signed_by: self.signed_by.clone(),
            ..crate::spec::Source::default()
        };
        problems.extend(
            crate::validate::source_problems(&spec)
                .into_iter()
                .map(|(field, message)| format!("{field}: {message}")),
        );
        if git && self.reference.is_empty() {
            problems.push("ref: a Git source follows a branch or tag: name it (--ref main)".into());
        }
        (!problems.is_empty()).then(|| problems.join("; "))
    }

    /// The key of the source's URL and ref, as the triggers find it
    /// ([`crate::source::source_key`]).
    pub fn key(&self) -> String {
        source_key(&self.url, Some(&self.reference))
    }
}

/// Where a source stands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum SourceState {
    /// Registered, not read yet.
    #[default]
    Pending,
    /// Its applied revision is in the registry.
    Ready,
    /// A commit could not be applied: nothing of it was written.
    Failed,
    /// A commit would prune more than the guard allows: not applied.
    Held,
}

impl SourceState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "Pending",
            Self::Ready => "Ready",
            Self::Failed => "Failed",
            Self::Held => "Held (PruneGuard)",
        }
    }
}

/// A commit that could not be applied, and why (each problem names the
/// file, the entry and the field).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Failure {
    pub commit: String,
    pub problems: Vec<String>,
    pub at: Timestamp,
}

/// A commit held by the prune guard, and the entries it would prune.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Hold {
    pub commit: String,
    pub entries: Vec<String>,
    /// The source's entries before that commit.
    pub of: usize,
}

/// A commit whose plan is being written, batch by batch: recorded before
/// the first batch, dropped after the last.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Applying {
    pub commit: String,
    /// The changes the plan writes.
    pub changes: usize,
    pub started_at: Timestamp,
}

/// What a source's last reads did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SourceStatus {
    pub state: SourceState,
    /// The commit (or S3 version) whose entries are in the registry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_revision: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_at: Option<Timestamp>,
    /// The entries it owns, as of its applied revision.
    #[serde(default)]
    pub entries: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applying: Option<Applying>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<Failure>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold: Option<Hold>,
    /// A commit an operator let prune past the guard (`approve-prune`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_prune: Option<String>,
}

impl SourceStatus {
    /// Whether `head` needs reading: not applied yet, a plan left
    /// unfinished, and not a commit already found failed or held (those
    /// wait for another commit, or an approval of this one).
    pub fn needs(&self, head: &str) -> bool {
        if self.applying.is_some() {
            return true;
        }
        if self.applied_revision.as_deref() == Some(head) {
            return false;
        }
        let failed_here = self.failure.as_ref().is_some_and(|f| f.commit == head);
        let held_here = self.hold.as_ref().is_some_and(|h| h.commit == head)
            && self.approved_prune.as_deref() != Some(head);
        !(failed_here || held_here)
    }

    /// One line: the state and what it is about.
    pub fn summary(&self) -> String {
        match self.state {
            SourceState::Failed => self
                .failure
                .as_ref()
                .map(|f| format!("Failed at {}: {}", short(&f.commit), f.problems.join("; ")))
                .unwrap_or_else(|| "Failed".into()),
            SourceState::Held => self
                .hold
                .as_ref()
                .map(|h| {
                    format!(
                        "Held (PruneGuard) at {}: it would prune {} of its {} entries ({}); \
                         a commit that keeps them, or `stacksync source approve-prune NAME \
                         --commit {}`, lets it go on",
                        short(&h.commit),
                        h.entries.len(),
                        h.of,
                        h.entries.join(", "),
                        h.commit
                    )
                })
                .unwrap_or_else(|| "Held (PruneGuard)".into()),
            state => state.as_str().to_owned(),
        }
    }
}

/// Every change of a source's status, each from the status read (the one
/// place that builds one; the applier and the CLI call these).
impl SourceStatus {
    /// A commit that cannot be applied: its problems recorded; what was
    /// applied before kept.
    pub fn failed(&self, commit: &str, problems: Vec<String>, at: Timestamp) -> SourceStatus {
        SourceStatus {
            state: SourceState::Failed,
            failure: Some(Failure {
                commit: commit.to_owned(),
                problems,
                at,
            }),
            hold: None,
            ..self.clone()
        }
    }

    /// A commit the prune guard holds, with the entries it would prune of `of`.
    pub fn held(&self, commit: &str, entries: Vec<String>, of: usize) -> SourceStatus {
        SourceStatus {
            state: SourceState::Held,
            hold: Some(Hold {
                commit: commit.to_owned(),
                entries,
                of,
            }),
            failure: None,
            ..self.clone()
        }
    }

    /// A commit whose plan of `changes` writes is about to be written.
    pub fn applying(&self, commit: &str, changes: usize, at: Timestamp) -> SourceStatus {
        SourceStatus {
            applying: Some(Applying {
                commit: commit.to_owned(),
                changes,
                started_at: at,
            }),
            ..self.clone()
        }
    }

    /// A commit in the registry, with the `entries` the source owns now:
    /// failure, hold and plan cleared; an approval of this commit used.
    pub fn applied(&self, commit: &str, entries: usize, at: Timestamp) -> SourceStatus {
        SourceStatus {
            state: SourceState::Ready,
            applied_revision: Some(commit.to_owned()),
            applied_at: Some(at),
            entries,
            applying: None,
            failure: None,
            hold: None,
            approved_prune: self.approved_prune.clone().filter(|c| c != commit),
        }
    }

    /// An operator's approval of the commit held (only that one).
    pub fn approved(&self, commit: &str) -> Result<SourceStatus, String> {
        match self.hold.as_ref().map(|h| h.commit.as_str()) {
            Some(held) if held == commit => Ok(SourceStatus {
                approved_prune: Some(commit.to_owned()),
                ..self.clone()
            }),
            Some(other) => Err(format!(
                "it is held at commit {other}, not {commit}: approve that one"
            )),
            None => Err("it holds no commit: nothing to approve".into()),
        }
    }
}

/// A commit id shortened for a person (12 characters).
pub fn short(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}

/// A registry source as stored: its spec, its status, and the version every
/// write is conditioned on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RegistrySource {
    #[serde(flatten)]
    pub spec: SourceSpec,
    pub status: SourceStatus,
    pub version: u64,
}

/// The installation's first registry source, from its deployment's
/// parameters (`STACKSYNC_REGISTRY_SOURCE_URL`, `_REF`, `_PATH`,
/// `_CREDENTIALS`, `_NAME`): `None` when no URL is given; an error naming
/// what is wrong otherwise.
pub fn bootstrap_spec(get: impl Fn(&str) -> Option<String>) -> Result<Option<SourceSpec>, String> {
    let var = |suffix: &str| {
        get(&format!("STACKSYNC_REGISTRY_SOURCE_{suffix}"))
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    let Some(url) = var("URL") else {
        return Ok(None);
    };
    let spec = SourceSpec {
        name: var("NAME").unwrap_or_else(|| "installation".into()),
        reference: var("REF").unwrap_or_else(|| {
            if url.starts_with("s3://") {
                String::new()
            } else {
                "main".into()
            }
        }),
        path: var("PATH").unwrap_or_else(|| "stacks.yaml".into()),
        credentials_secret: var("CREDENTIALS"),
        url,
        signed_by: Vec::new(),
        insecure: false,
    };
    match spec.problems() {
        Some(problems) => Err(format!("the installation's registry source: {problems}")),
        None => Ok(Some(spec)),
    }
}

/// The most entries a commit may prune without an approval when it does
/// not prune them all: max(5, a fifth of the source's entries).
pub fn prune_allowance(owned: usize) -> usize {
    (owned / 5).max(5)
}

/// Whether pruning `pruned` of a source's `owned` entries is held: every
/// one of them, or more than [`prune_allowance`].
pub fn prune_held(pruned: usize, owned: usize) -> bool {
    pruned > 0 && (pruned == owned || pruned > prune_allowance(owned))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guard_holds_every_entry_or_more_than_a_fifth_past_five() {
        assert!(!prune_held(0, 0));
        assert!(prune_held(1, 1), "every entry of the source");
        assert!(!prune_held(5, 10));
        assert!(prune_held(6, 10));
        assert!(!prune_held(20, 100));
        assert!(prune_held(21, 100));
        assert!(prune_held(8, 10), "80%");
    }

    #[test]
    fn a_commit_failed_or_held_waits_and_an_unfinished_plan_does_not() {
        let mut status = SourceStatus::default();
        assert!(status.needs("a"));
        status.applied_revision = Some("a".into());
        assert!(!status.needs("a"), "an idle source needs nothing");
        assert!(status.needs("b"));
        status.failure = Some(Failure {
            commit: "b".into(),
            problems: vec![],
            at: Timestamp(0),
        });
        assert!(!status.needs("b"));
        assert!(status.needs("c"), "the next commit is read");
        status.hold = Some(Hold {
            commit: "c".into(),
            entries: vec!["x".into()],
            of: 1,
        });
        assert!(!status.needs("c"));
        status.approved_prune = Some("c".into());
        assert!(status.needs("c"), "approved");
        status.applied_revision = Some("c".into());
        status.applying = Some(Applying {
            commit: "c".into(),
            changes: 3,
            started_at: Timestamp(0),
        });
        assert!(status.needs("c"), "a plan left unfinished is finished");
    }

    #[test]
    fn each_change_of_a_status_keeps_what_it_does_not_replace() {
        let at = Timestamp(5);
        let ready = SourceStatus::default().applied("a", 3, at);
        assert_eq!(
            (
                ready.state,
                ready.applied_revision.as_deref(),
                ready.entries
            ),
            (SourceState::Ready, Some("a"), 3)
        );
        let failed = ready.failed("b", vec!["x".into()], at);
        assert_eq!(
            (failed.state, failed.applied_revision.as_deref()),
            (SourceState::Failed, Some("a")),
            "the applied revision is kept"
        );
        let held = failed.held("c", vec!["e".into()], 3);
        assert_eq!(
            (held.state, held.failure.as_ref()),
            (SourceState::Held, None),
            "a hold replaces the failure"
        );
        assert!(held.approved("b").is_err(), "only the commit held");
        let approved = held.approved("c").unwrap();
        assert_eq!(approved.approved_prune.as_deref(), Some("c"));
        let applying = approved.applying("c", 2, at);
        assert_eq!(
            (
                applying.state,
                applying.applying.as_ref().map(|a| a.changes)
            ),
            (SourceState::Held, Some(2))
        );
        let done = applying.applied("c", 2, at);
        assert_eq!(
            (done.applying, done.hold, done.approved_prune),
            (None, None, None),
            "the approval is used"
        );
        assert!(SourceStatus::default().approved("c").is_err());
    }

    #[test]
    fn a_spec_with_a_bad_name_path_or_ref_says_each() {
        let spec = SourceSpec {
            name: "bad name".into(),
            url: "https://git.example/infra.git".into(),
            reference: String::new(),
            path: "**/*.yaml".into(),
            credentials_secret: None,
            signed_by: vec![],
            insecure: false,
        };
        let problems = spec.problems().unwrap();
        assert!(problems.contains("name"), "{problems}");
        assert!(problems.contains("path"), "{problems}");
        assert!(problems.contains("ref"), "{problems}");
        let good = SourceSpec {
            name: "infra".into(),
            reference: "main".into(),
            path: "stacks.yaml".into(),
            ..spec
        };
        assert_eq!(good.problems(), None);
    }
}
