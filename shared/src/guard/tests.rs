use super::*;
use std::collections::BTreeMap;

const BUCKETS: &str = r#"# Buckets are encrypted and private.
let buckets = Resources.*[ Type == 'AWS::S3::Bucket' ]

rule BUCKET_ENCRYPTED when %buckets !empty {
    %buckets.Properties.BucketEncryption exists <<Buckets must enable server-side encryption>>
}

# Versioning is wanted, not required.
# severity: warn
rule BUCKET_VERSIONED when %buckets !empty {
    %buckets.Properties.VersioningConfiguration.Status == 'Enabled'
}
"#;

const TAGGED: &str = r#"rule COST_CENTER_TAGGED {
    StackSync.Tags.CostCenter exists <<every stack names its cost centre (tag CostCenter)>>
}
"#;

const TEMPLATE: &str = r#"AWSTemplateFormatVersion: "2010-09-09"
Resources:
  Plain:
    Type: AWS::S3::Bucket
    Properties:
      BucketName: !Sub "${AWS::StackName}-plain"
  Locked:
    Type: AWS::S3::Bucket
    Properties:
      BucketEncryption:
        ServerSideEncryptionConfiguration:
          - ServerSideEncryptionByDefault: { SSEAlgorithm: AES256 }
      VersioningConfiguration: { Status: Enabled }
"#;

fn set(files: &[(&str, &str)]) -> RuleSet {
    RuleSet {
        origin: "rules@abc1234".into(),
        files: files
            .iter()
            .map(|(p, t)| RuleFile {
                path: (*p).into(),
                text: (*t).into(),
            })
            .collect(),
    }
}

fn stack(tags: &[(&str, &str)]) -> Value {
    let tags = tags
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let parameters = BTreeMap::from([
        ("Size".to_owned(), "small".to_owned()),
        ("Token".to_owned(), "s3cr3t".to_owned()),
    ]);
    let secrets = BTreeSet::from(["Token".to_owned()]);
    input(TEMPLATE.as_bytes(), "app", &parameters, &secrets, &tags).unwrap()
}

#[test]
fn a_blocking_rule_broken_names_rule_resource_file_and_its_own_message() {
    let report = check(&[set(&[("s3.guard", BUCKETS)])], &stack(&[])).unwrap();
    assert!(!report.passes());
    assert_eq!(report.rules, 2);
    assert_eq!(report.violations.len(), 1, "{report:?}");
    let v = &report.violations[0];
    assert_eq!(v.rule, "BUCKET_ENCRYPTED");
    assert_eq!(
        v.resources,
        vec!["Plain".to_owned()],
        "only the bucket that breaks it"
    );
    assert_eq!(v.message, "Buckets must enable server-side encryption");
    assert_eq!(v.file, "rules@abc1234:s3.guard");
    assert_eq!(
        report
            .warnings
            .iter()
            .map(|w| w.rule.as_str())
            .collect::<Vec<_>>(),
        ["BUCKET_VERSIONED"],
        "a comment block saying severity: warn makes its rule a warning"
    );
    assert_eq!(
        report.summary(),
        "policy: 1 rule broken, 1 warning (2 rules in 1 rule set)"
    );
    assert!(
        report
            .violation_message()
            .contains("BUCKET_ENCRYPTED on Plain: Buckets must enable"),
        "{}",
        report.violation_message()
    );
}

#[test]
fn the_stacks_parameters_and_tags_are_input_and_a_secret_is_never_given() {
    let input = stack(&[]);
    assert_eq!(input[INPUT_KEY]["StackName"], "app");
    assert_eq!(input[INPUT_KEY]["Parameters"]["Size"], "small");
    assert_eq!(input[INPUT_KEY]["Parameters"]["Token"], "****");
    assert_eq!(
        input["Resources"]["Plain"]["Properties"]["BucketName"],
        serde_json::json!({"Fn::Sub": "${AWS::StackName}-plain"}),
        "short forms read as CloudFormation reads them"
    );
    let sets = [set(&[("tags.guard", TAGGED)])];
    let report = check(&sets, &input).unwrap();
    assert_eq!(report.violations[0].rule, "COST_CENTER_TAGGED");
    assert!(report.violations[0].resources.is_empty());
    let report = check(&sets, &stack(&[("CostCenter", "42")])).unwrap();
    assert!(report.passes(), "{report:?}");
    assert_eq!(report.summary(), "policy: passed (1 rule in 1 rule set)");
}

#[test]
fn a_file_whose_first_line_says_warn_warns_for_every_rule() {
    let text = format!("# severity: warn\n{TAGGED}");
    let report = check(&[set(&[("tags.guard", &text)])], &stack(&[])).unwrap();
    assert!(report.passes());
    assert_eq!(report.warnings.len(), 1);
    assert_eq!(report.lines()[0].chars().next(), Some('!'));
}

