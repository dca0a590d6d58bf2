//! One AWS call as the recorder saw it: the operation and the resource it
//! names, read off the wire (the request the SDK sends), so the record is
//! what AWS would authorize, not what the code meant to send.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use stacksync::ownership::INSTALLATION_TAG;
use stacksync::registry::schema::PK;

/// One AWS API call made by one function during one test.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Call {
    /// The test that made it (its name, as the test runner passed it).
    pub test: String,
    /// The function whose role the call runs under (`change-set`, `webhook`, …).
    pub function: String,
    /// The signing name of the service: `dynamodb`, `s3`, `cloudformation`, …
    pub service: String,
    /// The API operation: `UpdateItem`, `HeadObject`, `CreateChangeSet`, …
    pub operation: String,
    /// The region the request was signed for.
    pub region: String,
    /// The HTTP status of the answer (0: no answer).
    pub status: u16,
    /// DynamoDB: the table, the index of a query, and the item's partition key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub table: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// DynamoDB, for fine-grained access control: the top-level attributes
    /// the request names (`dynamodb:Attributes`: its expressions, its item,
    /// its key), and its `Select` and `ReturnValues`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attributes: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub select: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub return_values: Option<String>,
    /// S3: the bucket, the object key and version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bucket: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// CloudFormation: the stack (name or id), the service role passed
    /// (`RoleARN`), the template URL, the template's transforms, and
    /// whether tags were given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stack: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role_arn: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub template_url: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub transforms: Vec<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub tagged: bool,
    /// Signed with temporary credentials from `sts:AssumeRole` (an access
    /// key `ASIA…`): made as an `assumeRoleArn` target role in its own
    /// account, not as the function's role.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub assumed: bool,
    /// CloudFormation, for IAM's tag conditions: the installation (registry
    /// table) the caller runs as, the `stacksync:installation` tag the
    /// request gives the stack (`aws:RequestTag/…`), and the one the stack
    /// had when the call was made (`aws:ResourceTag/…`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub installation: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_installation: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stack_installation: Option<String>,
    /// Anything else the call names: a state machine or execution ARN, a
    /// secret, a parameter, a role to assume, an event bus.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// EventBridge `PutEvents`: the events' `Source` (IAM's `events:source`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event_source: Option<String>,
}

/// What the recorder needs of an HTTP request.
#[derive(Debug, Clone, Copy)]
pub struct Wire<'a> {
    pub method: &'a str,
    pub uri: &'a str,
    pub authorization: Option<&'a str>,
    pub target: Option<&'a str>,
    pub copy_source: Option<&'a str>,
    pub body: &'a [u8],
}

/// The calls one HTTP request makes, as IAM sees them: one, or one per item
/// of a `TransactWriteItems` (each item is authorized on its own).
pub fn from_wire(wire: &Wire<'_>) -> Result<Vec<Call>, String> {
    let (service, region) = signing_scope(wire.authorization)
        .ok_or_else(|| format!("{} {}: no SigV4 credential scope", wire.method, wire.uri))?;
    let mut call = Call {
        service: service.clone(),
        region,
        assumed: access_key(wire.authorization).is_some_and(|k| k.starts_with("ASIA")),
        ..Call::default()
    };
    if let Some(target) = wire.target {
        let operation = target.rsplit('.').next().unwrap_or(target).to_owned();
        let body: Value = serde_json::from_slice(wire.body).unwrap_or(Value::Null);
        call.operation = operation;
        return Ok(json_protocol(call, &body));
    }
    if service == "s3" {
        return rest_s3(call, wire).map(|c| vec![c]);
    }
    // The query protocol (CloudFormation, STS, IAM): a form with Action=.
    let form = parse_form(wire.body);
    call.operation = form
        .get("Action")
        .cloned()
        .ok_or_else(|| format!("{service}: a request without Action"))?;
    call.stack = form.get("StackName").cloned();
    call.role_arn = form.get("RoleARN").cloned();
    call.template_url = form.get("TemplateURL").cloned();
    call.tagged = form.keys().any(|k| k.starts_with("Tags.member."));
    call.request_installation = form
        .iter()
        .find(|(k, v)| {
            k.starts_with("Tags.member.") && k.ends_with(".Key") && *v == INSTALLATION_TAG
        })
        .and_then(|(k, _)| form.get(&format!("{}.Value", k.trim_end_matches(".Key"))))
        .cloned();
    call.target = form.get("RoleArn").cloned();
    Ok(vec![call])
}

