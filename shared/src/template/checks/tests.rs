//! What a template makes certain to fail, and what it does not.

use std::collections::BTreeMap;

use super::check;
use crate::spec::fixtures::spec;
use crate::spec::{Capability, ParameterValue, StackSpec, ValueRef};

/// `orders`, deploying `t.yaml`, giving `given` (text values).
fn entry(given: &[&str], capabilities: &[Capability]) -> StackSpec {
    let mut s = spec("orders");
    s.source.path = "t.yaml".into();
    for name in given {
        s.parameters.insert((*name).into(), "1".into());
    }
    s.capabilities = capabilities.to_vec();
    s
}

fn checked(s: &StackSpec, template: &str) -> Vec<String> {
    check(s, "t.yaml", template.as_bytes(), &BTreeMap::new())
}

const ROLE: &str = "Resources:\n  Role:\n    Type: AWS::IAM::Role\n    Properties: {AssumeRolePolicyDocument: {}}\n";

#[test]
fn a_parameter_without_default_that_nothing_gives_is_named() {
    let template = "Parameters:\n  DbPassword: {Type: String, NoEcho: true}\n  Days: {Type: Number, Default: 7}\nResources:\n  Q: {Type: AWS::SQS::Queue}\n";
    assert_eq!(
        checked(&entry(&[], &[]), template),
        ["template t.yaml: parameter DbPassword has no Default and the entry gives none"]
    );
    let mut with_file = entry(&[], &[]);
    with_file.parameter_file = Some("p.json".into());
    assert_eq!(
        checked(&with_file, template),
        [
            "template t.yaml: parameter DbPassword has no Default and neither the entry nor \
             parameter file p.json gives one"
        ]
    );
    // The same in JSON.
    let json = r#"{"Parameters": {"DbPassword": {"Type": "String"}}, "Resources": {"Q": {"Type": "AWS::SQS::Queue"}}}"#;
    assert_eq!(checked(&entry(&[], &[]), json).len(), 1);
}

#[test]
fn a_parameter_the_template_does_not_declare_is_named_with_who_gives_it() {
    let template = "Parameters:\n  Days: {Type: Number, Default: 7}\nResources:\n  Q: {Type: AWS::SQS::Queue}\n";
    let mut s = entry(&["Days", "Foo"], &[]);
    s.parameter_file = Some("p.json".into());
    let file = BTreeMap::from([("Bar".to_owned(), "2".to_owned())]);
    assert_eq!(
        check(&s, "t.yaml", template.as_bytes(), &file),
        [
            "template t.yaml: the entry gives parameter Foo, which the template does not declare",
            "template t.yaml: parameter file p.json gives parameter Bar, which the template does \
             not declare",
        ]
    );
    // A template without Parameters declares none.
    assert_eq!(
        checked(
            &entry(&["Foo"], &[]),
            ROLE.replace("Role:\n", "Q:\n")
                .replace("AWS::IAM::Role", "AWS::SQS::Queue")
                .as_str()
        ),
        ["template t.yaml: the entry gives parameter Foo, which the template does not declare"]
    );
}

#[test]
fn iam_resources_need_capability_iam_and_named_ones_named_iam() {
    assert_eq!(
        checked(&entry(&[], &[]), ROLE),
        ["template t.yaml: declares AWS::IAM::Role (Role) but capabilities lack CAPABILITY_IAM"]
    );
    for enough in [Capability::Iam, Capability::NamedIam] {
        assert!(checked(&entry(&[], &[enough]), ROLE).is_empty(), "{enough}");
    }
    let named = "Resources:\n  Role:\n    Type: AWS::IAM::Role\n    Properties: {RoleName: !Sub '${AWS::StackName}-r'}\n  User:\n    Type: AWS::IAM::User\n    Properties: {UserName: u}\n  Policy:\n    Type: AWS::IAM::Policy\n    Properties: {PolicyName: p, PolicyDocument: {}}\n";
    let wanted = [
        "template t.yaml: declares AWS::IAM::Role (Role) with RoleName, AWS::IAM::User (User) \
         with UserName but capabilities lack CAPABILITY_NAMED_IAM",
    ];
    assert_eq!(checked(&entry(&[], &[]), named), wanted);
    assert_eq!(checked(&entry(&[], &[Capability::Iam]), named), wanted);
    assert!(checked(&entry(&[], &[Capability::NamedIam]), named).is_empty());
    // An inline policy's PolicyName names no IAM resource: CAPABILITY_IAM.
    let policy = "Resources:\n  P:\n    Type: AWS::IAM::Policy\n    Properties: {PolicyName: p, PolicyDocument: {}}\n";
    assert_eq!(
        checked(&entry(&[], &[]), policy),
        ["template t.yaml: declares AWS::IAM::Policy (P) but capabilities lack CAPABILITY_IAM"]
    );
    assert!(checked(&entry(&[], &[Capability::Iam]), policy).is_empty());
    // Many: the first three named.
    let many: String = (0..5)
        .map(|i| format!("  U{i}: {{Type: AWS::IAM::User}}\n"))
        .collect();
    assert_eq!(
        checked(&entry(&[], &[]), &format!("Resources:\n{many}")),
        [
            "template t.yaml: declares AWS::IAM::User (U0), AWS::IAM::User (U1), AWS::IAM::User \
             (U2) and 2 more but capabilities lack CAPABILITY_IAM"
        ]
    );
}

