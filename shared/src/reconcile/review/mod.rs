//! The review of a pull request: which registered stacks it touches, the
//! preview of each at its head commit (the change set a run would make,
//! made, described and deleted by `reconcile::diff`, never executed), one
//! comment on the pull request updated in place, and a commit status on
//! its head.
//!
//! Decided from what is observed, not from records: the stacks are those
//! that follow the base repository and branch and whose wanted files
//! (template, parameter or deployment file, `source.include`) differ
//! between the base branch's head and the pull request's head, and those
//! the pull request's stacks files add or change (its registry sources
//! planned at the head, `ports::stacks_files`); the head is read from the
//! repository again before anything is posted, and a head that moved means
//! a newer push, whose own review posts instead.
//!
//! `approval: pullRequest`: each preview of such an entry is recorded on it
//! (`registry::Reviews`) and marked by the merge; a run's own status on
//! its commit, and the merged pull request's "After the merge" lines, come
//! from the run's events ([`runs`]).

pub mod comment;
mod event;
pub mod runs;
mod touched;

use std::collections::BTreeMap;
use std::time::Duration;

use futures_util::StreamExt;

use self::comment::{StackReview, marker};
use crate::ports::SourceLocation;
use crate::ports::stacks_files::StacksFilesPlanner;
use crate::ports::{
    Blobs, CloudFormationFactory, CommitStatus, GitHost, HostRepository, Posted, SourceFetcher,
};
use crate::pull_request::{CommitState, PrState, PullRequest, StacksFiles};
use crate::reconcile::diff::{TemplateAt, Waiting};
use crate::registry::{Entries, Reviews, StackEntry};

pub use event::pull_request_event;
pub use touched::{Touch, touched};

/// How a review runs.
#[derive(Debug, Clone)]
pub struct ReviewConfig {
    /// The installation (its registry table): its entries, its comment.
    pub installation: String,
    /// Where a template over CloudFormation's body limit is read from
    /// (the installation's bucket: `naming::template_url`).
    pub template_url_base: String,
    /// The installation's bucket: what a packaged template names.
    pub bucket: String,
    pub waiting: Waiting,
    /// Previews at once in one account (and in all: [`MAX_PARALLEL`]).
    pub per_account: usize,
    /// The installation's Guard rules (`PolicySource`): each preview
    /// shows what a run's check would find.
    pub rules: Option<crate::spec::Source>,
}

/// A touched stack: its place in the review, its entry, and why its
/// files cannot be read at the head, if they cannot.
type Touched<'a> = (usize, &'a StackEntry, Option<String>);

/// Entries whose files are read at once (to tell which the pull request
/// touches).
pub const MAX_READS: usize = 8;

/// Previews at once, whatever the accounts.
pub const MAX_PARALLEL: usize = 16;

/// What a review did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reviewed {
    /// The comment and the status were posted (or what failed is said).
    Posted {
        /// Every stack the pull request touches, and its action.
        stacks: Vec<(String, &'static str)>,
        /// `Ok(None)`: none was there and none was needed.
        comment: Result<Option<Posted>, String>,
        status: Result<(), String>,
    },
    /// The pull request's head moved on: a newer push is reviewed instead.
    Superseded { head: String },
    /// No registered stack follows its base repository and branch.
    NothingFollows,
    /// Closed without a merge: nothing to preview.
    NotOpen,
    /// Merged: these entries' previews (`approval: pullRequest`) are marked
    /// as what their runs may execute.
    Merged { marked: Vec<String> },
}

/// The review's collaborators.
pub struct Reviewer<E, S, F, B, G> {
    pub registry: E,
    pub sources: S,
    pub cloudformation: F,
    pub blobs: B,
    pub hosts: G,
    pub config: ReviewConfig,
    /// The registry sources of the base branch, planned at the head
    /// (`None`: stacks files are not previewed).
    pub stacks_files: Option<std::sync::Arc<dyn StacksFilesPlanner>>,
}