/// `Credential=AKID/…` → AKID.
fn access_key(authorization: Option<&str>) -> Option<&str> {
    let credential = authorization?.split("Credential=").nth(1)?;
    credential.split('/').next()
}

/// `Credential=AKID/DATE/REGION/SERVICE/aws4_request` → (service, region).
fn signing_scope(authorization: Option<&str>) -> Option<(String, String)> {
    let credential = authorization?.split("Credential=").nth(1)?;
    let scope: Vec<&str> = credential.split([',', ' ']).next()?.split('/').collect();
    match scope.as_slice() {
        [_, _, region, service, "aws4_request"] => {
            Some(((*service).to_owned(), (*region).to_owned()))
        }
        _ => None,
    }
}

fn json_protocol(call: Call, body: &Value) -> Vec<Call> {
    let text = |v: &Value| v.as_str().map(str::to_owned);
    let key_of = |item: &Value| text(&item[PK]["S"]);
    match call.operation.as_str() {
        "TransactWriteItems" => body["TransactItems"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|item| {
                let (kind, op) = item.as_object()?.iter().next()?;
                let operation = match kind.as_str() {
                    "Put" => "PutItem",
                    "Update" => "UpdateItem",
                    "Delete" => "DeleteItem",
                    _ => "ConditionCheckItem",
                };
                Some(Call {
                    operation: operation.to_owned(),
                    table: text(&op["TableName"]),
                    key: key_of(&op["Key"]).or_else(|| key_of(&op["Item"])),
                    attributes: attributes_named(op),
                    return_values: text(&op["ReturnValues"]),
                    ..call.clone()
                })
            })
            .collect(),
        _ => vec![Call {
            table: text(&body["TableName"]).or_else(|| {
                // BatchWriteItem / BatchGetItem: the one table they name.
                body["RequestItems"]
                    .as_object()
                    .and_then(|m| m.keys().next().cloned())
            }),
            index: text(&body["IndexName"]),
            key: key_of(&body["Key"]).or_else(|| key_of(&body["Item"])),
            attributes: attributes_named(body),
            // A projection without `Select` selects those attributes.
            select: text(&body["Select"]).or_else(|| {
                body["ProjectionExpression"]
                    .is_string()
                    .then(|| "SPECIFIC_ATTRIBUTES".to_owned())
            }),
            return_values: text(&body["ReturnValues"]),
            target: text(&body["stateMachineArn"])
                .or_else(|| text(&body["executionArn"]))
                .or_else(|| text(&body["SecretId"]))
                .or_else(|| text(&body["Name"]))
                .or_else(|| text(&body["Entries"][0]["EventBusName"])),
            event_source: text(&body["Entries"][0]["Source"]),
            ..call
        }],
    }
}

/// The top-level attributes a DynamoDB request names: those of its
/// expressions (through `ExpressionAttributeNames`), of its item and of its
/// key, sorted, each once.
fn attributes_named(request: &Value) -> Vec<String> {
    let aliases = &request["ExpressionAttributeNames"];
    let mut names = std::collections::BTreeSet::new();
    for field in [
        "UpdateExpression",
        "ConditionExpression",
        "ProjectionExpression",
        "KeyConditionExpression",
        "FilterExpression",
    ] {
        let Some(expression) = request[field].as_str() else {
            continue;
        };
        names.extend(top_level_names(expression, aliases));
    }
    for field in ["Item", "Key"] {
        if let Some(map) = request[field].as_object() {
            names.extend(map.keys().cloned());
        }
    }
    names.into_iter().collect()
}

