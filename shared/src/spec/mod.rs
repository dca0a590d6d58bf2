//! The desired state of one stack: an entry of `stacks.yaml` and of the registry.
//!
//! Reading a spec (serde) checks shapes and fills defaults; [`crate::validate`]
//! checks everything else (names, ARNs, paths, limits) and says which field is
//! wrong. A spec that passed both is what the registry stores.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::duration::Duration;

mod deploy;
mod deps;
mod drift;
mod publish;
mod rollout;
mod targets;
mod value;
mod windows;

pub use deploy::{
    Approval, DeploymentConfig, DeploymentMode, OnFailedCreate, OnStackFailure, RollbackConfig,
    RollbackTrigger,
};
pub use deps::{find_cycle, find_cycle_through};
pub use drift::{
    DEFAULT_DRIFT_INTERVAL, DriftAction, DriftSpec, MAX_DRIFT_INTERVAL, MAX_IGNORE_RULES,
    MIN_DRIFT_INTERVAL,
};
pub use publish::Publish;
pub use rollout::{Amount, RolloutSpec};
pub use targets::{Override, TargetOf, Targets};
pub use value::{ParameterValue, ValueRef};
pub use windows::WindowSpec;

/// Default `interval` (the longest an out-of-band change may go unnoticed; the
/// scheduler checks every stack every period and warns when that is longer).
pub const DEFAULT_INTERVAL: Duration = Duration::from_mins(10);
/// Default first poll while CloudFormation works; it grows with backoff.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(5);
/// Default wait before retrying a failed reconcile.
pub const DEFAULT_RETRY_INTERVAL: Duration = Duration::from_mins(2);
/// Default longest one run may take, waits included.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_mins(120);
/// Default most polls (waits for CloudFormation) one run may make.
pub const DEFAULT_MAX_POLLS: u32 = 500;
/// Default most failed attempts at one revision and spec before a stack
/// stays `Failed` (until a push, a spec change or `reconcile --force`).
pub const DEFAULT_MAX_ATTEMPTS: u32 = 5;
/// Default longest a change set waits for a person's approval.
pub const DEFAULT_APPROVAL_TIMEOUT: Duration = Duration::from_secs(7 * 86_400);
/// The longest wait between two attempts, however many failed.
pub const MAX_RETRY_BACKOFF: Duration = Duration::from_mins(360);
/// Default Git ref when a Git source names none.
pub const DEFAULT_GIT_REF: &str = "main";

