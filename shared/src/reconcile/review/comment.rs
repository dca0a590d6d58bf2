//! The pull request's comment: a summary line, a table of the stacks the
//! pull request touches, and per stack its resource rows, the parameters,
//! tags and settings that differ, or what failed. Values are as
//! `stacksync diff` shows them (secrets and `NoEcho` parameters `****`).
//! No time in it: the same previews give the same comment.
//!
//! Folded in `<details>` where the host renders it (GitHub, GitLab; not
//! Bitbucket Cloud, whose markdown drops HTML), and cut to the host's
//! comment limit: the details of the last stacks go first, then rows.

use crate::pull_request::{Host, PullRequest, StacksFiles};
use crate::reconcile::diff::{Diff, Difference};

/// One stack's preview, as the comment shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StackReview {
    /// The entry.
    pub name: String,
    /// The CloudFormation stack and its region (`None`: the installation's).
    pub stack_name: String,
    pub region: Option<String>,
    /// What a run would do, or why there is no preview.
    pub outcome: Result<Diff, String>,
    /// The desired state previewed, as a run hashes it (`None`: no preview).
    pub desired_hash: Option<String>,
    /// The entry executes after the merge only what was previewed
    /// (`approval: pullRequest`).
    pub bound: bool,
}

impl StackReview {
    /// A run after the merge would stop at the policy check.
    pub fn refused_by_policy(&self) -> bool {
        matches!(&self.outcome, Ok(d) if d.policy.as_ref().is_some_and(|p| !p.passes()))
    }

    /// `create`, `update`, `nothing`, or `failed`.
    pub fn action(&self) -> &'static str {
        match &self.outcome {
            Err(_) => "failed",
            Ok(d) if d.is_empty() => "nothing",
            Ok(d) if d.kind == "Create" => "create",
            Ok(_) => "update",
        }
    }
}

/// The hidden line that finds the installation's comment again.
pub fn marker(installation: &str) -> String {
    format!("<!-- stacksync:preview installation={installation} -->")
}

/// The marker of the comment's after-the-merge section.
const AFTER_MERGE: &str = "<!-- stacksync:after-merge -->";

/// `body` with `line` as what happened to `stack` after the merge: one
/// line per stack in an "After the merge" section (added before the
/// footer the first time; a stack's earlier line replaced).
pub fn with_after_merge(body: &str, stack: &str, line: &str) -> String {
    let key = format!("- `{stack}` ");
    let entry = format!("{key}{}", line.replace('\n', " "));
    let (before, section) = match body.split_once(AFTER_MERGE) {
        Some((before, section)) => (before.to_owned(), section.to_owned()),
        None => (body.to_owned(), String::new()),
    };
    let (before, footer) = match before.rfind("\n<sub>") {
        Some(at) if section.is_empty() => (before[..at].to_owned(), before[at..].to_owned()),
        _ => (before, String::new()),
    };
    let mut lines: Vec<String> = section
        .lines()
        .filter(|l| l.starts_with("- `"))
        .filter(|l| !l.starts_with(&key))
        .map(str::to_owned)
        .collect();
    lines.push(entry);
    let section_footer = section
        .split_once("\n<sub>")
        .map(|(_, f)| format!("\n<sub>{f}"))
        .unwrap_or_default();
    format!(
        "{}\n{AFTER_MERGE}\n**After the merge**\n\n{}\n{}{}",
        before.trim_end(),
        lines.join("\n"),
        footer,
        section_footer
    )
}

/// The comment, within `limit` characters.
pub fn render(
    pr: &PullRequest,
    installation: &str,
    reviews: &[StackReview],
    limit: usize,
) -> String {
    render_with(pr, installation, reviews, &[], limit)
}

/// The comment, with what the pull request's stacks files do to the
/// registry sources (`files`), within `limit` characters.
pub fn render_with(
    pr: &PullRequest,
    installation: &str,
    reviews: &[StackReview],
    files: &[StacksFiles],
    limit: usize,
) -> String {
    let fold = pr.host != Host::Bitbucket;
    let head = short(&pr.head_commit);
    let mut shown = reviews.len();
    loop {
        let mut out = String::new();
        out.push_str(&marker(installation));
        out.push('\n');
        out.push_str(&summary(reviews, &head));
        out.push_str("\n\n");
        if !reviews.is_empty() {
            out.push_str(&table(reviews));
        }
        for file in files.iter().filter(|f| !f.is_empty()) {
            out.push('\n');
            out.push_str(&stacks_files(file));
        }
        for review in reviews.iter().take(shown) {
            out.push('\n');
            out.push_str(&details(review, fold));
        }
        if shown < reviews.len() {
            out.push_str(&format!(
                "\n_The details of {} more stacks do not fit in one comment: `stacksync diff NAME` \
                 shows them._\n",
                reviews.len() - shown
            ));
        }
        out.push_str(&format!(
            "\n<sub>stacksync · installation `{installation}` · {} at `{head}` · \
             this comment is updated on each push</sub>\n",
            pr.host.noun()
        ));
        if out.chars().count() <= limit || shown == 0 {
            return cut(out, limit);
        }
        shown -= 1;
    }
}

