//! The roles as deployed: each function's policy statements read out of a
//! CloudFormation template (`template.yaml`, or the CDK app's synthesized
//! template) with its intrinsic functions resolved for one installation, and
//! an evaluator of IAM's rules for identity policies (explicit deny wins;
//! otherwise some allow must match action, resource and every condition).
//!
//! Only what the two templates use is supported; anything else is an error,
//! never a silent pass.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::requests::{Installation, Request};

/// A template in JSON form, from YAML with short tags (`!Sub`, `!GetAtt`,
/// …) or from JSON.
pub fn load_template(text: &str) -> Result<Value, String> {
    let yaml: serde_yaml_ng::Value = serde_yaml_ng::from_str(text).map_err(|e| e.to_string())?;
    Ok(long_form(yaml))
}

/// `!Ref x` → `{"Ref": x}`, `!GetAtt a.b` → `{"Fn::GetAtt": [a, b]}`,
/// `!Sub …` → `{"Fn::Sub": …}`, and so on.
fn long_form(v: serde_yaml_ng::Value) -> Value {
    use serde_yaml_ng::Value as Y;
    match v {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(b),
        Y::Number(n) => serde_json::to_value(n).unwrap_or(Value::Null),
        Y::String(s) => Value::String(s),
        Y::Sequence(items) => Value::Array(items.into_iter().map(long_form).collect()),
        Y::Mapping(m) => Value::Object(
            m.into_iter()
                .map(|(k, v)| {
                    let key = match k {
                        Y::String(s) => s,
                        other => serde_yaml_ng::to_string(&other).unwrap_or_default(),
                    };
                    (key.trim().to_owned(), long_form(v))
                })
                .collect(),
        ),
        Y::Tagged(tagged) => {
            let tag = tagged.tag.to_string();
            let tag = tag.trim_start_matches('!');
            let value = long_form(tagged.value);
            match tag {
                "Ref" => json!({ "Ref": value }),
                "Condition" => json!({ "Condition": value }),
                "GetAtt" => match value {
                    Value::String(s) => {
                        let (resource, attribute) = s.split_once('.').unwrap_or((&s, ""));
                        json!({ "Fn::GetAtt": [resource, attribute] })
                    }
                    other => json!({ "Fn::GetAtt": other }),
                },
                other => json!({ format!("Fn::{other}"): value }),
            }
        }
    }
}

/// Resolves a template's intrinsic functions for one installation.
#[derive(Debug)]
pub struct Resolver<'a> {
    template: &'a Value,
    installation: &'a Installation,
    parameters: BTreeMap<String, Value>,
}