/// One registered stack. Field names are those of `stacks.yaml` (camelCase).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StackSpec {
    /// Registry id; also the CloudFormation stack name unless `stackName` is set.
    pub name: String,
    /// CloudFormation stack name, when it differs from `name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack_name: Option<String>,
    /// Region of the stack; the deployment's own region when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// Service role CloudFormation assumes to deploy the stack.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role_arn: Option<String>,
    /// Role stacksync assumes to reach the stack's account (cross-account).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assume_role_arn: Option<String>,
    /// Where the template comes from.
    pub source: Source,
    /// Template parameters. Scalars are read as text; a list becomes a
    /// comma-separated value (CloudFormation's `CommaDelimitedList`); a
    /// mapping says where a run reads the value (`{ssm: NAME}`, `{secret:
    /// ARN, key: FIELD}`, `{fromStack: NAME, output: KEY}`).
    #[serde(default, deserialize_with = "value::parameter_map")]
    pub parameters: BTreeMap<String, ParameterValue>,
    /// A parameter file inside the source (the AWS CLI's, CodePipeline's,
    /// a Git sync deployment file or a plain mapping), merged under
    /// `parameters`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameter_file: Option<String>,
    /// Stack tags.
    #[serde(default, deserialize_with = "value::scalar_map")]
    pub tags: BTreeMap<String, String>,
    /// Registered stacks this one waits for: a run starts deploying only
    /// once each is `Ready` (a `fromStack` parameter adds its stack too).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<String>,
    /// Capabilities acknowledged for the template.
    #[serde(default)]
    pub capabilities: Vec<Capability>,
    /// The longest an out-of-band change may go unnoticed (a promise the
    /// scheduler checks against its period: it checks every stack every run).
    #[serde(default = "default_interval")]
    pub interval: Duration,
    /// First poll while CloudFormation works; grows with backoff.
    #[serde(default = "default_poll_interval")]
    pub poll_interval: Duration,
    /// Wait before retrying after a failed reconcile.
    #[serde(default = "default_retry_interval")]
    pub retry_interval: Duration,
    /// The longest one run may take, waits included; past it the run ends
    /// `Failed`, saying what it waited for.
    #[serde(default = "default_timeout")]
    pub timeout: Duration,
    /// The most times one run waits for CloudFormation; past it, as for
    /// `timeout`.
    #[serde(default = "default_max_polls")]
    pub max_polls: u32,
    /// The most failed attempts at one revision and spec: the wait before
    /// each retry doubles from `retryInterval`, and after the last the
    /// stack stays `Failed` until the revision or the spec changes, or
    /// `stacksync reconcile --force`. (Left out of the stored form at its
    /// default, so specs written before it hash as they did.)
    #[serde(
        default = "default_max_attempts",
        skip_serializing_if = "is_default_max_attempts"
    )]
    pub max_attempts: u32,
    /// What a create that failed leaves: `delete` (default) deletes the
    /// stack and creates it again, at most once per revision; `keep` leaves
    /// it as it failed, its resources in place, for a person to inspect,
    /// until the revision or the spec changes or `reconcile --force`.
    #[serde(default, skip_serializing_if = "OnFailedCreate::is_default")]
    pub on_failed_create: OnFailedCreate,
    /// What CloudFormation does when a create fails (`OnStackFailure`, on
    /// CREATE change sets): `ROLLBACK` (stacksync then deletes the stack
    /// and creates it again, as `onFailedCreate: delete`), `DELETE`
    /// (CloudFormation deletes it; the next try creates it anew), or
    /// `DO_NOTHING` (kept as it failed, as `onFailedCreate: keep`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_stack_failure: Option<OnStackFailure>,
    /// Change sets include the nested stacks' changes
    /// (`IncludeNestedStacks`), so previews show them.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub include_nested_stacks: bool,
    /// Resources of the template that exist already (with a custom name,
    /// and `DeletionPolicy: Retain`) are imported rather than created
    /// (`ImportExistingResources`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub import_existing_resources: bool,
    /// CloudFormation's deployment mode (`DeploymentConfig`): `{mode:
    /// EXPRESS}` ends an operation once resources are configured, without
    /// waiting for them to stabilize (and without rollback, unless
    /// `disableRollback: false`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_config: Option<DeploymentConfig>,
    /// Take over a stack of this name that stacksync did not make (no
    /// `stacksync:` tags, another StackId): its next run updates it to the
    /// template and tags it as this entry's. Without it, such a stack is
    /// refused (`Failed (NotOwned)`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub adopt: bool,
    /// When a run asks a person before executing its change set: `never`
    /// (default), `always`, `onReplace` (it replaces, or may replace, a
    /// resource), `onRemove` (it removes one), `pullRequest` (it is not
    /// what the merged pull request's last preview showed).
    #[serde(default, skip_serializing_if = "Approval::is_never")]
    pub approval: Approval,
    /// How long a change set waits for that approval; past it, the change
    /// set is deleted and the run ends `Failed` ("approval timed out").
    #[serde(
        default = "default_approval_timeout",
        skip_serializing_if = "is_default_approval_timeout"
    )]
    pub approval_timeout: Duration,
    /// Who may approve or reject its change sets through the installation's
    /// approval function: IAM principal ARN patterns (an assumed role's
    /// sessions match their role's ARN). Empty: the installation's
    /// `Approvers`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvers: Vec<String>,
    /// When true, stacksync leaves the stack alone.
    #[serde(default)]
    pub suspend: bool,
    /// When true, removing the entry deletes the stack; otherwise the stack stays.
    #[serde(default)]
    pub destroy_on_delete: bool,
    /// CloudFormation termination protection for the stack.
    #[serde(default)]
    pub termination_protection: bool,
    /// Stack policy document (inline, as YAML or JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack_policy: Option<serde_json::Value>,
    /// SNS topics that receive the stack's events.
    #[serde(default)]
    pub notification_arns: Vec<String>,
    /// Rollback triggers: CloudWatch alarms watched during and after an update.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback: Option<RollbackConfig>,
    /// Drift detection: `{interval: 24h, action: report | revert | off,
    /// ignore: [LogicalId.Property.Path]}`.
    #[serde(default, skip_serializing_if = "DriftSpec::is_default")]
    pub drift: DriftSpec,
    /// More Guard rules for this stack, besides the installation's
    /// (`PolicySource`): a folder (`path`) of `.guard` files in a Git
    /// repository or an S3 archive, or, without `git` and `s3`, in the
    /// entry's own source at the run's revision. Never fewer rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<Source>,
    /// Many accounts and regions (a fleet): one stack per target, each
    /// with an entry of its own (`NAME-ACCOUNT-REGION`). Instead of
    /// `region`; `assumeRoleArn` (and `roleArn`) name `{account}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub targets: Option<Targets>,
    /// How often the scheduler reads a fleet's organizational units again
    /// (default 1h): a new account gets its stacks, a removed account's
    /// entries are pruned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub targets_interval: Option<Duration>,
    /// The fleet, account and region of an entry stacksync made from a
    /// fleet's; refused in a file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_of: Option<TargetOf>,
    /// When runs may change the stack (besides the installation's
    /// `SyncWindows`): outside an allowed window, or inside a denied one, a
    /// run waits `Pending (Window)` until it opens (`reconcile --force`
    /// does not wait).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub windows: Vec<WindowSpec>,
    /// Where the stack's outputs are published after each `Ready` end
    /// (`{ssm: /path/{output}}`), only when changed, removed with the stack.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publish: Option<Publish>,
    /// How a fleet's change reaches its targets: in waves of
    /// `maxConcurrent`, in `order`, stopping (`Halted`) past
    /// `failureTolerance` failures ([`crate::rollout`]). A fleet's targets
    /// carry it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<RolloutSpec>,
}

