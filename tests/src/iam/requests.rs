//! What IAM checks for one recorded call: the actions, on which resources,
//! with which condition keys. Written from AWS's Service Authorization
//! Reference (the "API operations" tables of CloudFormation, S3, DynamoDB,
//! Step Functions, Secrets Manager, SSM and STS) and the CloudFormation user
//! guide ("Controlling access with IAM"):
//!
//! - CloudFormation actions are authorized on the stack ARN, change-set
//!   and drift operations included (`DescribeChangeSetHooks` too);
//!   `ListStacks`, `DescribeStackDriftDetectionStatus` (it names a
//!   detection, not a stack) and `ListHookResults` (it names a hook's
//!   target, and has no resource type) only on `*`.
//! - `CreateChangeSet`, `DeleteStack` and `ContinueUpdateRollback` with a
//!   `RoleARN` also need `iam:PassRole` on that role, with
//!   `iam:PassedToService` = `cloudformation.amazonaws.com` (in every
//!   partition).
//! - `CreateChangeSet` with tags also needs `cloudformation:TagResource`;
//!   `ExecuteChangeSet` needs `TagResource` and `UntagResource` (it applies
//!   the change set's tags, adding and removing).
//! - CloudFormation reads a `TemplateURL` with the caller's credentials:
//!   `s3:GetObject` on the template object (`s3:GetObjectVersion` when the
//!   URL names its version).
//! - A template with a transform needs `cloudformation:CreateChangeSet` on
//!   `arn:PARTITION:cloudformation:REGION:aws:transform/NAME`.
//! - S3: `HeadObject` is `s3:GetObject` (`s3:GetObjectVersion` with a
//!   version id); a missing object answers 404 only with `s3:ListBucket` on
//!   the bucket (403 otherwise), so a call that saw a 404 needs it too.
//! - DynamoDB item operations carry the item's partition key as
//!   `dynamodb:LeadingKeys`.
//! - Git over HTTPS to CodeCommit is authorized as `codecommit:GitPull` on
//!   the repository (CodeCommit's "Git commands" permissions).
//!
//! Resources are the installation's: every table is the registry, every
//! bucket the artifact bucket except the tests' source buckets (named
//! `source-…`), every secret the webhook's when the webhook reads it, a
//! stack parameter's (`ValueSecretArns`) when a function that reads the
//! stacks' parameters does, and a source secret otherwise; SSM parameters
//! alike (`ValueParameterArns`).

use stacksync::ownership::INSTALLATION_TAG;
use std::collections::BTreeMap;

use super::call::Call;

/// The functions that read the stacks' parameters from Secrets Manager and
/// SSM (`{secret: ARN}`, `{ssm: NAME}`), through the stack's CloudFormation
/// port: their reads are of `ValueSecretArns` and `ValueParameterArns`.
const VALUE_READERS: [&str; 3] = ["template-upload", "change-set", "poll-status"];

/// The CloudFormation operations known here, each authorized on the stack
/// ARN alone (plus what [`requests`] adds for roles, tags and templates).
const ON_STACK: [&str; 17] = [
    "DescribeStacks",
    "DescribeChangeSetHooks",
    "DetectStackDrift",
    "DescribeStackResourceDrifts",
    "DescribeEvents",
    "CreateChangeSet",
    "DescribeChangeSet",
    "ExecuteChangeSet",
    "DeleteChangeSet",
    "ListChangeSets",
    "ContinueUpdateRollback",
    "DescribeStackEvents",
    "UpdateTerminationProtection",
    "SetStackPolicy",
    "GetStackPolicy",
    "DeleteStack",
    "GetTemplate",
];

/// The installation the roles belong to: the names its resources have
/// (every table the tests make is "the registry", every bucket "the
/// artifact bucket", …), in one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installation {
    pub partition: String,
    /// The region calls are mapped to outside the `aws` partition.
    pub region: String,
    pub account: String,
    pub url_suffix: String,
    pub table: String,
    pub bucket: String,
    pub state_machine_name: String,
    pub webhook_secret_arn: String,
    pub cloudformation_role_arn: String,
    pub target_role_arn: String,
    /// `FleetRoleName`: a fleet's role in any account (empty: none).
    pub fleet_role_name: String,
    pub source_secret_arn: String,
    pub source_parameter_arn: String,
    pub value_secret_arn: String,
    pub value_parameter_arn: String,
    pub source_bucket: String,
    pub codecommit_repository_arn: String,
}