impl<E, S, F, B, G> std::fmt::Debug for Reviewer<E, S, F, B, G> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reviewer")
            .field("config", &self.config)
            .field("stacks_files", &self.stacks_files.is_some())
            .finish_non_exhaustive()
    }
}

impl<E, S, F, B, G> Reviewer<E, S, F, B, G>
where
    E: Entries + Reviews,
    S: SourceFetcher,
    F: CloudFormationFactory,
    B: Blobs,
    G: GitHost,
{
    /// Reviews `pr` at its head commit; an error only when the registry or
    /// the repository cannot be read (worth another delivery).
    pub async fn review(&self, pr: &PullRequest) -> Result<Reviewed, String> {
        match pr.state {
            PrState::Open => {}
            PrState::Merged => return self.merged(pr).await,
            PrState::Closed => return Ok(Reviewed::NotOpen),
        }
        let entries = self.followers(pr).await?;
        let planned = match &self.stacks_files {
            Some(planner) => planner.locations(pr).await?,
            None => Vec::new(),
        };
        let location = entries
            .first()
            .map(|e| SourceLocation::of(&e.spec.source))
            .or_else(|| planned.first().cloned());
        let Some(location) = location else {
            return Ok(Reviewed::NothingFollows);
        };
        let repository = host_repository(pr, &entries, &location);
        let Some((base, head)) = touched::revisions(&self.sources, &location, pr).await? else {
            return Ok(Reviewed::Superseded {
                head: pr.head_commit.clone(),
            });
        };
        let files = match (&self.stacks_files, planned.is_empty()) {
            (Some(planner), false) => planner.plan(pr, &head).await?,
            _ => Vec::new(),
        };
        let proposed = proposed_entries(&entries, &files);
        let changed = self.changed(&entries, &proposed, &base, &head).await?;
        let reviews = self.previews(changed, &head).await;
        if touched::head_moved(&self.sources, &location, pr, &head).await {
            return Ok(Reviewed::Superseded { head });
        }
        self.record(pr, &head, &reviews).await;
        Ok(self.post(pr, &repository, &head, reviews, &files).await)
    }

    /// The entries to preview: the registered ones whose files the pull
    /// request changes (read [`MAX_READS`] at a time, two fetches each),
    /// then those its stacks files add or change (as they would be), in
    /// that order, each once.
    async fn changed<'a>(
        &self,
        entries: &'a [StackEntry],
        proposed: &'a [StackEntry],
        base: &str,
        head: &str,
    ) -> Result<Vec<(&'a StackEntry, Option<String>)>, String> {
        let pending: Vec<_> =
            entries
                .iter()
                .filter(|e| !proposed.iter().any(|p| p.name == e.name))
                .map(|entry| async move {
                    (entry, touched(&self.sources, &entry.spec, base, head).await)
                })
                .collect();
        let touches: Vec<(&StackEntry, Touch)> = futures_util::stream::iter(pending)
            .buffered(MAX_READS)
            .collect()
            .await;
        let mut changed = Vec::new();
        for (entry, touch) in touches {
            match touch {
                Touch::Unchanged => {}
                // Worth another delivery (the function's retry), not a
                // failure on the pull request.
                Touch::Unreachable(why) => return Err(format!("{}: {why}", entry.name)),
                Touch::Changed => changed.push((entry, None)),
                Touch::Unreadable(why) => changed.push((entry, Some(why))),
            }
        }
        changed.extend(proposed.iter().map(|e| (e, None)));
        Ok(changed)
    }

    /// Records each preview of an entry with `approval: pullRequest` on it
    /// (what the merge's run may execute); one that cannot be recorded
    /// only means that run waits for a person.
    async fn record(&self, pr: &PullRequest, head: &str, reviews: &[StackReview]) {
        let at = crate::clock::now_millis();
        for review in reviews.iter().filter(|r| r.bound) {
            let (Ok(diff), Some(hash)) = (&review.outcome, &review.desired_hash) else {
                continue;
            };
            let record = crate::pull_request::Reviewed {
                pull_request: pr.label(),
                head: head.to_owned(),
                desired_hash: hash.clone(),
                rows_hash: crate::pull_request::rows_hash(&diff.changes),
                merged: false,
                at,
            };
            if let Err(e) = self.registry.record_review(&review.name, &record).await {
                tracing::warn!(stack = %review.name, error = %e, "the preview could not be recorded");
            }
        }
    }

    /// A merge: the last preview of each entry with `approval: pullRequest`
    /// marked merged, if it is this pull request's at the head it merged.
    async fn merged(&self, pr: &PullRequest) -> Result<Reviewed, String> {
        let label = pr.label();
        let mut marked = Vec::new();
        for entry in self.followers(pr).await? {
            let Some(reviewed) = entry.reviewed.as_ref() else {
                continue;
            };
            if reviewed.pull_request != label || !pr.is_head(&reviewed.head) {
                continue;
            }
            let done = self
                .registry
                .mark_merged(&entry.name, &label, &reviewed.head)
                .await
                .map_err(|e| e.to_string())?;
            if done {
                marked.push(entry.name.clone());
            }
        }
        Ok(Reviewed::Merged { marked })
    }

    /// The entries that follow the base repository and branch, by name,
    /// each once; suspended ones and ones being deleted left out.
    async fn followers(&self, pr: &PullRequest) -> Result<Vec<StackEntry>, String> {
        let mut names = std::collections::BTreeSet::new();
        for key in pr.base_keys() {
            let found = self
                .registry
                .followers(&key)
                .await
                .map_err(|e| e.to_string())?;
            names.extend(
                found
                    .into_iter()
                    .filter(|f| !f.suspended && !f.deleting)
                    .map(|f| f.name),
            );
        }
        let mut entries = Vec::new();
        for name in names {
            if let Some(entry) = self.registry.get(&name).await.map_err(|e| e.to_string())? {
                entries.push(entry);
            }
        }
        Ok(entries)
    }

    /// The previews of the touched stacks, in parallel: at most
    /// `per_account` at once in one account, [`MAX_PARALLEL`] in all; in
    /// the entries' order.
    async fn previews(
        &self,
        changed: Vec<(&StackEntry, Option<String>)>,
        head: &str,
    ) -> Vec<StackReview> {
        let mut by_account: BTreeMap<String, Vec<Touched<'_>>> = BTreeMap::new();
        for (i, (entry, unreadable)) in changed.into_iter().enumerate() {
            let account = entry.spec.assume_role_arn.clone().unwrap_or_default();
            by_account
                .entry(account)
                .or_default()
                .push((i, entry, unreadable));
        }
        let per_account = self.config.per_account.max(1);
        // The futures made first, then run (a closure in the stream would
        // make the future not `Send`, as in `triggers::start_found`).
        let groups: Vec<_> = by_account
            .into_values()
            .map(|group| {
                let pending: Vec<_> = group
                    .into_iter()
                    .map(|(i, entry, unreadable)| self.one(i, entry, unreadable, head))
                    .collect();
                futures_util::stream::iter(pending)
                    .buffer_unordered(per_account)
                    .collect::<Vec<_>>()
            })
            .collect();
        let mut all: Vec<(usize, StackReview)> = futures_util::stream::iter(groups)
            .buffer_unordered((MAX_PARALLEL / per_account).max(1))
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .flatten()
            .collect();
        all.sort_by_key(|(i, _)| *i);
        all.into_iter().map(|(_, r)| r).collect()
    }

    /// The `i`-th touched stack's review.
    async fn one(
        &self,
        i: usize,
        entry: &StackEntry,
        unreadable: Option<String>,
        head: &str,
    ) -> (usize, StackReview) {
        let outcome = match unreadable {
            Some(why) => Err(why),
            None => self.preview(entry, head).await,
        };
        (i, review_of(entry, outcome))
    }

    /// One stack's preview at `head`, as `stacksync diff --ref HEAD` makes it.
    async fn preview(
        &self,
        entry: &StackEntry,
        head: &str,
    ) -> Result<(crate::reconcile::diff::Diff, String), String> {
        let spec = &entry.spec;
        let wanted = crate::reconcile::diff::desired(&self.sources, spec, Some(head)).await?;
        let cfn = self
            .cloudformation
            .for_stack(
                spec.region.as_deref(),
                spec.assume_role_arn.as_deref(),
                Some(&spec.name),
            )
            .await
            .map_err(|e| e.to_string())?;
        let mut wanted = wanted
            .read_values(&self.cloudformation, &self.registry, &cfn)
            .await?;
        let packaged = wanted.package(&crate::package::Destination {
            bucket: self.config.bucket.clone(),
            url_base: self.config.template_url_base.clone(),
            prefix: "previews/".into(),
        })?;
        for object in &packaged.objects {
            if matches!(self.blobs.exists(&object.key).await, Ok(true)) {
                continue;
            }
            let bytes = packaged.bytes(object).map_err(|e| e.to_string())?;
            self.blobs
                .put(&object.key, bytes, object.content_type)
                .await
                .map_err(|e| format!("{} could not be stored for the preview: {e}", object.key))?;
        }
        drop(packaged);
        let policy = crate::reconcile::diff::policy::check(
            &self.sources,
            self.config.rules.as_ref(),
            spec,
            &wanted,
        )
        .await;
        let template = self.template_at(&wanted.template).await?;
        let recorded = entry
            .status
            .applied
            .seen
            .as_ref()
            .map(|s| s.stack_id.as_str());
        let mut diff = crate::reconcile::diff::diff(
            &cfn,
            spec,
            &self.config.installation,
            recorded,
            &wanted,
            template,
            self.config.waiting,
        )
        .await?;
        diff.policy = policy;
        diff.packaged =
            crate::reconcile::diff::packaged_files(&wanted.packaged, &entry.status.inputs.packaged);
        Ok((diff, wanted.desired_hash(spec)))
    }

    /// The template in the request, or, over CloudFormation's body limit,
    /// put at `previews/<sha256>` in the installation's bucket (as
    /// `stacksync diff` puts it; the bucket expires them after a day):
    /// never under `templates/`, which only template-upload may write.
    async fn template_at(&self, template: &[u8]) -> Result<TemplateAt, String> {
        if let Ok(body) = std::str::from_utf8(template)
            && body.len() <= crate::reconcile::diff::MAX_TEMPLATE_BODY
        {
            return Ok(TemplateAt::Body(body.to_owned()));
        }
        let key = crate::naming::preview_template_key(&crate::hash::sha256_hex(template));
        self.blobs
            .put(&key, template.to_vec(), "text/plain")
            .await
            .map_err(|e| format!("the template could not be stored for the preview: {e}"))?;
        Ok(TemplateAt::Url(crate::naming::template_url(
            &self.config.template_url_base,
            &key,
            None,
        )))
    }

    /// The comment and the head's status; what cannot be posted is logged
    /// and said, never an error.
    async fn post(
        &self,
        pr: &PullRequest,
        repository: &HostRepository,
        head: &str,
        reviews: Vec<StackReview>,
        files: &[StacksFiles],
    ) -> Reviewed {
        let installation = &self.config.installation;
        let limit = self.hosts.max_comment(pr.host);
        let body = comment::render_with(pr, installation, &reviews, files, limit);
        // A pull request that touches no stack gets no comment, unless one
        // is there to correct (an earlier push touched some).
        let comment = self
            .hosts
            .upsert_comment(
                repository,
                pr.number,
                &marker(installation),
                &body,
                !reviews.is_empty() || files.iter().any(|f| !f.is_empty()),
            )
            .await
            .map_err(|e| e.to_string());
        if let Err(e) = &comment {
            tracing::warn!(pr = %pr.label(), error = %e, "the preview comment could not be posted");
        }
        let status = self
            .hosts
            .set_status(
                repository,
                head,
                &preview_status(installation, pr, &reviews, files),
            )
            .await
            .map_err(|e| e.to_string());
        if let Err(e) = &status {
            tracing::warn!(pr = %pr.label(), error = %e, "the preview status could not be set");
        }
        Reviewed::Posted {
            stacks: reviews
                .iter()
                .map(|r| (r.name.clone(), r.action()))
                .collect(),
            comment,
            status,
        }
    }
}

