//! Reading `stacks.yaml`: every problem reported with file, entry and field.
//!
//! ```yaml
//! stacks:
//!   - name: orders-queue
//!     source: { git: https://github.com/acme/infra.git, path: queues/orders.yaml }
//! ```
//!
//! Reading is all-or-nothing: a file with any problem yields no specs, so a
//! bad file can never half-apply.
//!
//! A file is read in three passes, each only when the one before found
//! nothing wrong: the YAML syntax and the outline of the file (a `stacks:`
//! list), then each entry into a [`StackSpec`] (types, unknown fields), then
//! the rules of [`crate::validate`] over each entry and across entries
//! (unique names, one entry per CloudFormation stack). The first two stop at
//! the first problem, as the parser does; the third reports every problem
//! it finds.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;

use crate::registry_source::RelativeBase;
use crate::spec::StackSpec;
use crate::validate::validate_spec;

/// Which entry of the file a problem is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryRef {
    /// Position in the `stacks` list, from 0.
    pub index: usize,
    /// The entry's `name`, when it has a readable one.
    pub name: Option<String>,
}

impl fmt::Display for EntryRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "stacks[{}]", self.index)?;
        if let Some(name) = &self.name {
            write!(f, " ({name})")?;
        }
        Ok(())
    }
}

/// One problem in a manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The entry, unless the problem is with the file as a whole.
    pub entry: Option<EntryRef>,
    /// The field inside the entry (`source.path`), when known.
    pub field: Option<String>,
    pub message: String,
}

impl Problem {
    /// A problem with the file as a whole, not with one entry.
    fn whole_file(message: String) -> Self {
        Self {
            entry: None,
            field: None,
            message,
        }
    }
}

/// Everything wrong with one manifest file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ManifestError {
    pub file: String,
    pub problems: Vec<Problem>,
}

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.problems.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{}: ", self.file)?;
            if let Some(entry) = &p.entry {
                write!(f, "{entry}: ")?;
            }
            if let Some(field) = &p.field {
                write!(f, "field {field}: ")?;
            }
            f.write_str(&p.message)?;
        }
        Ok(())
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Manifest {
    stacks: Vec<StackSpec>,
}

/// The largest manifest read, in bytes: 10,000 entries of a few hundred
/// bytes each fit many times over.
pub const MAX_MANIFEST_BYTES: u64 = 8 * 1024 * 1024;
/// The most entries one manifest may hold (the scale the scheduler is
/// measured at). A registry may hold more, applied from several files.
pub const MAX_MANIFEST_ENTRIES: usize = 10_000;

/// The problem with a manifest of `bytes` bytes, when it is too large to read.
pub fn oversize(bytes: u64) -> Option<String> {
    (bytes > MAX_MANIFEST_BYTES).then(|| {
        format!(
            "the file is {bytes} bytes, more than the {MAX_MANIFEST_BYTES} a stacks file may \
             hold: split it into several files and apply each (without --prune)"
        )
    })
}

/// Reads and validates a manifest. `file` is only used in messages.
pub fn parse_manifest(file: &str, text: &str) -> Result<Vec<StackSpec>, ManifestError> {
    parse_manifest_in(file, text, None)
}

/// [`parse_manifest`] of a registry source's stacks file: an entry that
/// names no repository follows `base`'s, its paths read from the file's
/// folder ([`RelativeBase::resolve`]), before the rules are checked.
pub fn parse_manifest_in(
    file: &str,
    text: &str,
    base: Option<&RelativeBase>,
) -> Result<Vec<StackSpec>, ManifestError> {
    let fail = |problems: Vec<Problem>| ManifestError {
        file: file.to_owned(),
        problems,
    };
    if let Some(message) = oversize(text.len() as u64) {
        return Err(fail(vec![Problem::whole_file(message)]));
    }
    let outline = read_outline(text).map_err(|message| fail(vec![Problem::whole_file(message)]))?;
    let names = match outline {
        Outline::NoEntries => return Ok(vec![]),
        Outline::Entries(names) if names.len() > MAX_MANIFEST_ENTRIES => {
            return Err(fail(vec![Problem::whole_file(format!(
                "the file has {} entries, more than the {MAX_MANIFEST_ENTRIES} a stacks file may \
                 hold: split it into several files and apply each (without --prune)",
                names.len()
            ))]));
        }
        Outline::Entries(names) => EntryNames(names),
    };
    let mut stacks = read_entries(text, &names).map_err(|problem| fail(vec![problem]))?;
    let mut problems = Vec::new();
    if let Some(base) = base {
        for (index, spec) in stacks.iter_mut().enumerate() {
            for (field, message) in base.resolve(spec) {
                problems.push(Problem {
                    entry: Some(names.entry(index)),
                    field: Some(field),
                    message,
                });
            }
        }
    }
    problems.extend(rule_problems(&stacks, &names));
    problems.extend(clash_problems(&stacks, &names));
    if problems.is_empty() {
        problems.extend(cycle_problem(&stacks, &names));
    }
    if problems.is_empty() {
        Ok(stacks)
    } else {
        Err(fail(problems))
    }
}