/// The top-level attribute of each path in an expression: `#a.#b[0]` → a
/// (aliases resolved), a bare name → itself; keywords, functions and
/// `:values` left out.
fn top_level_names(expression: &str, aliases: &Value) -> Vec<String> {
    const WORDS: [&str; 16] = [
        "SET",
        "REMOVE",
        "ADD",
        "DELETE",
        "AND",
        "OR",
        "NOT",
        "BETWEEN",
        "IN",
        "attribute_exists",
        "attribute_not_exists",
        "attribute_type",
        "begins_with",
        "contains",
        "size",
        "if_not_exists",
    ];
    let mut out = Vec::new();
    let mut chars = expression.char_indices().peekable();
    // Whether the path being read is past its first part (after `.` or `[`).
    let mut inside_path = false;
    while let Some((start, c)) = chars.next() {
        let word = c == '#' || c == ':' || c.is_ascii_alphabetic() || c == '_';
        if !word {
            inside_path =
                matches!(c, '.' | '[') || (inside_path && (c == ']' || c.is_ascii_digit()));
            continue;
        }
        let mut end = start + c.len_utf8();
        while let Some(&(i, n)) = chars.peek() {
            if n.is_ascii_alphanumeric() || n == '_' {
                end = i + n.len_utf8();
                chars.next();
            } else {
                break;
            }
        }
        let token = &expression[start..end];
        let first_of_path = !inside_path;
        inside_path = false;
        let follows_call = chars.peek().is_some_and(|&(_, n)| n == '(');
        if !first_of_path || token.starts_with(':') || follows_call || WORDS.contains(&token) {
            continue;
        }
        let name = match token.strip_prefix('#') {
            Some(_) => aliases[token].as_str().unwrap_or(token).to_owned(),
            None => token.to_owned(),
        };
        out.push(name);
    }
    out
}

/// S3's REST protocol (path style, as the emulator is addressed): the
/// operation from the method, the path and the query.
fn rest_s3(mut call: Call, wire: &Wire<'_>) -> Result<Call, String> {
    let after_host = wire
        .uri
        .split_once("://")
        .map_or(wire.uri, |(_, rest)| rest);
    let path_and_query = after_host.find('/').map_or("", |i| &after_host[i + 1..]);
    let (path, query) = path_and_query
        .split_once('?')
        .unwrap_or((path_and_query, ""));
    let query = parse_form(query.as_bytes());
    let (bucket, object) = match path.split_once('/') {
        Some((b, k)) if !k.is_empty() => (b, Some(percent_decode(k))),
        _ => (path.trim_end_matches('/'), None),
    };
    call.bucket = Some(bucket.to_owned());
    call.object = object.clone();
    call.version = query.get("versionId").cloned();
    let on_object = object.is_some();
    call.operation = match (wire.method, on_object) {
        _ if query.contains_key("x-id") => query["x-id"].clone(),
        ("HEAD", true) => "HeadObject".into(),
        ("GET", true) => "GetObject".into(),
        ("PUT", true) if wire.copy_source.is_some() => "CopyObject".into(),
        ("PUT", true) => "PutObject".into(),
        ("DELETE", true) => "DeleteObject".into(),
        ("HEAD", false) => "HeadBucket".into(),
        ("GET", false) if query.get("list-type").map(String::as_str) == Some("2") => {
            "ListObjectsV2".into()
        }
        ("GET", false) if query.contains_key("versioning") => "GetBucketVersioning".into(),
        ("PUT", false) if query.is_empty() => "CreateBucket".into(),
        (method, _) => {
            return Err(format!(
                "s3: {method} {path}?{query:?}: an operation the recorder does not know"
            ));
        }
    };
    Ok(call)
}