impl<'a> Resolver<'a> {
    /// Parameters: the template's defaults, then `overrides`
    /// (CommaDelimitedList parameters as JSON arrays).
    pub fn new(
        template: &'a Value,
        installation: &'a Installation,
        overrides: &BTreeMap<String, Value>,
    ) -> Resolver<'a> {
        let mut parameters = BTreeMap::new();
        if let Some(declared) = template["Parameters"].as_object() {
            for (name, declaration) in declared {
                let list = declaration["Type"].as_str() == Some("CommaDelimitedList");
                let value = match (&declaration["Default"], list) {
                    (Value::String(s), true) => Value::Array(
                        s.split(',')
                            .filter(|x| !x.is_empty())
                            .map(|x| Value::String(x.trim().to_owned()))
                            .collect(),
                    ),
                    (Value::Number(n), _) => Value::String(n.to_string()),
                    (other, _) => other.clone(),
                };
                parameters.insert(name.clone(), value);
            }
        }
        for (name, value) in overrides {
            parameters.insert(name.clone(), value.clone());
        }
        Resolver {
            template,
            installation,
            parameters,
        }
    }

    fn resource_type(&self, logical: &str) -> Option<&str> {
        let resources = &self.template["Resources"];
        resources[logical]["Type"].as_str().or_else(|| {
            // The role SAM makes for a function that names none: <Function>Role.
            let function = logical.strip_suffix("Role")?;
            (resources[function]["Type"].as_str() == Some("AWS::Serverless::Function"))
                .then_some("AWS::IAM::Role")
        })
    }

    /// The artifact bucket's policy statements that apply to requests made
    /// by `role_arn`: those whose `Principal` takes it in; a statement whose
    /// `aws:PrincipalArn` condition leaves that role out does not apply, and
    /// in one that names it, that condition is met.
    pub fn bucket_policy(&self, role_arn: &str) -> Result<Vec<Statement>, String> {
        let mut applying = Vec::new();
        for resource in self.template["Resources"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(_, r)| r)
        {
            let bucket = resource["Properties"]["Bucket"]["Ref"]
                .as_str()
                .unwrap_or_default();
            if resource["Type"].as_str() != Some("AWS::S3::BucketPolicy")
                || !bucket.starts_with("ArtifactBucket")
            {
                continue;
            }
            let document = self
                .resolve(&resource["Properties"]["PolicyDocument"])?
                .unwrap_or(Value::Null);
            // IAM's policy variable for the caller's account, as IAM fills
            // it in for this role.
            let account = role_arn.split(':').nth(4).unwrap_or_default();
            for mut statement in statements_of(&document)?
                .into_iter()
                .filter(|s| s.principals.iter().any(|p| p == "*" || glob(p, role_arn)))
            {
                for resource in &mut statement.resources {
                    *resource = resource.replace("${aws:PrincipalAccount}", account);
                }
                let principal = vec![role_arn.to_owned()];
                let mut applies = true;
                statement.conditions.retain(|(operator, key, values)| {
                    if key != "aws:PrincipalArn" {
                        return true;
                    }
                    applies &= condition_holds(operator, values, Some(&principal)).unwrap_or(true);
                    false
                });
                if applies {
                    applying.push(statement);
                }
            }
        }
        Ok(applying)
    }

    /// What the bucket's policy denies `role_arn` (its allows are left out:
    /// a function's own grants are what is checked).
    fn bucket_denies(&self, role_arn: &str) -> Result<Vec<Statement>, String> {
        let mut denies = self.bucket_policy(role_arn)?;
        denies.retain(|s| !s.allow);
        Ok(denies)
    }

    /// The physical name of one of the installation's resources.
    fn physical(&self, logical: &str) -> Result<Value, String> {
        let i = self.installation;
        let kind = self
            .resource_type(logical)
            .ok_or_else(|| format!("Ref {logical}: no such parameter or resource"))?;
        Ok(Value::String(match kind {
            "AWS::DynamoDB::Table" => i.table.clone(),
            "AWS::S3::Bucket" if logical.starts_with("ArtifactBucket") => i.bucket.clone(),
            "AWS::Serverless::StateMachine" | "AWS::StepFunctions::StateMachine" => {
                i.state_machine_arn(&i.region)
            }
            _ => logical.to_lowercase(),
        }))
    }

    fn get_att(&self, logical: &str, attribute: &str) -> Result<Value, String> {
        let i = self.installation;
        let (p, r, a) = (&i.partition, &i.region, &i.account);
        let name = self.physical(logical)?;
        let name = name.as_str().unwrap_or_default();
        let kind = self.resource_type(logical).unwrap_or_default();
        Ok(Value::String(match (kind, attribute) {
            ("AWS::DynamoDB::Table", "Arn") => i.table_arn(r),
            ("AWS::S3::Bucket", "Arn") => format!("arn:{p}:s3:::{name}"),
            ("AWS::S3::Bucket", "RegionalDomainName") => {
                format!("{name}.s3.{r}.{}", i.url_suffix)
            }
            ("AWS::Serverless::StateMachine" | "AWS::StepFunctions::StateMachine", "Arn") => {
                i.state_machine_arn(r)
            }
            ("AWS::SQS::Queue", "Arn") => format!("arn:{p}:sqs:{r}:{a}:{name}"),
            ("AWS::SQS::Queue", "QueueName") => name.to_owned(),
            ("AWS::Logs::LogGroup", "Arn") => format!("arn:{p}:logs:{r}:{a}:log-group:{name}:*"),
            ("AWS::IAM::Role", "Arn") => format!("arn:{p}:iam::{a}:role/{name}"),
            ("AWS::Lambda::Function" | "AWS::Serverless::Function", "Arn") => {
                format!("arn:{p}:lambda:{r}:{a}:function:{name}")
            }
            _ => format!("{logical}.{attribute}"),
        }))
    }

    fn reference(&self, name: &str) -> Result<Option<Value>, String> {
        let i = self.installation;
        let text = |s: &str| Ok(Some(Value::String(s.to_owned())));
        match name {
            "AWS::NoValue" => Ok(None),
            "AWS::Partition" => text(&i.partition),
            "AWS::Region" => text(&i.region),
            "AWS::AccountId" => text(&i.account),
            "AWS::URLSuffix" => text(&i.url_suffix),
            "AWS::StackName" => text("stacksync"),
            _ => match self.parameters.get(name) {
                Some(value) => Ok(Some(value.clone())),
                None => self.physical(name).map(Some),
            },
        }
    }

    /// Whether a named condition of the template holds.
    pub fn condition(&self, name: &str) -> Result<bool, String> {
        let definition = &self.template["Conditions"][name];
        if definition.is_null() {
            return Err(format!("no condition named {name}"));
        }
        self.truth(definition)
    }

    fn truth(&self, v: &Value) -> Result<bool, String> {
        match self.resolve(v)? {
            Some(Value::Bool(b)) => Ok(b),
            other => Err(format!("not a condition: {v} ({other:?})")),
        }
    }

    fn text(&self, v: &Value) -> Result<String, String> {
        match self.resolve(v)? {
            Some(Value::String(s)) => Ok(s),
            Some(Value::Number(n)) => Ok(n.to_string()),
            other => Err(format!("not a string: {v} ({other:?})")),
        }
    }

    /// `v` with every intrinsic function applied; `None` for `AWS::NoValue`.
    pub fn resolve(&self, v: &Value) -> Result<Option<Value>, String> {
        match v {
            Value::Object(map) if map.len() == 1 => {
                let (key, arg) = map.iter().next().unwrap_or_else(|| unreachable!());
                if key == "Ref" || key == "Condition" || key.starts_with("Fn::") {
                    return self.intrinsic(key, arg);
                }
                self.resolve_map(map).map(Some)
            }
            Value::Object(map) => self.resolve_map(map).map(Some),
            Value::Array(items) => {
                let mut out = Vec::new();
                for item in items {
                    if let Some(value) = self.resolve(item)? {
                        out.push(value);
                    }
                }
                Ok(Some(Value::Array(out)))
            }
            other => Ok(Some(other.clone())),
        }
    }

    fn resolve_map(&self, map: &Map<String, Value>) -> Result<Value, String> {
        let mut out = Map::new();
        for (k, v) in map {
            if let Some(value) = self.resolve(v)? {
                out.insert(k.clone(), value);
            }
        }
        Ok(Value::Object(out))
    }

    fn list(&self, v: &Value) -> Result<Vec<Value>, String> {
        match self.resolve(v)? {
            Some(Value::Array(items)) => Ok(items),
            other => Err(format!("not a list: {v} ({other:?})")),
        }
    }

    fn intrinsic(&self, function: &str, arg: &Value) -> Result<Option<Value>, String> {
        let args = || arg.as_array().cloned().unwrap_or_default();
        let value = match function {
            "Ref" => return self.reference(arg.as_str().unwrap_or_default()),
            "Condition" => Value::Bool(self.condition(arg.as_str().unwrap_or_default())?),
            "Fn::GetAtt" => {
                let a = args();
                let (logical, attribute) = (
                    a.first().and_then(Value::as_str).unwrap_or_default(),
                    a.get(1).and_then(Value::as_str).unwrap_or_default(),
                );
                self.get_att(logical, attribute)?
            }
            "Fn::Sub" => Value::String(self.sub(arg)?),
            "Fn::Join" => {
                let a = args();
                let separator = a.first().and_then(Value::as_str).unwrap_or_default();
                let parts = self.list(a.get(1).unwrap_or(&Value::Null))?;
                let parts: Result<Vec<String>, String> =
                    parts.iter().map(|p| self.text(p)).collect();
                Value::String(parts?.join(separator))
            }
            "Fn::Select" => {
                let a = args();
                let index: usize = self
                    .text(a.first().unwrap_or(&Value::Null))?
                    .parse()
                    .map_err(|e| format!("Fn::Select: {e}"))?;
                self.list(a.get(1).unwrap_or(&Value::Null))?
                    .get(index)
                    .cloned()
                    .ok_or_else(|| format!("Fn::Select {index}: out of range"))?
            }
            "Fn::Split" => {
                let a = args();
                let separator = self.text(a.first().unwrap_or(&Value::Null))?;
                let text = self.text(a.get(1).unwrap_or(&Value::Null))?;
                Value::Array(
                    text.split(separator.as_str())
                        .map(|s| Value::String(s.to_owned()))
                        .collect(),
                )
            }
            "Fn::If" => {
                let a = args();
                let name = a.first().and_then(Value::as_str).unwrap_or_default();
                let branch = if self.condition(name)? { 1 } else { 2 };
                return self.resolve(a.get(branch).unwrap_or(&Value::Null));
            }
            "Fn::Equals" => {
                let a = args();
                let left = self.resolve(a.first().unwrap_or(&Value::Null))?;
                let right = self.resolve(a.get(1).unwrap_or(&Value::Null))?;
                Value::Bool(left == right)
            }
            "Fn::Not" => Value::Bool(!self.truth(args().first().unwrap_or(&Value::Null))?),
            "Fn::And" | "Fn::Or" => {
                let values: Result<Vec<bool>, String> =
                    args().iter().map(|c| self.truth(c)).collect();
                let values = values?;
                Value::Bool(if function == "Fn::And" {
                    values.iter().all(|b| *b)
                } else {
                    values.iter().any(|b| *b)
                })
            }
            other => {
                return Err(format!(
                    "{other}: an intrinsic function the IAM test does not resolve"
                ));
            }
        };
        Ok(Some(value))
    }

    fn sub(&self, arg: &Value) -> Result<String, String> {
        let (text, variables) = match arg {
            Value::String(s) => (s.clone(), Map::new()),
            Value::Array(a) => (
                a.first()
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                a.get(1)
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default(),
            ),
            other => return Err(format!("Fn::Sub {other}")),
        };
        let mut out = String::new();
        let mut rest = text.as_str();
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let end = after
                .find('}')
                .ok_or_else(|| format!("Fn::Sub {text}: unclosed ${{"))?;
            let name = &after[..end];
            if let Some(literal) = name.strip_prefix('!') {
                out.push_str("${");
                out.push_str(literal);
                out.push('}');
            } else if let Some(value) = variables.get(name) {
                out.push_str(&self.text(value)?);
            } else if let Some((logical, attribute)) = name.split_once('.') {
                out.push_str(
                    self.get_att(logical, attribute)?
                        .as_str()
                        .unwrap_or_default(),
                );
            } else {
                let value = self
                    .reference(name)?
                    .ok_or_else(|| format!("Fn::Sub: ${{{name}}} is AWS::NoValue"))?;
                out.push_str(&self.text(&value)?);
            }
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }
}

