//! `stacksync diff`: what a run would do to a stack, without doing it. The
//! desired state at a ref (the template and the merged parameters, checked
//! as a run checks them), a change set made of it exactly as a run makes
//! one (`ChangeSetRequest::for_spec`), described, and deleted again, with
//! the `REVIEW_IN_PROGRESS` placeholder a create leaves. It never executes
//! anything, stores nothing, and touches no stack that is not the entry's.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::hash::sha256_hex;
use crate::ownership::{Owner, desired_tags_with, owner};
use crate::ports::{ChangeSetRequest, CloudFormation, Created, ResourceChange, StackInfo};
use crate::spec::StackSpec;
use crate::stack_status::{
    ChangeSetKind, ChangeSetStatus, StackStatus, is_empty_change_set_reason,
};

pub use crate::ports::MAX_TEMPLATE_BODY;

mod desired;
pub mod policy;
pub use desired::{Desired, desired};
pub use policy::PolicyChecked;

/// One value that differs between the stack and the desired state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Difference {
    pub name: String,
    /// `None`: not set now, or not wanted.
    pub now: Option<String>,
    pub desired: Option<String>,
}

/// What a run would do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Diff {
    pub stack_name: String,
    pub revision: String,
    /// `Create` (no stack yet) or `Update`.
    pub kind: String,
    /// The stack as it is (`None`: none yet).
    pub stack_id: Option<String>,
    pub stack_status: Option<String>,
    /// One row per resource change; empty when nothing would change.
    pub changes: Vec<ResourceChange>,
    pub parameters: Vec<Difference>,
    pub tags: Vec<Difference>,
    pub settings: Vec<Difference>,
    /// CloudFormation made a change set to run that lists no resource
    /// change: what it changes no resource shows (the template's outputs,
    /// stack tags its resources do not take). A run executes it.
    pub beyond_resources: bool,
    /// CloudFormation's own checks of the change set (pre-deployment
    /// validations, hooks), where the endpoint serves them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<crate::preview::ChangeSetCheck>,
    /// What the Guard rules a run checks find (`None`: no rules apply):
    /// set by the caller, who has the sources ([`policy::check`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<PolicyChecked>,
    /// The local files the templates name, packaged, and whether each
    /// differs from what the last run packaged ([`packaged_files`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub packaged: Vec<PackagedFile>,
}

/// A local file (or folder) a template names, as a preview packaged it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PackagedFile {
    pub path: String,
    /// Where it is named: `parent.yaml: resource Fn property Code`.
    pub at: String,
    /// Its content differs from what the last run packaged there (or the
    /// last run packaged nothing there).
    pub changed: bool,
}

/// Each file the preview packaged, and whether its content is other than
/// the last run's (`recorded`: `status.packaged`). Compared by content:
/// the last part of a key is its SHA-256, whatever the prefix.
pub fn packaged_files(
    desired: &[crate::package::Artifact],
    recorded: &[crate::package::Artifact],
) -> Vec<PackagedFile> {
    let content = |key: &str| key.rsplit('/').next().unwrap_or(key).to_owned();
    desired
        .iter()
        .map(|a| PackagedFile {
            path: a.path.clone(),
            at: a.at.clone(),
            changed: !recorded
                .iter()
                .any(|r| r.at == a.at && content(&r.key) == content(&a.key)),
        })
        .collect()
}

impl Diff {
    /// Nothing would change: no resource, parameter, tag or setting, and
    /// no change set CloudFormation would run.
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
            && self.parameters.is_empty()
            && self.tags.is_empty()
            && self.settings.is_empty()
            && !self.beyond_resources
    }
}

/// Where the preview's change set reads the template: its body (up to
/// [`MAX_TEMPLATE_BODY`]), or a URL the caller stored it at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TemplateAt {
    Body(String),
    Url(String),
}

/// How the preview waits for its change set.
#[derive(Debug, Clone, Copy)]
pub struct Waiting {
    pub poll: Duration,
    pub deadline: Duration,
}

/// CloudFormation's own checks of the preview's change set (validations,
/// hooks), as far as the endpoint serves them: never the preview's failure.
async fn checks_of<C: CloudFormation>(
    cfn: &C,
    stack: &str,
    name: &str,
    made: bool,
) -> Vec<crate::preview::ChangeSetCheck> {
    if !made {
        return Vec::new();
    }
    let checks = cfn.change_set_checks(stack, name).await;
    checks.ok().flatten().unwrap_or_default()
}