/// `a=1&b=x%2Fy` → {a: 1, b: x/y}.
pub fn parse_form(body: &[u8]) -> BTreeMap<String, String> {
    String::from_utf8_lossy(body)
        .split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

/// `a/b c` → `a%2Fb%20c`: a value for a form (every byte but the
/// unreserved ones escaped).
pub fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(b).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

/// `a%2Fb+c` → `a/b c`: a form-encoded value (a `%` that starts no
/// escape stays as it is).
pub fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The `Transform` of a template (YAML or JSON): `AWS::Serverless-2016-10-31`,
/// a list of them, or none.
pub fn transforms(template: &[u8]) -> Vec<String> {
    let Ok(value) = serde_yaml_ng::from_slice::<serde_yaml_ng::Value>(template) else {
        return Vec::new();
    };
    match &value["Transform"] {
        serde_yaml_ng::Value::String(s) => vec![s.clone()],
        serde_yaml_ng::Value::Sequence(items) => items
            .iter()
            .filter_map(|t| {
                t.as_str()
                    .map(str::to_owned)
                    .or_else(|| t["Name"].as_str().map(str::to_owned))
            })
            .collect(),
        serde_yaml_ng::Value::Mapping(_) => value["Transform"]["Name"]
            .as_str()
            .map(|s| vec![s.to_owned()])
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auth(service: &str) -> String {
        format!(
            "AWS4-HMAC-SHA256 Credential=AKID/20260101/us-east-1/{service}/aws4_request, SignedHeaders=host, Signature=0"
        )
    }

    fn wire<'a>(
        method: &'a str,
        uri: &'a str,
        authorization: &'a str,
        target: Option<&'a str>,
        body: &'a [u8],
    ) -> Wire<'a> {
        Wire {
            method,
            uri,
            authorization: Some(authorization),
            target,
            copy_source: None,
            body,
        }
    }

    #[test]
    fn a_dynamodb_update_names_its_table_and_partition_key() {
        let a = auth("dynamodb");
        let body = br#"{"TableName":"reg","Key":{"pk":{"S":"stack#orders"}},"UpdateExpression":"SET x = :x"}"#;
        let calls = from_wire(&wire(
            "POST",
            "http://127.0.0.1:5000/",
            &a,
            Some("DynamoDB_20120810.UpdateItem"),
            body,
        ))
        .unwrap();
        assert_eq!(calls.len(), 1);
        let c = &calls[0];
        assert_eq!(
            (c.service.as_str(), c.operation.as_str(), c.region.as_str()),
            ("dynamodb", "UpdateItem", "us-east-1")
        );
        assert_eq!(c.table.as_deref(), Some("reg"));
        assert_eq!(c.key.as_deref(), Some("stack#orders"));
    }

    #[test]
    fn a_transaction_is_one_call_per_item() {
        let a = auth("dynamodb");
        let body = br#"{"TransactItems":[{"Put":{"TableName":"reg","Item":{"pk":{"S":"stack#a"}}}},{"Update":{"TableName":"reg","Key":{"pk":{"S":"stack#b"}}}},{"ConditionCheck":{"TableName":"reg","Key":{"pk":{"S":"stack#c"}}}}]}"#;
        let calls = from_wire(&wire(
            "POST",
            "http://h/",
            &a,
            Some("DynamoDB_20120810.TransactWriteItems"),
            body,
        ))
        .unwrap();
        let ops: Vec<(&str, &str)> = calls
            .iter()
            .map(|c| (c.operation.as_str(), c.key.as_deref().unwrap()))
            .collect();
        assert_eq!(
            ops,
            [
                ("PutItem", "stack#a"),
                ("UpdateItem", "stack#b"),
                ("ConditionCheckItem", "stack#c")
            ]
        );
    }

    #[test]
    fn a_cloudformation_form_names_stack_role_template_and_tags() {
        let a = auth("cloudformation");
        let body = b"Action=CreateChangeSet&Version=2010-05-15&StackName=orders&RoleARN=arn%3Aaws%3Aiam%3A%3A1%3Arole%2Fcfn&TemplateURL=http%3A%2F%2Flocalhost%3A5000%2Fb%2Ftemplates%2Fab&Tags.member.1.Key=team&Tags.member.1.Value=a+b";
        let c = &from_wire(&wire("POST", "http://h/", &a, None, body)).unwrap()[0];
        assert_eq!(c.operation, "CreateChangeSet");
        assert_eq!(c.stack.as_deref(), Some("orders"));
        assert_eq!(c.role_arn.as_deref(), Some("arn:aws:iam::1:role/cfn"));
        assert_eq!(
            c.template_url.as_deref(),
            Some("http://localhost:5000/b/templates/ab")
        );
        assert!(c.tagged);
        assert!(!c.assumed, "the function's own credentials");
        assert_eq!(
            c.request_installation, None,
            "no stacksync:installation tag"
        );
        let body = b"Action=CreateChangeSet&StackName=orders&Tags.member.1.Key=team&Tags.member.1.Value=a&Tags.member.2.Key=stacksync%3Ainstallation&Tags.member.2.Value=registry-a";
        let c = &from_wire(&wire("POST", "http://h/", &a, None, body)).unwrap()[0];
        assert_eq!(c.request_installation.as_deref(), Some("registry-a"));
    }

    #[test]
    fn a_dynamodb_request_names_the_top_level_attributes_of_its_expressions_item_and_key() {
        let aliases = serde_json::json!({"#status": "status", "#watch": "watch", "#n": "nextReconcileAt", "#p": "pk"});
        assert_eq!(
            top_level_names(
                "SET #status = :s, #watch.#phase = :p REMOVE #n, leaseOwner",
                &aliases
            ),
            ["status", "watch", "nextReconcileAt", "leaseOwner"]
        );
        assert_eq!(
            top_level_names(
                "attribute_exists(#p) AND (attribute_not_exists(#n) OR #n <= :now) AND size(tags[0].x) > :z",
                &aliases
            ),
            ["pk", "nextReconcileAt", "nextReconcileAt", "tags"]
        );
        let body = serde_json::json!({
            "Key": {"pk": {"S": "stack#a"}},
            "UpdateExpression": "SET #n = :now",
            "ConditionExpression": "attribute_exists(#p)",
            "ExpressionAttributeNames": {"#n": "nextReconcileAt", "#p": "pk"},
        });
        assert_eq!(attributes_named(&body), ["nextReconcileAt", "pk"]);
    }

    #[test]
    fn a_call_signed_with_assumed_role_credentials_is_told_apart() {
        let a = auth("cloudformation").replace("AKID", "ASIATCH6YDSY5XYY2LA3");
        let body = b"Action=DescribeStacks&Version=2010-05-15&StackName=orders";
        let c = &from_wire(&wire("POST", "http://h/", &a, None, body)).unwrap()[0];
        assert!(c.assumed);
    }

    #[test]
    fn s3_operations_come_from_method_path_and_query() {
        let a = auth("s3");
        let op = |method: &str, uri: &str| {
            from_wire(&wire(method, uri, &a, None, b"")).unwrap()[0].clone()
        };
        let head = op("HEAD", "http://127.0.0.1:5/bkt/templates/ab%2Bc");
        assert_eq!(head.operation, "HeadObject");
        assert_eq!(head.bucket.as_deref(), Some("bkt"));
        assert_eq!(head.object.as_deref(), Some("templates/ab+c"));
        assert_eq!(
            op(
                "GET",
                "http://127.0.0.1:5/bkt/a/b?x-id=GetObject&versionId=v1"
            )
            .version,
            Some("v1".into())
        );
        assert_eq!(op("PUT", "http://127.0.0.1:5/bkt/a").operation, "PutObject");
        assert_eq!(
            op("PUT", "http://127.0.0.1:5/bkt").operation,
            "CreateBucket"
        );
        assert_eq!(
            op("GET", "http://127.0.0.1:5/bkt?list-type=2&prefix=a").operation,
            "ListObjectsV2"
        );
        assert!(
            from_wire(&wire(
                "POST",
                "http://127.0.0.1:5/bkt?select",
                &a,
                None,
                b""
            ))
            .is_err()
        );
    }

    #[test]
    fn a_request_without_a_credential_scope_is_refused() {
        let w = Wire {
            method: "GET",
            uri: "http://h/",
            authorization: None,
            target: None,
            copy_source: None,
            body: b"",
        };
        assert!(from_wire(&w).is_err());
    }

    #[test]
    fn transforms_are_read_from_yaml_and_json_templates() {
        assert_eq!(
            transforms(b"Transform: AWS::Serverless-2016-10-31\nResources: {}\n"),
            ["AWS::Serverless-2016-10-31"]
        );
        assert_eq!(
            transforms(br#"{"Transform": ["AWS::LanguageExtensions", {"Name": "AWS::Include"}]}"#),
            ["AWS::LanguageExtensions", "AWS::Include"]
        );
        assert!(transforms(b"Resources:\n  Q: {Type: AWS::SQS::Queue}\n").is_empty());
    }
}