/// One statement of an identity policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Statement {
    pub sid: Option<String>,
    pub allow: bool,
    pub actions: Vec<String>,
    pub not_actions: Vec<String>,
    pub resources: Vec<String>,
    pub not_resources: Vec<String>,
    /// (operator, key, values)
    pub conditions: Vec<(String, String, Vec<String>)>,
    /// A resource policy's `Principal` (`AWS` ARNs, or `*`); empty in an
    /// identity policy.
    pub principals: Vec<String>,
}

fn strings(v: &Value) -> Vec<String> {
    match v {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items.iter().flat_map(strings).collect(),
        _ => Vec::new(),
    }
}

impl Statement {
    /// A statement of a resolved policy document.
    pub fn from_json(v: &Value) -> Result<Statement, String> {
        let allow = match v["Effect"].as_str() {
            Some("Allow") => true,
            Some("Deny") => false,
            other => return Err(format!("statement {v}: Effect {other:?}")),
        };
        let mut conditions = Vec::new();
        if let Some(map) = v["Condition"].as_object() {
            for (operator, keys) in map {
                for (key, values) in keys.as_object().into_iter().flatten() {
                    conditions.push((operator.clone(), key.clone(), strings(values)));
                }
            }
        }
        Ok(Statement {
            sid: v["Sid"].as_str().map(str::to_owned),
            allow,
            actions: strings(&v["Action"]),
            not_actions: strings(&v["NotAction"]),
            resources: strings(&v["Resource"]),
            not_resources: strings(&v["NotResource"]),
            conditions,
            principals: match &v["Principal"] {
                Value::Object(by_kind) => strings(&by_kind["AWS"]),
                other => strings(other),
            },
        })
    }

