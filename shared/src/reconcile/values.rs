//! Reading the values a spec's parameters point at (`{ssm: …}`, `{secret:
//! …}`, `{fromStack: …}`) at reconcile time: SSM and Secrets Manager in the
//! stack's own account and region (its port), another stack's outputs from
//! CloudFormation in that stack's account and region — observed, not taken
//! from the registry's record of them. Shared by the steps and previews.

use std::collections::BTreeMap;

use crate::parameters::{MASKED_OUTPUT, Stored, UNCHECKED_OUTPUT, pick};
use crate::ports::{CloudFormation, CloudFormationFactory, PortError, Stacks, Versioned};
use crate::registry::{Entries, RegistryError};
use crate::spec::{ParameterValue, ValueRef};

/// Why a value could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ValueError {
    /// Not there: names the parameter and what it points at.
    #[error("{0}")]
    Missing(String),
    /// The value holds a secret and would show where it is recorded: an
    /// output the stack it comes from records masked (`fromStack`).
    #[error("{0}")]
    Secret(String),
    #[error(transparent)]
    Port(#[from] PortError),
    #[error(transparent)]
    Registry(#[from] RegistryError),
}

/// The parameters once read: what may be stored (secrets as references
/// and hashes), and the values themselves, for the request at hand only.
pub struct ReadValues {
    pub stored: BTreeMap<String, Stored>,
    pub values: BTreeMap<String, String>,
    /// The parameters given a secret's value (Secrets Manager, an SSM
    /// `SecureString`), and where each was read.
    pub secrets: BTreeMap<String, ValueRef>,
}

/// Names only: the values may be secrets.
impl std::fmt::Debug for ReadValues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadValues")
            .field("names", &self.values.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// Reads every reference among `merged` (the parameters, file's and
/// entry's). `port`: the stack's own (its account and region).
pub async fn read_values<F, E>(
    factory: &F,
    registry: &E,
    port: &F::Port,
    merged: &BTreeMap<String, ParameterValue>,
) -> Result<ReadValues, ValueError>
where
    F: CloudFormationFactory,
    E: Entries,
{
    let mut stored = BTreeMap::new();
    let mut values = BTreeMap::new();
    let mut secrets = BTreeMap::new();
    for (name, value) in merged {
        let (keep, value) = match value {
            ParameterValue::Text(text) => (Stored::Text(text.clone()), text.clone()),
            ParameterValue::From(ValueRef::FromStack { from_stack, output }) => {
                let value = stack_output(factory, registry, name, from_stack, output).await?;
                (Stored::Text(value.clone()), value)
            }
            ParameterValue::From(from) => {
                let read = read_secret(port, name, from, None).await?;
                if read.secret {
                    secrets.insert(name.clone(), from.clone());
                }
                let keep = Stored::Read {
                    from: from.clone(),
                    version: read.version,
                };
                (keep, read.value)
            }
        };
        stored.insert(name.clone(), keep);
        values.insert(name.clone(), value);
    }
    Ok(ReadValues {
        stored,
        values,
        secrets,
    })
}

/// The secrets' values among `stored` (Secrets Manager, SSM
/// `SecureString`s), read again: what no recorded output may hold. Both
/// the version the run read and the current one, should they differ (a
/// rotation while the run went on: the stack holds one or the other).
pub async fn secret_values<P: CloudFormation>(
    port: &P,
    stored: &BTreeMap<String, Stored>,
) -> Result<Vec<String>, ValueError> {
    let mut out = Vec::new();
    for (name, value) in stored {
        if let Stored::Read { from, version } = value {
            let read = read_secret(port, name, from, None).await?;
            if !read.secret {
                continue;
            }
            if read.version != *version
                && let Some(earlier) = read_earlier(port, name, from, version).await?
            {
                out.push(earlier);
            }
            out.push(read.value);
        }
    }
    Ok(out)
}

/// The value of `from` at `version`, if the store still keeps it.
async fn read_earlier<P: CloudFormation>(
    port: &P,
    name: &str,
    from: &ValueRef,
    version: &str,
) -> Result<Option<String>, ValueError> {
    match read_secret(port, name, from, Some(version)).await {
        Ok(read) => Ok(Some(read.value)),
        Err(ValueError::Missing(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The parameters a stored set stands for, secrets read again through the
/// stack's port (the change set's request needs them; nothing else does).
pub async fn read_again<P: CloudFormation>(
    port: &P,
    stored: BTreeMap<String, Stored>,
) -> Result<Vec<(String, String)>, ValueError> {
    let mut out = Vec::with_capacity(stored.len());
    for (name, value) in stored {
        let value = match value {
            Stored::Text(text) => text,
            Stored::Read { from, version } => {
                let read = read_secret(port, &name, &from, None).await?;
                if read.version != version {
                    tracing::info!(parameter = %name, from = %from.describe(), was = %version, now = %read.version, "a new version since the run read it: that one is deployed, and the next run records it");
                }
                read.value
            }
        };
        out.push((name, value));
    }
    Ok(out)
}

/// An SSM parameter or a secret (or one key of it), with its version (at
/// `version`, or the current one). A refusal or a failure of the store
/// names the parameter and what it reads.
async fn read_secret<P: CloudFormation>(
    port: &P,
    name: &str,
    from: &ValueRef,
    version: Option<&str>,
) -> Result<Versioned, ValueError> {
    let missing = |what: String| ValueError::Missing(format!("parameter {name}: {what}"));
    let failed = |e: PortError| {
        let what = format!("parameter {name}: reading {}", from.describe());
        ValueError::Port(e.context(&what))
    };
    match from {
        ValueRef::Ssm { ssm } => port
            .ssm_parameter(ssm, version)
            .await
            .map_err(failed)?
            .ok_or_else(|| {
                missing(format!(
                    "SSM parameter {ssm} is not there (in the stack's account and region)"
                ))
            }),
        ValueRef::Secret { secret, key } => {
            let raw = port
                .secret_string(secret, version)
                .await
                .map_err(failed)?
                .ok_or_else(|| {
                    missing(format!(
                        "secret {secret} is not there, or holds no text (in the stack's account and region)"
                    ))
                })?;
            Ok(Versioned {
                value: pick(secret, &raw.value, key.as_deref()).map_err(missing)?,
                version: raw.version,
                secret: raw.secret,
            })
        }
        ValueRef::FromStack { .. } => Err(missing(
            "a stack's output is read from that stack, not a secret store".into(),
        )),
    }
}

/// Output `output` of the registered stack `from_stack`, as CloudFormation
/// reports it now (in that stack's account and region). Refused when that
/// stack's last recorded run found a secret in it ([`MASKED_OUTPUT`]): a
/// value read through `fromStack` is recorded in the clear (the
/// parameters, the outputs read, `get --explain`), and a secret never is;
/// missing while that run could not check it ([`UNCHECKED_OUTPUT`]).
async fn stack_output<F, E>(
    factory: &F,
    registry: &E,
    name: &str,
    from_stack: &str,
    output: &str,
) -> Result<String, ValueError>
where
    F: CloudFormationFactory,
    E: Entries,
{
    let missing = |what: String| ValueError::Missing(format!("parameter {name}: {what}"));
    let upstream = registry
        .get(from_stack)
        .await?
        .ok_or_else(|| missing(format!("stack {from_stack} is not registered")))?;
    match upstream
        .status
        .applied
        .outputs
        .get(output)
        .map(String::as_str)
    {
        Some(MASKED_OUTPUT) => {
            return Err(ValueError::Secret(format!(
                "parameter {name}: output {output} of stack {from_stack} holds a secret (its \
                 status records it {MASKED_OUTPUT}), and a value read with fromStack is \
                 recorded in the clear: read that secret where it is kept ({{secret: …}} or \
                 {{ssm: …}})"
            )));
        }
        Some(UNCHECKED_OUTPUT) => {
            return Err(missing(format!(
                "output {output} of stack {from_stack} is not recorded yet: its last run could \
                 not read its secrets again to check that the output holds none (its next run \
                 checks it)"
            )));
        }
        _ => {}
    }
    let spec = &upstream.spec;
    let port = factory
        .for_stack(
            spec.region.as_deref(),
            spec.assume_role_arn.as_deref(),
            Some(&spec.name),
        )
        .await?;
    let stack = port
        .describe_stack(spec.effective_stack_name())
        .await?
        .filter(|s| !s.status.not_created())
        .ok_or_else(|| missing(format!("stack {from_stack} has not been created yet")))?;
    stack.outputs.get(output).cloned().ok_or_else(|| {
        let known: Vec<&str> = stack.outputs.keys().map(String::as_str).collect();
        missing(format!(
            "stack {from_stack} has no output {output} (its outputs: {})",
            if known.is_empty() {
                "none".to_owned()
            } else {
                known.join(", ")
            }
        ))
    })
}
