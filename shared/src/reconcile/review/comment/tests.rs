use super::*;
use crate::preview::ResourceChange;
use crate::pull_request::PrState;

fn pr(host: Host) -> PullRequest {
    PullRequest {
        host,
        repository: "acme/infra".into(),
        repository_urls: vec![],
        number: 7,
        base_ref: "refs/heads/main".into(),
        head_ref: "refs/heads/f".into(),
        head_commit: "0123456789abcdef0123456789abcdef01234567".into(),
        fork: false,
        state: PrState::Open,
        merge_commit: None,
        url: None,
    }
}

fn diff(kind: &str, rows: usize) -> Diff {
    Diff {
        stack_name: "orders".into(),
        revision: "0123".into(),
        kind: kind.into(),
        stack_id: None,
        stack_status: None,
        changes: (0..rows)
            .map(|i| ResourceChange {
                action: "Modify".into(),
                logical_id: format!("Queue{i}"),
                resource_type: "AWS::SQS::Queue".into(),
                physical_id: None,
                replacement: Some("True".into()),
                changed: vec!["Properties.DelaySeconds".into()],
            })
            .collect(),
        parameters: vec![Difference {
            name: "Password".into(),
            now: Some("****".into()),
            desired: Some("****".into()),
        }],
        tags: vec![Difference {
            name: "team".into(),
            now: Some("a|b".into()),
            desired: Some("c`d".into()),
        }],
        settings: vec![],
        beyond_resources: false,
        checks: Vec::new(),
        policy: None,
        packaged: Vec::new(),
    }
}

fn review(name: &str, outcome: Result<Diff, String>) -> StackReview {
    StackReview {
        name: name.into(),
        stack_name: name.into(),
        region: Some("eu-west-1".into()),
        outcome,
        desired_hash: None,
        bound: false,
    }
}

#[test]
fn a_comment_has_its_marker_a_summary_a_table_and_the_rows() {
    let reviews = vec![
        review("orders", Ok(diff("Update", 1))),
        review(
            "broken",
            Err("Template format error: bad\nsecond line".into()),
        ),
    ];
    let body = render(&pr(Host::GitHub), "prod", &reviews, 65_536);
    assert!(body.starts_with(&marker("prod")), "{body}");
    assert!(
        body.contains(
            "### ❌ stacksync preview at `0123456789ab`: 2 stacks (1 to update, 1 failed)"
        ),
        "{body}"
    );
    assert!(
        body.contains("| `orders` | update | 1 to modify, 1 replaced |"),
        "{body}"
    );
    assert!(
        body.contains("| `broken` | failed | Template format error: bad |"),
        "{body}"
    );
    assert!(
        body.contains("| Modify | `Queue0` | `AWS::SQS::Queue` | True | Properties.DelaySeconds |")
    );
    // Masked values stay masked; a cell cannot break the table.
    assert!(body.contains("| `Password` | `****` | `****` |"), "{body}");
    assert!(body.contains("`a\\|b`") && body.contains("`c'd`"), "{body}");
    assert!(
        body.contains("<details><summary><b>orders</b> (`orders` in eu-west-1): update</summary>")
    );
    assert_eq!(
        render(&pr(Host::GitHub), "prod", &reviews, 65_536),
        body,
        "the same each time"
    );
}

#[test]
fn the_local_files_a_change_packages_anew_are_named() {
    let mut changed = diff("Update", 1);
    changed.packaged = vec![
        crate::reconcile::diff::PackagedFile {
            path: "src/orders".into(),
            at: "t.yaml: resource Fn property Code".into(),
            changed: true,
        },
        crate::reconcile::diff::PackagedFile {
            path: "nested/network.yaml".into(),
            at: "t.yaml: resource Network property TemplateURL".into(),
            changed: false,
        },
    ];
    let body = render(
        &pr(Host::GitHub),
        "prod",
        &[review("orders", Ok(changed))],
        65_536,
    );
    assert!(
        body.contains("Local files packaged, changed since the last run: `src/orders`\n"),
        "{body}"
    );
    assert!(!body.contains("nested/network.yaml"), "{body}");
}

#[test]
fn bitbucket_gets_no_html_and_an_empty_review_says_nothing_changes() {
    let body = render(
        &pr(Host::Bitbucket),
        "prod",
        &[review("orders", Ok(diff("Create", 1)))],
        32_768,
    );
    assert!(
        !body.contains("<details>") && body.contains("**orders**"),
        "{body}"
    );
    assert!(body.contains("1 to create"), "{body}");
    let empty = render(&pr(Host::GitLab), "prod", &[], 1_000);
    assert!(empty.contains("no stack changes"), "{empty}");
    assert!(empty.contains("merge request at"), "{empty}");
}