    /// Whether the statement applies to `request`.
    pub fn matches(&self, request: &Request) -> Result<bool, String> {
        let action = |p: &String| glob(&p.to_lowercase(), &request.action.to_lowercase());
        let resource = |p: &String| glob(p, &request.resource);
        let action_ok = if self.not_actions.is_empty() {
            self.actions.iter().any(action)
        } else {
            !self.not_actions.iter().any(action)
        };
        let resource_ok = if self.not_resources.is_empty() {
            self.resources.iter().any(resource)
        } else {
            !self.not_resources.iter().any(resource)
        };
        if !(action_ok && resource_ok) {
            return Ok(false);
        }
        for (operator, key, values) in &self.conditions {
            if !condition_holds(operator, values, request.context.get(key))? {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// IAM's condition operators, as far as the templates use them.
fn condition_holds(
    operator: &str,
    policy: &[String],
    request: Option<&Vec<String>>,
) -> Result<bool, String> {
    let (set, rest) = match operator.split_once(':') {
        Some((set, rest)) => (Some(set), rest),
        None => (None, operator),
    };
    let (base, if_exists) = match rest.strip_suffix("IfExists") {
        Some(base) => (base, true),
        None => (rest, false),
    };
    let (matcher, negated): (fn(&str, &str) -> bool, bool) = match base {
        "StringEquals" | "ArnEquals" => (|p, v| p == v, false),
        "StringNotEquals" | "ArnNotEquals" => (|p, v| p == v, true),
        "StringLike" | "ArnLike" => (glob, false),
        "StringNotLike" | "ArnNotLike" => (glob, true),
        "Bool" => (|p, v| p.eq_ignore_ascii_case(v), false),
        other => {
            return Err(format!(
                "condition operator {other}: not supported by the IAM test"
            ));
        }
    };
    let one = |value: &str| policy.iter().any(|p| matcher(p, value)) != negated;
    let values = match request {
        Some(values) if !values.is_empty() => values,
        // An absent key: vacuously true for ForAllValues and IfExists (and
        // for the negated operators), false otherwise.
        _ => return Ok(set == Some("ForAllValues") || if_exists || negated),
    };
    Ok(match set {
        Some("ForAllValues") => values.iter().all(|v| one(v)),
        Some("ForAnyValue") | None => values.iter().any(|v| one(v)),
        Some(other) => return Err(format!("condition set operator {other}")),
    })
}

/// IAM's wildcard matching: `*` any run of characters, `?` one character.
pub fn glob(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

/// Whether IAM allows `request` under `statements` (an explicit deny wins).
pub fn allowed(statements: &[Statement], request: &Request) -> Result<bool, String> {
    let mut allow = false;
    for s in statements {
        if s.matches(request)? {
            if !s.allow {
                return Ok(false);
            }
            allow = true;
        }
    }
    Ok(allow)
}

fn statements_of(document: &Value) -> Result<Vec<Statement>, String> {
    let statements = match &document["Statement"] {
        Value::Array(items) => items.clone(),
        Value::Null => return Err(format!("a policy document without Statement: {document}")),
        one => vec![one.clone()],
    };
    statements.iter().map(Statement::from_json).collect()
}

/// Each SAM function's statements (`Policies` of `AWS::Serverless::Function`,
/// inline documents only, and what the artifact bucket's policy denies its
/// role), by the binary it runs. A managed policy (the drift function's
/// `DriftReadPolicy` and `DriftReadGapsPolicy`, for drift detection's
/// reads of the stacks' resources) is left out: every call stacksync makes
/// itself must be granted inline, so the checks never lean on it.
pub fn sam_roles(resolver: &Resolver<'_>) -> Result<BTreeMap<String, Vec<Statement>>, String> {
    let mut roles = BTreeMap::new();
    // What a `Ref` to each customer managed policy of the template gives.
    let mut managed = Vec::new();
    for (logical, resource) in resolver.template["Resources"]
        .as_object()
        .into_iter()
        .flatten()
    {
        if resource["Type"].as_str() == Some("AWS::IAM::ManagedPolicy") {
            managed.extend(resolver.resolve(&serde_json::json!({ "Ref": logical }))?);
        }
    }
    for (logical, resource) in resolver.template["Resources"]
        .as_object()
        .into_iter()
        .flatten()
    {
        if resource["Type"].as_str() != Some("AWS::Serverless::Function") {
            continue;
        }
        let binary = resource["Metadata"]["BuildProperties"]["Binary"]
            .as_str()
            .ok_or_else(|| format!("{logical}: no Metadata.BuildProperties.Binary"))?;
        let policies = resolver
            .resolve(&resource["Properties"]["Policies"])?
            .unwrap_or(Value::Null);
        let mut statements = Vec::new();
        for policy in policies.as_array().into_iter().flatten() {
            if policy
                .as_str()
                .is_some_and(|arn| arn.starts_with("arn:") && arn.contains(":iam::aws:policy/"))
            {
                continue;
            }
            // A customer managed policy of the template's own (the drift
            // function's `DriftReadGapsPolicy`): read access for drift
            // detection, never relied on, as an AWS managed one.
            if policy.is_string() && managed.contains(policy) {
                continue;
            }
            if !policy.is_object() || policy.get("Statement").is_none() {
                return Err(format!(
                    "{logical}: policy {policy} is not an inline document (SAM policy templates and managed policies are not checked)"
                ));
            }
            statements.extend(statements_of(policy)?);
        }
        let role = resolver.get_att(&format!("{logical}Role"), "Arn")?;
        statements.extend(resolver.bucket_denies(role.as_str().unwrap_or_default())?);
        roles.insert(binary.to_owned(), statements);
    }
    Ok(roles)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn installation(partition: &str) -> Installation {
        let fixture = json!({
            "account": "123456789012", "table": "registry", "bucket": "artifacts",
            "stateMachineName": "reconcile",
            "webhookSecretArn": "arn:aws:secretsmanager:us-east-1:123456789012:secret:hook-AbCdEf",
            "cloudFormationRoleArns": ["arn:aws:iam::123456789012:role/cfn"],
            "targetAccountRoleArns": ["arn:aws:iam::210987654321:role/target"],
        });
        Installation::in_partition(partition, &fixture)
    }

    const SAM: &str = r#"
Parameters:
  Prefix: { Type: String, Default: "" }
  Roles: { Type: CommaDelimitedList, Default: "" }
Conditions:
  HasRoles: !Not [!Equals [!Join ["", !Ref Roles], ""]]
Resources:
  RegistryTable: { Type: AWS::DynamoDB::Table }
  ArtifactBucket: { Type: AWS::S3::Bucket }
  Fn:
    Type: AWS::Serverless::Function
    Metadata: { BuildProperties: { Binary: change-set } }
    Properties:
      Policies:
        - Statement:
            - Effect: Allow
              Action: [dynamodb:UpdateItem]
              Resource: !GetAtt RegistryTable.Arn
              Condition: { "ForAllValues:StringLike": { "dynamodb:LeadingKeys": ["stack#*"] } }
            - Effect: Allow
              Action: s3:GetObject
              Resource: !Sub "${ArtifactBucket.Arn}/templates/*"
            - Effect: Allow
              Action: cloudformation:DescribeStacks
              Resource: !Sub "arn:${AWS::Partition}:cloudformation:*:${AWS::AccountId}:stack/${Prefix}*/*"
            - !If
              - HasRoles
              - Effect: Allow
                Action: iam:PassRole
                Resource: !Ref Roles
                Condition: { StringEquals: { "iam:PassedToService": cloudformation.amazonaws.com } }
              - !Ref AWS::NoValue
  ArtifactBucketPolicy:
    Type: AWS::S3::BucketPolicy
    Properties:
      Bucket: !Ref ArtifactBucket
      PolicyDocument:
        Statement:
          - Effect: Deny
            Principal: "*"
            Action: s3:*
            Resource: !Sub "${ArtifactBucket.Arn}/*"
            Condition: { Bool: { "aws:SecureTransport": "false" } }
          - Effect: Deny
            Principal: "*"
            Action: s3:PutObject
            Resource: !Sub "${ArtifactBucket.Arn}/templates/*"
            Condition: { ArnNotEquals: { "aws:PrincipalArn": !GetAtt UploaderRole.Arn } }
          - Effect: Deny
            Principal: "*"
            Action: s3:PutObject
            Resource: !Sub "${ArtifactBucket.Arn}/artifacts/*"
            Condition: { ArnNotEquals: { "aws:PrincipalArn": !GetAtt FnRole.Arn } }
  UploaderRole: { Type: AWS::IAM::Role }
"#;

    fn request(action: &str, resource: &str, context: &[(&str, &str)]) -> Request {
        Request {
            action: action.into(),
            resource: resource.into(),
            context: context
                .iter()
                .map(|(k, v)| ((*k).to_owned(), vec![(*v).to_owned()]))
                .collect(),
        }
    }

    fn roles(partition: &str, overrides: &[(&str, Value)]) -> Vec<Statement> {
        let template = load_template(SAM).unwrap();
        let i = installation(partition);
        let overrides = overrides
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect();
        let resolver = Resolver::new(&template, &i, &overrides);
        sam_roles(&resolver).unwrap().remove("change-set").unwrap()
    }

    #[test]
    fn the_bucket_policy_denies_a_role_what_it_reserves_for_another() {
        let statements = roles("aws", &[]);
        let put = |key: &str| {
            request(
                "s3:PutObject",
                &format!("arn:aws:s3:::artifacts/{key}"),
                &[],
            )
        };
        // Fn's own grants do not include PutObject; with an allow for
        // everything, only the bucket's denies decide.
        let mut with_allow = statements.clone();
        with_allow.push(
            Statement::from_json(&json!({"Effect": "Allow", "Action": "*", "Resource": "*"}))
                .unwrap(),
        );
        assert!(
            !allowed(&with_allow, &put("templates/a")).unwrap(),
            "reserved for UploaderRole"
        );
        assert!(
            allowed(&with_allow, &put("artifacts/a")).unwrap(),
            "its own prefix"
        );
        assert!(
            allowed(
                &with_allow,
                &request("s3:GetObject", "arn:aws:s3:::artifacts/templates/a", &[])
            )
            .unwrap(),
            "TLS: the deny for plain HTTP does not apply"
        );
    }

    #[test]
    fn short_tags_resolve_to_the_installations_arns_in_each_partition() {
        let statements = roles("aws-cn", &[]);
        assert_eq!(
            statements.iter().filter(|s| s.allow).count(),
            3,
            "no roles: the PassRole statement is AWS::NoValue"
        );
        assert_eq!(
            statements[0].resources,
            ["arn:aws-cn:dynamodb:cn-north-1:123456789012:table/registry"]
        );
        assert_eq!(
            statements[1].resources,
            ["arn:aws-cn:s3:::artifacts/templates/*"]
        );
        assert_eq!(
            statements[2].resources,
            ["arn:aws-cn:cloudformation:*:123456789012:stack/*/*"]
        );
    }

    #[test]
    fn leading_keys_conditions_allow_only_their_prefixes() {
        let s = roles("aws", &[]);
        let table = "arn:aws:dynamodb:us-east-1:123456789012:table/registry";
        let update = |key| {
            request(
                "dynamodb:UpdateItem",
                table,
                &[("dynamodb:LeadingKeys", key)],
            )
        };
        assert!(allowed(&s, &update("stack#a")).unwrap());
        assert!(!allowed(&s, &update("delivery#a")).unwrap());
        assert!(!allowed(&s, &request("dynamodb:GetItem", table, &[])).unwrap());
    }

    #[test]
    fn pass_role_needs_the_listed_role_and_cloudformation_as_the_service() {
        let role = "arn:aws:iam::123456789012:role/cfn";
        let s = roles("aws", &[("Roles", json!([role]))]);
        let pass = |r, to| request("iam:PassRole", r, &[("iam:PassedToService", to)]);
        assert!(allowed(&s, &pass(role, "cloudformation.amazonaws.com")).unwrap());
        assert!(!allowed(&s, &pass(role, "lambda.amazonaws.com")).unwrap());
        assert!(
            !allowed(
                &s,
                &pass(
                    "arn:aws:iam::123456789012:role/admin",
                    "cloudformation.amazonaws.com"
                )
            )
            .unwrap()
        );
    }

    #[test]
    fn the_stack_prefix_scopes_stack_arns() {
        let s = roles("aws", &[("Prefix", json!("prod-"))]);
        let describe = |name: &str| {
            request(
                "cloudformation:DescribeStacks",
                &format!("arn:aws:cloudformation:eu-west-1:123456789012:stack/{name}/id"),
                &[],
            )
        };
        assert!(allowed(&s, &describe("prod-orders")).unwrap());
        assert!(!allowed(&s, &describe("dev-orders")).unwrap());
    }

    #[test]
    fn an_explicit_deny_wins_and_actions_match_without_case() {
        let allow =
            Statement::from_json(&json!({"Effect": "Allow", "Action": "S3:Get*", "Resource": "*"}))
                .unwrap();
        let deny = Statement::from_json(&json!({"Effect": "Deny", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::b/secret/*"})).unwrap();
        let get = |key: &str| request("s3:GetObject", &format!("arn:aws:s3:::b/{key}"), &[]);
        assert!(allowed(&[allow.clone(), deny.clone()], &get("public/x")).unwrap());
        assert!(!allowed(&[allow, deny], &get("secret/x")).unwrap());
    }

    #[test]
    fn wildcards_follow_iam() {
        assert!(glob("stack/*/*", "stack/orders/123"));
        assert!(glob("stack/prod-*/*", "stack/prod-a/1"));
        assert!(!glob("stack/prod-*/*", "stack/dev-a/1"));
        assert!(glob("a?c", "abc"));
        assert!(!glob("a?c", "ac"));
        assert!(glob("*", ""));
    }

    #[test]
    fn unsupported_operators_and_functions_are_errors() {
        let s = Statement::from_json(&json!({"Effect": "Allow", "Action": "*", "Resource": "*", "Condition": {"NumericLessThan": {"k": "1"}}})).unwrap();
        assert!(
            s.matches(&request("s3:GetObject", "x", &[("k", "0")]))
                .is_err()
        );
        let template = json!({"Resources": {}});
        let i = installation("aws");
        let resolver = Resolver::new(&template, &i, &BTreeMap::new());
        assert!(resolver.resolve(&json!({"Fn::ImportValue": "x"})).is_err());
    }
}