fn review_of(
    entry: &StackEntry,
    outcome: Result<(crate::reconcile::diff::Diff, String), String>,
) -> StackReview {
    let (outcome, desired_hash) = match outcome {
        Ok((diff, hash)) => (Ok(diff), Some(hash)),
        Err(e) => (Err(e), None),
    };
    StackReview {
        name: entry.name.clone(),
        stack_name: entry.spec.effective_stack_name().to_owned(),
        region: entry.spec.region.clone(),
        outcome,
        desired_hash,
        bound: entry.spec.approval == crate::spec::Approval::PullRequest,
    }
}

/// Where the comment and status go: the pull request's base repository,
/// with the first secret its entries name (the URL checked against it is
/// that entry's), else the registry source's.
fn host_repository(
    pr: &PullRequest,
    entries: &[StackEntry],
    fallback: &SourceLocation,
) -> HostRepository {
    let from_entry = entries
        .iter()
        .find(|e| e.spec.source.credentials_secret.is_some())
        .or(entries.first())
        .map(|e| SourceLocation::of(&e.spec.source));
    let location = from_entry.unwrap_or_else(|| fallback.clone());
    HostRepository {
        host: pr.host,
        repository: pr.repository.clone(),
        url: location.url,
        credentials: location.credentials,
    }
}