impl Installation {
    /// The installation the conformance test checks, in `partition`, with
    /// the values of `tests/fixtures/iam/installation.json` (the CDK app is
    /// synthesized from the same file).
    pub fn in_partition(partition: &str, fixture: &serde_json::Value) -> Installation {
        let (region, url_suffix) = match partition {
            "aws-cn" => ("cn-north-1", "amazonaws.com.cn"),
            "aws-us-gov" => ("us-gov-west-1", "amazonaws.com"),
            _ => ("us-east-1", "amazonaws.com"),
        };
        let text = |key: &str| fixture[key].as_str().unwrap_or_default().to_owned();
        let first = |key: &str| fixture[key][0].as_str().unwrap_or_default().to_owned();
        Installation {
            partition: partition.to_owned(),
            region: region.to_owned(),
            account: text("account"),
            url_suffix: url_suffix.to_owned(),
            table: text("table"),
            bucket: text("bucket"),
            state_machine_name: text("stateMachineName"),
            webhook_secret_arn: text("webhookSecretArn"),
            cloudformation_role_arn: first("cloudFormationRoleArns"),
            target_role_arn: first("targetAccountRoleArns"),
            fleet_role_name: text("fleetRoleName"),
            source_secret_arn: first("sourceSecretArns"),
            source_parameter_arn: first("sourceParameterArns"),
            value_secret_arn: first("valueSecretArns"),
            value_parameter_arn: first("valueParameterArns"),
            source_bucket: first("sourceBucketNames"),
            codecommit_repository_arn: first("codeCommitRepositoryArns"),
        }
    }

    /// The region of a call, in this partition.
    fn region<'a>(&'a self, call: &'a Call) -> &'a str {
        if self.partition == "aws" && !call.region.is_empty() {
            &call.region
        } else {
            &self.region
        }
    }

    pub fn table_arn(&self, region: &str) -> String {
        format!(
            "arn:{}:dynamodb:{region}:{}:table/{}",
            self.partition, self.account, self.table
        )
    }

    pub fn state_machine_arn(&self, region: &str) -> String {
        format!(
            "arn:{}:states:{region}:{}:stateMachine:{}",
            self.partition, self.account, self.state_machine_name
        )
    }

    fn stack_arn(&self, region: &str, stack: &str) -> String {
        // A stack id (`arn:…:stack/NAME/ID`) keeps its name and id.
        let (name, id) = match stack.split_once(":stack/") {
            Some((_, rest)) => rest.split_once('/').unwrap_or((rest, "id")),
            None => (stack, "00000000-0000-0000-0000-000000000000"),
        };
        format!(
            "arn:{}:cloudformation:{region}:{}:stack/{name}/{id}",
            self.partition, self.account
        )
    }
}

/// DynamoDB's fine-grained access control keys: the top-level attributes
/// the request names (`dynamodb:Attributes`), what a read returns
/// (`dynamodb:Select`: `SPECIFIC_ATTRIBUTES` with a projection, else all of
/// them, as DynamoDB takes it) and what a write returns
/// (`dynamodb:ReturnValues`, `NONE` unless asked).
fn fine_grained(call: &Call, mut request: Request) -> Request {
    for attribute in &call.attributes {
        request.add("dynamodb:Attributes", attribute);
    }
    let reads = matches!(call.operation.as_str(), "GetItem" | "Query" | "Scan");
    if reads {
        let select = call.select.as_deref().unwrap_or("ALL_ATTRIBUTES");
        request.add("dynamodb:Select", select);
    } else {
        let returned = call.return_values.as_deref().unwrap_or("NONE");
        request.add("dynamodb:ReturnValues", returned);
    }
    request
}

/// One authorization IAM makes for a call.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Request {
    pub action: String,
    pub resource: String,
    /// Condition keys and their values in the request context.
    pub context: BTreeMap<String, Vec<String>>,
}

impl Request {
    fn new(action: &str, resource: String) -> Request {
        Request {
            action: action.to_owned(),
            resource,
            context: BTreeMap::new(),
        }
    }

    fn with(mut self, key: &str, value: &str) -> Request {
        self.add(key, value);
        self
    }

    fn add(&mut self, key: &str, value: &str) {
        self.context
            .entry(key.to_owned())
            .or_default()
            .push(value.to_owned());
    }
}

