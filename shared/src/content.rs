//! What a run takes from a source, and the rules that content must meet.
//!
//! A run needs a few files of a source: the template, the parameter file and
//! what `source.include` lists. [`Wanted`] names them; the adapters fetch
//! those and nothing else, within the limits below, whatever the repository
//! or archive holds besides. Sources are untrusted input: every way a Git
//! tree or an archive can point outside itself, hide a file elsewhere (Git
//! LFS, submodules) or blow up in size is refused here with its own
//! [`ContentError`], which names the file.
//!
//! Symbolic links: a link whose target, read relative to the link's folder,
//! stays inside the source is followed (at most [`MAX_LINK_HOPS`] links per
//! path), so `template.yaml -> envs/prod.yaml` works; a link to an absolute
//! path or out of the source is refused.

use crate::hash::sha256_hex;
use crate::spec::StackSpec;

/// Most symbolic links followed for one path.
pub const MAX_LINK_HOPS: usize = 8;
/// Largest file a run takes from a source.
pub const MAX_FILE_BYTES: u64 = 10 * 1024 * 1024;
/// Most bytes one run takes from a source, all files together.
pub const MAX_WANTED_BYTES: u64 = 32 * 1024 * 1024;
/// Most files one run takes from a source (an included folder counts each).
pub const MAX_WANTED_FILES: usize = 1_000;
/// Largest archive object (compressed) an S3 source may be.
pub const MAX_ARCHIVE_BYTES: u64 = 256 * 1024 * 1024;
/// Most entries an archive may hold.
pub const MAX_ARCHIVE_ENTRIES: usize = 100_000;
/// Most bytes an archive may unpack to, all entries together.
pub const MAX_UNPACKED_BYTES: u64 = 1024 * 1024 * 1024;
/// Highest compression ratio accepted for anything over [`RATIO_FLOOR`]
/// bytes unpacked: ordinary text compresses 3–10×, a bomb 1,000×.
pub const MAX_RATIO: u64 = 200;
/// Unpacked size under which the ratio is not checked (tiny files of one
/// repeated byte compress far, harmlessly).
pub const RATIO_FLOOR: u64 = 1024 * 1024;
/// The first line of a Git LFS pointer file.
const LFS_POINTER: &[u8] = b"version https://git-lfs.github.com/spec/v1";

/// Why a file is wanted: said in every message about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    Template,
    ParameterFile,
    DeploymentFile,
    Included,
    /// A registry source's stacks file (`crate::registry_source`).
    StacksFile,
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Role::Template => "template",
            Role::ParameterFile => "parameter file",
            Role::DeploymentFile => "deployment file",
            Role::Included => "included path",
            Role::StacksFile => "stacks file",
        })
    }
}

/// The paths a run takes from a source: each must be there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    /// (normal path, role), sorted, each path once: a file, or for
    /// [`Role::Included`] a file or a folder (everything under it).
    pub paths: Vec<(String, Role)>,
    /// When not empty, the commit must carry an SSH signature by one of
    /// these keys (OpenSSH public keys; `source.signedBy`).
    pub signed_by: Vec<String>,
    /// How much the fetch may take, all paths together.
    pub limits: Limits,
}

/// How many files and bytes one fetch may take, and what a message about
/// going over says to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub files: usize,
    pub bytes: u64,
    /// Said after "over N files": where the excess comes from.
    pub hint: &'static str,
}

impl Default for Limits {
    /// What a stack's own files (template, parameter file, `source.include`) may take.
    fn default() -> Self {
        Self {
            files: MAX_WANTED_FILES,
            bytes: MAX_WANTED_BYTES,
            hint: "source.include may list too much",
        }
    }
}

impl Wanted {
    /// What a stack's runs take: its template, parameter file and includes.
    /// With `source.deploymentFile`, the deployment file stands for the
    /// template until it is read ([`Wanted::with_template`]).
    pub fn of(spec: &StackSpec) -> Self {
        let mut paths = Vec::new();
        if !spec.source.path.is_empty() {
            paths.push((normal(&spec.source.path), Role::Template));
        }
        if let Some(file) = &spec.parameter_file {
            paths.push((normal(file), Role::ParameterFile));
        }
        if let Some(file) = &spec.source.deployment_file {
            paths.push((normal(file), Role::DeploymentFile));
        }
        paths.extend(
            spec.source
                .include
                .iter()
                .map(|p| (normal(p), Role::Included)),
        );
        let mut wanted = Self::new(paths);
        wanted.signed_by = spec.source.signed_by.clone();
        wanted
    }