#[test]
fn a_rule_file_that_does_not_parse_is_named_with_its_line_and_column() {
    let broken = "let b = Resources.*[ Type == 'AWS::S3::Bucket' ]\n\nrule R when %b !empty {\n  %b.Properties.X ==\n}\n";
    let sets = [set(&[("ok.guard", TAGGED), ("bad.guard", broken)])];
    let err = check(&sets, &stack(&[])).unwrap_err();
    match &err {
        PolicyError::Parse {
            file, line, column, ..
        } => {
            assert_eq!(file, "rules@abc1234:bad.guard");
            assert_eq!((*line, *column), (4, 21), "{err}");
        }
        other => panic!("{other:?}"),
    }
    assert!(
        err.to_string()
            .starts_with("policy: rules@abc1234:bad.guard:4:21: the rule file does not parse"),
        "{err}"
    );
    assert_eq!(parse_all(&sets), Err(err));
    assert_eq!(parse_all(&[set(&[("ok.guard", TAGGED)])]), Ok(()));
    let unclosed = check(
        &[set(&[("open.guard", "rule A {\n  Resources exists\n")])],
        &stack(&[]),
    );
    assert!(
        matches!(unclosed, Err(PolicyError::Parse { line: 3, .. })),
        "{unclosed:?}"
    );
}

#[test]
fn a_file_of_comments_only_checks_nothing_and_a_bad_template_is_refused_not_panicked_on() {
    let report = check(&[set(&[("none.guard", "# nothing yet\n")])], &stack(&[])).unwrap();
    assert_eq!((report.rules, report.passes()), (0, true));
    for bad in [
        &b"\xff\xfe"[..],
        b"- a list\n- not a template\n",
        b"{ not json",
    ] {
        let err = input(
            bad,
            "app",
            &BTreeMap::new(),
            &BTreeSet::new(),
            &BTreeMap::new(),
        );
        assert!(matches!(err, Err(PolicyError::Input(_))), "{err:?}");
    }
}

#[test]
fn guard_error_messages_are_read_for_their_position() {
    let e = engine_error(
        "f.guard",
        "Parser Error when parsing `Parsing Error Error parsing file f.guard at line 8 at column 23, when handling expecting either a property access \"engine.core\" or value like \"string\", fragment \n}\n``",
    );
    assert_eq!(
        e.to_string(),
        "policy: f.guard:8:23: the rule file does not parse: expecting either a property access \"engine.core\" or value like \"string\""
    );
    let e = engine_error(
        "f.guard",
        "Could not resolve variable by name x across scopes",
    );
    assert!(matches!(e, PolicyError::Evaluation { .. }), "{e:?}");
}

#[test]
fn the_installations_policy_source_is_read_and_checked_as_an_entrys_policy() {
    let source = policy_source("{git: 'https://git.example/rules.git', ref: v2, path: policies/}")
        .unwrap()
        .unwrap();
    assert_eq!(
        (
            source.url(),
            source.reference.as_deref(),
            source.path.as_str()
        ),
        ("https://git.example/rules.git", Some("v2"), "policies/")
    );
    assert_eq!(policy_source("  "), Ok(None));
    for (text, says) in [
        ("{path: policies}", "give `git` or `s3`"),
        (
            "{git: 'https://git.example/r.git', path: ../up}",
            "policy.path",
        ),
        ("{git: 'https://git.example/r.git'}", "policy.path"),
        (
            "{git: 'https://u:p@git.example/r.git', path: p}",
            "policy.git",
        ),
        ("[not, a, source]", "not a source"),
        (
            "{git: 'https://git.example/r.git', path: p, colour: red}",
            "unknown field",
        ),
    ] {
        let err = policy_source(text).unwrap_err();
        assert!(
            err.starts_with("PolicySource: ") && err.contains(says),
            "{text}: {err}"
        );
    }
}

/// Guard's summary reporter returns only the last 8 KB of a longer report
/// (cfn-guard 3.2.1 reads its `BufWriter`'s buffer): the record tree is
/// read instead, whole, however many resources break a rule.
#[test]
fn a_rule_broken_by_many_resources_is_read_whole_and_names_them_within_a_bound() {
    let mut template = String::from("Resources:\n");
    for i in 0..40 {
        template.push_str(&format!(
            "  Bucket{i:02}:\n    Type: AWS::S3::Bucket\n    Properties:\n      BucketName: b{i}\n"
        ));
    }
    let input = input(
        template.as_bytes(),
        "many",
        &BTreeMap::new(),
        &BTreeSet::new(),
        &BTreeMap::new(),
    )
    .unwrap();
    let report = check(&[set(&[("s3.guard", BUCKETS)])], &input).unwrap();
    let v = &report.violations[0];
    assert_eq!(v.rule, "BUCKET_ENCRYPTED");
    assert_eq!(v.resources.len(), MAX_FINDING_RESOURCES + 1);
    assert_eq!(v.resources[0], "Bucket00");
    assert_eq!(v.resources.last().map(String::as_str), Some("and 20 more"));
    assert_eq!(v.message, "Buckets must enable server-side encryption");
    assert_eq!(report.warnings[0].rule, "BUCKET_VERSIONED");
}