/// Makes, describes and deletes a change set of `desired` for `spec` in
/// `installation`; `recorded`: the StackId the entry recorded.
pub async fn diff<C: CloudFormation>(
    cfn: &C,
    spec: &StackSpec,
    installation: &str,
    recorded: Option<&str>,
    desired: &Desired,
    template: TemplateAt,
    waiting: Waiting,
) -> Result<Diff, String> {
    let stack_name = spec.effective_stack_name();
    let stack = cfn
        .describe_stack(stack_name)
        .await
        .map_err(|e| e.to_string())?;
    let kind = preview_kind(spec, installation, recorded, stack.as_ref())?;
    let name = format!(
        "stacksync-preview-{}",
        &sha256_hex(
            format!(
                "{stack_name}@{}@{}",
                desired.revision,
                crate::clock::now_millis()
            )
            .as_bytes()
        )[..16]
    );
    let request = preview_request(spec, installation, desired, template, &name, kind);
    let made = cfn
        .create_change_set(&request)
        .await
        .map_err(|e| e.to_string());
    // Whatever happens from here, the change set (and a create's
    // placeholder) goes again.
    let (changes, placeholder) = match made {
        Ok(Created::ChangeSet { stack_id }) => {
            (changes_of(cfn, stack_name, &name, waiting).await, stack_id)
        }
        Ok(Created::NothingToChange) => (Ok((Vec::new(), false)), None),
        Err(e) => (Err(e), None),
    };
    let checks = checks_of(cfn, stack_name, &name, changes.is_ok()).await;
    let made = stack.is_none().then_some(placeholder);
    let cleaned = clean_up(cfn, spec, &name, made).await;
    let (changes, to_run) = changes?;
    cleaned?;
    // A placeholder has nothing to compare with.
    let existing = stack.as_ref().filter(|s| !s.status.not_created());
    Ok(Diff {
        stack_name: stack_name.to_owned(),
        revision: desired.revision.clone(),
        kind: format!("{kind:?}"),
        stack_id: stack.as_ref().map(|s| s.stack_id.clone()),
        stack_status: stack.as_ref().map(|s| s.status.to_string()),
        parameters: existing
            .map(|s| parameter_differences(s, desired))
            .unwrap_or_default(),
        // The change set gives the whole tag set: one not in it goes.
        tags: existing
            .map(|s| {
                differences(
                    &s.tags,
                    &desired_tags_with(&desired.file_tags, spec, installation),
                )
            })
            .unwrap_or_default(),
        settings: existing.map(|s| settings(s, spec)).unwrap_or_default(),
        beyond_resources: to_run && changes.is_empty(),
        changes,
        checks,
        policy: None,
        packaged: Vec::new(),
    })
}

