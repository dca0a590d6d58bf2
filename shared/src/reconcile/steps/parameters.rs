//! The parameters a run gives CloudFormation, between template-upload
//! (which reads and stores them) and the steps that make or compare the
//! change set (which read secrets again): where each came from, and how a
//! value that cannot be read ends the run.

use std::collections::{BTreeMap, BTreeSet};

use super::{Port, Ports, Steps};
use crate::parameters::{Kind, Provenance, Stored};
use crate::ports::Blobs;
use crate::reconcile::run::{RunState, StepError};
use crate::reconcile::values::{self, ValueError};
use crate::spec::{ParameterValue, StackSpec};
use crate::status::StallReason;
use crate::template::FileValues;

impl<P: Ports> Steps<P> {
    /// The parameters template-upload stored for this run, secrets read
    /// again through the stack's port `cfn`.
    pub(super) async fn parameters(
        &self,
        state: &RunState,
        cfn: &Port<P>,
    ) -> Result<Vec<(String, String)>, StepError> {
        let stored = self.stored_parameters(state).await?;
        values::read_again(cfn, stored).await.map_err(value_error)
    }

    /// The stack's `outputs` as the registry may record them: any that is,
    /// or holds, the value of a secret the run's parameters read is masked
    /// ([`crate::parameters::without_secrets`]); the secrets are read again
    /// through `cfn` for this, and if they cannot be, no output is recorded
    /// ([`crate::parameters::UNCHECKED_OUTPUT`]: never recorded by mistake,
    /// nor taken for a secret).
    pub(super) async fn recordable_outputs(
        &self,
        state: &RunState,
        spec: &StackSpec,
        cfn: &Port<P>,
        outputs: Option<BTreeMap<String, String>>,
    ) -> Result<Option<BTreeMap<String, String>>, StepError> {
        let outputs = match outputs {
            Some(o) if !o.is_empty() && spec.reads_secrets() => o,
            other => return Ok(other),
        };
        let stored = self.stored_parameters(state).await?;
        if !stored.values().any(|v| matches!(v, Stored::Read { .. })) {
            return Ok(Some(outputs));
        }
        let secrets = match values::secret_values(cfn, &stored).await {
            Ok(secrets) => secrets,
            Err(e) => {
                tracing::warn!(stack = %state.entry, error = %e, "the secrets could not be read again to check the outputs: none recorded");
                return Ok(Some(
                    outputs
                        .into_keys()
                        .map(|k| (k, crate::parameters::UNCHECKED_OUTPUT.to_owned()))
                        .collect(),
                ));
            }
        };
        Ok(Some(crate::parameters::without_secrets(outputs, &secrets)))
    }

    /// The parameters as template-upload stored them (a secret as where it
    /// is read and its version), checked against the hash their key names.
    pub(super) async fn stored_parameters(
        &self,
        state: &RunState,
    ) -> Result<BTreeMap<String, Stored>, StepError> {
        let Some(key) = state
            .uploaded
            .as_ref()
            .and_then(|u| u.parameters_key.as_ref())
        else {
            return Ok(BTreeMap::new());
        };
        let bytes = self
            .blobs
            .get(key, 16 * 1024 * 1024)
            .await
            .map_err(StepError::port(StallReason::ArtifactUnavailable))?;
        if *key != crate::naming::parameters_key(&bytes) {
            return Err(StepError::stalled(
                StallReason::ArtifactUnavailable,
                format!(
                    "{key} no longer holds the parameters its name is the hash of (written outside stacksync since the run stored it); nothing was deployed, and the next run stores them again"
                ),
            ));
        }
        serde_json::from_slice(&bytes).map_err(|e| {
            StepError::stalled(StallReason::ArtifactUnavailable, format!("{key}: {e}"))
        })
    }
}

/// The stack's parameters with the values of those the spec reads from a
/// secret store masked, as CloudFormation masks `NoEcho` ones: the hash of
/// what is deployed is recorded, and must let nobody confirm a guess.
pub(super) fn masked(
    spec: &StackSpec,
    parameters: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    parameters
        .iter()
        .map(|(k, v)| {
            let secret = spec
                .parameters
                .get(k)
                .and_then(|p| p.reference())
                .is_some_and(crate::spec::ValueRef::is_secret);
            (
                k.clone(),
                if secret { "****".to_owned() } else { v.clone() },
            )
        })
        .collect()
}

