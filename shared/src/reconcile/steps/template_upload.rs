//! `template-upload` (state `UploadTemplate`): takes the template (and the
//! parameter file) out of the artifact, checks it, stores it by content, and
//! computes the desired hash. Already applied to a healthy stack → the run
//! ends in sync, no change set made.

use std::collections::BTreeMap;

use super::parameters::{provenance, value_error};
use super::settings::with_settings;
use super::{Port, Ports, StepResult, Steps, short};
use crate::hash::sha256_hex;
use crate::naming::{parameters_key, template_key};
use crate::parameters::{self, Provenance};
use crate::reconcile::values;
use tracing::{info, warn};

use crate::clock::now_millis;
use crate::ports::{Blobs, StackInfo, Stacks};
use crate::reconcile::decide::{AtAppliedHash, sync};
use crate::reconcile::run::{Next, Revert, RunState, StepError, Uploaded};
use crate::registry::StackEntry;
use crate::seen::{Change, Observed, OutOfBand, Seen};
use crate::status::StallReason;
use crate::status::Timestamp;
use crate::template;
use files::{check_tag_count, read_outputs};

mod files;

/// The stack, against what the last run left.
enum AsLeft {
    /// The same stack, as seen now (its drift status may be news).
    Same(Seen),
    /// Changed outside stacksync.
    Changed(OutOfBand),
    /// Nothing recorded to compare with (an entry from before this version).
    Unknown,
}

/// The drift to put back, when the entry says `drift.action: revert` and
/// a detection asked for it.
fn revert_requested(entry: &StackEntry) -> Option<Revert> {
    if entry.spec.drift.action != crate::spec::DriftAction::Revert {
        return None;
    }
    let print = entry.status.findings.drift.as_ref()?.revert_requested()?;
    Some(Revert {
        drift: print.to_owned(),
        reapplied: false,
    })
}

/// The stack as the steps compare it with what the last run saw.
pub(super) fn observed(stack: &StackInfo) -> Observed<'_> {
    Observed {
        stack_id: &stack.stack_id,
        changed_at: stack.changed_at,
        status: stack.status.as_str(),
        drift: stack.drift.as_deref(),
    }
}

/// "in sync", and the drift CloudFormation reports if that is news.
fn in_sync_message(entry: &StackEntry, now: &Seen) -> String {
    match &entry.status.applied.seen {
        Some(before) if before.drift != now.drift && now.drift.is_some() => format!(
            "in sync: nothing to change; {} (`stacksync drift {}` shows what drifted; \
             `drift.action: revert` puts it back)",
            before.describe(Change::DriftChanged, Some(observed_seen(now))),
            entry.name
        ),
        _ => "in sync: nothing to change".to_owned(),
    }
}

fn observed_seen(seen: &Seen) -> Observed<'_> {
    Observed {
        stack_id: &seen.stack_id,
        changed_at: seen.changed_at.0,
        status: &seen.stack_status,
        drift: seen.drift.as_deref(),
    }
}

/// What the run deploys: the stored template and parameters, and their hash.
struct Desired {
    template_key: String,
    template_version: Option<String>,
    parameters_key: String,
    hash: String,
    /// The parameter file's tags (the entry's own are in the spec).
    file_tags: BTreeMap<String, String>,
    /// Where each parameter and tag came from (values masked as needed).
    provenance: Vec<Provenance>,
    /// The other stacks' outputs read (stack → output → recorded value).
    read_outputs: BTreeMap<String, BTreeMap<String, String>>,
    /// The local files the templates named, packaged.
    packaged: Vec<crate::package::Artifact>,
}

fn invalid(e: impl std::fmt::Display) -> StepError {
    StepError::stalled(StallReason::InvalidTemplate, e.to_string())
}