/// The status a review sets on the head: success when every preview
/// succeeded, else failure naming the stacks whose preview failed.
pub fn preview_status(
    installation: &str,
    pr: &PullRequest,
    reviews: &[StackReview],
    files: &[StacksFiles],
) -> CommitStatus {
    let mut failed: Vec<String> = reviews
        .iter()
        .filter(|r| r.outcome.is_err())
        .map(|r| r.name.clone())
        .collect();
    failed.extend(
        files
            .iter()
            .filter(|f| !f.problems.is_empty())
            .map(|f| format!("registry source {}", f.source)),
    );
    // A stack the policy would refuse: the merge's run would fail.
    let refused: Vec<String> = reviews
        .iter()
        .filter(|r| r.refused_by_policy())
        .map(|r| r.name.clone())
        .collect();
    let changing = reviews
        .iter()
        .filter(|r| matches!(r.action(), "create" | "update"))
        .count();
    let (state, description) = if !refused.is_empty() && failed.is_empty() {
        (
            CommitState::Failure,
            format!("policy refuses: {}", refused.join(", ")),
        )
    } else if failed.is_empty() {
        (
            CommitState::Success,
            format!("{} previewed: {changing} would change", reviews.len()),
        )
    } else {
        (
            CommitState::Failure,
            format!("preview failed: {}", failed.join(", ")),
        )
    };
    CommitStatus {
        state,
        context: format!("stacksync/preview ({installation})"),
        description,
        url: pr.url.clone(),
        summary: None,
    }
}

/// The entries a pull request's stacks files add or change, as they would
/// be: an added one registered anew, a changed one with its new spec.
fn proposed_entries(entries: &[StackEntry], files: &[StacksFiles]) -> Vec<StackEntry> {
    let now = crate::clock::now_millis();
    let mut out = Vec::new();
    for file in files.iter().filter(|f| f.problems.is_empty()) {
        for spec in &file.created {
            out.push(StackEntry::registered(&spec.name, spec, now));
        }
        for spec in &file.updated {
            let mut entry = entries
                .iter()
                .find(|e| e.name == spec.name)
                .cloned()
                .unwrap_or_else(|| StackEntry::registered(&spec.name, spec, now));
            entry.spec = spec.clone();
            out.push(entry);
        }
    }
    out
}

/// How long a preview waits for its change set by default.
pub const DEFAULT_WAITING: Waiting = Waiting {
    poll: Duration::from_secs(2),
    deadline: Duration::from_secs(300),
};

#[cfg(test)]
mod tests;
