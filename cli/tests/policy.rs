//! Policy before any change: Guard rules (AWS Control Tower's own, fetched
//! by `scripts/guard-rules`, and ours) from Git, checked by the real state
//! machine against the emulator before any change set, and by `stacksync
//! validate --policy` alike.
#![allow(clippy::unwrap_used)]
// tests: a failed unwrap is a failed test

mod common;

use stacksync::asl::Outcome;
use stacksync::spec::Source;
use stacksync::status::{Phase, StallReason};
use stacksync_testkit::git::GitRepo;
use stacksync_testkit::harness::Harness;
use stacksync_testkit::{Emulator, guard_rules, unique_name};

/// Passes CT.S3.PR.1 (every block set) and CT.IAM.PR.1; KMS encryption
/// (CT.S3.PR.10) it has not.
const PRIVATE_BUCKET: &[u8] = b"Resources:
  Logs:
    Type: AWS::S3::Bucket
    Properties:
      PublicAccessBlockConfiguration:
        BlockPublicAcls: true
        BlockPublicPolicy: true
        IgnorePublicAcls: true
        RestrictPublicBuckets: true
";

/// Breaks CT.S3.PR.1: no public access block.
const OPEN_BUCKET: &[u8] = b"Resources:
  Open:
    Type: AWS::S3::Bucket
";

/// Breaks CT.IAM.PR.1: an inline policy allowing every action on every
/// resource.
const ADMIN_ROLE: &[u8] = br#"Resources:
  Admin:
    Type: AWS::IAM::Role
    Properties:
      AssumeRolePolicyDocument:
        Version: "2012-10-17"
        Statement:
          - Effect: Allow
            Principal: { Service: lambda.amazonaws.com }
            Action: sts:AssumeRole
      Policies:
        - PolicyName: everything
          PolicyDocument:
            Version: "2012-10-17"
            Statement:
              - Effect: Allow
                Action: "*"
                Resource: "*"
"#;

/// Ours: every stack names its team (the resolved tags are Guard's input).
const TEAM_TAGGED: &[u8] =
    b"rule TEAM_TAGGED {\n    StackSync.Tags.team exists <<every stack names its team (tag team)>>\n}\n";

/// The installation's rule folder: three of AWS's controls, KMS encryption
/// made a warning (its first line), and ours.
fn installation_rules() -> Vec<(String, Vec<u8>)> {
    let mut kms = b"# severity: warn\n".to_vec();
    kms.extend(guard_rules::rule("s3/ct-s3-pr-10.guard"));
    vec![
        (
            "guard/ct-s3-pr-1.guard".into(),
            guard_rules::rule("s3/ct-s3-pr-1.guard"),
        ),
        (
            "guard/ct-iam-pr-1.guard".into(),
            guard_rules::rule("identityandaccessmanagement/ct-iam-pr-1.guard"),
        ),
        ("guard/ct-s3-pr-10.guard".into(), kms),
        ("guard/team.guard".into(), TEAM_TAGGED.to_vec()),
        (
            "guard/LICENSE".into(),
            std::fs::read(guard_rules::folder().join("../../../LICENSE")).unwrap(),
        ),
    ]
}

fn commit(repo: &GitRepo, files: &[(String, Vec<u8>)], message: &str) -> String {
    let files: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(p, b)| (p.as_str(), b.as_slice()))
        .collect();
    repo.commit(&files, message)
}

/// A harness whose installation's rules are `rules`' folder `guard`.
async fn with_installation_rules(
    prefix: &str,
    rules: &GitRepo,
) -> Harness<stacksync::adapters::cloudformation::SdkCloudFormationFactory> {
    let mut h = Harness::new(prefix).await;
    h.steps.config.rules = Some(Source {
        git: Some(rules.file_url()),
        path: "guard".into(),
        ..Source::default()
    });
    h
}