/// What the first, untyped read of a file found under `stacks`.
enum Outline {
    /// `stacks:` with nothing after it: a file with no entries.
    NoEntries,
    /// A list: the `name` of each entry, when it has a readable one.
    Entries(Vec<Option<String>>),
}

/// The first pass: the syntax and the overall shape, with line numbers from
/// the parser, and the entries' names for the messages of later passes.
fn read_outline(text: &str) -> Result<Outline, String> {
    if text.trim().is_empty() {
        return Err("the file is empty: expected `stacks:` followed by a list of entries".into());
    }
    crate::yaml::check_expansion(text, crate::yaml::MAX_YAML_NODES)?;
    let value: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(text).map_err(|e| format!("not valid YAML: {e}"))?;
    let Some(top) = value.as_mapping() else {
        return Err("expected a mapping with a `stacks:` list at the top of the file".into());
    };
    if !top.contains_key("stacks") {
        return Err("there is no `stacks:` list in the file".into());
    }
    match value.get("stacks") {
        Some(serde_yaml_ng::Value::Sequence(items)) => Ok(Outline::Entries(
            items
                .iter()
                .map(|item| item.get("name").and_then(|n| n.as_str()).map(str::to_owned))
                .collect(),
        )),
        Some(serde_yaml_ng::Value::Null) => Ok(Outline::NoEntries),
        _ => Err("`stacks` must be a list of entries".into()),
    }
}

/// The entries' names, by position, to say which entry a problem is about.
struct EntryNames(Vec<Option<String>>);

impl EntryNames {
    fn entry(&self, index: usize) -> EntryRef {
        EntryRef {
            index,
            name: self.0.get(index).cloned().flatten(),
        }
    }
}

/// The second pass: the typed read of every entry. On failure the path in
/// the document says which entry and field went wrong.
fn read_entries(text: &str, names: &EntryNames) -> Result<Vec<StackSpec>, Problem> {
    let de = serde_yaml_ng::Deserializer::from_str(text);
    match serde_path_to_error::deserialize::<_, Manifest>(de) {
        Ok(m) => Ok(m.stacks),
        Err(e) => {
            let (entry, field) = split_path(e.path());
            Err(Problem {
                entry: entry.map(|index| names.entry(index)),
                field,
                message: without_path(e.into_inner().to_string()),
            })
        }
    }
}

/// The parser's message without the path it starts with
/// (`stacks[1].source: ...`): the problem already names entry and field.
fn without_path(message: String) -> String {
    match message.split_once(": ") {
        Some((path, rest)) if path.starts_with("stacks") && !path.contains(' ') => rest.to_owned(),
        _ => message,
    }
}

/// The third pass, over every entry: the rules of [`validate_spec`].
fn rule_problems(stacks: &[StackSpec], names: &EntryNames) -> Vec<Problem> {
    let mut problems = Vec::new();
    for (index, spec) in stacks.iter().enumerate() {
        for error in validate_spec(spec) {
            problems.push(Problem {
                entry: Some(names.entry(index)),
                field: Some(error.field),
                message: error.message,
            });
        }
    }
    problems
}

