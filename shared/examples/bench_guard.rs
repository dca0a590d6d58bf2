//! Guard in-process, as template-upload runs it: a 60 KB template against
//! 50 of AWS Control Tower's proactive controls (`scripts/guard-rules`),
//! timed and measured for peak memory. `scripts/bench policy` runs it with
//! `--release` (the Lambda packages' profile: `opt-level = "s"`).
//!
//!     cargo run --release -p stacksync-shared --example bench_guard -- RULES_DIR
#![allow(clippy::unwrap_used, clippy::print_stdout)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Instant;

use stacksync::guard::{self, RuleFile, RuleSet};

/// Peak resident memory so far (`VmHWM`), in KiB.
fn peak_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// A template of about `bytes`: buckets, roles, queues and functions, some
/// breaking the controls, as a platform's baseline templates do.
fn template(bytes: usize) -> String {
    let mut out = String::from("AWSTemplateFormatVersion: \"2010-09-09\"\nResources:\n");
    let mut i = 0;
    while out.len() < bytes {
        out.push_str(&format!(
            "  Bucket{i}:\n    Type: AWS::S3::Bucket\n    Properties:\n      BucketName: !Sub \"${{AWS::StackName}}-data-{i}\"\n      \
             VersioningConfiguration: {{ Status: Enabled }}\n      PublicAccessBlockConfiguration:\n        BlockPublicAcls: true\n        \
             BlockPublicPolicy: true\n        IgnorePublicAcls: true\n        RestrictPublicBuckets: {}\n  \
             Role{i}:\n    Type: AWS::IAM::Role\n    Properties:\n      AssumeRolePolicyDocument:\n        Version: \"2012-10-17\"\n        \
             Statement:\n          - {{ Effect: Allow, Principal: {{ Service: lambda.amazonaws.com }}, Action: sts:AssumeRole }}\n      \
             Policies:\n        - PolicyName: read\n          PolicyDocument:\n            Version: \"2012-10-17\"\n            Statement:\n              \
             - {{ Effect: Allow, Action: [\"s3:GetObject\"], Resource: !Sub \"arn:${{AWS::Partition}}:s3:::${{Bucket{i}}}/*\" }}\n  \
             Queue{i}:\n    Type: AWS::SQS::Queue\n    Properties:\n      KmsMasterKeyId: alias/aws/sqs\n      VisibilityTimeout: 60\n  \
             Function{i}:\n    Type: AWS::Lambda::Function\n    Properties:\n      Runtime: python3.12\n      Handler: index.handler\n      \
             Role: !GetAtt Role{i}.Arn\n      Code: {{ ZipFile: \"def handler(e, c): return e\" }}\n      Environment:\n        \
             Variables: {{ QUEUE: !Ref Queue{i} }}\n",
            if i % 7 == 0 { "false" } else { "true" }
        ));
        i += 1;
    }
    out
}

/// The first `n` rule files under `dir` (services in name order).
fn rules(dir: &Path, n: usize) -> RuleSet {
    let mut paths = Vec::new();
    let mut services: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    services.sort();
    for service in services {
        let mut files: Vec<_> = std::fs::read_dir(&service)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        files.sort();
        paths.extend(
            files
                .into_iter()
                .filter(|p| p.extension().is_some_and(|e| e == "guard")),
        );
    }
    // Spread over the services: every k-th file.
    let step = (paths.len() / n).max(1);
    let files = paths
        .iter()
        .step_by(step)
        .take(n)
        .map(|p| RuleFile {
            path: p.strip_prefix(dir).unwrap().display().to_string(),
            text: std::fs::read_to_string(p).unwrap(),
        })
        .collect();
    RuleSet {
        origin: "control-tower".into(),
        files,
    }
}

fn main() {
    let dir = std::env::args()
        .nth(1)
        .expect("the rules folder (scripts/guard-rules)");
    let template = template(60 * 1024);
    let set = rules(Path::new(&dir), 50);
    let sets = [set];
    let parameters = BTreeMap::from([("Stage".to_owned(), "prod".to_owned())]);
    let tags = BTreeMap::from([("team".to_owned(), "platform".to_owned())]);
    let before = peak_kib();

    let started = Instant::now();
    let input = guard::input(
        template.as_bytes(),
        "baseline",
        &parameters,
        &BTreeSet::new(),
        &tags,
    )
    .unwrap();
    if let Ok(path) = std::env::var("BENCH_GUARD_INPUT") {
        std::fs::write(path, serde_json::to_string(&input).unwrap()).unwrap();
    }
    let report = guard::check(&sets, &input).unwrap();
    let first = started.elapsed();
    let mut times = Vec::new();
    for _ in 0..20 {
        let started = Instant::now();
        let input = guard::input(
            template.as_bytes(),
            "baseline",
            &parameters,
            &BTreeSet::new(),
            &tags,
        )
        .unwrap();
        let again = guard::check(&sets, &input).unwrap();
        times.push(started.elapsed());
        assert_eq!(again, report, "the same each time");
    }
    times.sort();
    let after = peak_kib();
    println!(
        "template: {} bytes, {} resources",
        template.len(),
        input["Resources"].as_object().map_or(0, |r| r.len())
    );
    println!(
        "rule files: {}, rules evaluated: {}",
        sets[0].files.len(),
        report.rules
    );
    for v in &report.violations {
        println!("broken: {} on {} resources", v.rule, v.resources.len());
    }
    println!(
        "found: {} broken, {} warnings",
        report.violations.len(),
        report.warnings.len()
    );
    println!("first check: {:.1} ms", first.as_secs_f64() * 1000.0);
    println!(
        "check, 20 more: median {:.1} ms, max {:.1} ms",
        times[times.len() / 2].as_secs_f64() * 1000.0,
        times[times.len() - 1].as_secs_f64() * 1000.0
    );
    println!(
        "peak RSS: {before} KiB before, {after} KiB after: {} KiB added",
        after.saturating_sub(before)
    );
}