async fn no_change_set_and_no_stack(stack: &str) {
    assert_eq!(
        Emulator::shared().stack_status(stack).await,
        None,
        "{stack}"
    );
    let change_sets = Emulator::shared()
        .cloudformation()
        .list_change_sets()
        .stack_name(stack)
        .send()
        .await;
    match change_sets {
        Ok(out) => assert!(out.summaries().is_empty(), "{stack}: {out:?}"),
        // No stack: CloudFormation says so.
        Err(e) => assert!(
            format!("{e:?}").contains("does not exist"),
            "{stack}: {e:?}"
        ),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_template_that_breaks_aws_controls_is_refused_before_any_change_set_naming_rule_and_resource()
 {
    let rules = GitRepo::new("policy-rules");
    commit(&rules, &installation_rules(), "controls");
    let h = with_installation_rules("policy-refused", &rules).await;
    let repo = GitRepo::new("policy-infra");
    repo.commit(
        &[("open.yaml", OPEN_BUCKET), ("admin.yaml", ADMIN_ROLE)],
        "templates",
    );
    let (open, admin) = (unique_name("open"), unique_name("admin"));
    h.apply(&format!(
        "stacks:\n  - name: {open}\n    source: {{git: '{url}', path: open.yaml}}\n    tags: {{team: data}}\n  \
         - name: {admin}\n    source: {{git: '{url}', path: admin.yaml}}\n    tags: {{team: data}}\n    \
         capabilities: [CAPABILITY_IAM]\n",
        url = repo.file_url()
    ))
    .await;
    for (name, rule, resource) in [
        (
            &open,
            "s3_bucket_level_public_access_prohibited_check",
            "Open",
        ),
        (
            &admin,
            "iam_inline_policy_no_statements_with_admin_access_check",
            "Admin",
        ),
    ] {
        let outcome = h.reconcile(name).await;
        assert!(matches!(outcome, Outcome::Failed(_)), "{name}: {outcome:?}");
        let status = h.entry(name).await.status;
        assert_eq!(status.phase, Phase::Failed, "{name}");
        assert_eq!(
            status.stall_reason,
            Some(StallReason::PolicyViolation),
            "{name}"
        );
        let message = status.message.clone().unwrap_or_default();
        assert!(
            message.contains(&format!("{rule} on {resource}:"))
                && message.contains("; nothing was made"),
            "{name}: {message}"
        );
        let record = status.findings.policy.expect("the check recorded");
        assert_eq!(record.report.violations.len(), 1, "{name}: {record:?}");
        assert!(
            record.report.rules >= 4,
            "every rule of the folder evaluated: {record:?}"
        );
        no_change_set_and_no_stack(name).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_warning_only_breach_deploys_and_is_shown() {
    let rules = GitRepo::new("policy-rules");
    commit(&rules, &installation_rules(), "controls");
    let h = with_installation_rules("policy-warned", &rules).await;
    let repo = GitRepo::new("policy-infra");
    repo.commit(&[("bucket.yaml", PRIVATE_BUCKET)], "a private bucket");
    let name = unique_name("warned");
    h.apply(&format!(
        "stacks:\n  - name: {name}\n    source: {{git: '{}', path: bucket.yaml}}\n    tags: {{team: data}}\n",
        repo.file_url()
    ))
    .await;
    let outcome = h.reconcile(&name).await;
    assert!(matches!(outcome, Outcome::Succeeded(_)), "{outcome:?}");
    assert_eq!(
        Emulator::shared().stack_status(&name).await.as_deref(),
        Some("CREATE_COMPLETE")
    );
    let status = h.entry(&name).await.status;
    assert_eq!(status.phase, Phase::Ready);
    let record = status.findings.policy.expect("the check recorded");
    assert!(record.report.violations.is_empty(), "{record:?}");
    assert_eq!(
        record
            .report
            .warnings
            .iter()
            .map(|w| (w.rule.as_str(), w.resources.clone()))
            .collect::<Vec<_>>(),
        [(
            "s3_bucket_default_encryption_kms_check",
            vec!["Logs".to_owned()]
        )]
    );
    // `get NAME` shows it.
    let out = common::stacksync_on(h.steps.registry.table(), &["get", &name]).await;
    let text = common::stdout(&out);
    assert!(
        text.contains("s3_bucket_default_encryption_kms_check") && text.contains("severity: warn"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rule_file_with_a_syntax_error_fails_with_file_and_line_and_changes_nothing() {
    let rules = GitRepo::new("policy-rules");
    let mut files = installation_rules();
    files.push((
        "guard/broken.guard".into(),
        b"let buckets = Resources.*[ Type == 'AWS::S3::Bucket' ]\n\nrule BROKEN when %buckets !empty {\n    %buckets.Properties.Tags ==\n}\n".to_vec(),
    ));
    commit(&rules, &files, "a broken rule");
    let h = with_installation_rules("policy-broken", &rules).await;
    let repo = GitRepo::new("policy-infra");
    repo.commit(&[("bucket.yaml", PRIVATE_BUCKET)], "a private bucket");
    let name = unique_name("broken");
    h.apply(&format!(
        "stacks:\n  - name: {name}\n    source: {{git: '{}', path: bucket.yaml}}\n    tags: {{team: data}}\n",
        repo.file_url()
    ))
    .await;
    let outcome = h.reconcile(&name).await;
    assert!(matches!(outcome, Outcome::Failed(_)), "{outcome:?}");
    let status = h.entry(&name).await.status;
    assert_eq!(status.stall_reason, Some(StallReason::InvalidPolicy));
    let message = status.message.unwrap_or_default();
    assert!(
        message.contains("guard/broken.guard:4:") && message.contains("does not parse"),
        "{message}"
    );
    no_change_set_and_no_stack(&name).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_entrys_own_rules_apply_to_it_alone_and_a_new_rule_revision_rechecks_at_the_next_run() {
    let rules = GitRepo::new("policy-rules");
    commit(&rules, &installation_rules(), "controls");
    let h = with_installation_rules("policy-own", &rules).await;
    let repo = GitRepo::new("policy-infra");
    repo.commit(
        &[
            ("bucket.yaml", PRIVATE_BUCKET),
            (
                "strict/versioned.guard",
                b"let b = Resources.*[ Type == 'AWS::S3::Bucket' ]\nrule VERSIONED when %b !empty {\n  %b.Properties.VersioningConfiguration.Status == 'Enabled' <<version every bucket>>\n}\n",
            ),
        ],
        "a bucket and strict rules",
    );
    let (strict, plain) = (unique_name("strict"), unique_name("plain"));
    h.apply(&format!(
        "stacks:\n  - name: {strict}\n    source: {{git: '{url}', path: bucket.yaml}}\n    tags: {{team: data}}\n    \
         policy: {{path: strict}}\n  - name: {plain}\n    source: {{git: '{url}', path: bucket.yaml}}\n    tags: {{team: data}}\n",
        url = repo.file_url()
    ))
    .await;
    assert!(matches!(h.reconcile(&strict).await, Outcome::Failed(_)));
    let status = h.entry(&strict).await.status;
    assert_eq!(status.stall_reason, Some(StallReason::PolicyViolation));
    assert!(
        status
            .message
            .unwrap_or_default()
            .contains("VERSIONED on Logs: version every bucket"),
    );
    no_change_set_and_no_stack(&strict).await;
    let outcome = h.reconcile(&plain).await;
    assert!(matches!(outcome, Outcome::Succeeded(_)), "{outcome:?}");
    assert_eq!(h.entry(&plain).await.status.phase, Phase::Ready);

    // The installation's rules move on: the stack that passed is checked
    // against them at its next run, and left as it is.
    let mut stricter = installation_rules();
    stricter.push((
        "guard/owner.guard".into(),
        b"rule OWNER_TAGGED {\n    StackSync.Tags.owner exists <<every stack names its owner>>\n}\n".to_vec(),
    ));
    commit(&rules, &stricter, "owners too");
    let before = Emulator::shared().stack_status(&plain).await;
    assert!(matches!(h.reconcile(&plain).await, Outcome::Failed(_)));
    let status = h.entry(&plain).await.status;
    assert_eq!(status.stall_reason, Some(StallReason::PolicyViolation));
    assert!(status.message.unwrap_or_default().contains("OWNER_TAGGED"));
    assert_eq!(
        Emulator::shared().stack_status(&plain).await,
        before,
        "untouched"
    );
    // Mended in the rules: the next run is in sync again.
    rules.remove("guard/owner.guard", "owners dropped");
    assert!(matches!(h.reconcile(&plain).await, Outcome::Succeeded(_)));
    let status = h.entry(&plain).await.status;
    assert_eq!(status.phase, Phase::Ready);
    assert!(status.findings.policy.unwrap().report.violations.is_empty());
}

/// How a check ended, as both a run and `validate` tell it.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Passes,
    Refused(Vec<String>),
    Invalid,
}

/// The run's verdict, from its status.
fn run_verdict(status: &stacksync::status::Status) -> Verdict {
    match status.stall_reason {
        None => Verdict::Passes,
        Some(StallReason::PolicyViolation) => Verdict::Refused(
            status
                .findings
                .policy
                .as_ref()
                .unwrap()
                .report
                .violations
                .iter()
                .map(|v| v.rule.clone())
                .collect(),
        ),
        Some(StallReason::InvalidPolicy) => Verdict::Invalid,
        Some(other) => panic!("{other}: {:?}", status.message),
    }
}

/// `validate`'s verdict, from its JSON and exit code.
fn validate_verdict(out: &std::process::Output) -> Verdict {
    let stdout = common::stdout(out);
    if !out.status.success() && stdout.trim().is_empty() {
        assert!(
            common::stderr(out).contains("does not parse"),
            "{}",
            common::stderr(out)
        );
        return Verdict::Invalid;
    }
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let problems = report["problems"].as_array().unwrap();
    if problems.is_empty() {
        assert!(out.status.success());
        return Verdict::Passes;
    }
    assert!(!out.status.success());
    let message = problems[0]["message"].as_str().unwrap();
    let mut rules: Vec<String> = message
        .split_once("broken: ")
        .unwrap()
        .1
        .split("; ")
        .map(|f| f.split([' ', ':']).next().unwrap().to_owned())
        .collect();
    rules.sort();
    Verdict::Refused(rules)
}

#[tokio::test(flavor = "multi_thread")]
async fn validate_policy_passes_and_fails_exactly_as_a_run_would() {
    let cases: [(&str, &[u8], &str, bool); 5] = [
        ("private", PRIVATE_BUCKET, "{team: data}", false),
        ("untagged", PRIVATE_BUCKET, "{}", false),
        ("open", OPEN_BUCKET, "{team: data}", false),
        ("open-untagged", OPEN_BUCKET, "{}", false),
        ("broken-rules", PRIVATE_BUCKET, "{team: data}", true),
    ];
    for (case, template, tags, broken) in cases {
        let rules = GitRepo::new("policy-rules");
        let mut files = installation_rules();
        if broken {
            files.push((
                "guard/z.guard".into(),
                b"rule Z {\n  Resources exists\n".to_vec(),
            ));
        }
        commit(&rules, &files, "rules");
        let h = with_installation_rules("policy-table", &rules).await;
        let repo = GitRepo::new("policy-infra");
        repo.commit(&[("t.yaml", template)], case);
        let name = unique_name("table");
        let stacks = format!(
            "stacks:\n  - name: {name}\n    source: {{git: '{}', path: t.yaml}}\n    tags: {tags}\n",
            repo.file_url()
        );
        h.apply(&stacks).await;
        h.reconcile(&name).await;
        let by_run = run_verdict(&h.entry(&name).await.status);

        let file = repo.dir.join("stacks.yaml");
        std::fs::write(&file, &stacks).unwrap();
        let out = common::stacksync_on(
            h.steps.registry.table(),
            &[
                "validate",
                "-f",
                &file.display().to_string(),
                "--policy",
                &rules.dir.join("guard").display().to_string(),
                "--checkout",
                &repo.dir.display().to_string(),
                "-o",
                "json",
            ],
        )
        .await;
        let mut by_validate = validate_verdict(&out);
        if let (Verdict::Refused(a), Verdict::Refused(b)) = (&by_run, &mut by_validate) {
            let mut a = a.clone();
            a.sort();
            assert_eq!(&a, b, "{case}");
            continue;
        }
        assert_eq!(by_run, by_validate, "{case}: {}", common::stderr(&out));
        let expected_pass = matches!(case, "private");
        assert_eq!(by_run == Verdict::Passes, expected_pass, "{case}");
    }
}