/// A value that could not be read: `MissingValue` naming it,
/// `SecretNotNoEcho` for a secret it would record, or the port's error as
/// any other.
pub(super) fn value_error(e: values::ValueError) -> StepError {
    match e {
        ValueError::Missing(why) => StepError::stalled(StallReason::MissingValue, why),
        ValueError::Secret(why) => StepError::stalled(StallReason::SecretNotNoEcho, why),
        ValueError::Port(e) => e.into(),
        ValueError::Registry(e) => e.into(),
    }
}

/// The longest value `get --explain` keeps of a parameter or tag.
const MAX_EXPLAINED_VALUE: usize = 256;

/// Where each parameter and tag came from: the entry, the file, a secret
/// store, another stack, stacksync. Secrets' and `NoEcho` parameters'
/// values are left out; the others are cut to [`MAX_EXPLAINED_VALUE`].
pub(super) fn provenance(
    spec: &StackSpec,
    file: &FileValues,
    file_label: Option<&str>,
    no_echo: Option<&BTreeSet<String>>,
    read: &BTreeMap<String, String>,
) -> Vec<Provenance> {
    let cut = |v: &str| -> String {
        if v.len() <= MAX_EXPLAINED_VALUE {
            return v.to_owned();
        }
        let mut end = MAX_EXPLAINED_VALUE;
        while !v.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}…", &v[..end])
    };
    let file_label = file_label.unwrap_or("parameter file");
    let mut out = Vec::new();
    let names: BTreeSet<&String> = file
        .parameters
        .keys()
        .chain(spec.parameters.keys())
        .collect();
    for name in names {
        let masked = no_echo.is_none_or(|n| n.contains(name.as_str()));
        let (from, value) = match (spec.parameters.get(name), file.parameters.get(name)) {
            (Some(ParameterValue::From(r)), _) => (
                format!("stacks.yaml: {}", r.describe()),
                // Another stack's output, as read: no secret.
                read.get(name)
                    .filter(|_| !r.is_secret() && !masked)
                    .map(|v| cut(v)),
            ),
            (Some(ParameterValue::Text(t)), over) => (
                if over.is_some() {
                    format!("stacks.yaml (over the {file_label})")
                } else {
                    "stacks.yaml".to_owned()
                },
                (!masked).then(|| cut(t)),
            ),
            (None, Some(t)) => (file_label.to_owned(), (!masked).then(|| cut(t))),
            (None, None) => continue,
        };
        out.push(Provenance {
            kind: Kind::Parameter,
            name: name.clone(),
            from,
            value,
        });
    }
    let tags: BTreeSet<&String> = file.tags.keys().chain(spec.tags.keys()).collect();
    for name in tags {
        let (from, value) = match (spec.tags.get(name), file.tags.get(name)) {
            (Some(v), Some(_)) => (format!("stacks.yaml (over the {file_label})"), v),
            (Some(v), None) => ("stacks.yaml".to_owned(), v),
            (None, Some(v)) => (file_label.to_owned(), v),
            (None, None) => continue,
        };
        out.push(Provenance {
            kind: Kind::Tag,
            name: name.clone(),
            from,
            value: Some(cut(value)),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::reconcile::run::Next;
    use crate::stack_status::StackStatus as S;
    use crate::status::Phase;

    async fn uploaded(t: &Test) -> Result<RunState, StepError> {
        let state = t.steps.artifact_fetch(t.input("run-1")).await?;
        t.steps.template_upload(state).await
    }

    /// A template whose secret parameters are `NoEcho`, with an output
    /// that echoes one of them.
    const SECRET_TEMPLATE: &[u8] = b"Parameters:\n  Pw: {Type: String, NoEcho: true}\n  Key: {Type: String, NoEcho: true}\n  Plain: {Type: String}\nResources:\n  Queue:\n    Type: AWS::SQS::Queue\nOutputs:\n  Echo: {Value: !Ref Pw}\n";

    /// `orders` reading a SecureString and a key of a JSON secret.
    async fn with_secrets(password: &str) -> Test {
        with_secrets_in(password, SECRET_TEMPLATE).await
    }

    /// The same, `template` committed.
    async fn with_secrets_in(password: &str, template: &[u8]) -> Test {
        let t = Test::with_entry(|e| {
            e.spec.parameters.insert(
                "Pw".into(),
                ParameterValue::From(crate::spec::ValueRef::Ssm {
                    ssm: "/db/pw".into(),
                }),
            );
            e.spec.parameters.insert(
                "Key".into(),
                ParameterValue::From(crate::spec::ValueRef::Secret {
                    secret: "arn:aws:secretsmanager:us-east-1:111122223333:secret:db".into(),
                    key: Some("apiKey".into()),
                }),
            );
            e.spec.parameters.insert("Plain".into(), "visible".into());
        })
        .await;
        t.steps
            .sources
            .commit(URL, "main", HEAD, &[("t.yaml", template)]);
        t.cfn.script().ssm.insert("/db/pw".into(), password.into());
        t.cfn.script().secrets.insert(
            "arn:aws:secretsmanager:us-east-1:111122223333:secret:db".into(),
            r#"{"apiKey": "k-SECRET-1", "other": "x"}"#.into(),
        );
        t
    }

    #[tokio::test]
    async fn secrets_enter_the_hash_as_hashes_and_are_stored_nowhere() {
        let t = with_secrets("pw-SECRET-1").await;
        let state = uploaded(&t).await.unwrap();
        let blob = t
            .blob(
                state
                    .uploaded
                    .as_ref()
                    .unwrap()
                    .parameters_key
                    .as_deref()
                    .unwrap(),
            )
            .unwrap();
        let blob = String::from_utf8(blob).unwrap();
        let state_json = serde_json::to_string(&state).unwrap();
        let status_json = serde_json::to_string(&t.entry()).unwrap();
        for (what, text) in [
            ("blob", &blob),
            ("state", &state_json),
            ("entry", &status_json),
        ] {
            assert!(!text.contains("SECRET"), "{what} holds a secret: {text}");
        }
        assert!(
            blob.contains("/db/pw") && blob.contains("visible"),
            "{blob}"
        );
        // Where each came from, the secrets' values masked.
        let provenance = t.entry().status.inputs.provenance;
        let pw = provenance.iter().find(|p| p.name == "Pw").unwrap();
        assert_eq!(
            (pw.from.as_str(), pw.value.as_deref()),
            ("stacks.yaml: SSM parameter /db/pw", None)
        );
        let plain = provenance.iter().find(|p| p.name == "Plain").unwrap();
        assert_eq!(plain.value.as_deref(), Some("visible"));
        // The change set's request has the values, read again.
        let cfn = t.steps.port(&t.entry().spec).await.unwrap();
        let values: BTreeMap<String, String> = t
            .steps
            .parameters(&state, &cfn)
            .await
            .unwrap()
            .into_iter()
            .collect();
        assert_eq!(values["Pw"], "pw-SECRET-1");
        assert_eq!(values["Key"], "k-SECRET-1");

        // Rotated: another desired hash (so the next run updates the stack).
        let rotated = with_secrets("pw-SECRET-2").await;
        let again = uploaded(&rotated).await.unwrap();
        assert_ne!(again.desired_hash(), state.desired_hash());
        let same = with_secrets("pw-SECRET-1").await;
        assert_eq!(
            uploaded(&same).await.unwrap().desired_hash(),
            state.desired_hash()
        );
    }

    #[tokio::test]
    async fn a_missing_secret_or_key_is_a_failure_that_names_it_and_not_its_value() {
        let t = with_secrets("pw").await;
        t.cfn.script().ssm.clear();
        let err = uploaded(&t).await.unwrap_err();
        assert!(
            matches!(
                err,
                StepError::Stalled {
                    reason: StallReason::MissingValue,
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(
            err.to_string()
                .contains("parameter Pw: SSM parameter /db/pw is not there"),
            "{err}"
        );
        let t = with_secrets("pw").await;
        t.cfn.script().secrets.insert(
            "arn:aws:secretsmanager:us-east-1:111122223333:secret:db".into(),
            r#"{"other": "SECRET"}"#.into(),
        );
        let err = uploaded(&t).await.unwrap_err().to_string();
        assert!(
            err.contains("no key \"apiKey\"") && !err.contains("SECRET"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn a_secret_for_a_parameter_the_template_does_not_mark_no_echo_is_refused_naming_it() {
        // `Key` reads a Secrets Manager key, `Pw` a SecureString: neither
        // marked NoEcho here, so DescribeStacks would show their values.
        let template = b"Parameters:\n  Pw: {Type: String}\n  Key: {Type: String}\n  Plain: {Type: String}\nResources:\n  Queue:\n    Type: AWS::SQS::Queue\n";
        let t = with_secrets_in("pw-SECRET-1", template).await;
        let err = uploaded(&t).await.unwrap_err();
        let StepError::Stalled { reason, message } = &err else {
            panic!("{err:?}")
        };
        assert_eq!(*reason, StallReason::SecretNotNoEcho, "{message}");
        assert!(
            message.contains("Pw (from SSM parameter /db/pw)")
                && message.contains("Key (from key \"apiKey\"")
                && message.contains("{{resolve:secretsmanager:")
                && !message.contains("Plain"),
            "{message}"
        );
        assert!(!message.contains("SECRET"), "{message}");
        assert!(
            !t.cfn.operations().iter().any(|o| o == "CreateChangeSet"),
            "nothing made"
        );

        // A plain SSM String is no secret: any parameter may take it.
        let t = with_secrets_in("pw-SECRET-1", template).await;
        t.cfn.script().plain_ssm.insert("/db/pw".into());
        t.cfn.script().secrets.clear();
        let mut entry = t.entry();
        entry.spec.parameters.insert("Key".into(), "plain".into());
        t.steps.registry.inner.insert(entry);
        uploaded(&t).await.unwrap();
    }

    /// The run through to its end, the stack created: `meanwhile` between
    /// the change set's execution and the step that records the outputs.
    /// The status it recorded.
    async fn deployed(t: &Test, meanwhile: impl FnOnce(&Test)) -> crate::status::Status {
        let state = uploaded(t).await.unwrap();
        let mut state = t.steps.change_set(state).await.unwrap();
        state.change_set.as_mut().unwrap().execute = true;
        let state = t.steps.change_set(state).await.unwrap();
        meanwhile(t);
        t.stack_answers(&[Some(S::CreateComplete)]);
        let state = t.steps.poll_status(state).await.unwrap();
        assert_eq!(state.next, Next::Done, "{state:?}");
        t.entry().status
    }

    #[tokio::test]
    async fn an_output_that_echoes_a_secret_is_recorded_masked() {
        let t = with_secrets("pw-SECRET-1").await;
        {
            let mut s = t.cfn.script();
            s.outputs.insert("Echo".into(), "pw-SECRET-1".into());
            s.outputs.insert(
                "Url".into(),
                "postgres://app:pw-SECRET-1@db.internal/app".into(),
            );
            s.outputs
                .insert("Arn".into(), "arn:aws:sqs:us-east-1:1:q".into());
        }
        let status = deployed(&t, |_| {}).await;
        assert_eq!(status.phase, Phase::Ready);
        assert_eq!(
            status.applied.outputs["Echo"],
            crate::parameters::MASKED_OUTPUT
        );
        assert_eq!(
            status.applied.outputs["Url"],
            crate::parameters::MASKED_OUTPUT
        );
        assert_eq!(status.applied.outputs["Arn"], "arn:aws:sqs:us-east-1:1:q");
        let text = serde_json::to_string(&t.entry()).unwrap();
        assert!(!text.contains("SECRET"), "{text}");
    }

    #[tokio::test]
    async fn an_output_that_echoes_the_secret_as_the_run_read_it_is_masked_after_a_rotation() {
        let t = with_secrets("pw-SECRET-1").await;
        t.cfn
            .script()
            .outputs
            .insert("Echo".into(), "pw-SECRET-1".into());
        // Rotated while the stack was updating: the stack holds the value
        // the run read, the store a newer one.
        let status = deployed(&t, |t| {
            let mut s = t.cfn.script();
            s.ssm.insert("/db/pw".into(), "pw-SECRET-2".into());
            s.earlier_values.push("pw-SECRET-1".into());
        })
        .await;
        assert_eq!(
            status.applied.outputs["Echo"],
            crate::parameters::MASKED_OUTPUT
        );
        let text = serde_json::to_string(&t.entry()).unwrap();
        assert!(!text.contains("SECRET"), "{text}");
    }

    #[tokio::test]
    async fn outputs_that_cannot_be_checked_for_secrets_are_not_recorded_nor_called_secrets() {
        let t = with_secrets("pw-SECRET-1").await;
        t.cfn
            .script()
            .outputs
            .insert("Echo".into(), "pw-SECRET-1".into());
        // The parameter is gone by the time the outputs are checked.
        let status = deployed(&t, |t| t.cfn.script().ssm.clear()).await;
        assert_eq!(
            status.phase,
            Phase::Ready,
            "the stack is deployed all the same"
        );
        assert_eq!(
            status.applied.outputs["Echo"],
            crate::parameters::UNCHECKED_OUTPUT
        );
        let text = serde_json::to_string(&t.entry()).unwrap();
        assert!(!text.contains("SECRET"), "{text}");
    }

    /// `orders` reading output Url of `db` (made, Url holding a password:
    /// the one stack the fake describes), which `db`'s last run recorded
    /// as `recorded`.
    async fn reading_db_url(recorded: &str) -> Test {
        use crate::registry::sample_entry;
        let cfn = crate::fakes::ScriptedCloudFormation::with_stack(&[Some(S::CreateComplete)]);
        let t = Test::with(cfn, |e| {
            e.spec.parameters.insert(
                "Password".into(),
                ParameterValue::From(crate::spec::ValueRef::FromStack {
                    from_stack: "db".into(),
                    output: "Url".into(),
                }),
            );
        })
        .await;
        t.steps.sources.commit(
            URL,
            "main",
            HEAD,
            &[(
                "t.yaml",
                b"Parameters:\n  Password: {Type: String, NoEcho: true}\nResources:\n  Queue:\n    Type: AWS::SQS::Queue\n",
            )],
        );
        let mut db = sample_entry("db", crate::status::Status::default());
        db.status.run.last_attempted_revision = Some(HEAD.into());
        db.status.run.observed_spec_version = db.spec_version;
        db.status.applied.outputs = BTreeMap::from([
            ("Url".to_owned(), recorded.to_owned()),
            ("Arn".to_owned(), "arn:aws:rds:us-east-1:1:db".to_owned()),
        ]);
        t.steps.registry.inner.insert(db);
        t.cfn
            .script()
            .outputs
            .insert("Url".into(), "postgres://app:pw-SECRET-1@db/app".into());
        t
    }

    #[tokio::test]
    async fn an_output_recorded_masked_is_refused_to_from_stack_naming_it() {
        let t = reading_db_url(crate::parameters::MASKED_OUTPUT).await;
        let err = uploaded(&t).await.unwrap_err();
        let StepError::Stalled { reason, message } = &err else {
            panic!("{err:?}")
        };
        assert_eq!(*reason, StallReason::SecretNotNoEcho, "{message}");
        assert!(
            message.starts_with("parameter Password: output Url of stack db holds a secret")
                && message.contains("{secret: …}"),
            "{message}"
        );
        let text = serde_json::to_string(&t.entry()).unwrap();
        assert!(!text.contains("SECRET"), "{text}");
        assert!(
            !t.cfn.operations().iter().any(|o| o == "CreateChangeSet"),
            "nothing made"
        );
    }

    #[tokio::test]
    async fn an_output_left_unchecked_is_not_there_yet_for_from_stack() {
        // db's run could not read its secrets again: not a secret, not yet
        // a value (tried again, with backoff, as any missing value).
        let t = reading_db_url(crate::parameters::UNCHECKED_OUTPUT).await;
        let err = uploaded(&t).await.unwrap_err();
        let StepError::Stalled { reason, message } = &err else {
            panic!("{err:?}")
        };
        assert_eq!(*reason, StallReason::MissingValue, "{message}");
        assert!(!reason.is_lasting());
        assert!(
            message.starts_with("parameter Password: output Url of stack db is not recorded yet"),
            "{message}"
        );
        let text = serde_json::to_string(&t.entry()).unwrap();
        assert!(!text.contains("SECRET"), "{text}");
    }
}
