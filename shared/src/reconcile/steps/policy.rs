//! The policy check of template-upload: the run's Guard rule sets (stored
//! by artifact-fetch, kept in memory by revision), checked against the
//! template as written and the resolved parameters and tags, before
//! anything is stored or made.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use super::{Ports, Steps};
use crate::guard::{self, RuleFile, RuleSet};
use crate::ports::Blobs;
use crate::reconcile::run::{PolicyRef, RunState, StepError};
use crate::registry::StackEntry;
use crate::status::{PolicyRecord, StallReason, Timestamp};

/// The most bytes a rule set may hold (its files together).
pub const MAX_RULE_SET_BYTES: u64 = 4 * 1024 * 1024;

/// The most rule sets kept in memory.
const CACHED_RULE_SETS: usize = 32;

/// Rule sets read, by the key they are stored at (a source, revision and
/// folder: never another content), so a warm function reads each once;
/// and the keys known to be stored, so a warm artifact-fetch asks S3 for
/// none of them again.
#[derive(Debug, Clone, Default)]
pub struct RuleCache(Arc<Mutex<Cached>>);

#[derive(Debug, Default)]
struct Cached {
    sets: HashMap<String, Arc<Vec<RuleFile>>>,
    stored: HashSet<String>,
}

impl RuleCache {
    fn get(&self, key: &str) -> Option<Arc<Vec<RuleFile>>> {
        self.0.lock().ok()?.sets.get(key).cloned()
    }

    fn put(&self, key: &str, files: Arc<Vec<RuleFile>>) {
        if let Ok(mut cached) = self.0.lock() {
            if cached.sets.len() >= CACHED_RULE_SETS {
                cached.sets.clear();
            }
            cached.sets.insert(key.to_owned(), files);
        }
    }

    /// Whether `key` is known to be stored (by this process).
    pub(super) fn stored(&self, key: &str) -> bool {
        self.0.lock().is_ok_and(|c| c.stored.contains(key))
    }

    pub(super) fn mark_stored(&self, key: &str) {
        if let Ok(mut cached) = self.0.lock() {
            if cached.stored.len() >= CACHED_RULE_SETS * 8 {
                cached.stored.clear();
            }
            cached.stored.insert(key.to_owned());
        }
    }

    /// Forgets everything (a cold start, in tests).
    pub fn clear(&self) {
        if let Ok(mut cached) = self.0.lock() {
            *cached = Cached::default();
        }
    }
}

/// What the check is given: the stack as it would be deployed.
pub(super) struct Checked<'a> {
    pub template: &'a [u8],
    pub values: &'a BTreeMap<String, String>,
    /// Parameters whose values are not given to Guard (secrets, `NoEcho`).
    pub hidden: BTreeSet<String>,
    pub tags: &'a BTreeMap<String, String>,
}

/// What a check is given, hashed: Guard's input (values hidden as given)
/// and the rule sets' keys (a source, revision and folder each).
fn input_hash(input: &serde_json::Value, refs: &[PolicyRef]) -> String {
    let keys: Vec<&str> = refs.iter().map(|r| r.key.as_str()).collect();
    let hashed = serde_json::json!({ "input": input, "rules": keys });
    crate::hash::sha256_hex(crate::hash::canonical(hashed).to_string().as_bytes())
}

fn invalid_policy(e: impl std::fmt::Display) -> StepError {
    StepError::stalled(StallReason::InvalidPolicy, e.to_string())
}

impl<P: Ports> Steps<P> {
    /// The run's rule sets, read from the bucket unless in memory.
    pub(super) async fn rule_sets(&self, refs: &[PolicyRef]) -> Result<Vec<RuleSet>, StepError> {
        let mut sets = Vec::with_capacity(refs.len());
        for r in refs {
            let files = match self.rule_cache.get(&r.key) {
                Some(files) => files,
                None => {
                    let archive = self
                        .blobs
                        .get(&r.key, MAX_RULE_SET_BYTES)
                        .await
                        .map_err(StepError::port(StallReason::ArtifactUnavailable))?;
                    let files = crate::artifact::read_all(&archive, MAX_RULE_SET_BYTES)
                        .map_err(|e| invalid_policy(format!("policy {}: {e}", r.origin)))?
                        .into_iter()
                        .map(|(path, bytes)| {
                            String::from_utf8(bytes)
                                .map(|text| RuleFile {
                                    path: path.clone(),
                                    text,
                                })
                                .map_err(|_| {
                                    invalid_policy(format!(
                                        "policy: {}:{path}: the rule file is not UTF-8",
                                        r.origin
                                    ))
                                })
                        })
                        .collect::<Result<Vec<_>, _>>()?;
                    let files = Arc::new(files);
                    self.rule_cache.put(&r.key, files.clone());
                    files
                }
            };
            sets.push(RuleSet {
                origin: r.origin.clone(),
                files: files.as_ref().clone(),
            });
        }
        Ok(sets)
    }