impl<P: Ports> Steps<P> {
    pub async fn template_upload(&self, mut state: RunState) -> StepResult {
        let mut entry = self.resume(&state).await?;
        let desired = self.store_desired(&state, &mut entry).await?;
        self.record_provenance(&state, &mut entry, &desired).await?;
        let hash_matches = sync::hash_matches(
            entry.status.applied.applied_hash.as_deref(),
            Some(desired.hash.as_str()),
            false,
        );
        // What an earlier pass of this run found (before an approval) stays.
        let mut uploaded = Uploaded {
            template_key: desired.template_key,
            template_version: desired.template_version,
            parameters_key: Some(desired.parameters_key),
            desired_hash: Some(desired.hash),
            file_tags: desired.file_tags,
            ..state.uploaded.take().unwrap_or_default()
        };
        state.next = Next::ChangeSet;
        // A drift found and to be put back (`drift.action: revert`): a
        // drift-aware change set, whatever the hash.
        if let Some(revert) = revert_requested(&entry) {
            info!(stack = %state.entry, "reverting drift");
            uploaded.revert = Some(revert);
            uploaded.must_apply = true;
        }
        let forced = state.trigger.force || uploaded.revert.is_some();
        state.uploaded = Some(uploaded);
        if !sync::needs_a_look(hash_matches, state.approval.answer.is_some()) {
            return Ok(state);
        }
        // At the applied hash: nothing to deploy, if the stack is still what
        // the last run left and healthy. Otherwise Git wins: a change set
        // puts the desired state back.
        let cfn = self.port(&entry.spec).await?;
        let stack = cfn
            .describe_stack(entry.spec.effective_stack_name())
            .await?;
        let as_left = self.as_left(&cfn, &entry, stack.as_ref()).await?;
        let found = match (&as_left, stack.as_ref()) {
            (AsLeft::Same(_), Some(stack)) => sync::Found::AsLeft(&stack.status),
            (AsLeft::Changed(found), _) => sync::Found::Changed(found.change),
            (AsLeft::Same(_), None) | (AsLeft::Unknown, _) => sync::Found::Unknown,
        };
        let must_apply = match sync::at_applied_hash(found, forced) {
            AtAppliedHash::InSync => {
                // In sync comes only of a stack found as left.
                let (AsLeft::Same(seen), Some(stack)) = (as_left, stack.as_ref()) else {
                    return Err(StepError::missing("template-upload", "the stack as left"));
                };
                let changed = self.apply_settings(&cfn, &entry.spec, stack).await?;
                let message = with_settings(in_sync_message(&entry, &seen), &changed);
                let outputs = Some(stack.outputs.clone());
                return self
                    .in_sync(state, &entry, &cfn, Some(seen), outputs, &message)
                    .await;
            }
            AtAppliedHash::ChangeSet { must_apply } => must_apply,
        };
        let out_of_band = match as_left {
            AsLeft::Changed(found) => {
                info!(stack = %state.entry, change = %found.change, detail = %found.detail, "changed outside stacksync: putting it back");
                Some(found)
            }
            AsLeft::Same(_) | AsLeft::Unknown => None,
        };
        if let Some(uploaded) = state.uploaded.as_mut() {
            uploaded.must_apply = must_apply;
            uploaded.out_of_band = out_of_band.or(uploaded.out_of_band.take());
        }
        Ok(state)
    }

    /// Where the values came from (`get --explain`), and the other stacks'
    /// outputs read: written when they change (compared as stored: a large
    /// provenance is bounded), so an unchanged stack's run writes nothing.
    async fn record_provenance(
        &self,
        state: &RunState,
        entry: &mut StackEntry,
        desired: &Desired,
    ) -> Result<(), StepError> {
        let bounded = crate::status::bounded_provenance(desired.provenance.clone());
        let mut packaged = desired.packaged.clone();
        packaged.truncate(crate::status::MAX_PACKAGED_RECORDED);
        if entry.status.inputs.provenance != bounded
            || entry.status.inputs.read_outputs != desired.read_outputs
            || entry.status.inputs.packaged != packaged
        {
            let status = crate::status::transitions::with_inputs(
                &entry.status,
                desired.provenance.clone(),
                desired.read_outputs.clone(),
                packaged,
            );
            self.record(state, entry, status.clone()).await?;
            entry.status = status;
        }
        Ok(())
    }

