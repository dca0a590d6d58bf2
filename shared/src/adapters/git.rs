//! Git sources, fetched in-process with gix: Lambda has no `git` binary.
//!
//! Resolving a ref lists the remote's refs only (no objects); fetching takes
//! exactly one commit, shallow (depth 1), into a fresh bare repository with no
//! worktree, reads every blob of its tree, and removes the repository. Size is
//! checked from object headers before anything is inflated.
//!
//! Transports: smart HTTP(S) and `git://` in-process; `file://` and local paths
//! run `git-upload-pack` (tests); `ssh://` needs the `ssh` program, which a
//! Lambda runtime does not have.

use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use gix::bstr::{BStr, ByteSlice};
use gix::protocol::handshake::Ref;
use gix::protocol::transport::client::blocking_io::connect;
use gix::remote::{Direction, fetch::Shallow, fetch::Tags};

use crate::ports::{PortError, PortResult, SourceFetcher};

/// Files of a tree: (path, bytes).
type Files = Vec<(String, Vec<u8>)>;

/// Most bytes of files one revision may hold.
pub const MAX_TREE_BYTES: u64 = 256 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
enum Error {
    #[error("git: {0}")]
    Git(#[from] gix::Error),
    #[error("reference {0:?} not found on the remote")]
    RefNotFound(String),
    #[error("{reference:?} resolved to {object}, which is not a commit")]
    NotACommit { reference: String, object: String },
    #[error("the files at this revision exceed {limit} bytes")]
    TooLarge { limit: u64 },
    #[error("work folder {0} exists and is not empty")]
    WorkdirNotEmpty(String),
}

impl Error {
    fn into_port(self, url: &str) -> PortError {
        match self {
            // The remote answered, and the answer is final.
            Error::RefNotFound(_) | Error::NotACommit { .. } | Error::TooLarge { .. } => {
                PortError::Rejected(format!("{url}: {self}"))
            }
            Error::Git(e) => {
                // gix's Display is the top message only; the sources say why.
                let mut chain = format!("{e}\n{e:?}");
                let mut source = std::error::Error::source(&e);
                while let Some(cause) = source {
                    chain.push('\n');
                    chain.push_str(&cause.to_string());
                    source = cause.source();
                }
                let text = format!("{url}: {e} ({})", last_cause(&chain));
                if is_final_git_failure(&chain) {
                    PortError::Rejected(text)
                } else {
                    PortError::Transient(text)
                }
            }
            Error::WorkdirNotEmpty(_) => PortError::Transient(format!("{url}: {self}")),
        }
    }
}

/// Failures another try will not mend: no such repository, no access, a
/// commit the server will not give, a transport Lambda cannot run.
/// Anything else (connection refused, timeouts, 5xx) is worth retrying.
fn is_final_git_failure(chain: &str) -> bool {
    const FINAL: [&str; 9] = [
        "not a valid git directory",
        "does not appear to be a git repository",
        "Repository not found",
        "not our ref",
        "401",
        "403",
        "404",
        "Authentication",
        "No such file or directory",
    ];
    FINAL.iter().any(|needle| chain.contains(needle))
}

/// The innermost message of a gix error chain, for people.
fn last_cause(chain: &str) -> &str {
    chain
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or(chain)
}

/// The Git [`SourceFetcher`].
#[derive(Debug, Clone)]
pub struct GitFetcher {
    workdir: PathBuf,
}

impl GitFetcher {
    /// `workdir`: where temporary bare repositories go (`/tmp` in Lambda).
    pub fn new(workdir: impl Into<PathBuf>) -> Self {
        Self {
            workdir: workdir.into(),
        }
    }
}

impl SourceFetcher for GitFetcher {
    async fn resolve(&self, url: &str, reference: &str) -> PortResult<String> {
        // A local repository that is not there will not appear on a retry
        // (the transport would only report a broken pipe).
        if let Some(path) = url.strip_prefix("file://")
            && !Path::new(path).exists()
        {
            return Err(PortError::Rejected(format!(
                "{url}: there is no repository at {path}"
            )));
        }
        let (url, reference) = (url.to_owned(), reference.to_owned());
        tokio::task::spawn_blocking(move || {
            ls_remote(&url, &reference).map_err(|e| e.into_port(&url))
        })
        .await
        .map_err(|e| PortError::Transient(format!("git resolve: {e}")))?
    }

