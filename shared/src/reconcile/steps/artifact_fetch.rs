//! `artifact-fetch` (state `FetchArtifact`): loads the spec, takes the lease,
//! honours suspend and deletion, resolves the source to an exact revision
//! and stores the artifact, once per source and revision.

use tracing::info;

use super::{Ports, StepResult, Steps, due, short};
use crate::artifact;
use crate::clock::now_millis;
use crate::content::{ContentError, Wanted};
use crate::naming::artifact_key;
use crate::notice::NoticeKind;
use crate::ports::{Blobs, FetchError, PortError, SourceFetcher, SourceLocation};
use crate::reconcile::desired::FetchFailed;
use crate::reconcile::run::{Fetched, Next, PolicyRef, RunState, StepError};
use crate::registry::Leases as _;
use crate::registry::{LEASE_TTL, RegistryError, StackEntry};
use crate::status::{StallReason, Status, Timestamp, transitions};

impl<P: Ports> Steps<P> {
    /// The first step of every run.
    pub async fn artifact_fetch(&self, mut state: RunState) -> StepResult {
        // A run back from waiting for a run slot keeps its start: its
        // deadline counts from it.
        if state.next != Next::WaitSlot || state.execution.started_at == 0 {
            state.execution.started_at = now_millis();
        }
        if let Some(ended) = self.take_lease(&mut state).await? {
            return Ok(ended);
        }
        // Read only now, holding the lease: the status copied below is the
        // latest, not one that a run finishing just before us has replaced.
        let entry = self.entry(&state).await?;
        state.execution.spec_version = entry.spec_version;
        if let Some(why) = &entry.unsupported {
            // Read, never acted on: what this version does not know may
            // change what the run should do (or must not do).
            return Err(StepError::stalled(StallReason::Unsupported, why.clone()));
        }
        if let Some(ended) = self.hold_for_windows(&mut state, &entry).await? {
            return Ok(ended);
        }
        if let Some(waiting) = self.take_slot(&mut state, &entry).await? {
            return Ok(waiting);
        }
        if entry.deletion_requested_at.is_some() {
            state.next = Next::Delete;
            state.budgets.recreate = false;
            return Ok(state);
        }
        if entry.is_suspended() {
            // Out of the queue: resuming makes it due again.
            let status = transitions::suspended(&entry.status);
            return self.finish(state, &entry, status, "suspended").await;
        }
        if let Some(why) = self.config.policy.refuses_spec(&entry.spec) {
            return Err(StepError::stalled(StallReason::NotAllowed, why));
        }
        self.transport_allowed(&entry.spec.source)?;
        let revision = self.resolve(&state, &entry).await?;
        if !state.trigger.force && entry.status.gave_up_at(entry.spec_version, Some(&revision)) {
            // Nothing changed since the run that gave up: trying again would
            // fail (or create and roll back) again. Out of the queue.
            let status = transitions::out_of_queue(&entry.status);
            return self
                .finish(
                    state,
                    &entry,
                    status,
                    "gave up at this revision and spec: push a fix, change the spec, \
                     or reconcile with --force",
                )
                .await;
        }
        if let Some(ended) = self.hold_for_others(&mut state, &entry, &revision).await? {
            return Ok(ended);
        }
        // Recorded before the fetch, so a revision whose files are refused
        // is the one the failure names. Due when the lease runs out: a run
        // that dies (nothing ends it) is started again by the scheduler;
        // one that ends leaves the queue.
        let status = reconciling(&entry, &revision, state.execution.started_at);
        self.record(&state, &entry, status.clone()).await?;
        state.fetched = Some(Fetched {
            revision: revision.clone(),
            artifact_key: None,
            policies: Vec::new(),
        });
        self.notify(NoticeKind::Started, &state, &entry, &status, None)
            .await;
        let key = self.store_artifact(&state, &entry, &revision).await?;
        let policies = self.store_policies(&entry, &revision).await?;
        state.fetched = Some(Fetched {
            revision,
            artifact_key: Some(key),
            policies,
        });
        state.next = Next::Upload;
        Ok(state)
    }

    /// Ends the run `Pending` while others must go first: the waves of its
    /// fleet's rollout before its own, the stacks it depends on.
    async fn hold_for_others(
        &self,
        state: &mut RunState,
        entry: &StackEntry,
        revision: &str,
    ) -> Result<Option<RunState>, StepError> {
        if let Some(ended) = self.hold_for_rollout(state, entry, revision).await? {
            return Ok(Some(ended));
        }
        self.wait_for_upstream(state, entry, revision).await
    }