    /// Whether the stack is still the one the last run left: same StackId,
    /// `LastUpdatedTime`, status, template and parameters.
    async fn as_left(
        &self,
        cfn: &Port<P>,
        entry: &StackEntry,
        stack: Option<&StackInfo>,
    ) -> Result<AsLeft, StepError> {
        let Some(seen) = &entry.status.applied.seen else {
            return Ok(AsLeft::Unknown);
        };
        let observed = stack.map(observed);
        let found = |change| OutOfBand {
            change,
            detail: seen.describe(change, observed),
            found_at: Timestamp(now_millis()),
            undone: false,
        };
        let change = seen.change(observed);
        let Some(stack) = stack.filter(|_| change.is_none_or(|c| !c.is_put_back())) else {
            return Ok(AsLeft::Changed(found(change.unwrap_or(Change::Deleted))));
        };
        let now = self.observe(cfn, &entry.spec, stack).await?;
        if now.deployed_hash != seen.deployed_hash {
            return Ok(AsLeft::Changed(found(Change::Updated)));
        }
        Ok(AsLeft::Same(now))
    }

    /// Reads and checks the template and the parameters at the run's
    /// revision, checks them against the policy, and stores both by
    /// content.
    async fn store_desired(
        &self,
        state: &RunState,
        entry: &mut StackEntry,
    ) -> Result<Desired, StepError> {
        let spec = &entry.spec.clone();
        let (mut packaged, from_file, file_label) = self.read_template(state, spec).await?;
        let template = std::mem::take(&mut packaged.template);
        let merged = template::merge_parameters(from_file.parameters.clone(), spec);
        let cfn = self.port(spec).await?;
        let read = values::read_values(&self.cloudformation, &self.registry, &cfn, &merged)
            .await
            .map_err(value_error)?;
        let no_echo = parameters::no_echo(&template);
        parameters::refuse_exposed_secrets(&read.secrets, no_echo.as_ref())
            .map_err(|m| StepError::stalled(StallReason::SecretNotNoEcho, m))?;
        let read_outputs = read_outputs(&merged, &read.values);
        let provenance = provenance(
            spec,
            &from_file,
            file_label.as_deref(),
            no_echo.as_ref(),
            &read.values,
        );
        let tags = template::merge_tags(from_file.tags.clone(), spec);
        check_tag_count(&tags, spec)?;
        // Guard, before anything is stored or made. A parameter that is a
        // secret or `NoEcho` is not given (every one when the template's
        // `NoEcho`s cannot be read).
        let hidden = read
            .values
            .keys()
            .filter(|name| {
                read.secrets.contains_key(*name)
                    || no_echo.as_ref().is_none_or(|n| n.contains(*name))
            })
            .cloned()
            .collect();
        let checked = super::policy::Checked {
            template: &template,
            values: &read.values,
            hidden,
            tags: &tags,
        };
        self.check_policy(state, entry, checked).await?;
        self.store_objects(&packaged).await?;
        let template_sha = sha256_hex(&template);
        let hash = template::desired_hash(
            &template_sha,
            &parameters::hash_inputs(&read.stored),
            &tags,
            spec,
        );
        // The parameters can be large (200 × 4 KB): they go to the bucket,
        // not into the run's state; change-set reads them back. A secret's
        // value is not among them: its reference and hash are.
        let parameters_json = serde_json::to_vec(&read.stored).map_err(invalid)?;
        drop(read);
        let template_key = template_key(&template_sha, spec.target_account());
        let parameters_key = parameters_key(&parameters_json);
        let template_version = self.store(&template_key, template, "text/plain").await?;
        self.store(&parameters_key, parameters_json, "application/json")
            .await?;
        Ok(Desired {
            template_key,
            template_version,
            parameters_key,
            hash,
            file_tags: from_file.tags,
            provenance,
            read_outputs,
            packaged: std::mem::take(&mut packaged.artifacts),
        })
    }

    /// Stores an object whose key names its content, checking what is
    /// already there byte for byte: an object replaced outside stacksync is
    /// written again (and said), never deployed. Returns the version that
    /// holds these bytes.
    async fn store(
        &self,
        key: &str,
        body: Vec<u8>,
        content_type: &str,
    ) -> Result<Option<String>, StepError> {
        let stored = self.blobs.store(key, body, content_type).await?;
        if stored.restored {
            warn!(
                key,
                "the object held other bytes than its name says (replaced outside stacksync): written again"
            );
        }
        Ok(stored.version)
    }
}

