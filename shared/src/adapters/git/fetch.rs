//! The Git protocol, as far as stacksync needs it: list refs (resolve), and
//! fetch exactly the objects it asks for into a scratch repository.

use std::num::NonZeroU32;
use std::path::Path;
use std::sync::atomic::AtomicBool;

use gix::ObjectId;
use gix::bstr::{BStr, ByteSlice};
use gix::protocol::Handshake;
use gix::protocol::fetch::negotiate::{self, Action, Round};
use gix::protocol::fetch::{Arguments, Negotiate, Shallow, Tags};
use gix::protocol::handshake::Ref;
use gix::protocol::transport::Protocol;

use super::transport::{AGENT, BoxedTransport, Timeouts, open, parse};
use super::{Error, Refusal, tree};
use crate::adapters::credentials::GitAuth;
use crate::content::Wanted;
use crate::ports::source::Files;

/// Largest single object gix may allocate for while indexing a pack: a
/// hostile pack cannot make it reserve more.
const ALLOC_LIMIT_BYTES: usize = 64 * 1024 * 1024;

pub(super) fn is_full_sha(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A connection that has shaken hands. The credentials (if any) go with
/// the first request; a server that answers 401 gets nothing more (never a
/// prompt or a credential helper), and that answer is told as what it is:
/// the credentials sent were refused, or none were configured, or a
/// redirect led to another server, where none are sent.
fn connect(
    url: &str,
    auth: &GitAuth,
    timeouts: &Timeouts,
) -> Result<(BoxedTransport, Handshake), Error> {
    let mut transport = open(url, auth, timeouts)?;
    // gix asks for credentials only when the server answered 401, with the
    // URL it was at (after any redirect).
    let mut asked_at: Option<Option<String>> = None;
    let handshake = gix::protocol::handshake(
        &mut transport,
        gix::protocol::transport::Service::UploadPack,
        |action| {
            asked_at = Some(
                action
                    .context()
                    .and_then(|c| c.url.as_ref())
                    .map(|u| u.to_string()),
            );
            Ok(None)
        },
        Vec::new(),
        &mut gix::progress::Discard,
    );
    match (handshake, asked_at) {
        (Ok(handshake), _) => Ok((transport, handshake)),
        (Err(_), Some(Some(at))) if !same_server(url, &at) => {
            Err(Error::Unauthorized(Refusal::Redirected { to: at }))
        }
        (Err(_), Some(_)) => Err(Error::Unauthorized(Refusal::Http(401))),
        (Err(e), None) => Err(e.into()),
    }
}

/// Whether two URLs are on the same scheme, host and port (where gix
/// sends the credentials after a redirect).
fn same_server(a: &str, b: &str) -> bool {
    let server = |url: &str| {
        parse(url).ok().map(|u| {
            (
                u.scheme.clone(),
                u.host().map(str::to_owned),
                u.port_or_default(),
            )
        })
    };
    server(a).is_some() && server(a) == server(b)
}

/// The commit `reference` names on the remote: `ls-refs` only, no objects.
pub(super) fn resolve(
    url: &str,
    auth: &GitAuth,
    reference: &str,
    timeouts: &Timeouts,
) -> Result<String, Error> {
    let (mut transport, mut handshake) = connect(url, auth, timeouts)?;
    let refs = match handshake.refs.take() {
        Some(refs) => refs, // protocol v0/v1: the refs came with the handshake
        None => {
            let mut prefixes = gix::protocol::ls_refs::RefPrefixes::new();
            prefixes.extend(candidates(reference).into_iter().map(Into::into));
            gix::protocol::LsRefsCommand::new(
                Some(prefixes),
                &handshake.capabilities,
                ("agent", Some(AGENT.into())),
            )
            .invoke_blocking(&mut transport, &mut gix::progress::Discard, false)?
        }
    };
    let found = pick(&refs, reference).and_then(ref_commit);
    found
        .map(|(_, id)| id.to_string())
        .ok_or_else(|| Error::RefNotFound(reference.to_owned()))
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
fn ref_commit(r: &Ref) -> Option<(&BStr, ObjectId)> {
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

/// The wanted files of the commit `revision`, fetched into a scratch
/// repository at `dir`: first the commit and its trees (no blobs where the
/// server allows a filter; else everything, streamed to disk), then only
/// the blobs the wanted paths need.
pub(super) fn fetch(
    url: &str,
    auth: &GitAuth,
    revision: &str,
    wanted: &Wanted,
    dir: &Path,
    timeouts: &Timeouts,
) -> Result<Files, Error> {
    let revision = if is_full_sha(revision) {
        revision.to_ascii_lowercase()
    } else {
        resolve(url, auth, revision, timeouts)?
    };
    let commit =
        ObjectId::from_hex(revision.as_bytes()).map_err(|e| Error::Refused(e.to_string()))?;
    let repo = init_bare(dir)?;
    // The pack gix maps, out of the resident set as it is read (a server
    // without filters sends every blob of the commit).
    let _pager = super::pages::Pager::start(dir);
    let (mut transport, mut handshake) = connect(url, auth, timeouts)?;
    // Protocol v0 servers check wants against their refs: a blob is
    // never one, so the filter (and the second round) is for v2 only.
    let filter = handshake.server_protocol_version == Protocol::V2;
    let mut wants = Wants {
        ids: vec![commit],
        filter,
    };
    receive(
        &repo,
        &mut transport,
        &mut handshake,
        &mut wants,
        Shallow::DepthAtRemote(NonZeroU32::MIN),
    )?;
    drop(transport);
    let found = repo
        .find_object(commit)
        .map_err(|e| Error::Refused(format!("commit {revision}: {e}")))?;
    let commit = found.try_into_commit().map_err(|_| Error::NotACommit {
        reference: revision.clone(),
        object: commit.to_string(),
    })?;
    super::signed::check(&commit, &wanted.signed_by)?;
    let tree_id = commit
        .tree_id()
        .map_err(|e| Error::Refused(e.to_string()))?;
    tree::take(&repo, tree_id.detach(), wanted, |blobs| {
        let (mut transport, mut handshake) = connect(url, auth, timeouts)?;
        let mut wants = Wants {
            ids: blobs.to_vec(),
            filter: false,
        };
        receive(
            &repo,
            &mut transport,
            &mut handshake,
            &mut wants,
            Shallow::NoChange,
        )
    })
}

/// A new bare repository at `dir`, which must be absent or empty; isolated
/// from `~/.gitconfig`, `/etc/gitconfig` and `GIT_*` variables, so it
/// behaves the same in Lambda and in tests.
fn init_bare(dir: &Path) -> Result<gix::Repository, Error> {
    if dir.exists()
        && dir
            .read_dir()
            .map(|mut d| d.next().is_some())
            .unwrap_or(true)
    {
        return Err(Error::Transient(format!(
            "work folder {} exists and is not empty",
            dir.display()
        )));
    }
    std::fs::create_dir_all(dir)?;
    Ok(gix::ThreadSafeRepository::init_opts(
        dir,
        gix::create::Kind::Bare,
        gix::create::Options::default(),
        gix::open::Options::isolated(),
    )
    .map_err(gix::Error::from_error)?
    .to_thread_local())
}

/// What to ask for: these objects, with no haves (the repository is new),
/// in one round; without their blobs when `filter` and the server allows it.
struct Wants {
    ids: Vec<ObjectId>,
    filter: bool,
}

impl Negotiate for Wants {
    fn mark_complete_and_common_ref(&mut self) -> gix::error::Result<Action> {
        Ok(Action::MustNegotiate {
            remote_ref_target_known: Vec::new(),
        })
    }

    fn add_wants(&mut self, arguments: &mut Arguments, _known: &[bool]) -> bool {
        for id in &self.ids {
            arguments.want(id);
        }
        if self.filter && arguments.can_use_filter() {
            arguments.filter("blob:none");
        }
        !self.ids.is_empty()
    }

    fn one_round(
        &mut self,
        _state: &mut negotiate::one_round::State,
        _arguments: &mut Arguments,
        _previous: Option<&gix::protocol::fetch::Response>,
    ) -> gix::error::Result<(Round, bool)> {
        let round = Round {
            haves_sent: 0,
            in_vain: 0,
            haves_to_send: 0,
            previous_response_had_at_least_one_in_common: false,
        };
        Ok((round, true))
    }
}

/// One fetch command: the pack it answers streams to disk (with its index)
/// in the repository's object store.
fn receive(
    repo: &gix::Repository,
    transport: &mut BoxedTransport,
    handshake: &mut Handshake,
    wants: &mut Wants,
    shallow: Shallow,
) -> Result<(), Error> {
    let pack_dir = repo.objects.store_ref().path().join("pack");
    let interrupt = AtomicBool::new(false);
    let options = gix::odb::pack::bundle::write::Options {
        thread_limit: Some(1),
        iteration_mode: gix::odb::pack::data::input::Mode::Verify,
        index_version: Default::default(),
        alloc_limit_bytes: Some(ALLOC_LIMIT_BYTES),
        compression: Default::default(),
    };
    let context = gix::protocol::fetch::Context {
        handshake,
        transport,
        user_agent: ("agent", Some(AGENT.into())),
        trace_packetlines: false,
    };
    let fetch_options = gix::protocol::fetch::Options {
        shallow_file: repo.shallow_file().map_err(gix::Error::from_error)?,
        shallow: &shallow,
        tags: Tags::None,
        reject_shallow_remote: false,
    };
    gix::protocol::fetch(
        wants,
        |reader, progress, interrupt| {
            gix::odb::pack::Bundle::write_to_directory(
                reader,
                Some(&pack_dir),
                progress,
                interrupt,
                None::<gix::objs::find::Never>,
                gix::hash::Kind::Sha1,
                options,
            )?;
            Ok(true)
        },
        gix::progress::Discard,
        &interrupt,
        context,
        fetch_options,
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_are_tried_as_git_rev_parse_tries_them() {
        assert_eq!(
            candidates("main"),
            ["refs/main", "refs/tags/main", "refs/heads/main"]
        );
        assert_eq!(candidates("refs/heads/x"), ["refs/heads/x"]);
        assert_eq!(candidates("HEAD"), ["HEAD"]);
        assert!(is_full_sha(&"a".repeat(40)) && !is_full_sha("abc"));
    }
}