    /// The same, with the template a deployment file named.
    pub fn with_template(&self, template: &str) -> Self {
        let mut paths = self.paths.clone();
        paths.push((normal(template), Role::Template));
        let mut wanted = Self::new(paths);
        wanted.signed_by = self.signed_by.clone();
        wanted.limits = self.limits;
        wanted
    }

    /// Sorted, and each path once (under its first role in [`Role`]'s order).
    pub fn new(mut paths: Vec<(String, Role)>) -> Self {
        paths.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
        paths.dedup_by(|later, first| later.0 == first.0);
        Self {
            paths,
            signed_by: Vec::new(),
            limits: Limits::default(),
        }
    }

    /// Sixteen hex digits naming the set: artifacts are stored per source,
    /// revision and set, so stacks that take the same files share one.
    /// The keys a commit must be signed by are part of it: an artifact
    /// stored without the check never serves a stack that asks for it.
    pub fn key(&self) -> String {
        let mut listed: Vec<&str> = self.paths.iter().map(|(p, _)| p.as_str()).collect();
        if !self.signed_by.is_empty() {
            listed.push("\0signed-by");
            listed.extend(self.signed_by.iter().map(String::as_str));
        }
        sha256_hex(listed.join("\n").as_bytes())[..16].to_owned()
    }

    /// The role under which `path` (normal) is wanted: as itself, or as a
    /// file under an included folder.
    pub fn role_of(&self, path: &str) -> Option<Role> {
        self.paths.iter().find_map(|(wanted, role)| {
            let under = *role == Role::Included
                && path.len() > wanted.len()
                && path.starts_with(wanted.as_str())
                && path.as_bytes()[wanted.len()] == b'/';
            (path == wanted || under).then_some(*role)
        })
    }
}

/// `./a//b/` → `a/b`: the form paths are compared in.
pub fn normal(path: &str) -> String {
    path.split('/')
        .filter(|part| !part.is_empty() && *part != ".")
        .collect::<Vec<_>>()
        .join("/")
}

/// Why a source's content is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContentError {
    #[error("{role} {path} is not in the source")]
    Missing { path: String, role: Role },
    #[error("{role} {path} is a folder, not a file")]
    Folder { path: String, role: Role },
    #[error(
        "{path} is in a Git submodule, which stacksync does not fetch: commit the file to the repository itself"
    )]
    Submodule { path: String },
    #[error(
        "{path} is stored in Git LFS (the commit holds only a pointer to it), which stacksync does not fetch: commit the file itself"
    )]
    LfsPointer { path: String },
    #[error(
        "{path} is {size} bytes, over the limit of {limit} bytes for a file taken from a source"
    )]
    FileTooLarge { path: String, size: u64, limit: u64 },
    #[error("the files a run takes from the source are over {limit} ({hint})")]
    TooMuch { limit: String, hint: &'static str },
    #[error("{path} is a symbolic link to {target:?}, which leaves the source")]
    LinkEscapes { path: String, target: String },
    #[error("{path}: more than {MAX_LINK_HOPS} symbolic links in a row (a loop?)")]
    LinkLoop { path: String },
    #[error("{path} is a symbolic link whose target is not UTF-8")]
    LinkNotUtf8 { path: String },
    #[error("archive entry {entry:?} {why}")]
    UnsafeEntry { entry: String, why: &'static str },
    #[error("the archive has more than {limit} entries")]
    TooManyEntries { limit: usize },
    #[error("the archive is {size} bytes, over the limit of {limit} bytes")]
    ArchiveTooLarge { size: u64, limit: u64 },
    #[error("the archive unpacks to more than {limit} bytes")]
    UnpacksTooLarge { limit: u64 },
    #[error(
        "archive entry {entry:?} unpacks {ratio} times its packed size (over {MAX_RATIO}): a compression bomb?"
    )]
    Bomb { entry: String, ratio: u64 },
    #[error("commit {commit} {why}")]
    Unsigned { commit: String, why: String },
    #[error("the object is not a {kind} archive stacksync can read: {why}")]
    NotAnArchive { kind: &'static str, why: String },
}