/// The third pass, across entries: every name used once, and no
/// CloudFormation stack (name and region) driven by two entries.
fn clash_problems(stacks: &[StackSpec], names: &EntryNames) -> Vec<Problem> {
    let mut problems = Vec::new();
    let mut by_name: BTreeMap<&str, usize> = BTreeMap::new();
    let mut by_stack: BTreeMap<(Option<&str>, Option<&str>, &str), usize> = BTreeMap::new();
    for (index, spec) in stacks.iter().enumerate() {
        if let Some(first) = by_name.insert(&spec.name, index) {
            problems.push(Problem {
                entry: Some(names.entry(index)),
                field: Some("name".into()),
                message: format!(
                    "{:?} is already the name of stacks[{first}]: names must be unique",
                    spec.name
                ),
            });
            continue;
        }
        // The installation's region is not known here: `apply` compares a
        // spec without `region` with one naming it.
        let stack = spec.stack_key(None);
        if let Some(first) = by_stack.insert(stack, index) {
            problems.push(Problem {
                entry: Some(names.entry(index)),
                field: Some("stackName".into()),
                message: format!(
                    "stacks[{first}] already manages the CloudFormation stack {:?}{}{}: \
                     two entries must not drive one stack",
                    stack.2,
                    stack.1.map(|r| format!(" in {r}")).unwrap_or_default(),
                    stack
                        .0
                        .map(|a| format!(" of account {a}"))
                        .unwrap_or_default()
                ),
            });
        }
    }
    problems
}

/// A cycle among the file's own dependencies (`dependsOn`, `fromStack`):
/// no stack of it could ever run first. (Dependencies on entries outside
/// the file are `apply`'s to check, against the registry.)
fn cycle_problem(stacks: &[StackSpec], names: &EntryNames) -> Option<Problem> {
    let specs: BTreeMap<&str, &StackSpec> = stacks.iter().map(|s| (s.name.as_str(), s)).collect();
    let cycle = crate::spec::find_cycle(&specs)?;
    let index = stacks.iter().position(|s| s.name == cycle[0])?;
    Some(Problem {
        entry: Some(names.entry(index)),
        field: Some("dependsOn".into()),
        message: format!(
            "the dependencies form a cycle ({}): no stack of it could ever run first",
            cycle.join(" → ")
        ),
    })
}