/// Where a template comes from: a Git repository or an S3 archive.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Source {
    /// Git URL: `https://`, `http://`, `ssh://`, `git://`, `file://` or `user@host:path`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git: Option<String>,
    /// S3 archive (zip or tar.gz): `s3://bucket/key`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s3: Option<String>,
    /// Git branch, tag or commit; for S3, an object version id (latest when absent).
    #[serde(default, rename = "ref", skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    /// The template's path inside the source. May be left out when
    /// `deploymentFile` is given: its `template-file-path` names it.
    #[serde(default)]
    pub path: String,
    /// An AWS CloudFormation Git sync deployment file inside the source
    /// (`template-file-path`, `parameters`, `tags`): the template is the
    /// one it names, its parameters and tags go under the entry's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_file: Option<String>,
    /// Secrets Manager secret or SSM parameter (ARN) with a token or SSH key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_secret: Option<String>,
    /// More files or folders a run takes from the source, besides the
    /// template and the parameter file (nested templates and the like).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub include: Vec<String>,
    /// Fetch an `http://` or `git://` source in a deployed installation
    /// too: unauthenticated transports let anyone on the network path
    /// choose the template, so they are refused there unless this is set.
    /// (The local runner fetches them either way.)
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure: bool,
    /// OpenSSH public keys (`ssh-ed25519 AAAA… name`): when given, a run
    /// deploys a commit only if it carries an SSH signature (`git commit
    /// -S` with `gpg.format=ssh`) by one of them. Git only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signed_by: Vec<String>,
}

/// The kind of a source, once validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    Git,
    S3,
}

impl Source {
    /// Git or S3, if exactly one is given.
    pub fn kind(&self) -> Option<SourceKind> {
        match (&self.git, &self.s3) {
            (Some(_), None) => Some(SourceKind::Git),
            (None, Some(_)) => Some(SourceKind::S3),
            _ => None,
        }
    }

    /// The Git ref or S3 version to follow (Git defaults to `main`).
    pub fn effective_ref(&self) -> Option<&str> {
        match self.kind() {
            Some(SourceKind::Git) => Some(self.reference.as_deref().unwrap_or(DEFAULT_GIT_REF)),
            _ => self.reference.as_deref(),
        }
    }

    /// The URL of the source, whichever kind it is.
    pub fn url(&self) -> &str {
        self.git.as_deref().or(self.s3.as_deref()).unwrap_or("")
    }
}

/// Template capabilities CloudFormation may require an acknowledgement for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Capability {
    #[serde(rename = "CAPABILITY_IAM")]
    Iam,
    #[serde(rename = "CAPABILITY_NAMED_IAM")]
    NamedIam,
    #[serde(rename = "CAPABILITY_AUTO_EXPAND")]
    AutoExpand,
}