#[test]
fn a_long_review_drops_details_then_cuts_within_the_limit() {
    let reviews: Vec<_> = (0..50)
        .map(|i| review(&format!("stack-{i}"), Ok(diff("Update", 40))))
        .collect();
    let body = render(&pr(Host::GitHub), "prod", &reviews, 65_536);
    assert!(body.chars().count() <= 65_536);
    assert!(
        body.contains("| `stack-49` | update |"),
        "every stack in the table"
    );
    assert!(
        body.contains("more stacks do not fit in one comment"),
        "details dropped"
    );
    let tiny = render(&pr(Host::GitHub), "prod", &reviews, 2_000);
    assert!(tiny.chars().count() <= 2_000);
    assert!(tiny.contains("cut to the host's comment limit"), "{tiny}");
}

#[test]
fn after_the_merge_each_stack_has_one_line_before_the_footer() {
    let body = render(
        &pr(Host::GitHub),
        "prod",
        &[review("orders", Ok(diff("Update", 1)))],
        65_536,
    );
    let once = with_after_merge(
        &body,
        "orders",
        "waits for a person: approval: pullRequest, and the rows differ",
    );
    assert!(
        once.contains("**After the merge**\n\n- `orders` waits for a person"),
        "{once}"
    );
    let footer = once.find("<sub>").unwrap();
    assert!(once.find("**After the merge**").unwrap() < footer, "{once}");
    let twice = with_after_merge(&once, "orders", "applied 0123456789ab");
    let thrice = with_after_merge(&twice, "payments", "failed: Queue: CREATE_FAILED");
    assert_eq!(thrice.matches("- `orders` ").count(), 1, "{thrice}");
    assert!(
        thrice.contains("- `orders` applied 0123456789ab\n- `payments` failed"),
        "{thrice}"
    );
    assert_eq!(thrice.matches("<sub>").count(), 1, "{thrice}");
    assert!(thrice.trim_end().ends_with("</sub>"), "{thrice}");
    assert!(thrice.starts_with(&marker("prod")));
}

#[test]
fn a_stack_the_policy_refuses_is_marked_in_the_summary_its_section_and_the_status() {
    use crate::guard::{Finding, Report, Severity};
    let finding = |rule: &str, severity| Finding {
        rule: rule.into(),
        file: "rules@abc:s3.guard".into(),
        severity,
        resources: vec!["Logs".into()],
        message: "encrypt it".into(),
    };
    let mut refused = diff("Update", 1);
    refused.policy = Some(crate::reconcile::diff::PolicyChecked {
        report: Some(Report {
            rule_sets: vec!["rules@abc".into()],
            rules: 2,
            violations: vec![finding("BUCKET_ENCRYPTED", Severity::Block)],
            warnings: vec![finding("BUCKET_VERSIONED", Severity::Warn)],
        }),
        error: None,
    });
    let mut warned = diff("Update", 1);
    warned.policy = Some(crate::reconcile::diff::PolicyChecked {
        report: Some(Report {
            rule_sets: vec!["rules@abc".into()],
            rules: 2,
            violations: vec![],
            warnings: vec![finding("BUCKET_VERSIONED", Severity::Warn)],
        }),
        error: None,
    });
    let reviews = vec![review("orders", Ok(refused)), review("logs", Ok(warned))];
    let body = render(&pr(Host::GitHub), "prod", &reviews, 65_536);
    assert!(
        body.contains("### ❌ stacksync preview at `0123456789ab`: 2 stacks (2 to update, 1 refused by policy)"),
        "{body}"
    );
    assert!(
        body.contains("❌ **policy: 1 rule broken, 1 warning (2 rules in 1 rule set)**: a run after the merge stops here and makes nothing"),
        "{body}"
    );
    assert!(
        body.contains("- ✗ BUCKET_ENCRYPTED on Logs: encrypt it (rules@abc:s3.guard)"),
        "{body}"
    );
    assert!(
        body.contains("**policy: passed with 1 warning (2 rules in 1 rule set)**"),
        "{body}"
    );
    let status = crate::reconcile::review::preview_status("prod", &pr(Host::GitHub), &reviews, &[]);
    assert_eq!(status.state, crate::pull_request::CommitState::Failure);
    assert_eq!(status.description, "policy refuses: orders");
}