/// What a registry source's stacks files would do to its entries.
fn stacks_files(file: &StacksFiles) -> String {
    let mut out = format!(
        "**Registry source `{}`** (its stacks files at this head):\n\n",
        cell(&file.source)
    );
    if !file.problems.is_empty() {
        out.push_str("❌ the commit would not be applied: nothing of it would be registered\n\n");
        for problem in &file.problems {
            out.push_str(&format!("- {}\n", cell(problem)));
        }
        return out;
    }
    let names =
        |specs: &[crate::spec::StackSpec]| specs.iter().map(|s| s.name.clone()).collect::<Vec<_>>();
    for (what, list) in [
        ("adds", names(&file.created)),
        ("changes", names(&file.updated)),
        ("moves to another file", file.moved.clone()),
        ("removes", file.pruned.clone()),
    ] {
        if !list.is_empty() {
            let shown: Vec<String> = list.iter().map(|n| format!("`{}`", cell(n))).collect();
            out.push_str(&format!("- {what} {}\n", shown.join(", ")));
        }
    }
    if !file.pruned.is_empty() {
        out.push_str(
            "- a removed entry's stack is deleted only where it says `destroyOnDelete`; else it is left\n",
        );
    }
    if file.held {
        out.push_str(
            "- ⏸ the prune guard would hold this commit (it removes too many entries) until `stacksync source approve-prune`\n",
        );
    }
    out
}

/// The first line: what the pull request changes, at which commit.
fn summary(reviews: &[StackReview], head: &str) -> String {
    let count = |a: &str| reviews.iter().filter(|r| r.action() == a).count();
    let (create, update, nothing, failed) = (
        count("create"),
        count("update"),
        count("nothing"),
        count("failed"),
    );
    if reviews.is_empty() {
        return format!(
            "### stacksync preview at `{head}`: no stack changes\n\nThis pull request changes no \
             file a registered stack reads."
        );
    }
    let mut parts = Vec::new();
    for (n, what) in [
        (create, "to create"),
        (update, "to update"),
        (nothing, "unchanged"),
        (failed, "failed"),
    ] {
        if n > 0 {
            parts.push(format!("{n} {what}"));
        }
    }
    let refused = reviews.iter().filter(|r| r.refused_by_policy()).count();
    if refused > 0 {
        parts.push(format!("{refused} refused by policy"));
    }
    let mark = if failed + refused > 0 { "❌" } else { "✅" };
    format!(
        "### {mark} stacksync preview at `{head}`: {} ({})",
        plural(reviews.len(), "stack"),
        parts.join(", ")
    )
}

fn table(reviews: &[StackReview]) -> String {
    let mut out = String::from("| stack | action | resources |\n|---|---|---|\n");
    for r in reviews {
        let resources = match &r.outcome {
            Err(e) => first_line(e),
            Ok(d) => resource_counts(d),
        };
        out.push_str(&format!(
            "| `{}` | {} | {} |\n",
            cell(&r.name),
            r.action(),
            cell(&resources)
        ));
    }
    out
}

/// `2 to add, 1 to modify (1 replaced)`.
fn resource_counts(d: &Diff) -> String {
    if d.changes.is_empty() {
        return if d.beyond_resources {
            "no resource change (outputs or stack settings)".into()
        } else if d.is_empty() {
            "no change".into()
        } else {
            "no resource change".into()
        };
    }
    let count = |a: &str| d.changes.iter().filter(|c| c.action == a).count();
    let mut parts = Vec::new();
    for (action, word) in [
        ("Add", "to add"),
        ("Modify", "to modify"),
        ("Remove", "to remove"),
        ("Import", "to import"),
        ("Dynamic", "dynamic"),
    ] {
        let n = count(action);
        if n > 0 {
            parts.push(format!("{n} {word}"));
        }
    }
    let replaced = d.changes.iter().filter(|c| c.replaces()).count();
    if replaced > 0 {
        parts.push(format!("{replaced} replaced"));
    }
    parts.join(", ")
}