    async fn fetch(&self, url: &str, revision: &str) -> PortResult<Vec<(String, Vec<u8>)>> {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let dir = self.workdir.join(format!(
            "fetch-{}-{}-{}",
            std::process::id(),
            crate::clock::now_millis(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let (url, revision) = (url.to_owned(), revision.to_owned());
        tokio::task::spawn_blocking(move || {
            if let Some(parent) = dir.parent() {
                std::fs::create_dir_all(parent).map_err(|e| {
                    PortError::Transient(format!(
                        "git fetch: cannot create {}: {e}",
                        parent.display()
                    ))
                })?;
            }
            let result = fetch_tree(&url, &revision, &dir, MAX_TREE_BYTES);
            let _ = std::fs::remove_dir_all(&dir);
            result
                .map(|(_, files)| files)
                .map_err(|e| e.into_port(&url))
        })
        .await
        .map_err(|e| PortError::Transient(format!("git fetch: {e}")))?
    }
}

fn is_full_sha(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Full ref names to try for a short name, in git's `rev-parse` order (tags win over branches).
fn candidates(reference: &str) -> Vec<String> {
    if reference.starts_with("refs/") || reference == "HEAD" {
        return vec![reference.to_owned()];
    }
    vec![
        format!("refs/{reference}"),
        format!("refs/tags/{reference}"),
        format!("refs/heads/{reference}"),
    ]
}

/// The commit a remote ref points to (annotated tags peeled), or None if unborn.
fn ref_commit(r: &Ref) -> Option<(&BStr, gix::ObjectId)> {
    match r {
        Ref::Peeled {
            full_ref_name,
            object,
            ..
        }
        | Ref::Direct {
            full_ref_name,
            object,
        }
        | Ref::Symbolic {
            full_ref_name,
            object,
            ..
        } => Some((full_ref_name.as_bstr(), *object)),
        Ref::Unborn { .. } => None,
    }
}

fn pick<'a>(refs: &'a [Ref], reference: &str) -> Option<&'a Ref> {
    candidates(reference).iter().find_map(|c| {
        refs.iter()
            .find(|r| ref_commit(r).is_some_and(|(n, _)| n == c.as_bytes()))
    })
}

/// Resolve `reference` to a commit SHA via the handshake + `ls-refs` only (no objects transferred).
/// A 40-hex SHA is returned as-is (lower-cased) without contacting the server.
fn ls_remote(url: &str, reference: &str) -> Result<String, Error> {
    if is_full_sha(reference) {
        return Ok(reference.to_ascii_lowercase());
    }
    let mut transport = connect::connect(
        url,
        connect::Options {
            version: gix::protocol::transport::Protocol::V2,
            ..Default::default()
        },
    )?;
    let mut progress = gix::progress::Discard;
    let mut handshake = gix::protocol::handshake(
        &mut transport,
        gix::protocol::transport::Service::UploadPack,
        |_action| Ok(None), // never prompt / run credential helpers
        Vec::new(),
        &mut progress,
    )?;
    let refs = match handshake.refs.take() {
        Some(refs) => refs, // protocol v0/v1 server: refs came with the handshake
        None => {
            let mut prefixes = gix::protocol::ls_refs::RefPrefixes::new();
            prefixes.extend(candidates(reference).into_iter().map(Into::into));
            gix::protocol::LsRefsCommand::new(
                Some(prefixes),
                &handshake.capabilities,
                (
                    "agent",
                    Some(concat!("stacksync/", env!("CARGO_PKG_VERSION")).into()),
                ),
            )
            .invoke_blocking(&mut transport, &mut progress, false)?
        }
    };
    let r = pick(&refs, reference).ok_or_else(|| Error::RefNotFound(reference.to_owned()))?;
    ref_commit(r)
        .map(|(_, id)| id.to_string())
        .ok_or_else(|| Error::RefNotFound(reference.to_owned()))
}

/// A shallow (depth 1) fetch of exactly one commit into a fresh bare
/// repository at `workdir`: the commit's id and every file of its tree
/// (symlinks and submodules skipped), at most `max_total_bytes` in all.
fn fetch_tree(
    url: &str,
    reference: &str,
    workdir: &Path,
    max_total_bytes: u64,
) -> Result<(String, Files), Error> {
    let repo = init_bare(workdir)?;
    // No destination in the refspec: nothing is written under refs/, so no reflog/committer needed.
    // A 40-hex source is sent as a plain `want <sha>` (needs protocol v2 or uploadpack.allowAnySHA1InWant).
    let spec: String = if is_full_sha(reference) {
        reference.to_ascii_lowercase()
    } else {
        reference.to_owned()
    };
    let remote = repo
        .remote_at(url)?
        .with_fetch_tags(Tags::None)
        .with_refspecs(Some(spec.as_str()), Direction::Fetch)?;
    let prepare = remote
        .connect(Direction::Fetch)?
        .with_credentials(|_action| Ok(None))
        .prepare_fetch(gix::progress::Discard, Default::default())?;
    // Which object did the refspec select? (ls-refs already happened inside prepare_fetch.)
    let wanted = wanted_object(prepare.ref_map(), reference, &spec)?;
    let interrupt = AtomicBool::new(false);
    prepare
        .with_shallow(Shallow::DepthAtRemote(NonZeroU32::MIN))
        .receive(gix::progress::Discard, &interrupt)?;
    let commit = repo
        .find_object(wanted)?
        .peel_to_commit()
        .map_err(|_| Error::NotACommit {
            reference: reference.to_owned(),
            object: wanted.to_string(),
        })?;
    let commit_id = commit.id.to_string();
    let files = read_tree(&repo, &commit.tree()?, max_total_bytes)?;
    Ok((commit_id, files))
}

/// A new bare repository at `workdir`, which must be empty or absent;
/// isolated from `~/.gitconfig`, `/etc/gitconfig` and `GIT_*` variables, so it
/// behaves the same in Lambda and in tests.
fn init_bare(workdir: &Path) -> Result<gix::Repository, Error> {
    if workdir.exists()
        && workdir
            .read_dir()
            .map(|mut d| d.next().is_some())
            .unwrap_or(true)
    {
        return Err(Error::WorkdirNotEmpty(workdir.display().to_string()));
    }
    Ok(gix::ThreadSafeRepository::init_opts(
        workdir,
        gix::create::Kind::Bare,
        gix::create::Options::default(),
        gix::open::Options::isolated(),
    )?
    .to_thread_local())
}

/// The commit a fetch of `reference` wants: the id itself, or what the
/// remote's matching ref points at.
fn wanted_object(
    ref_map: &gix::remote::fetch::RefMap,
    reference: &str,
    spec: &str,
) -> Result<gix::ObjectId, Error> {
    if is_full_sha(reference) {
        return Ok(gix::ObjectId::from_hex(spec.as_bytes()).map_err(|e| gix::Error::from_error(e))?);
    }
    let refs: Vec<Ref> = ref_map
        .mappings
        .iter()
        .filter_map(|m| match &m.remote {
            gix::remote::fetch::refmap::Source::Ref(r) => Some(r.clone()),
            gix::remote::fetch::refmap::Source::ObjectId(_) => None,
        })
        .collect();
    let r = pick(&refs, reference).ok_or_else(|| Error::RefNotFound(reference.to_owned()))?;
    ref_commit(r)
        .map(|(_, id)| id)
        .ok_or_else(|| Error::RefNotFound(reference.to_owned()))
}

/// Every file of a tree, by path; the sizes are read from the pack's
/// headers before any blob is inflated, so an oversized tree is refused
/// without holding it in memory.
fn read_tree(
    repo: &gix::Repository,
    tree: &gix::Tree<'_>,
    max_total_bytes: u64,
) -> Result<Files, Error> {
    let mut recorder = gix::traverse::tree::Recorder::default();
    tree.traverse().breadthfirst(&mut recorder)?;
    let mut total: u64 = 0;
    let mut files = Vec::new();
    for entry in recorder.records {
        use gix::object::tree::EntryKind;
        match entry.mode.kind() {
            EntryKind::Blob | EntryKind::BlobExecutable => {}
            EntryKind::Link | EntryKind::Commit | EntryKind::Tree => continue,
        }
        total += repo.find_header(entry.oid)?.size();
        if total > max_total_bytes {
            return Err(Error::TooLarge {
                limit: max_total_bytes,
            });
        }
        let data = repo.find_object(entry.oid)?.detach().data;
        files.push((entry.filepath.to_str_lossy().into_owned(), data));
    }
    files.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(files)
}