/// An archive entry's name, checked and in normal form: UTF-8, relative,
/// and never leaving the archive.
pub fn entry_name(raw: &[u8]) -> Result<String, ContentError> {
    let unsafe_entry = |why| ContentError::UnsafeEntry {
        entry: String::from_utf8_lossy(raw).into_owned(),
        why,
    };
    let name =
        std::str::from_utf8(raw).map_err(|_| unsafe_entry("has a name that is not UTF-8"))?;
    if name.contains('\0') || name.chars().any(char::is_control) {
        return Err(unsafe_entry("has a control character in its name"));
    }
    if name.contains('\\') {
        return Err(unsafe_entry(
            "has a backslash in its name (write paths with /)",
        ));
    }
    if name.starts_with('/') || name.as_bytes().get(1) == Some(&b':') {
        return Err(unsafe_entry("is an absolute path"));
    }
    if name.split('/').any(|part| part == "..") {
        return Err(unsafe_entry(
            "has a `..` in its path, which could leave the archive",
        ));
    }
    Ok(normal(name))
}

/// Where a symbolic link at `link` (normal path) points: its target read
/// relative to the link's folder, in normal form, if it stays inside.
pub fn link_target(link: &str, target: &[u8]) -> Result<String, ContentError> {
    let text = std::str::from_utf8(target).map_err(|_| ContentError::LinkNotUtf8 {
        path: link.to_owned(),
    })?;
    let escapes = || ContentError::LinkEscapes {
        path: link.to_owned(),
        target: text.to_owned(),
    };
    if text.starts_with('/') || text.is_empty() {
        return Err(escapes());
    }
    let mut parts: Vec<&str> = link.split('/').collect();
    parts.pop();
    for part in text.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop().ok_or_else(escapes)?;
            }
            other => parts.push(other),
        }
    }
    if parts.is_empty() {
        return Err(escapes());
    }
    Ok(parts.join("/"))
}

/// A wanted file's bytes, checked: not a Git LFS pointer.
pub fn check_file(path: &str, bytes: &[u8]) -> Result<(), ContentError> {
    if bytes.len() < 1024 && bytes.starts_with(LFS_POINTER) {
        return Err(ContentError::LfsPointer {
            path: path.to_owned(),
        });
    }
    Ok(())
}

/// Keeps the count and bytes of what a run takes within the limits.
#[derive(Debug, Default)]
pub struct Budget {
    files: usize,
    bytes: u64,
    limits: Limits,
}

impl Budget {
    /// A budget of `limits`.
    pub fn new(limits: Limits) -> Self {
        Self {
            files: 0,
            bytes: 0,
            limits,
        }
    }

    /// The limits it keeps.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Counts one more file of `size` bytes at `path`.
    pub fn take(&mut self, path: &str, size: u64) -> Result<(), ContentError> {
        if size > MAX_FILE_BYTES {
            return Err(ContentError::FileTooLarge {
                path: path.to_owned(),
                size,
                limit: MAX_FILE_BYTES,
            });
        }
        self.files += 1;
        self.bytes += size;
        let limits = self.limits;
        if self.files > limits.files {
            return Err(ContentError::TooMuch {
                limit: format!("{} files", limits.files),
                hint: limits.hint,
            });
        }
        if self.bytes > limits.bytes {
            return Err(ContentError::TooMuch {
                limit: format!("{} bytes", limits.bytes),
                hint: limits.hint,
            });
        }
        Ok(())
    }
}