/// `stacks[2].source.path` → (Some(2), Some("source.path")).
fn split_path(path: &serde_path_to_error::Path) -> (Option<usize>, Option<String>) {
    use serde_path_to_error::Segment;
    let mut segments = path.iter();
    let mut index = None;
    if let Some(Segment::Map { key }) = segments.next()
        && key == "stacks"
        && let Some(Segment::Seq { index: i }) = segments.next()
    {
        index = Some(*i);
    }
    let mut field = String::new();
    for segment in segments {
        match segment {
            Segment::Map { key } => {
                if !field.is_empty() {
                    field.push('.');
                }
                field.push_str(key);
            }
            Segment::Seq { index } => field.push_str(&format!("[{index}]")),
            Segment::Enum { .. } | Segment::Unknown => {}
        }
    }
    (index, (!field.is_empty()).then_some(field))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "\
stacks:
  - name: orders-queue
    stackName: prod-orders-queue
    region: eu-west-1
    roleArn: arn:aws:iam::111122223333:role/cfn-exec
    source:
      git: https://github.com/acme/infra.git
      ref: main
      path: queues/orders.yaml
    parameters: { RetentionDays: 14 }
    tags: { team: orders }
    capabilities: [CAPABILITY_IAM]
    interval: 10m
  - name: billing
    source: { s3: 's3://acme-artifacts/billing.zip', path: template.yaml }
";

    fn problem(text: &str) -> String {
        parse_manifest("stacks.yaml", text).unwrap_err().to_string()
    }

    #[test]
    fn a_good_file_reads_every_entry() {
        let specs = parse_manifest("stacks.yaml", GOOD).unwrap();
        assert_eq!(specs.len(), 2);
        assert_eq!(specs[0].effective_stack_name(), "prod-orders-queue");
        assert_eq!(specs[0].parameters["RetentionDays"], "14");
        assert_eq!(specs[1].effective_ref(), None);
    }

    #[test]
    fn a_dependency_cycle_within_the_file_is_refused_offline_naming_it() {
        let entry = |name: &str, extra: &str| {
            format!(
                "  - name: {name}\n    source: {{git: 'https://h/r.git', path: {name}.yaml}}\n{extra}"
            )
        };
        let msg = problem(&format!(
            "stacks:\n{}{}",
            entry("a", "    dependsOn: [b]\n"),
            entry("b", "    parameters: {P: {fromStack: a, output: O}}\n"),
        ));
        assert!(
            msg.contains("stacks[0] (a)") && msg.contains("dependsOn"),
            "{msg}"
        );
        assert!(msg.contains("a cycle (a → b → a)"), "{msg}");
        // A dependency outside the file is apply's to check.
        let outside = format!("stacks:\n{}", entry("a", "    dependsOn: [elsewhere]\n"));
        assert!(parse_manifest("f", &outside).is_ok());
    }

    #[test]
    fn an_empty_list_is_valid_and_an_empty_file_is_not() {
        assert_eq!(parse_manifest("f", "stacks: []\n").unwrap(), vec![]);
        assert_eq!(parse_manifest("f", "stacks:\n").unwrap(), vec![]);
        assert!(problem("").contains("the file is empty"));
    }

    #[test]
    fn syntax_errors_carry_the_line() {
        let msg = problem("stacks:\n  - name: [unclosed\n");
        assert!(msg.starts_with("stacks.yaml: not valid YAML"), "{msg}");
        assert!(msg.contains("line"), "{msg}");
    }

    #[test]
    fn type_errors_name_the_entry_and_the_field() {
        let msg = problem(
            "stacks:\n  - name: a\n    source: {git: x, path: t.yaml}\n  - name: b\n    source: {git: x, pth: t.yaml}\n",
        );
        assert!(
            msg.contains("stacks[1] (b): field source.pth: unknown field `pth`"),
            "{msg}"
        );
        assert!(msg.contains("at line 5"), "{msg}");
        let msg =
            problem("stacks:\n  - name: a\n    source: {git: x, path: t.yaml}\n    interval: 10\n");
        assert!(
            msg.contains("stacks[0] (a): field interval: 10 has no unit"),
            "{msg}"
        );
    }

    #[test]
    fn rule_errors_name_the_entry_and_the_field() {
        let msg = problem("stacks:\n  - name: a\n    source: {git: x, path: ../t.yaml}\n");
        assert!(
            msg.contains("stacks[0] (a): field source.path: \"../t.yaml\" leaves the source"),
            "{msg}"
        );
    }

    #[test]
    fn duplicate_names_and_shared_stacks_are_refused() {
        let msg = problem(
            "stacks:\n  - {name: a, source: {git: x, path: t.yaml}}\n  - {name: a, source: {git: y, path: t.yaml}}\n",
        );
        assert!(
            msg.contains("stacks[1] (a): field name: \"a\" is already the name of stacks[0]"),
            "{msg}"
        );
        let msg = problem(
            "stacks:\n  - {name: a, source: {git: x, path: t.yaml}}\n  - {name: b, stackName: a, source: {git: y, path: t.yaml}}\n",
        );
        assert!(
            msg.contains("stacks[1] (b): field stackName: stacks[0] already manages"),
            "{msg}"
        );
    }

    #[test]
    fn anchors_that_expand_past_the_bound_are_refused_whole() {
        let text = format!(
            "x: &x [{}]\ny: [{}]\nstacks: []\n",
            vec!["v"; 20_000].join(", "),
            vec!["*x"; 100].join(", ")
        );
        let msg = problem(&text);
        assert!(
            msg.contains("expands to more than 1000000 values through its anchors and aliases"),
            "{msg}"
        );
    }

    #[test]
    fn a_file_too_large_or_with_too_many_entries_is_refused_whole() {
        let entry = "  - {name: s, source: {git: x, path: t.yaml}}\n";
        let many = format!("stacks:\n{}", entry.repeat(MAX_MANIFEST_ENTRIES + 1));
        let msg = problem(&many);
        assert!(
            msg.starts_with("stacks.yaml: the file has 10001 entries, more than the 10000"),
            "{msg}"
        );
        let huge = format!("stacks: []\n#{}\n", "x".repeat(MAX_MANIFEST_BYTES as usize));
        let msg = problem(&huge);
        assert!(
            msg.contains("more than the 8388608 a stacks file may hold"),
            "{msg}"
        );
        assert!(msg.contains("split it into several files"), "{msg}");
    }

    #[test]
    fn the_top_level_shape_is_checked() {
        assert!(problem("- a\n- b\n").contains("expected a mapping"));
        assert!(problem("stack: []\n").contains("no `stacks:`"));
        assert!(problem("stacks: {a: 1}\n").contains("must be a list"));
        assert!(problem("stacks: []\nextra: 1\n").contains("unknown field `extra`"));
    }
}