#[cfg(test)]
mod checks_tests;
#[cfg(test)]
mod package_tests;

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::stack_status::StackStatus as S;
    use crate::status::Phase;

    async fn uploaded(t: &Test) -> StepResult {
        let state = t.steps.artifact_fetch(t.input("run-1")).await?;
        t.steps.template_upload(state).await
    }

    #[tokio::test]
    async fn the_template_and_parameters_are_stored_by_content_and_hashed() {
        let t = Test::new().await;
        let state = uploaded(&t).await.unwrap();
        assert_eq!(state.next, Next::ChangeSet);
        let template_key = state.uploaded.clone().unwrap().template_key;
        assert_eq!(template_key, format!("templates/{}", sha256_hex(TEMPLATE)));
        assert_eq!(t.blob(&template_key).as_deref(), Some(TEMPLATE));
        assert!(
            t.blob(
                state
                    .uploaded
                    .as_ref()
                    .unwrap()
                    .parameters_key
                    .as_deref()
                    .unwrap()
            )
            .is_some()
        );
        assert_eq!(state.desired_hash().map(str::len), Some(64));
        assert!(
            t.cfn.operations().is_empty(),
            "no CloudFormation call before the change set"
        );
    }

    #[tokio::test]
    async fn a_stored_template_replaced_outside_stacksync_is_written_again_and_that_version_pinned()
    {
        let t = Test::new().await;
        let key = template_key(&sha256_hex(TEMPLATE), None);
        t.steps
            .blobs
            .inner
            .put(&key, b"Resources: {Substituted: {}}");
        let state = uploaded(&t).await.unwrap();
        assert_eq!(t.blob(&key).as_deref(), Some(TEMPLATE), "written again");
        let version = state.uploaded.clone().unwrap().template_version.unwrap();
        assert_eq!(
            t.steps.blobs.inner.version(&key, &version).as_deref(),
            Some(TEMPLATE)
        );

        // A second run finds the right bytes and pins the same version.
        t.release("run-1").await;
        let again = uploaded(&t).await.unwrap();
        assert_eq!(again.uploaded.unwrap().template_version, Some(version));
    }

    /// A run at the applied hash, on a stack that the last run left at
    /// `UPDATE_COMPLETE` and that `change` then changes (or not).
    async fn at_applied_hash(change: impl FnOnce(&Test)) -> (Test, StepResult) {
        let t = Test::new().await;
        let desired = uploaded(&t)
            .await
            .unwrap()
            .desired_hash()
            .unwrap()
            .to_owned();
        t.release("run-1").await;
        t.applied(&desired, S::UpdateComplete);
        t.stack_answers(&[Some(S::UpdateComplete)]);
        change(&t);
        t.cfn.script().calls.clear();
        let result = uploaded(&t).await;
        (t, result)
    }

    #[tokio::test]
    async fn a_stack_as_the_last_run_left_it_ends_the_run_in_sync() {
        let (t, result) = at_applied_hash(|_| {}).await;
        let state = result.unwrap();
        assert_eq!(state.next, Next::Done);
        let entry = t.entry();
        assert_eq!(entry.status.phase, Phase::Ready);
        assert_eq!(
            entry.status.message.as_deref(),
            Some("in sync: nothing to change")
        );
        assert!(entry.lease.is_none());
        assert_eq!(
            entry.status.times.next_reconcile_at, None,
            "out of the queue"
        );
        assert_eq!(entry.status.applied.seen, Some(t.seen(S::UpdateComplete)));
        assert_eq!(t.cfn.operations(), ["DescribeStacks", "GetTemplate"]);
    }

    #[tokio::test]
    async fn a_stack_changed_outside_stacksync_goes_on_to_a_change_set_saying_what_changed() {
        type Case = (Change, &'static str, fn(&Test));
        let cases: [Case; 5] = [
            (Change::Updated, "updated outside stacksync at", |t| {
                t.cfn.script().changed_at += 60_000;
            }),
            (Change::Updated, "template or parameters differ", |t| {
                t.cfn.script().template = "Resources: {Opened: {}}".into();
            }),
            (Change::Replaced, "replaced outside stacksync", |t| {
                t.cfn.script().generation = 2;
            }),
            (Change::Deleted, "deleted outside stacksync", |t| {
                t.stack_answers(&[None]);
            }),
            (Change::StatusChanged, "UPDATE_ROLLBACK_COMPLETE", |t| {
                t.stack_answers(&[Some(S::UpdateRollbackComplete)]);
            }),
        ];
        for (change, words, make) in cases {
            let (t, result) = at_applied_hash(make).await;
            let state = result.unwrap();
            assert_eq!(state.next, Next::ChangeSet, "{change}");
            assert!(state.must_apply(), "{change}");
            let found = state.out_of_band().cloned().unwrap();
            assert_eq!(found.change, change);
            assert!(found.detail.contains(words), "{}", found.detail);
            assert!(!found.undone);
            assert_eq!(t.entry().status.phase, Phase::Reconciling);
        }
    }

    #[tokio::test]
    async fn forced_or_with_nothing_recorded_the_run_goes_on_to_a_change_set() {
        let t = Test::new().await;
        let desired = uploaded(&t)
            .await
            .unwrap()
            .desired_hash()
            .unwrap()
            .to_owned();
        t.release("run-1").await;
        let mut entry = t.entry();
        entry.status.applied.applied_hash = Some(desired.clone());
        t.steps.registry.inner.insert(entry);
        t.stack_answers(&[Some(S::UpdateComplete)]);
        let state = uploaded(&t).await.unwrap();
        assert_eq!(
            state.next,
            Next::ChangeSet,
            "nothing recorded to compare with"
        );
        assert!(state.must_apply() && state.out_of_band().is_none());

        t.release("run-1").await;
        t.applied(&desired, S::UpdateComplete);
        let mut input = t.input("run-2");
        input.trigger.force = true;
        let state = t.steps.artifact_fetch(input).await.unwrap();
        let state = t.steps.template_upload(state).await.unwrap();
        assert_eq!(state.next, Next::ChangeSet, "forced");
        assert!(state.must_apply() && state.out_of_band().is_none());
    }

    #[tokio::test]
    async fn drift_reported_since_is_recorded_and_said_not_put_back() {
        let (t, result) = at_applied_hash(|t| {
            t.cfn.script().drift = Some("DRIFTED".into());
        })
        .await;
        assert_eq!(result.unwrap().next, Next::Done);
        let status = t.entry().status;
        assert_eq!(
            status.applied.seen.unwrap().drift.as_deref(),
            Some("DRIFTED")
        );
        let message = status.message.unwrap();
        assert!(
            message.contains("drift detection reports DRIFTED")
                && message.contains("stacksync drift orders"),
            "{message}"
        );
    }

    #[tokio::test]
    async fn a_missing_or_broken_template_stalls_naming_the_file_and_the_revision() {
        for (files, wants) in [
            (
                vec![("other.yaml", &b"x: 1"[..])],
                "template t.yaml is not in the source",
            ),
            (vec![("t.yaml", &b"Resources: [unclosed"[..])], "t.yaml"),
        ] {
            let t = Test::new().await;
            t.steps.sources.commit(URL, "main", "feedface", &files);
            let err = uploaded(&t).await.unwrap_err();
            match err {
                StepError::Stalled { reason, message } => {
                    assert_eq!(reason, StallReason::InvalidTemplate);
                    assert!(
                        message.contains(wants) && message.contains("feedface"),
                        "{message}"
                    );
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[tokio::test]
    async fn a_state_without_its_artifact_key_is_a_contract_violation() {
        let t = Test::new().await;
        let mut state = t.steps.artifact_fetch(t.input("run-1")).await.unwrap();
        state.fetched.as_mut().unwrap().artifact_key = None;
        let err = t.steps.template_upload(state).await.unwrap_err();
        assert!(
            matches!(
                err,
                StepError::Stalled {
                    reason: StallReason::ContractViolated,
                    ..
                }
            ),
            "{err:?}"
        );
    }
}