    /// Takes the stack's lease; `Some(state)` when the run ends here because
    /// another run drives the stack (it will see this change too) or the
    /// entry is gone.
    async fn take_lease(&self, state: &mut RunState) -> Result<Option<RunState>, StepError> {
        let outcome = match self
            .registry
            .acquire_lease(&state.entry, &state.execution.name, LEASE_TTL, now_millis())
            .await
        {
            Ok(_) => return Ok(None),
            Err(RegistryError::LeaseHeld { owner, .. }) => {
                info!(stack = %state.entry, holder = %owner, "lease held; ending");
                format!("another run ({owner}) holds the stack")
            }
            Err(RegistryError::Conflict { detail, .. }) => {
                format!("the lease changed hands: {detail}")
            }
            Err(RegistryError::NotFound { .. }) => "the entry is no longer registered".into(),
            Err(e) => return Err(e.into()),
        };
        let mut ended = state.clone();
        ended.next = Next::Done;
        ended.execution.outcome = Some(outcome);
        Ok(Some(ended))
    }

    /// Refuses an unauthenticated transport (`http://`, `git://`) in a
    /// deployed installation, unless the spec says `source.insecure`:
    /// whoever sits on the network path would choose the template that
    /// runs under the stack's service role. And `file://` always there: a
    /// path on the function's own disk is no source anyone reviews (and
    /// would run `git-upload-pack`, which Lambda has not).
    fn transport_allowed(&self, source: &crate::spec::Source) -> Result<(), StepError> {
        let Some(url) = source.git.as_deref() else {
            return Ok(());
        };
        let scheme = url.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
        match scheme.as_deref() {
            Some("file") if !self.config.local => Err(StepError::stalled(
                StallReason::Unsupported,
                format!(
                    "{url}: file:// sources are for the local runner only (stacksync \
                     reconcile --local); a deployed installation fetches from https://, \
                     ssh://, CodeCommit or S3"
                ),
            )),
            Some(plain @ ("http" | "git")) if !self.config.local && !source.insecure => {
                Err(StepError::stalled(
                    StallReason::Unsupported,
                    format!(
                        "{}: {plain}:// is not authenticated, so anyone on the network path \
                         could choose the template: use https:// or ssh://, or set \
                         source.insecure: true to fetch it anyway",
                        crate::validate::redacted(url)
                    ),
                ))
            }
            _ => Ok(()),
        }
    }

    /// Resolves the source's ref to its head: always the head now, since
    /// deliveries come in any order and may be replayed, so a trigger's
    /// commit is never deployed as-is (that could roll a stack back to an
    /// older push).
    async fn resolve(&self, state: &RunState, entry: &StackEntry) -> Result<String, StepError> {
        let source = SourceLocation::of(&entry.spec.source);
        let reference = entry.spec.effective_ref().unwrap_or_default();
        let revision = self
            .sources
            .resolve(&source, reference)
            .await
            .map_err(fetch_error)?;
        if let Some(pushed) = state.trigger.revision.as_deref()
            && !pushed.eq_ignore_ascii_case(&revision)
        {
            info!(stack = %state.entry, pushed, head = %revision, "the ref moved on since the trigger; deploying its head");
        }
        Ok(revision)
    }

    /// Stores the files the run takes from the source at `revision`,
    /// unless stored already: the artifact's key.
    async fn store_artifact(
        &self,
        state: &RunState,
        entry: &StackEntry,
        revision: &str,
    ) -> Result<String, StepError> {
        let spec = &entry.spec;
        let source = SourceLocation::of(&spec.source);
        let wanted = Wanted::of(spec);
        // "-referenced": the artifact holds what the templates name too
        // (`desired::fetch`); one an earlier version stored at this key
        // without them is never re-used.
        let key = artifact_key(
            &source.url,
            revision,
            &format!("{}-referenced", wanted.key()),
        );
        if self.blobs.exists(&key).await? {
            info!(stack = %state.entry, %revision, "artifact re-used");
            return Ok(key);
        }
        let content_error = |e: FetchError| match e {
            FetchError::Content(e) => StepError::stalled(
                content_reason(&e),
                format!("{e} ({} at {})", source.url, short(revision)),
            ),
            other => fetch_error(other),
        };
        // A deployment file alone: the template it names comes too (the
        // same revision, so the same key).
        let files = crate::reconcile::desired::fetch(&self.sources, spec, revision)
            .await
            .map_err(|e| match e {
                FetchFailed::Source(e) => content_error(e),
                FetchFailed::Invalid(e) => StepError::stalled(
                    StallReason::InvalidTemplate,
                    format!("{e} ({} at {})", source.url, short(revision)),
                ),
            })?;
        let bytes: usize = files.iter().map(|(_, b)| b.len()).sum();
        let packed = artifact::pack(&files)
            .map_err(|e| StepError::stalled(StallReason::InvalidSource, e.to_string()))?;
        self.blobs
            .put_if_absent(&key, packed, "application/gzip")
            .await?;
        info!(stack = %state.entry, %revision, files = files.len(), bytes, "artifact stored");
        Ok(key)
    }
}