impl std::fmt::Display for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} on {}", self.action, self.resource)?;
        for (key, values) in &self.context {
            write!(f, " [{key}={}]", values.join(","))?;
        }
        Ok(())
    }
}

/// One call being read: what the rules of each service below need of it.
struct Asked<'a> {
    call: &'a Call,
    i: &'a Installation,
    region: &'a str,
    op: &'a str,
    /// `SERVICE:OPERATION`.
    action: String,
    /// Whether the calling function reads the stacks' parameter values.
    reads_values: bool,
}

impl Asked<'_> {
    /// The answer for a call this module does not know.
    fn unknown(&self) -> Result<Vec<Request>, String> {
        Err(format!(
            "{}:{}: a call the IAM conformance test does not know yet (tests/src/iam/requests.rs)",
            self.call.service, self.op
        ))
    }
}

/// The authorizations `call` needs in `installation`; an error for a call
/// this module does not know (a new kind of call must be taught here, not
/// let through).
pub fn requests(call: &Call, installation: &Installation) -> Result<Vec<Request>, String> {
    let op = call.operation.as_str();
    let a = Asked {
        call,
        i: installation,
        region: installation.region(call),
        op,
        action: format!("{}:{op}", call.service),
        reads_values: VALUE_READERS.contains(&call.function.as_str()),
    };
    match call.service.as_str() {
        "dynamodb" => dynamodb(&a),
        "s3" => s3(&a),
        "cloudformation" => cloudformation(&a),
        "states" => states(&a),
        "events" => events(&a),
        "secretsmanager" => secretsmanager(&a),
        "codecommit" => codecommit(&a),
        "ssm" => ssm(&a),
        "sts" => sts(&a),
        "sqs" => sqs(&a),
        "organizations" => organizations(&a),
        _ => a.unknown(),
    }
}

/// DynamoDB: the registry table (or one of its indexes), item operations
/// with their fine-grained access keys.
fn dynamodb(a: &Asked) -> Result<Vec<Request>, String> {
    let (call, i, region, op, action) = (a.call, a.i, a.region, a.op, a.action.as_str());
    let table = i.table_arn(region);
    Ok(match op {
        "GetItem" | "PutItem" | "UpdateItem" | "DeleteItem" | "ConditionCheckItem" => {
            let key = call.key.as_deref().unwrap_or("");
            vec![fine_grained(
                call,
                Request::new(action, table).with("dynamodb:LeadingKeys", key),
            )]
        }
        "Query" | "Scan" => {
            let resource = match &call.index {
                Some(index) => format!("{table}/index/{index}"),
                None => table,
            };
            vec![fine_grained(call, Request::new(action, resource))]
        }
        "BatchWriteItem" | "BatchGetItem" | "DescribeTable" => {
            vec![Request::new(action, table)]
        }
        _ => return a.unknown(),
    })
}

/// S3: the artifact bucket or a source bucket (`source-…`); a 404 for an
/// object needs `s3:ListBucket` too.
fn s3(a: &Asked) -> Result<Vec<Request>, String> {
    let (call, i, op) = (a.call, a.i, a.op);
    let source = call
        .bucket
        .as_deref()
        .is_some_and(|b| b.starts_with("source-"));
    let name = if source { &i.source_bucket } else { &i.bucket };
    let bucket = format!("arn:{}:s3:::{name}", i.partition);
    let object = format!("{bucket}/{}", call.object.as_deref().unwrap_or(""));
    let read = if call.version.is_some() {
        "s3:GetObjectVersion"
    } else {
        "s3:GetObject"
    };
    let mut out = match op {
        "HeadObject" | "GetObject" => vec![Request::new(read, object)],
        "PutObject" => vec![Request::new("s3:PutObject", object)],
        "DeleteObject" => vec![Request::new("s3:DeleteObject", object)],
        "ListObjectsV2" | "HeadBucket" => {
            vec![Request::new("s3:ListBucket", bucket.clone())]
        }
        "CreateBucket" => vec![Request::new("s3:CreateBucket", bucket.clone())],
        _ => return a.unknown(),
    };
    if call.status == 404 && call.object.is_some() {
        out.push(Request::new("s3:ListBucket", bucket));
    }
    Ok(out)
}