/// The parameters that differ: only those the desired state gives (one it
/// leaves out takes the template's default, which only the change set
/// knows); values of secrets and `NoEcho` parameters shown as `****`.
fn parameter_differences(stack: &StackInfo, desired: &Desired) -> Vec<Difference> {
    let given = stack
        .parameters
        .iter()
        .filter(|(k, _)| desired.parameters.contains_key(*k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut found = differences(&given, &desired.parameters);
    for d in found
        .iter_mut()
        .filter(|d| desired.masked.contains(&d.name))
    {
        d.now = d.now.as_ref().map(|_| "****".to_owned());
        d.desired = d.desired.as_ref().map(|_| "****".to_owned());
    }
    found
}

/// The change set a run would make, named `name`, reading `template`.
fn preview_request(
    spec: &StackSpec,
    installation: &str,
    desired: &Desired,
    template: TemplateAt,
    name: &str,
    kind: ChangeSetKind,
) -> ChangeSetRequest {
    let mut request = ChangeSetRequest::for_spec(
        spec,
        &desired.file_tags,
        installation,
        name,
        kind,
        String::new(),
        desired
            .parameters
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    );
    request.description = format!(
        "stacksync diff: {} at {} (a preview; never executed)",
        spec.name,
        &desired.revision[..desired.revision.len().min(12)]
    );
    match template {
        TemplateAt::Body(body) => request.template_body = Some(body),
        TemplateAt::Url(url) => request.template_url = url,
    }
    request
}

/// Whether the stack can be previewed, and how: a create where there is
/// none (or only a placeholder), an update of a settled stack the entry may
/// touch; else why not.
fn preview_kind(
    spec: &StackSpec,
    installation: &str,
    recorded: Option<&str>,
    stack: Option<&StackInfo>,
) -> Result<ChangeSetKind, String> {
    let Some(stack) = stack.filter(|s| !s.status.not_created()) else {
        return Ok(ChangeSetKind::Create);
    };
    if let Owner::Foreign(why) = owner(spec, installation, &stack.stack_id, &stack.tags, recorded) {
        return Err(format!("no preview: {why}"));
    }
    let name = spec.effective_stack_name();
    if stack.status.in_progress() {
        return Err(format!(
            "{name} is {}: CloudFormation is working on it; preview again once it settles",
            stack.status
        ));
    }
    if matches!(
        stack.status,
        StackStatus::RollbackComplete
            | StackStatus::RollbackFailed
            | StackStatus::CreateFailed
            | StackStatus::DeleteFailed
            | StackStatus::UpdateRollbackFailed
    ) {
        return Err(format!(
            "{name} is {}: it takes no update, so there is nothing to preview against \
             (a run deletes a failed create and makes it anew, or continues a failed rollback)",
            stack.status
        ));
    }
    Ok(ChangeSetKind::Update)
}

/// Waits for the change set to be made, then reads its changes (none for
/// one CloudFormation made empty); an error for one that failed otherwise.
async fn changes_of<C: CloudFormation>(
    cfn: &C,
    stack: &str,
    name: &str,
    waiting: Waiting,
) -> Result<(Vec<ResourceChange>, bool), String> {
    let started = Instant::now();
    loop {
        let cs = cfn
            .describe_change_set(stack, name)
            .await
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("the preview's change set {name} vanished"))?;
        match cs.status {
            ChangeSetStatus::CreateComplete => {
                let changes = cfn
                    .change_set_changes(stack, name)
                    .await
                    .map_err(|e| e.to_string())?;
                return Ok((changes, true));
            }
            ChangeSetStatus::Failed => {
                let reason = cs.reason.unwrap_or_default();
                return if is_empty_change_set_reason(&reason) {
                    Ok((Vec::new(), false))
                } else {
                    Err(format!(
                        "CloudFormation refused the change set: {}",
                        if reason.trim().is_empty() {
                            "no reason given"
                        } else {
                            reason.as_str()
                        }
                    ))
                };
            }
            _ if started.elapsed() > waiting.deadline => {
                return Err(format!(
                    "the change set was not ready within {}s",
                    waiting.deadline.as_secs()
                ));
            }
            _ => tokio::time::sleep(waiting.poll).await,
        }
    }
}

/// Deletes the preview's change set, and the stack a create made for it:
/// only when there was no stack before, and the one there now is still in
/// `REVIEW_IN_PROGRESS` with no change set left (a run that began a create
/// meanwhile has its own change set there: its stack stays).
/// Deletes the preview's change set, and the stack a create's change set
/// made for itself (`created`: there was none before; with the StackId
/// CloudFormation answered, if it did) once no change set is left on it:
/// that one whatever its status (an endpoint may leave it `CREATE_FAILED`),
/// else one still `REVIEW_IN_PROGRESS`.
async fn clean_up<C: CloudFormation>(
    cfn: &C,
    spec: &StackSpec,
    name: &str,
    created: Option<Option<String>>,
) -> Result<(), String> {
    let stack = spec.effective_stack_name();
    let failed = |e: crate::ports::PortError| {
        format!(
            "the preview could not clean up after itself ({e}): delete the change set {name} of {stack}"
        )
    };
    cfn.delete_change_set(stack, name).await.map_err(failed)?;
    if let Some(made) = created {
        let placeholder = cfn.describe_stack(stack).await.map_err(failed)?;
        let ours = placeholder
            .as_ref()
            .is_some_and(|s| made.as_deref() == Some(s.stack_id.as_str()));
        let waiting = placeholder
            .as_ref()
            .is_some_and(|s| s.status == StackStatus::ReviewInProgress);
        let gone = placeholder.is_none_or(|s| s.status == StackStatus::DeleteComplete);
        // Empty: no change set of anyone else's on it.
        if (ours || waiting)
            && !gone
            && cfn
                .list_change_sets(stack)
                .await
                .map_err(failed)?
                .is_empty()
        {
            cfn.delete_stack(stack, spec.role_arn.as_deref(), &format!("preview-{name}"))
                .await
                .map_err(failed)?;
        }
    }
    Ok(())
}

/// Keys whose values differ, with both; a value CloudFormation hides
/// (`****`, NoEcho) is never shown.
fn differences(
    now: &BTreeMap<String, String>,
    desired: &BTreeMap<String, String>,
) -> Vec<Difference> {
    let keys: std::collections::BTreeSet<&String> = now.keys().chain(desired.keys()).collect();
    keys.into_iter()
        .filter(|k| {
            now.get(*k) != desired.get(*k) && now.get(*k).map(String::as_str) != Some("****")
        })
        .map(|k| Difference {
            name: k.clone(),
            now: now.get(k).cloned(),
            desired: desired.get(k).cloned(),
        })
        .collect()
}

/// The stack's settings a run would change: its service role and
/// termination protection.
fn settings(stack: &StackInfo, spec: &StackSpec) -> Vec<Difference> {
    let mut out = Vec::new();
    if spec.role_arn.is_some() && stack.role_arn != spec.role_arn {
        out.push(Difference {
            name: "roleArn".into(),
            now: stack.role_arn.clone(),
            desired: spec.role_arn.clone(),
        });
    }
    if stack.termination_protection != spec.termination_protection {
        out.push(Difference {
            name: "terminationProtection".into(),
            now: Some(stack.termination_protection.to_string()),
            desired: Some(spec.termination_protection.to_string()),
        });
    }
    out
}

#[cfg(test)]
mod tests;