impl<P: Ports> Steps<P> {
    /// Stores the Guard rule sets the run checks its template against,
    /// each once per source, revision and folder (as artifacts are): the
    /// installation's (`PolicySource`), then the entry's own (`policy:`;
    /// without `git` or `s3`, from the entry's source at `revision`).
    async fn store_policies(
        &self,
        entry: &StackEntry,
        revision: &str,
    ) -> Result<Vec<PolicyRef>, StepError> {
        let mut stored = Vec::new();
        if let Some(installation) = &self.config.rules {
            stored.push(self.store_policy(installation, None).await?);
        }
        if let Some((source, same_source)) = crate::guard::entry_policy(&entry.spec) {
            let at = same_source.then_some(revision);
            stored.push(self.store_policy(&source, at).await?);
        }
        Ok(stored)
    }

    /// One rule set: `source.path` is the folder (or file) of `.guard`
    /// files; `at`: the revision, else the head of `source.ref`.
    async fn store_policy(
        &self,
        source: &crate::spec::Source,
        at: Option<&str>,
    ) -> Result<PolicyRef, StepError> {
        let location = SourceLocation::of(source);
        let folder = source.path.trim_end_matches('/').to_owned();
        let url = crate::validate::redacted(&location.url);
        let in_policy = |e: StepError| match e {
            StepError::Stalled { reason, message } => StepError::Stalled {
                reason,
                message: format!("policy {url}: {message}"),
            },
            other => other,
        };
        // Rules weaken as templates do: the same transports only.
        self.transport_allowed(source).map_err(in_policy)?;
        let revision = match at {
            Some(revision) => revision.to_owned(),
            None => {
                let reference = source.effective_ref();
                self.sources
                    .resolve(&location, reference.unwrap_or_default())
                    .await
                    .map_err(|e| in_policy(fetch_error(e)))?
            }
        };
        let wanted = crate::guard::rules_wanted(source);
        let key = artifact_key(&location.url, &revision, &wanted.key());
        let origin = format!("{url}@{}", short(&revision));
        // Stored once per revision; a warm function knows it without asking.
        if self.rule_cache.stored(&key) || self.blobs.exists(&key).await? {
            self.rule_cache.mark_stored(&key);
            return Ok(PolicyRef { origin, key });
        }
        let files = self
            .sources
            .fetch(&location, &revision, &wanted)
            .await
            .map_err(|e| in_policy(fetch_error(e)))?;
        let rules: Vec<(String, Vec<u8>)> = crate::guard::rule_files(&origin, files)
            .map_err(|m| StepError::stalled(StallReason::InvalidPolicy, format!("{m} ({folder})")))?
            .into_iter()
            .map(|f| (f.path, f.text.into_bytes()))
            .collect();
        let packed = artifact::pack(&rules)
            .map_err(|e| StepError::stalled(StallReason::InvalidPolicy, e.to_string()))?;
        self.blobs
            .put_if_absent(&key, packed, "application/gzip")
            .await?;
        info!(%origin, files = rules.len(), "rule set stored");
        self.rule_cache.mark_stored(&key);
        Ok(PolicyRef { origin, key })
    }
}

/// The status a run records once it knows its revision.
fn reconciling(entry: &StackEntry, revision: &str, started_at: i64) -> Status {
    transitions::reconciling(
        &entry.status,
        revision,
        format!("reconciling {}", short(revision)),
        Timestamp(due(started_at, LEASE_TTL.as_secs())),
    )
}

/// A source that could not be read: retried when transient; else stalled,
/// with a refused credential told apart.
fn fetch_error(e: FetchError) -> StepError {
    match e {
        FetchError::Port(PortError::Transient(m)) => StepError::transient(m),
        FetchError::Port(other) => {
            StepError::stalled(StallReason::SourceUnavailable, other.message())
        }
        e @ FetchError::Authentication { .. } => {
            StepError::stalled(StallReason::AuthenticationFailed, e.to_string())
        }
        e @ FetchError::CredentialNotForHost { .. } => {
            StepError::stalled(StallReason::CredentialNotForHost, e.to_string())
        }
        e @ FetchError::TimedOut { .. } => StepError::TimedOut {
            message: e.to_string(),
        },
        FetchError::Content(e) => StepError::stalled(content_reason(&e), e.to_string()),
    }
}