/// CloudFormation: on the stack (or `*`), with `iam:PassRole` for a role,
/// the tagging, template read and transforms a change set needs, and the
/// installation tag conditions.
fn cloudformation(a: &Asked) -> Result<Vec<Request>, String> {
    let (call, i, region, op, action) = (a.call, a.i, a.region, a.op, a.action.as_str());
    let stack = |name: &str| i.stack_arn(region, name);
    let mut out = match (op, &call.stack) {
        // A detection is asked about by its id, not its stack.
        ("ListStacks" | "DescribeStackDriftDetectionStatus" | "ListHookResults", _)
        | ("DescribeStacks", None) => {
            vec![Request::new(action, "*".to_owned())]
        }
        (op, Some(name)) if ON_STACK.contains(&op) => {
            vec![Request::new(action, stack(name))]
        }
        _ => return a.unknown(),
    };
    let on_stack = out[0].resource.clone();
    if call.role_arn.is_some() {
        out.push(
            Request::new("iam:PassRole", i.cloudformation_role_arn.clone())
                .with("iam:PassedToService", "cloudformation.amazonaws.com"),
        );
    }
    match op {
        "CreateChangeSet" => {
            if call.tagged {
                out.push(Request::new("cloudformation:TagResource", on_stack.clone()));
            }
            if let Some(url) = &call.template_url {
                // http://localhost:PORT/BUCKET/KEY (the emulator) or
                // https://BUCKET.s3.REGION.SUFFIX/KEY: the key is what counts.
                // A URL that names a version (`?versionId=`) is
                // read as that version: s3:GetObjectVersion.
                let (url, query) = url.split_once('?').unwrap_or((url, ""));
                let key = template_key(url)
                    .ok_or_else(|| format!("CreateChangeSet: template URL {url}"))?;
                let versioned = query.split('&').any(|p| p.starts_with("versionId="));
                out.push(Request::new(
                    if versioned {
                        "s3:GetObjectVersion"
                    } else {
                        "s3:GetObject"
                    },
                    format!("arn:{}:s3:::{}/{key}", i.partition, i.bucket),
                ));
            }
            for transform in &call.transforms {
                let name = transform.trim_start_matches("AWS::");
                out.push(Request::new(
                    "cloudformation:CreateChangeSet",
                    format!(
                        "arn:{}:cloudformation:{region}:aws:transform/{name}",
                        i.partition
                    ),
                ));
            }
        }
        "ExecuteChangeSet" => {
            out.push(Request::new("cloudformation:TagResource", on_stack.clone()));
            out.push(Request::new(
                "cloudformation:UntagResource",
                on_stack.clone(),
            ));
        }
        _ => {}
    }
    // IAM's tag conditions: the stack's `stacksync:installation` tag
    // and the one the request gives it; the caller's own
    // installation (each test's table) is this installation's.
    let tag = |value: &Option<String>| {
        value.as_ref().map(|v| {
            if call.installation.as_ref() == Some(v) {
                i.table.clone()
            } else {
                v.clone()
            }
        })
    };
    let (resource_tag, request_tag) = (
        tag(&call.stack_installation),
        tag(&call.request_installation),
    );
    for request in out
        .iter_mut()
        .filter(|r| r.resource == on_stack && r.action.starts_with("cloudformation:"))
    {
        if let Some(value) = &resource_tag {
            request.add(&format!("aws:ResourceTag/{INSTALLATION_TAG}"), value);
        }
        if let Some(value) = &request_tag {
            request.add(&format!("aws:RequestTag/{INSTALLATION_TAG}"), value);
        }
    }
    Ok(out)
}

/// Step Functions: the state machine, or no resource for a task token.
fn states(a: &Asked) -> Result<Vec<Request>, String> {
    let (i, region, op, action) = (a.i, a.region, a.op, a.action.as_str());
    Ok(match op {
        // The machine carries the installation's tag (template.yaml's
        // `ReconcileStateMachine`, checked by tests/tests/template.rs): the
        // steps that start dependents are granted it by that tag.
        "StartExecution" | "DescribeStateMachine" | "ListExecutions" => {
            let mut request = Request::new(action, i.state_machine_arn(region));
            request.add(&format!("aws:ResourceTag/{INSTALLATION_TAG}"), &i.table);
            vec![request]
        }
        // A task token is answered on no resource (IAM has none for it).
        "SendTaskSuccess" | "SendTaskFailure" => vec![Request::new(action, "*".to_owned())],
        _ => return a.unknown(),
    })
}