#[test]
fn a_template_that_does_not_parse_is_one_problem_with_its_line() {
    let problems = checked(
        &entry(&["Foo"], &[]),
        "Resources:\n  Q: {Type: AWS::SQS::Queue}\n  R: [unclosed\n",
    );
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].starts_with("template t.yaml is not valid YAML or JSON")
            && problems[0].contains("line 3"),
        "{problems:?}"
    );
}

#[test]
fn values_read_at_run_time_or_from_the_file_count_as_given() {
    let template = "Parameters:\n  A: {Type: String}\n  B: {Type: String, NoEcho: true}\n  C: {Type: String, NoEcho: true}\n  D: {Type: String}\n  E: {Type: 'AWS::SSM::Parameter::Value<String>', Default: /x}\n  F: {Type: String, Default: ''}\nResources:\n  Q: {Type: AWS::SQS::Queue}\n";
    let mut s = entry(&[], &[]);
    s.parameters.insert(
        "B".into(),
        ParameterValue::From(ValueRef::Secret {
            secret: "db".into(),
            key: Some("pw".into()),
        }),
    );
    s.parameters.insert(
        "C".into(),
        ParameterValue::From(ValueRef::Ssm { ssm: "/pw".into() }),
    );
    s.parameters.insert(
        "D".into(),
        ParameterValue::From(ValueRef::FromStack {
            from_stack: "net".into(),
            output: "VpcId".into(),
        }),
    );
    s.parameter_file = Some("p.json".into());
    let file = BTreeMap::from([("A".to_owned(), "a".to_owned())]);
    assert_eq!(
        check(&s, "t.yaml", template.as_bytes(), &file),
        Vec::<String>::new()
    );
}

#[test]
fn what_a_macro_may_change_is_not_judged() {
    // A macro may add parameters, defaults and resources, or take them away.
    let transforms = [
        "Transform: AWS::Include\n",
        "Transform: [AWS::LanguageExtensions, AWS::Serverless-2016-10-31]\n",
        "Transform: MyMacro\n",
        "Transform: {Name: AWS::Include, Parameters: {Location: s3://b/k}}\n",
    ];
    let body = "Parameters:\n  Needed: {Type: String}\nResources:\n  Role:\n    Type: AWS::IAM::Role\n    Properties: {RoleName: r}\n";
    for transform in transforms {
        let template = format!("{transform}{body}");
        assert!(
            checked(&entry(&["Foo"], &[]), &template).is_empty(),
            "{transform}"
        );
    }
    let included = format!(
        "{body}  More:\n    Fn::Transform: {{Name: AWS::Include, Parameters: {{Location: s3://b/k}}}}\n"
    );
    assert!(checked(&entry(&["Foo"], &[]), &included).is_empty());
    // The SAM transform keeps the template's parameters and IAM resources:
    // those are judged; what it generates (a function's role) is not.
    let sam = format!(
        "Transform: AWS::Serverless-2016-10-31\n{body}  Fn:\n    Type: AWS::Serverless::Function\n    Properties: {{Runtime: python3.12, Handler: a.b, InlineCode: x}}\n"
    );
    assert_eq!(
        checked(&entry(&[], &[]), &sam),
        [
            "template t.yaml: parameter Needed has no Default and the entry gives none",
            "template t.yaml: declares AWS::IAM::Role (Role) with RoleName but capabilities \
             lack CAPABILITY_NAMED_IAM",
        ]
    );
    let fn_only = "Transform: AWS::Serverless-2016-10-31\nResources:\n  Fn:\n    Type: AWS::Serverless::Function\n    Properties: {Runtime: python3.12, Handler: a.b, InlineCode: x}\n";
    assert!(checked(&entry(&[], &[]), fn_only).is_empty());
}

#[test]
fn conditional_resources_and_names_are_not_judged() {
    let template = "Conditions:\n  Prod: !Equals [a, b]\nResources:\n  Role:\n    Type: AWS::IAM::Role\n    Condition: Prod\n    Properties: {RoleName: r}\n  Other:\n    Type: AWS::IAM::Role\n    Properties:\n      RoleName: !If [Prod, r, !Ref AWS::NoValue]\n  Third:\n    Type: AWS::IAM::Role\n    Properties:\n      RoleName: {Ref: AWS::NoValue}\n";
    // Other and Third are IAM resources all the same; not certainly named.
    assert_eq!(
        checked(&entry(&[], &[]), template),
        [
            "template t.yaml: declares AWS::IAM::Role (Other), AWS::IAM::Role (Third) but \
             capabilities lack CAPABILITY_IAM"
        ]
    );
    assert!(checked(&entry(&[], &[Capability::Iam]), template).is_empty());
    let json = r#"{"Resources": {"R": {"Type": "AWS::IAM::Role", "Properties": {"RoleName": {"Fn::If": ["P", "r", {"Ref": "AWS::NoValue"}]}}}}}"#;
    assert!(checked(&entry(&[], &[Capability::Iam]), json).is_empty());
}

#[test]
fn a_plain_template_the_entry_fits_has_nothing_to_say() {
    let template = "Parameters:\n  Days: {Type: Number}\nResources:\n  Q: {Type: AWS::SQS::Queue}\n  Role:\n    Type: AWS::IAM::Role\n    Properties: {RoleName: r}\n  Nested: {Type: AWS::CloudFormation::Stack, Properties: {TemplateURL: 'https://x'}}\n";
    assert!(checked(&entry(&["Days"], &[Capability::NamedIam]), template).is_empty());
}