/// A template or parameter file that is not there (or is a folder) is an
/// invalid template, as before; the rest is the source's content refused.
fn content_reason(e: &ContentError) -> StallReason {
    match e {
        ContentError::Missing { .. } | ContentError::Folder { .. } => StallReason::InvalidTemplate,
        _ => StallReason::InvalidSource,
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::status::Phase;

    /// A run of an entry whose source is `url` (`insecure` as given), in a
    /// `local` runner or deployed: the test, and what artifact-fetch made.
    async fn fetched_from(
        url: &str,
        insecure: bool,
        local: bool,
    ) -> (Test, Result<RunState, StepError>) {
        let mut t = Test::with_entry(|e| {
            e.spec.source.git = Some(url.into());
            e.spec.source.insecure = insecure;
        })
        .await;
        t.steps.config.local = local;
        t.steps
            .sources
            .commit(url, "main", HEAD, &[("t.yaml", TEMPLATE)]);
        let result = t.steps.artifact_fetch(t.input("run-1")).await;
        (t, result)
    }

    #[tokio::test]
    async fn unauthenticated_transports_are_refused_when_deployed_unless_the_spec_says_insecure() {
        for (url, insecure, local, refused) in [
            ("http://git.example/infra.git", false, false, true),
            ("GIT://git.example/infra.git", false, false, true),
            ("http://git.example/infra.git", true, false, false),
            ("git://git.example/infra.git", false, true, false),
            ("https://git.example/infra.git", false, false, false),
        ] {
            let (t, result) = fetched_from(url, insecure, local).await;
            match result {
                Err(e) if refused => {
                    assert_eq!(e.name(), "StackSync.Stalled.Unsupported");
                    assert!(
                        e.message().contains("is not authenticated")
                            && e.message().contains("source.insecure: true"),
                        "{}",
                        e.message()
                    );
                    assert_eq!(t.steps.sources.calls(), (0, 0), "nothing fetched");
                }
                Ok(state) if !refused => assert_eq!(state.next, Next::Upload, "{url}"),
                other => panic!("{url} insecure={insecure} local={local}: {other:?}"),
            }
        }
    }

    #[tokio::test]
    async fn a_file_source_is_for_the_local_runner_only_insecure_or_not() {
        for (insecure, local, refused) in [
            (false, false, true),
            (true, false, true),
            (false, true, false),
        ] {
            let url = "file:///tmp/infra";
            let (t, result) = fetched_from(url, insecure, local).await;
            match result {
                Err(e) if refused => {
                    assert_eq!(e.name(), "StackSync.Stalled.Unsupported");
                    assert!(e.message().contains("local runner only"), "{}", e.message());
                    assert_eq!(t.steps.sources.calls(), (0, 0), "nothing fetched");
                }
                Ok(state) if !refused => assert_eq!(state.next, Next::Upload),
                other => panic!("insecure={insecure} local={local}: {other:?}"),
            }
        }
    }

    #[tokio::test]
    async fn a_deployed_installation_refuses_an_entry_it_does_not_allow_before_reading_the_source()
    {
        let mut t = Test::new().await;
        t.steps.config.policy = crate::ownership::InstallationPolicy {
            stack_name_prefix: String::new(),
            service_roles: Some(vec!["arn:aws:iam::1:role/cfn-exec".into()]),
            require_role_arn: true,
            publish_path: None,
        };
        let err = t.steps.artifact_fetch(t.input("run-1")).await.unwrap_err();
        assert_eq!(err.name(), "StackSync.Stalled.NotAllowed");
        assert!(
            err.message().contains("RequireRoleArn")
                && err.message().contains("arn:aws:iam::1:role/cfn-exec"),
            "{}",
            err.message()
        );
        assert_eq!(t.steps.sources.calls(), (0, 0), "nothing read");
        assert!(
            t.cfn.script().calls.is_empty(),
            "nothing asked of CloudFormation"
        );
    }

    #[tokio::test]
    async fn an_entry_this_version_cannot_fully_read_is_never_acted_on() {
        let t = Test::with_entry(|e| {
            e.unsupported = Some("the entry's spec holds fields … (canary)".into());
        })
        .await;
        let err = t.steps.artifact_fetch(t.input("run-1")).await.unwrap_err();
        assert_eq!(err.name(), "StackSync.Stalled.Unsupported");
        assert!(err.message().contains("(canary)"));
        assert_eq!(
            t.steps.sources.calls(),
            (0, 0),
            "the source is not even read"
        );
    }

    #[tokio::test]
    async fn a_run_takes_the_lease_resolves_the_head_and_stores_the_artifact_once() {
        let t = Test::new().await;
        let state = t.steps.artifact_fetch(t.input("run-1")).await.unwrap();
        assert_eq!(state.next, Next::Upload);
        assert_eq!(state.revision(), Some(HEAD));
        let key = state.fetched.clone().unwrap().artifact_key.unwrap();
        assert!(t.blob(&key).is_some());
        let entry = t.entry();
        assert_eq!(entry.status.phase, Phase::Reconciling);
        assert_eq!(entry.lease.unwrap().owner, "run-1");
        assert_eq!(
            entry.status.run.last_attempted_revision.as_deref(),
            Some(HEAD)
        );
        // A second stack (or run) at this revision re-uses the artifact.
        t.release("run-1").await;
        t.steps.artifact_fetch(t.input("run-2")).await.unwrap();
        assert_eq!(t.steps.sources.calls(), (2, 1), "two resolves, one fetch");
    }

    #[tokio::test]
    async fn a_run_that_finds_the_lease_held_ends_without_touching_anything() {
        let t = Test::new().await;
        t.steps.artifact_fetch(t.input("run-1")).await.unwrap();
        let state = t.steps.artifact_fetch(t.input("run-2")).await.unwrap();
        assert_eq!(state.next, Next::Done);
        assert!(state.execution.outcome.unwrap().contains("run-1"));
        assert_eq!(t.entry().lease.unwrap().owner, "run-1");
    }

    #[tokio::test]
    async fn a_suspended_entry_is_recorded_suspended_and_released() {
        let t = Test::with_entry(|e| e.suspended = true).await;
        let state = t.steps.artifact_fetch(t.input("run-1")).await.unwrap();
        assert_eq!(state.next, Next::Done);
        let entry = t.entry();
        assert_eq!(entry.status.phase, Phase::Suspended);
        assert!(entry.lease.is_none());
        assert_eq!(
            t.steps.sources.calls(),
            (0, 0),
            "the source is not even read"
        );
    }

    #[tokio::test]
    async fn an_entry_being_deleted_goes_to_delete() {
        let t = Test::with_entry(|e| e.deletion_requested_at = Some(Timestamp(1))).await;
        let state = t.steps.artifact_fetch(t.input("run-1")).await.unwrap();
        assert_eq!((state.next, state.budgets.recreate), (Next::Delete, false));
    }

    #[tokio::test]
    async fn refused_credentials_hostile_content_and_missing_refs_stall_with_their_reason() {
        let t = Test::new().await;
        t.steps.sources.deny(URL);
        let err = t.steps.artifact_fetch(t.input("run-1")).await.unwrap_err();
        assert!(
            matches!(
                &err,
                StepError::Stalled {
                    reason: StallReason::AuthenticationFailed,
                    message,
                } if message.contains("authentication failed for")
            ),
            "{err:?}"
        );
        let t = Test::new().await;
        let pointer = b"version https://git-lfs.github.com/spec/v1\noid sha256:ab\nsize 9\n";
        t.steps
            .sources
            .commit(URL, "main", "feedface", &[("t.yaml", pointer)]);
        let err = t.steps.artifact_fetch(t.input("run-1")).await.unwrap_err();
        assert!(
            matches!(
                &err,
                StepError::Stalled {
                    reason: StallReason::InvalidSource,
                    message,
                } if message.contains("Git LFS") && message.contains("feedface")
            ),
            "{err:?}"
        );
        let t = Test::with_entry(|e| e.spec.source.reference = Some("no-such-branch".into())).await;
        let err = t.steps.artifact_fetch(t.input("run-1")).await.unwrap_err();
        assert!(
            matches!(
                err,
                StepError::Stalled {
                    reason: StallReason::SourceUnavailable,
                    ..
                }
            ),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn a_throttled_write_of_the_artifact_is_transient() {
        let t = Test::new().await;
        t.steps.blobs.fail(
            "PutObject",
            1,
            crate::ports::PortError::Transient("SlowDown".into()),
        );
        let err = t.steps.artifact_fetch(t.input("run-1")).await.unwrap_err();
        assert!(err.is_transient(), "{err:?}");
    }
}