/// One stack's section: its rows and differences, or its failure.
fn details(r: &StackReview, fold: bool) -> String {
    let place = match &r.region {
        Some(region) => format!("`{}` in {region}", r.stack_name),
        None => format!("`{}`", r.stack_name),
    };
    let title = format!("<b>{}</b> ({place}): {}", r.name, r.action());
    let mut body = match &r.outcome {
        Err(e) => format!(
            "The preview failed:\n\n```\n{}\n```\n",
            e.replace("```", "'''")
        ),
        Ok(d) => diff_body(d),
    };
    if r.bound && r.outcome.is_ok() {
        body.push_str(
            "\n`approval: pullRequest`: after the merge, the run executes this change set only if \
             its rows and desired state are these; else it waits for an approval and says why.\n",
        );
    }
    if fold {
        format!("<details><summary>{title}</summary>\n\n{body}\n</details>\n")
    } else {
        format!("**{}** ({place}): {}\n\n{body}", r.name, r.action())
    }
}

fn diff_body(d: &Diff) -> String {
    let mut out = String::new();
    if let Some(policy) = &d.policy {
        out.push_str(&policy_section(policy));
    }
    if !d.checks.is_empty() {
        out.push_str("CloudFormation's checks:\n\n");
        for check in &d.checks {
            out.push_str(&format!("- {}\n", check.line().replace('`', "'")));
        }
        out.push('\n');
    }
    let changed: Vec<&str> = d
        .packaged
        .iter()
        .filter(|f| f.changed)
        .map(|f| f.path.as_str())
        .collect();
    if !changed.is_empty() {
        let list: Vec<String> = changed.iter().map(|p| format!("`{}`", cell(p))).collect();
        out.push_str(&format!(
            "Local files packaged, changed since the last run: {}\n\n",
            list.join(", ")
        ));
    }
    if d.is_empty() {
        out.push_str("No change: a run after the merge would leave the stack as it is.\n");
        return out;
    }
    if !d.changes.is_empty() {
        out.push_str(
            "| action | logical id | type | replacement | changes |\n|---|---|---|---|---|\n",
        );
        for c in &d.changes {
            out.push_str(&format!(
                "| {} | `{}` | `{}` | {} | {} |\n",
                cell(&c.action),
                cell(&c.logical_id),
                cell(&c.resource_type),
                cell(c.replacement.as_deref().unwrap_or("")),
                cell(&c.changed.join(", ")),
            ));
        }
    }
    for (title, rows) in [
        ("Parameters", &d.parameters),
        ("Tags", &d.tags),
        ("Settings", &d.settings),
    ] {
        if !rows.is_empty() {
            out.push_str(&format!("\n{title}:\n\n{}", differences(rows)));
        }
    }
    if d.beyond_resources {
        out.push_str(
            "\nNo resource changes, but CloudFormation made a change set to run (the template's \
             outputs, say): a run executes it.\n",
        );
    }
    out
}

/// What the Guard rules find: a line, then one per finding.
fn policy_section(policy: &crate::reconcile::diff::PolicyChecked) -> String {
    let mut lines = policy.lines().into_iter();
    let Some(first) = lines.next() else {
        return String::new();
    };
    let (mark, after) = if policy.passes() {
        ("", "")
    } else {
        (
            "❌ ",
            ": a run after the merge stops here and makes nothing",
        )
    };
    let mut out = format!("{mark}**{}**{after}\n\n", first.replace('*', "\\*"));
    for line in lines {
        out.push_str(&format!("- {}\n", line.replace('`', "'")));
    }
    out.push('\n');
    out
}

fn differences(rows: &[Difference]) -> String {
    let show = |v: &Option<String>| {
        v.as_deref()
            .map_or("(none)".to_owned(), |v| format!("`{}`", cell(v)))
    };
    let mut out = String::from("| name | now | after the merge |\n|---|---|---|\n");
    for r in rows {
        out.push_str(&format!(
            "| `{}` | {} | {} |\n",
            cell(&r.name),
            show(&r.now),
            show(&r.desired)
        ));
    }
    out
}

/// A value made safe in a table cell: one line, no `|`, no backtick.
fn cell(value: &str) -> String {
    let one_line: String = value
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let short = crate::pull_request::shorten(one_line.trim(), 200);
    short.replace('|', "\\|").replace('`', "'")
}

fn first_line(text: &str) -> String {
    crate::pull_request::shorten(text.lines().next().unwrap_or_default(), 120)
}

fn short(commit: &str) -> String {
    commit.chars().take(12).collect()
}

fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// `text` within `limit` characters: cut, with a last line that says so.
fn cut(text: String, limit: usize) -> String {
    if text.chars().count() <= limit {
        return text;
    }
    let note = "\n\n_(cut to the host's comment limit: `stacksync diff NAME` shows all)_\n";
    let keep = limit.saturating_sub(note.chars().count());
    let mut out: String = text.chars().take(keep).collect();
    out.push_str(note);
    out
}

#[cfg(test)]
mod tests;