/// Whether `unpacked` bytes from `packed` is a ratio only a bomb has.
pub fn check_ratio(entry: &str, packed: u64, unpacked: u64) -> Result<(), ContentError> {
    if unpacked <= RATIO_FLOOR {
        return Ok(());
    }
    let ratio = unpacked / packed.max(1);
    if ratio > MAX_RATIO {
        return Err(ContentError::Bomb {
            entry: entry.to_owned(),
            ratio,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wanted() -> Wanted {
        Wanted::new(vec![
            ("stacks/q.yaml".into(), Role::Template),
            ("nested".into(), Role::Included),
            ("params/q.json".into(), Role::ParameterFile),
            ("stacks/q.yaml".into(), Role::Included),
        ])
    }

    #[test]
    fn a_wanted_set_is_sorted_once_and_keyed_by_its_paths() {
        let w = wanted();
        assert_eq!(
            w.paths,
            vec![
                ("nested".into(), Role::Included),
                ("params/q.json".into(), Role::ParameterFile),
                ("stacks/q.yaml".into(), Role::Template),
            ]
        );
        assert_eq!(w.key().len(), 16);
        let other = Wanted::new(vec![("stacks/q.yaml".into(), Role::Template)]);
        assert_ne!(w.key(), other.key());
        assert_eq!(w.key(), wanted().key(), "stable");
    }

    #[test]
    fn included_folders_take_what_is_under_them_and_nothing_beside() {
        let w = wanted();
        assert_eq!(w.role_of("nested/a.yaml"), Some(Role::Included));
        assert_eq!(w.role_of("nested/deep/b.yaml"), Some(Role::Included));
        assert_eq!(w.role_of("nested"), Some(Role::Included));
        assert_eq!(w.role_of("nested2/a.yaml"), None);
        assert_eq!(w.role_of("stacks/q.yaml"), Some(Role::Template));
        assert_eq!(w.role_of("stacks/q.yaml.bak"), None);
        assert_eq!(w.role_of("params"), None, "a parameter file is no folder");
    }

    #[test]
    fn hostile_entry_names_are_refused_each_with_its_reason() {
        for (raw, why) in [
            (&b"../etc/passwd"[..], "`..`"),
            (b"a/../../x", "`..`"),
            (b"/etc/passwd", "absolute"),
            (b"C:/x", "absolute"),
            (b"a\\..\\x", "backslash"),
            (b"caf\xe9.yaml", "not UTF-8"),
            (b"a\nb", "control"),
        ] {
            let err = entry_name(raw).unwrap_err().to_string();
            assert!(err.contains(why), "{raw:?}: {err}");
        }
        assert_eq!(entry_name(b"./stacks//q.yaml").unwrap(), "stacks/q.yaml");
    }

    #[test]
    fn links_inside_the_source_are_followed_and_links_out_of_it_refused() {
        assert_eq!(
            link_target("t.yaml", b"envs/prod.yaml").unwrap(),
            "envs/prod.yaml"
        );
        assert_eq!(
            link_target("a/b/t.yaml", b"../c/./x.yaml").unwrap(),
            "a/c/x.yaml"
        );
        for (link, target) in [
            ("t.yaml", &b"/etc/passwd"[..]),
            ("t.yaml", b"../outside.yaml"),
            ("a/t.yaml", b"../../x"),
            ("a/t.yaml", b".."),
            ("t.yaml", b""),
        ] {
            assert!(
                matches!(
                    link_target(link, target),
                    Err(ContentError::LinkEscapes { .. })
                ),
                "{link} -> {target:?}"
            );
        }
        assert!(matches!(
            link_target("t.yaml", b"\xff"),
            Err(ContentError::LinkNotUtf8 { .. })
        ));
    }

    #[test]
    fn lfs_pointers_oversize_files_and_bombs_are_named() {
        let pointer = b"version https://git-lfs.github.com/spec/v1\noid sha256:4d7a\nsize 12345\n";
        let err = check_file("t.yaml", pointer).unwrap_err().to_string();
        assert!(err.contains("t.yaml is stored in Git LFS"), "{err}");
        assert!(check_file("t.yaml", b"Resources: {}").is_ok());

        let mut budget = Budget::default();
        let err = budget
            .take("big", MAX_FILE_BYTES + 1)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("big is") && err.contains("over the limit"),
            "{err}"
        );
        for _ in 0..3 {
            budget.take("f", MAX_FILE_BYTES).unwrap();
        }
        assert!(matches!(
            budget.take("f", MAX_FILE_BYTES),
            Err(ContentError::TooMuch { .. })
        ));

        assert!(check_ratio("z", 10, 1000).is_ok(), "small: not checked");
        assert!(check_ratio("z", RATIO_FLOOR / 10, RATIO_FLOOR * 2).is_ok());
        let err = check_ratio("z", 1000, 100 * RATIO_FLOOR)
            .unwrap_err()
            .to_string();
        assert!(err.contains("compression bomb"), "{err}");
    }
}