    /// Checks the stack against the run's rule sets: a blocking rule
    /// broken ends the run (`PolicyViolation`), a rule file that does not
    /// parse too (`InvalidPolicy`); what was found is recorded either way
    /// (when it differs from the last record), warnings included.
    pub(super) async fn check_policy(
        &self,
        state: &RunState,
        entry: &mut StackEntry,
        checked: Checked<'_>,
    ) -> Result<(), StepError> {
        let refs = state
            .fetched
            .as_ref()
            .map(|f| f.policies.as_slice())
            .unwrap_or_default();
        if refs.is_empty() {
            return Ok(());
        }
        let input = guard::input(
            checked.template,
            entry.spec.effective_stack_name(),
            checked.values,
            &checked.hidden,
            checked.tags,
        )
        .map_err(invalid_policy)?;
        let input_hash = input_hash(&input, refs);
        let last = entry.status.findings.policy.as_ref();
        // The same template, values, tags and rule revisions as the last
        // check: its answer holds (Guard is not run again; a periodic run
        // of an unchanged stack costs no evaluation).
        let report = match last.filter(|l| !l.input_hash.is_empty() && l.input_hash == input_hash) {
            Some(last) => last.report.clone(),
            None => {
                let sets = self.rule_sets(refs).await?;
                guard::check(&sets, &input).map_err(invalid_policy)?
            }
        };
        tracing::info!(stack = %state.entry, summary = %report.summary(), "policy checked");
        let mut record = PolicyRecord::new(
            Timestamp(crate::clock::now_millis()),
            state.revision().map(str::to_owned),
            report.clone(),
        );
        record.input_hash = input_hash;
        if let Some(last) = last.filter(|l| l.input_hash == record.input_hash) {
            // Counts beyond the findings kept stay as first counted.
            (record.violations, record.warnings) = (last.violations, last.warnings);
        }
        let unchanged = last.is_some_and(|last| last.same_findings(&record));
        if !unchanged {
            let status = crate::status::transitions::with_policy(&entry.status, record);
            self.record(state, entry, status.clone()).await?;
            entry.status = status;
        }
        if report.passes() {
            Ok(())
        } else {
            Err(StepError::stalled(
                StallReason::PolicyViolation,
                format!("{}; nothing was made", report.violation_message()),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use crate::reconcile::run::Next;
    use crate::status::StallReason;

    const BUCKET: &[u8] = b"Resources:\n  Logs:\n    Type: AWS::S3::Bucket\n";
    const ENCRYPTED: &str = "let b = Resources.*[ Type == 'AWS::S3::Bucket' ]\n\
        rule BUCKET_ENCRYPTED when %b !empty {\n  %b.Properties.BucketEncryption exists <<encrypt it>>\n}\n";
    const RULES_URL: &str = "https://git.example/rules.git";
    const RULES_HEAD: &str = "fedcba9876543210fedcba9876543210fedcba98";

    /// `orders` deploying a bucket, with its own `policy: {path: policies}`
    /// holding `rules`; the installation's rule set `installation`, if any.
    async fn with_rules(rules: &str, installation: Option<&str>) -> Test {
        let mut t = Test::with_entry(|e| {
            e.spec.policy = Some(crate::spec::Source {
                path: "policies".into(),
                ..Default::default()
            });
        })
        .await;
        t.steps.sources.commit(
            URL,
            "main",
            HEAD,
            &[("t.yaml", BUCKET), ("policies/s3.guard", rules.as_bytes())],
        );
        if let Some(text) = installation {
            t.steps.sources.commit(
                RULES_URL,
                "main",
                RULES_HEAD,
                &[
                    ("guard/tags.guard", text.as_bytes()),
                    ("guard/README.md", b"no rules"),
                ],
            );
            t.steps.config.rules = Some(crate::spec::Source {
                git: Some(RULES_URL.into()),
                path: "guard".into(),
                ..Default::default()
            });
        }
        t
    }

    async fn uploaded(t: &Test) -> super::super::StepResult {
        let state = t.steps.artifact_fetch(t.input("run-1")).await?;
        t.steps.template_upload(state).await
    }

    #[tokio::test]
    async fn a_blocking_rule_broken_ends_the_run_before_anything_is_stored_and_is_recorded() {
        let t = with_rules(ENCRYPTED, None).await;
        let err = uploaded(&t).await.unwrap_err();
        assert_eq!(err.name(), "StackSync.Stalled.PolicyViolation");
        assert!(
            err.message()
                .contains("BUCKET_ENCRYPTED on Logs: encrypt it")
                && err.message().contains("policies/s3.guard"),
            "{}",
            err.message()
        );
        assert!(
            t.cfn.script().calls.is_empty(),
            "CloudFormation never asked"
        );
        let stored = t.steps.blobs.inner.keys();
        assert!(
            !stored.iter().any(|k| k.starts_with("templates/")),
            "no template stored: {stored:?}"
        );
        let record = t.entry().status.findings.policy.unwrap();
        assert_eq!((record.violations, record.warnings), (1, 0));
        assert_eq!(record.revision.as_deref(), Some(HEAD));
        assert_eq!(record.report.violations[0].resources, ["Logs"]);
    }

    #[tokio::test]
    async fn the_failed_run_ends_failed_policy_violation_and_its_event_carries_the_findings() {
        let t = with_rules(ENCRYPTED, None).await;
        let state = t.steps.artifact_fetch(t.input("run-1")).await.unwrap();
        let err = t.steps.template_upload(state.clone()).await.unwrap_err();
        let input = crate::reconcile::run::FinalizeInput {
            state,
            error: crate::reconcile::run::CaughtError {
                error: err.name(),
                cause: err.message().to_owned(),
            },
        };
        t.steps.finalize(input).await.unwrap();
        let entry = t.entry();
        assert_eq!(entry.status.phase, crate::status::Phase::Failed);
        assert_eq!(
            entry.status.stall_reason,
            Some(StallReason::PolicyViolation)
        );
        assert!(entry.lease.is_none(), "the lease given back");
        let failed = t.notices.all().pop().unwrap();
        assert_eq!(t.notices.kinds().last().copied(), Some("Reconcile Failed"));
        assert_eq!(failed.stall_reason.as_deref(), Some("PolicyViolation"));
        let policy = failed.policy.clone().expect("the findings in the event");
        assert_eq!(policy.violations[0].rule, "BUCKET_ENCRYPTED");
        let detail: serde_json::Value = serde_json::from_str(&failed.detail()).unwrap();
        assert_eq!(detail["policy"]["violations"][0]["resources"][0], "Logs");
    }

    #[tokio::test]
    async fn warnings_are_recorded_and_the_run_goes_on_with_the_installations_rules_first() {
        let warn = format!("# severity: warn\n{ENCRYPTED}");
        let tags = "rule TAGGED {\n  StackSync.Tags.team exists\n}\n";
        let t = with_rules(&warn, Some(tags)).await;
        let err = uploaded(&t).await.unwrap_err();
        assert_eq!(err.name(), "StackSync.Stalled.PolicyViolation");
        assert!(err.message().contains("TAGGED"), "{}", err.message());
        let record = t.entry().status.findings.policy.unwrap();
        assert_eq!(
            record.report.rule_sets,
            [
                format!("{RULES_URL}@fedcba987654"),
                format!("{URL}@0123456789ab")
            ]
        );

        // With the tag, the warning alone: the run goes on.
        let t = with_rules(&warn, Some(tags)).await;
        let mut entry = t.entry();
        entry.spec.tags.insert("team".into(), "payments".into());
        t.steps.registry.inner.insert(entry);
        let state = uploaded(&t).await.unwrap();
        assert_eq!(state.next, Next::ChangeSet);
        let record = t.entry().status.findings.policy.unwrap();
        assert_eq!((record.violations, record.warnings), (0, 1));
        assert_eq!(record.report.warnings[0].rule, "BUCKET_ENCRYPTED");
    }

    #[tokio::test]
    async fn a_rule_file_that_does_not_parse_fails_the_run_naming_file_and_line() {
        let t = with_rules("rule A {\n  Resources exists\n", None).await;
        let err = uploaded(&t).await.unwrap_err();
        assert_eq!(err.name(), "StackSync.Stalled.InvalidPolicy");
        assert!(
            err.message().contains(&format!(
                "{URL}@0123456789ab:policies/s3.guard:3:1: the rule file does not parse"
            )),
            "{}",
            err.message()
        );
        assert!(t.cfn.script().calls.is_empty());
        assert!(
            !StallReason::InvalidPolicy.is_lasting(),
            "retried: the fix is in the rules"
        );
    }

    #[tokio::test]
    async fn a_rule_set_is_fetched_once_per_revision_and_read_once_per_function() {
        let t = with_rules(ENCRYPTED, Some("rule ANY {\n  Resources exists\n}\n")).await;
        let mut entry = t.entry();
        entry.spec.policy = None;
        t.steps.registry.inner.insert(entry);
        t.steps
            .sources
            .commit(URL, "main", HEAD, &[("t.yaml", TEMPLATE)]);
        let state = uploaded(&t).await.unwrap();
        let fetches = t.steps.sources.calls().1;
        // The stored rule set spoiled: a second run of this function reads
        // it from memory, never from the bucket.
        let key = &state.fetched.unwrap().policies[0].key;
        t.steps.blobs.inner.put(key, b"not a tar.gz");
        t.release("run-1").await;
        let again = uploaded(&t).await.unwrap();
        assert_eq!(again.next, Next::ChangeSet);
        assert_eq!(t.steps.sources.calls().1, fetches, "nothing fetched again");
        assert_eq!(
            t.steps.blobs.calls("HeadObject"),
            3,
            "the artifact's on both runs, the rule set's on the first only: then known stored"
        );
        // Another function (a cold start) reads the bucket, and says so,
        // once what it checks is new (a tag here).
        let mut entry = t.entry();
        entry.spec.tags.insert("team".into(), "payments".into());
        t.steps.registry.inner.insert(entry);
        t.steps.rule_cache.clear();
        t.release("run-1").await;
        let err = uploaded(&t).await.unwrap_err();
        assert_eq!(err.name(), "StackSync.Stalled.InvalidPolicy");
        assert!(
            err.message().contains("not a readable tar.gz"),
            "{}",
            err.message()
        );
    }

    /// A periodic run of an unchanged stack takes the last check's answer:
    /// Guard is not run again, nothing is written.
    #[tokio::test]
    async fn the_same_input_and_rules_are_not_checked_twice() {
        let t = with_rules(ENCRYPTED, None).await;
        let err = uploaded(&t).await.unwrap_err();
        let first = t.entry().status.findings.policy.unwrap();
        assert!(!first.input_hash.is_empty());
        t.release("run-1").await;
        let state = t.steps.artifact_fetch(t.input("run-1")).await.unwrap();
        // The rule set spoiled: a check that ran Guard would fail otherwise.
        let key = &state.fetched.clone().unwrap().policies[0].key;
        t.steps.blobs.inner.put(key, b"not a tar.gz");
        t.steps.rule_cache.clear();
        let again = t.steps.template_upload(state).await.unwrap_err();
        assert_eq!(again.message(), err.message(), "the same answer");
        assert_eq!(
            t.entry().status.findings.policy.unwrap().checked_at,
            first.checked_at,
            "nothing written"
        );
    }

    /// Rules come over authenticated transports only, as templates do: a
    /// deployed installation refuses an `http://` rule source (anyone on the
    /// network path could weaken the rules) before reading it.
    #[tokio::test]
    async fn a_rule_source_over_an_unauthenticated_transport_is_refused_when_deployed() {
        let mut t = with_rules(ENCRYPTED, None).await;
        t.steps.config.local = false;
        let mut entry = t.entry();
        entry.spec.policy = Some(crate::spec::Source {
            git: Some("http://git.example/rules.git".into()),
            path: "guard".into(),
            ..Default::default()
        });
        t.steps.registry.inner.insert(entry);
        let fetches = t.steps.sources.calls().1;
        let err = t.steps.artifact_fetch(t.input("run-1")).await.unwrap_err();
        assert_eq!(err.name(), "StackSync.Stalled.Unsupported");
        assert!(
            err.message()
                .starts_with("policy http://git.example/rules.git: ")
                && err.message().contains("is not authenticated"),
            "{}",
            err.message()
        );
        assert_eq!(t.steps.sources.calls().1, fetches + 1, "the template only");
    }

    #[tokio::test]
    async fn a_policy_folder_without_rules_is_refused() {
        let t = with_rules(ENCRYPTED, None).await;
        t.steps.sources.commit(
            URL,
            "main",
            HEAD,
            &[("t.yaml", BUCKET), ("policies/x.txt", b"")],
        );
        let err = t.steps.artifact_fetch(t.input("run-1")).await.unwrap_err();
        assert_eq!(err.name(), "StackSync.Stalled.InvalidPolicy");
        assert!(
            err.message().contains("no .guard file"),
            "{}",
            err.message()
        );
    }
}