/// SQS: the webhook's delivery queue (template.yaml's `DeliveryQueue`,
/// named by its logical id here as every resource the template names not).
fn sqs(a: &Asked) -> Result<Vec<Request>, String> {
    let (i, region, op, action) = (a.i, a.region, a.op, a.action.as_str());
    Ok(match op {
        "SendMessage" => vec![Request::new(
            action,
            format!(
                "arn:{}:sqs:{region}:{}:deliveryqueue",
                i.partition, i.account
            ),
        )],
        _ => return a.unknown(),
    })
}

/// EventBridge: `PutEvents` on its bus.
fn events(a: &Asked) -> Result<Vec<Request>, String> {
    let (call, i, region, op, action) = (a.call, a.i, a.region, a.op, a.action.as_str());
    Ok(match op {
        // One event per call (the notifier puts them one by one): its
        // bus, by name (the account's, in the function's region) or ARN.
        "PutEvents" => {
            let bus = call.target.as_deref().unwrap_or("default");
            let arn = if bus.starts_with("arn:") {
                bus.to_owned()
            } else {
                format!(
                    "arn:{}:events:{region}:{}:event-bus/{bus}",
                    i.partition, i.account
                )
            };
            let mut request = Request::new(action, arn);
            if let Some(source) = &call.event_source {
                request.add("events:source", source);
            }
            vec![request]
        }
        _ => return a.unknown(),
    })
}

/// Secrets Manager: the webhook's secret, a stack parameter's, or a source's.
fn secretsmanager(a: &Asked) -> Result<Vec<Request>, String> {
    let (call, i, op, action, reads_values) =
        (a.call, a.i, a.op, a.action.as_str(), a.reads_values);
    Ok(match op {
        "GetSecretValue" if call.function == "webhook" => {
            vec![Request::new(action, i.webhook_secret_arn.clone())]
        }
        // A stack parameter's `{secret: ARN}`, whichever secret the test made.
        "GetSecretValue" if reads_values => {
            vec![Request::new(action, i.value_secret_arn.clone())]
        }
        "GetSecretValue" => vec![Request::new(action, i.source_secret_arn.clone())],
        _ => return a.unknown(),
    })
}

/// CodeCommit: `GitPull` on the repository.
fn codecommit(a: &Asked) -> Result<Vec<Request>, String> {
    let (i, op, action) = (a.i, a.op, a.action.as_str());
    Ok(match op {
        "GitPull" => vec![Request::new(action, i.codecommit_repository_arn.clone())],
        _ => return a.unknown(),
    })
}

/// SSM: a stack parameter's, a source's (by ARN), or the webhook's (by name).
fn ssm(a: &Asked) -> Result<Vec<Request>, String> {
    let (call, i, region, op, action, reads_values) = (
        a.call,
        a.i,
        a.region,
        a.op,
        a.action.as_str(),
        a.reads_values,
    );
    Ok(match op {
        // A stack parameter's `{ssm: NAME}` (a name or an ARN), whichever
        // parameter the test made. The preview reads both the stacks'
        // values and the sources' credentials: its values by name, its
        // credentials by ARN (as the tests name them).
        "GetParameter"
            if reads_values
                || (call.function == "preview"
                    && !call
                        .target
                        .as_deref()
                        .is_some_and(|t| t.starts_with("arn:"))) =>
        {
            vec![Request::new(action, i.value_parameter_arn.clone())]
        }
        // A source's credentials are named by ARN; the webhook's by name.
        "GetParameter"
            if call
                .target
                .as_deref()
                .is_some_and(|t| t.starts_with("arn:")) =>
        {
            vec![Request::new(action, i.source_parameter_arn.clone())]
        }
        // A stack's outputs, published (`publish:`) in the installation's
        // own account: the parameter by name.
        "GetParameter" | "PutParameter" | "DeleteParameter" => {
            let name = call.target.as_deref().unwrap_or("").trim_start_matches('/');
            vec![Request::new(
                action,
                format!(
                    "arn:{}:ssm:{region}:{}:parameter/{name}",
                    i.partition, i.account
                ),
            )]
        }
        _ => return a.unknown(),
    })
}