impl Capability {
    /// The name CloudFormation uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Iam => "CAPABILITY_IAM",
            Self::NamedIam => "CAPABILITY_NAMED_IAM",
            Self::AutoExpand => "CAPABILITY_AUTO_EXPAND",
        }
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl StackSpec {
    /// What a failed create leaves: kept as it failed (`onFailedCreate:
    /// keep`, or `onStackFailure: DO_NOTHING`), or not.
    pub fn failed_create(&self) -> OnFailedCreate {
        if self.on_stack_failure == Some(OnStackFailure::DoNothing) {
            OnFailedCreate::Keep
        } else {
            self.on_failed_create
        }
    }

    /// The `OnStackFailure` a CREATE change set asks for, if any.
    pub fn create_on_failure(&self) -> Option<OnStackFailure> {
        match (self.on_stack_failure, self.on_failed_create) {
            (Some(given), _) => Some(given),
            (None, OnFailedCreate::Keep) => Some(OnStackFailure::DoNothing),
            (None, OnFailedCreate::Delete) => None,
        }
    }

    /// One of the targets stacksync made from the fleet `fleet`.
    pub fn is_target_of(&self, fleet: &str) -> bool {
        self.target_of.as_ref().is_some_and(|t| t.fleet == fleet)
    }

    /// The CloudFormation stack name: `stackName`, or else `name`.
    pub fn effective_stack_name(&self) -> &str {
        self.stack_name.as_deref().unwrap_or(&self.name)
    }

    /// The CloudFormation stack the entry drives: its account (the
    /// `assumeRoleArn`'s; `None`: the installation's), its region (`home`,
    /// the installation's, when the spec names none) and its name. Two
    /// entries with one key would drive one stack.
    pub fn stack_key<'a>(
        &'a self,
        home: Option<&'a str>,
    ) -> (Option<&'a str>, Option<&'a str>, &'a str) {
        let account = self
            .assume_role_arn
            .as_deref()
            .and_then(|arn| arn.split(':').nth(4));
        (
            account,
            self.region.as_deref().or(home),
            self.effective_stack_name(),
        )
    }

    /// The Git ref or S3 version to follow (Git defaults to `main`).
    pub fn effective_ref(&self) -> Option<&str> {
        self.source.effective_ref()
    }

    /// The registered stacks this one waits for: `dependsOn`, and the
    /// stacks its `fromStack` parameters read, each once, sorted.
    pub fn upstream(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.depends_on.iter().map(String::as_str).collect();
        names.extend(
            self.parameters
                .values()
                .filter_map(|v| match v.reference() {
                    Some(ValueRef::FromStack { from_stack, .. }) => Some(from_stack.as_str()),
                    _ => None,
                }),
        );
        names.sort_unstable();
        names.dedup();
        names
    }

    /// The account of `assumeRoleArn` (`arn:PARTITION:iam::ACCOUNT:role/…`):
    /// where the stack lives, when not in the installation's.
    pub fn target_account(&self) -> Option<&str> {
        self.assume_role_arn
            .as_deref()
            .and_then(|arn| arn.split(':').nth(4))
            .filter(|a| a.len() == 12 && a.bytes().all(|b| b.is_ascii_digit()))
    }

    /// Whether a parameter reads SSM or Secrets Manager: the stack is then
    /// reconciled every `interval`, so a new version (a rotation) is
    /// deployed without a push.
    pub fn reads_secrets(&self) -> bool {
        self.parameters
            .values()
            .any(|v| v.reference().is_some_and(ValueRef::is_secret))
    }

    /// The outputs of stack `name` that this one's parameters read.
    pub fn consumes<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.parameters
            .values()
            .filter_map(move |v| match v.reference() {
                Some(ValueRef::FromStack { from_stack, output }) if from_stack == name => {
                    Some(output.as_str())
                }
                _ => None,
            })
    }

    /// A stable digest of the whole spec: two specs with the same hash are the same.
    ///
    /// The JSON form is canonical (fields in declaration order, maps sorted),
    /// so the hash does not depend on how the YAML was written.
    pub fn content_hash(&self) -> String {
        // The stack policy is a JSON value: its keys sorted, as they were
        // before serde_json kept their order (`crate::hash::canonical`).
        let mut canonical = self.clone();
        canonical.stack_policy = canonical.stack_policy.map(crate::hash::canonical);
        let json = serde_json::to_vec(&canonical).unwrap_or_default();
        crate::hash::sha256_hex(&json)
    }
}

fn default_interval() -> Duration {
    DEFAULT_INTERVAL
}

fn default_poll_interval() -> Duration {
    DEFAULT_POLL_INTERVAL
}

fn default_timeout() -> Duration {
    DEFAULT_TIMEOUT
}

fn default_max_polls() -> u32 {
    DEFAULT_MAX_POLLS
}

fn default_approval_timeout() -> Duration {
    DEFAULT_APPROVAL_TIMEOUT
}

fn is_default_approval_timeout(d: &Duration) -> bool {
    *d == DEFAULT_APPROVAL_TIMEOUT
}