/// STS: the target role, with `TagSession` for session tags. A role named
/// as the installation's `FleetRoleName` is asked for as it is (in the
/// account the test's organization made); any other stands for the
/// installation's target role.
fn sts(a: &Asked) -> Result<Vec<Request>, String> {
    let (call, i, op, action) = (a.call, a.i, a.op, a.action.as_str());
    let asked = call.target.as_deref().unwrap_or_default();
    let fleet_role = !i.fleet_role_name.is_empty()
        && asked.ends_with(&format!(":role/{}", i.fleet_role_name))
        && asked != i.target_role_arn
        && asked.split(':').nth(4) != i.target_role_arn.split(':').nth(4);
    let role = if fleet_role {
        let account = asked.split(':').nth(4).unwrap_or_default();
        format!(
            "arn:{}:iam::{account}:role/{}",
            i.partition, i.fleet_role_name
        )
    } else {
        i.target_role_arn.clone()
    };
    Ok(match op {
        // Session tags (the entry, the installation) need TagSession too.
        "AssumeRole" if call.tagged => vec![
            Request::new(action, role.clone()),
            Request::new("sts:TagSession", role),
        ],
        "AssumeRole" => vec![Request::new(action, role)],
        _ => return a.unknown(),
    })
}

/// Organizations: the listings a fleet's units are read with (IAM takes
/// no resource-level condition the policy uses: `*`).
fn organizations(a: &Asked) -> Result<Vec<Request>, String> {
    Ok(match a.op {
        "ListAccountsForParent" | "ListOrganizationalUnitsForParent" => {
            vec![Request::new(a.action.as_str(), "*".to_owned())]
        }
        _ => return a.unknown(),
    })
}

/// The object key of a template URL: everything after the bucket.
fn template_key(url: &str) -> Option<String> {
    let (_, rest) = url.split_once("://")?;
    let (host, path) = rest.split_once('/')?;
    if host.contains(".s3.") || host.contains(".s3-") {
        Some(path.to_owned()) // virtual-hosted: BUCKET.s3.REGION.SUFFIX/KEY
    } else {
        path.split_once('/').map(|(_, key)| key.to_owned()) // path style: /BUCKET/KEY
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn installation(partition: &str) -> Installation {
        let fixture = serde_json::json!({
            "account": "123456789012", "table": "registry", "bucket": "artifacts",
            "stateMachineName": "reconcile",
            "webhookSecretArn": "arn:aws:secretsmanager:us-east-1:123456789012:secret:hook-AbCdEf",
            "cloudFormationRoleArns": ["arn:aws:iam::123456789012:role/cfn"],
            "targetAccountRoleArns": ["arn:aws:iam::210987654321:role/target"],
            "sourceSecretArns": ["arn:aws:secretsmanager:us-east-1:123456789012:secret:git-AbCdEf"],
            "sourceParameterArns": ["arn:aws:ssm:us-east-1:123456789012:parameter/git"],
            "valueSecretArns": ["arn:aws:secretsmanager:us-east-1:123456789012:secret:app-AbCdEf"],
            "valueParameterArns": ["arn:aws:ssm:us-east-1:123456789012:parameter/app/*"],
            "sourceBucketNames": ["sources"],
            "codeCommitRepositoryArns": ["arn:aws:codecommit:us-east-1:123456789012:infra"],
        });
        Installation::in_partition(partition, &fixture)
    }

    #[test]
    fn source_credentials_buckets_and_codecommit_are_the_installations_own() {
        let i = installation("aws-cn");
        let call = |service: &str, operation: &str, function: &str| Call {
            service: service.into(),
            operation: operation.into(),
            function: function.into(),
            ..Call::default()
        };
        let resource = |call: Call| requests(&call, &i).unwrap()[0].resource.clone();
        assert_eq!(
            resource(call("secretsmanager", "GetSecretValue", "artifact-fetch")),
            "arn:aws:secretsmanager:us-east-1:123456789012:secret:git-AbCdEf"
        );
        assert!(resource(call("secretsmanager", "GetSecretValue", "webhook")).contains("hook-"));
        let by_arn = Call {
            target: Some("arn:aws:ssm:us-east-1:1:parameter/x".into()),
            ..call("ssm", "GetParameter", "scheduler")
        };
        assert_eq!(
            resource(by_arn),
            "arn:aws:ssm:us-east-1:123456789012:parameter/git"
        );
        assert_eq!(
            resource(call("codecommit", "GitPull", "artifact-fetch")),
            "arn:aws:codecommit:us-east-1:123456789012:infra"
        );
        let head = Call {
            bucket: Some("source-abc".into()),
            object: Some("app.zip".into()),
            version: Some("v1".into()),
            ..call("s3", "HeadObject", "scheduler")
        };
        let got = requests(&head, &i).unwrap();
        assert_eq!(
            (got[0].action.as_str(), got[0].resource.as_str()),
            ("s3:GetObjectVersion", "arn:aws-cn:s3:::sources/app.zip")
        );
    }

    #[test]
    fn the_stacks_parameters_are_read_from_the_installations_value_secrets_and_parameters() {
        let i = installation("aws");
        let call = |service: &str, operation: &str, function: &str, target: Option<&str>| Call {
            service: service.into(),
            operation: operation.into(),
            function: function.into(),
            region: "eu-west-1".into(),
            target: target.map(Into::into),
            ..Call::default()
        };
        let got = |call: Call| -> Vec<String> {
            requests(&call, &i)
                .unwrap()
                .iter()
                .map(ToString::to_string)
                .collect()
        };
        for function in VALUE_READERS {
            assert_eq!(
                got(call("secretsmanager", "GetSecretValue", function, None)),
                [
                    "secretsmanager:GetSecretValue on arn:aws:secretsmanager:us-east-1:123456789012:secret:app-AbCdEf"
                ],
                "{function}"
            );
            // By name (as stacks.yaml gives it), by ARN, or unrecorded: the installation's list.
            for target in [
                Some("/stacksync-tests/pw-xyz"),
                Some("arn:aws:ssm:eu-west-1:1:parameter/x"),
                None,
            ] {
                assert_eq!(
                    got(call("ssm", "GetParameter", function, target)),
                    ["ssm:GetParameter on arn:aws:ssm:us-east-1:123456789012:parameter/app/*"],
                    "{function} {target:?}"
                );
            }
        }
        // The other functions read their own: a source's credentials, the webhook's secret.
        assert_eq!(
            got(call("secretsmanager", "GetSecretValue", "scheduler", None)),
            [
                "secretsmanager:GetSecretValue on arn:aws:secretsmanager:us-east-1:123456789012:secret:git-AbCdEf"
            ]
        );
        assert_eq!(
            got(call(
                "ssm",
                "GetParameter",
                "artifact-fetch",
                Some("arn:aws:ssm:us-east-1:1:parameter/x")
            )),
            ["ssm:GetParameter on arn:aws:ssm:us-east-1:123456789012:parameter/git"]
        );
        assert_eq!(
            got(call("ssm", "GetParameter", "webhook", Some("/hook"))),
            ["ssm:GetParameter on arn:aws:ssm:eu-west-1:123456789012:parameter/hook"]
        );
    }

    fn cfn(op: &str) -> Call {
        Call {
            service: "cloudformation".into(),
            operation: op.into(),
            region: "eu-west-1".into(),
            stack: Some("orders".into()),
            ..Call::default()
        }
    }

    #[test]
    fn a_change_set_with_a_role_tags_and_a_transform_needs_five_authorizations() {
        let call = Call {
            role_arn: Some("arn:aws:iam::123456789012:role/whatever-the-test-used".into()),
            template_url: Some("http://localhost:5000/test-bucket-1/templates/abc".into()),
            transforms: vec!["AWS::Serverless-2016-10-31".into()],
            tagged: true,
            ..cfn("CreateChangeSet")
        };
        let got: Vec<String> = requests(&call, &installation("aws"))
            .unwrap()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            got,
            [
                "cloudformation:CreateChangeSet on arn:aws:cloudformation:eu-west-1:123456789012:stack/orders/00000000-0000-0000-0000-000000000000",
                "iam:PassRole on arn:aws:iam::123456789012:role/cfn [iam:PassedToService=cloudformation.amazonaws.com]",
                "cloudformation:TagResource on arn:aws:cloudformation:eu-west-1:123456789012:stack/orders/00000000-0000-0000-0000-000000000000",
                "s3:GetObject on arn:aws:s3:::artifacts/templates/abc",
                "cloudformation:CreateChangeSet on arn:aws:cloudformation:eu-west-1:aws:transform/Serverless-2016-10-31",
            ]
        );
    }

    #[test]
    fn a_template_url_that_names_its_version_is_read_as_that_version() {
        let call = Call {
            template_url: Some("http://localhost:5000/b/templates/abc?versionId=3%2FL4".into()),
            ..cfn("CreateChangeSet")
        };
        let got: Vec<String> = requests(&call, &installation("aws"))
            .unwrap()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            got[1],
            "s3:GetObjectVersion on arn:aws:s3:::artifacts/templates/abc"
        );
    }

    #[test]
    fn other_partitions_map_the_region_and_the_partition() {
        let got = requests(&cfn("DescribeStacks"), &installation("aws-cn")).unwrap();
        assert_eq!(
            got[0].resource,
            "arn:aws-cn:cloudformation:cn-north-1:123456789012:stack/orders/00000000-0000-0000-0000-000000000000"
        );
        let id = Call {
            stack: Some("arn:aws:cloudformation:us-east-1:123456789012:stack/orders/abc-1".into()),
            ..cfn("DescribeStacks")
        };
        assert_eq!(
            requests(&id, &installation("aws-us-gov")).unwrap()[0].resource,
            "arn:aws-us-gov:cloudformation:us-gov-west-1:123456789012:stack/orders/abc-1"
        );
    }

    #[test]
    fn a_missing_object_needs_list_bucket_and_a_version_needs_get_object_version() {
        let head = Call {
            service: "s3".into(),
            operation: "HeadObject".into(),
            bucket: Some("test-bucket".into()),
            object: Some("templates/x".into()),
            status: 404,
            ..Call::default()
        };
        let got: Vec<String> = requests(&head, &installation("aws"))
            .unwrap()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            got,
            [
                "s3:GetObject on arn:aws:s3:::artifacts/templates/x",
                "s3:ListBucket on arn:aws:s3:::artifacts"
            ]
        );
        let versioned = Call {
            version: Some("v1".into()),
            status: 200,
            ..head
        };
        assert_eq!(
            requests(&versioned, &installation("aws")).unwrap()[0].action,
            "s3:GetObjectVersion"
        );
    }

    #[test]
    fn item_operations_carry_their_leading_key_and_queries_their_index() {
        let update = Call {
            service: "dynamodb".into(),
            operation: "UpdateItem".into(),
            region: "us-east-1".into(),
            table: Some("t-123".into()),
            key: Some("stack#a".into()),
            attributes: vec!["nextReconcileAt".into(), "pk".into()],
            ..Call::default()
        };
        let update_request = &requests(&update, &installation("aws")).unwrap()[0];
        assert_eq!(
            update_request.resource,
            "arn:aws:dynamodb:us-east-1:123456789012:table/registry"
        );
        let context = |r: &Request, key: &str| r.context.get(key).cloned().unwrap_or_default();
        assert_eq!(context(update_request, "dynamodb:LeadingKeys"), ["stack#a"]);
        assert_eq!(
            context(update_request, "dynamodb:Attributes"),
            ["nextReconcileAt", "pk"]
        );
        assert_eq!(
            context(update_request, "dynamodb:ReturnValues"),
            ["NONE"],
            "a write returns nothing unless asked"
        );
        let query = Call {
            operation: "Query".into(),
            index: Some("by-source".into()),
            key: None,
            attributes: vec!["sourceKey".into()],
            ..update
        };
        let query_request = &requests(&query, &installation("aws")).unwrap()[0];
        assert_eq!(
            query_request.resource,
            "arn:aws:dynamodb:us-east-1:123456789012:table/registry/index/by-source"
        );
        assert_eq!(
            context(query_request, "dynamodb:Select"),
            ["ALL_ATTRIBUTES"],
            "no projection: every attribute"
        );
    }

    #[test]
    fn an_unknown_call_is_an_error_not_a_pass() {
        // CreateStack needs more than the stack (a role, tags): not taught yet.
        assert!(requests(&cfn("CreateStack"), &installation("aws")).is_err());
        let call = Call {
            service: "kms".into(),
            operation: "Decrypt".into(),
            ..Call::default()
        };
        assert!(requests(&call, &installation("aws")).is_err());
    }

    #[test]
    fn template_keys_from_both_url_styles() {
        assert_eq!(
            template_key("http://localhost:5000/bkt/templates/ab").as_deref(),
            Some("templates/ab")
        );
        assert_eq!(
            template_key("https://bkt.s3.cn-north-1.amazonaws.com.cn/templates/ab").as_deref(),
            Some("templates/ab")
        );
    }
}