fn default_max_attempts() -> u32 {
    DEFAULT_MAX_ATTEMPTS
}

fn is_default_max_attempts(n: &u32) -> bool {
    *n == DEFAULT_MAX_ATTEMPTS
}

fn default_retry_interval() -> Duration {
    DEFAULT_RETRY_INTERVAL
}

#[cfg(test)]
pub(crate) mod fixtures;

#[cfg(test)]
mod tests {
    use super::*;

    fn read(yaml: &str) -> StackSpec {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    #[test]
    fn a_minimal_entry_gets_every_default() {
        let spec = read("name: q\nsource: {git: https://h/r.git, path: t.yaml}\n");
        assert_eq!(spec.effective_stack_name(), "q");
        assert_eq!(spec.effective_ref(), Some("main"));
        assert_eq!(spec.interval, DEFAULT_INTERVAL);
        assert_eq!(spec.poll_interval, DEFAULT_POLL_INTERVAL);
        assert_eq!(spec.retry_interval, DEFAULT_RETRY_INTERVAL);
        assert!(!spec.suspend && !spec.destroy_on_delete && !spec.termination_protection);
    }

    #[test]
    fn scalar_parameters_and_tags_are_read_as_text_and_lists_are_joined() {
        let spec = read(
            "name: q\nsource: {git: x, path: t.yaml}\n\
             parameters: {Days: 14, Ratio: 0.5, On: true, Name: n, Subnets: [a, b]}\n\
             tags: {cost-center: 42}\n",
        );
        assert_eq!(spec.parameters["Days"], "14");
        assert_eq!(spec.parameters["Ratio"], "0.5");
        assert_eq!(spec.parameters["On"], "true");
        assert_eq!(spec.parameters["Subnets"], "a,b");
        assert_eq!(spec.tags["cost-center"], "42");
    }

    #[test]
    fn a_nested_parameter_value_is_refused_by_name() {
        let err = serde_yaml_ng::from_str::<StackSpec>(
            "name: q\nsource: {git: x, path: t.yaml}\nparameters: {Bad: {a: 1}}\n",
        )
        .unwrap_err();
        assert!(err.to_string().contains("parameter \"Bad\""), "{err}");
    }

    #[test]
    fn the_hash_ignores_how_the_yaml_was_written_but_not_what_it_says() {
        let a = read("name: q\nsource: {git: x, path: t.yaml}\ntags: {a: '1', b: '2'}\n");
        let b = read("source: {path: t.yaml, git: x}\ntags: {b: 2, a: 1}\nname: q\n");
        assert_eq!(a.content_hash(), b.content_hash());
        let c = read("name: q\nsource: {git: x, path: t.yaml}\ntags: {a: '1', b: '3'}\n");
        assert_ne!(a.content_hash(), c.content_hash());
    }

    #[test]
    fn the_spec_round_trips_through_json() {
        let spec = read(
            "name: q\nsource: {git: x, path: t.yaml, ref: v1}\ncapabilities: [CAPABILITY_IAM]\n\
             rollback: {monitoringTime: 5m, triggers: [{arn: 'arn:aws:cloudwatch:us-east-1:111122223333:alarm:a'}]}\n\
             stackPolicy: {Statement: [{Effect: Allow, Action: 'Update:*', Principal: '*', Resource: '*'}]}\n",
        );
        let json = serde_json::to_string(&spec).unwrap();
        let back: StackSpec = serde_json::from_str(&json).unwrap();
        assert_eq!(back, spec);
        assert_eq!(
            back.rollback.unwrap().triggers[0].kind,
            "AWS::CloudWatch::Alarm"
        );
    }

    #[test]
    fn a_failed_create_is_kept_by_either_spelling_and_asked_of_cloudformation_once() {
        let mut s = fixtures::spec("orders");
        assert_eq!(
            (s.failed_create(), s.create_on_failure()),
            (OnFailedCreate::Delete, None)
        );
        s.on_failed_create = OnFailedCreate::Keep;
        assert_eq!(
            (s.failed_create(), s.create_on_failure()),
            (OnFailedCreate::Keep, Some(OnStackFailure::DoNothing))
        );
        s.on_failed_create = OnFailedCreate::Delete;
        s.on_stack_failure = Some(OnStackFailure::DoNothing);
        assert_eq!(s.failed_create(), OnFailedCreate::Keep);
        s.on_stack_failure = Some(OnStackFailure::Delete);
        assert_eq!(
            (s.failed_create(), s.create_on_failure()),
            (OnFailedCreate::Delete, Some(OnStackFailure::Delete))
        );
    }
}
