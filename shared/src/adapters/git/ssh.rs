//! SSH in-process (russh): Lambda has no `ssh` program. A deploy key from
//! the source's secret signs in; the server's host key must be one that
//! `knownHosts` lists for the host (an unknown or changed key is an error,
//! never a prompt); then `git-upload-pack` runs on an exec channel, asked
//! for protocol v2, and gix speaks Git over the channel as over a pipe.
//!
//! russh is async and gix's transport blocking: the channel is read and
//! written through the runtime's handle from the blocking fetch thread,
//! each read or write bounded by the I/O timeout. What `git-upload-pack`
//! says on stderr is kept: when it ends with a failure (no such repository,
//! a deploy key of another repository), that is the error, not the early
//! end of its output.

use std::io::{Read, Write};
use std::sync::{Arc, Mutex, PoisonError};

use gix::protocol::transport::Protocol;
use gix::protocol::transport::client::git::ConnectMode;
use gix::protocol::transport::client::git::blocking_io::Connection;
use russh::client::Handle as Session;
use russh::keys::{PrivateKeyWithHashAlg, PublicKeyOrCertificate};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::runtime::Handle;

use super::transport::{BoxedTransport, Timeouts};
use super::{Error, Refusal};
use crate::adapters::credentials::SshKey;

/// What the host key check concluded, when it refused.
type Verdict = Arc<Mutex<Option<String>>>;

/// Checks the server's host key against `knownHosts`.
struct HostKeys {
    host: String,
    port: u16,
    known_hosts: String,
    verdict: Verdict,
}

impl HostKeys {
    fn refuse(&self, why: String) -> Result<bool, russh::Error> {
        *self.verdict.lock().unwrap_or_else(PoisonError::into_inner) = Some(why);
        Ok(false)
    }
}

impl russh::client::Handler for HostKeys {
    type Error = russh::Error;

    async fn check_server_key(
        &mut self,
        offered: &PublicKeyOrCertificate,
    ) -> Result<bool, Self::Error> {
        let PublicKeyOrCertificate::PublicKey { key, .. } = offered else {
            return self.refuse(format!(
                "{} offered a host certificate; stacksync checks host keys against knownHosts only",
                self.host
            ));
        };
        let fingerprint = key.fingerprint(Default::default());
        let algorithm = key.algorithm();
        match known(&self.known_hosts, &self.host, self.port, key) {
            Ok(true) => Ok(true),
            Ok(false) => self.refuse(format!(
                "the host key of {} ({algorithm} {fingerprint}) is not in the secret's knownHosts: \
                 add the host's key line (ssh-keyscan) to knownHosts",
                self.host
            )),
            Err(e) => self.refuse(format!(
                "the host key of {} ({algorithm} {fingerprint}) does not match the one knownHosts gives \
                 ({e}): refusing to connect",
                self.host
            )),
        }
    }
}

/// Whether `key` is a known key of `host`, by russh's known_hosts reading
/// (plain and hashed host names, `[host]:port`), from a scratch file.
fn known(
    known_hosts: &str,
    host: &str,
    port: u16,
    key: &russh::keys::PublicKey,
) -> Result<bool, russh::keys::Error> {
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let path = std::env::temp_dir().join(format!(
        "stacksync-known-hosts-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    std::fs::write(&path, known_hosts)?;
    let result = russh::keys::check_known_hosts_path(host, port, key, &path);
    let _ = std::fs::remove_file(&path);
    result
}

/// Git over SSH to `url` with `key`.
pub(super) fn connect(
    url: &gix::Url,
    key: &SshKey,
    timeouts: &Timeouts,
) -> Result<BoxedTransport, Error> {
    let runtime = Handle::try_current()
        .map_err(|_| Error::Transient("SSH needs the async runtime".into()))?;
    let host = url
        .host()
        .ok_or_else(|| Error::Refused("an SSH URL needs a host".into()))?
        .to_owned();
    let port = url.port.unwrap_or(22);
    let user = url.user().unwrap_or("git").to_owned();
    let path = url.path.to_string();
    let private = russh::keys::decode_secret_key(
        key.private_key.expose(),
        key.passphrase.as_ref().map(|p| p.expose()),
    )
    .map_err(|e| Error::Refused(format!("the secret's sshPrivateKey cannot be read: {e}")))?;
    let verdict = Verdict::default();
    let checker = HostKeys {
        host: host.clone(),
        port,
        known_hosts: key.known_hosts.clone(),
        verdict: verdict.clone(),
    };
    let opened = runtime.block_on(async {
        tokio::time::timeout(
            timeouts.connect + timeouts.io,
            open(checker, &host, port, &user, private, &path, timeouts),
        )
        .await
    });
    let refused = || {
        verdict
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    };
    let (session, channel) = match opened {
        Err(_) => {
            return Err(Error::TimedOut(format!(
                "SSH to {host}:{port}: no session within {:?}",
                timeouts.connect + timeouts.io
            )));
        }
        Ok(Err(e)) => return Err(refused().map(Error::Refused).unwrap_or(e)),
        Ok(Ok(opened)) => opened,
    };
    let (read, write) = channel.split();
    let session = Arc::new(session);
    Ok(Box::new(Connection::new(
        Output::new(read, &runtime, &session, timeouts.io),
        Blocking::new(write.make_writer(), &runtime, &session, timeouts.io),
        Protocol::V2,
        path,
        None::<(String, Option<u16>)>,
        ConnectMode::Process,
        false,
    )))
}

/// Signs in and starts `git-upload-pack` for `path`: the session and the
/// channel.
async fn open(
    checker: HostKeys,
    host: &str,
    port: u16,
    user: &str,
    private: russh::keys::PrivateKey,
    path: &str,
    timeouts: &Timeouts,
) -> Result<(Session<HostKeys>, russh::Channel<russh::client::Msg>), Error> {
    let config = Arc::new(russh::client::Config {
        inactivity_timeout: Some(timeouts.io),
        ..Default::default()
    });
    let ssh = |e: russh::Error| Error::Transient(format!("SSH to {host}:{port}: {e}"));
    let mut session = tokio::time::timeout(
        timeouts.connect,
        russh::client::connect(config, (host, port), checker),
    )
    .await
    .map_err(|_| {
        Error::TimedOut(format!(
            "SSH to {host}:{port}: no connection within {:?}",
            timeouts.connect
        ))
    })?
    .map_err(ssh)?;
    let hash = session
        .best_supported_rsa_hash()
        .await
        .map_err(ssh)?
        .flatten();
    let signed_in = session
        .authenticate_publickey(user, PrivateKeyWithHashAlg::new(Arc::new(private), hash))
        .await
        .map_err(ssh)?;
    if !signed_in.success() {
        return Err(Error::Unauthorized(Refusal::SshKey {
            host: host.to_owned(),
            user: user.to_owned(),
        }));
    }
    let channel = session.channel_open_session().await.map_err(ssh)?;
    // Servers that do not accept the variable speak protocol v0; gix copes.
    channel
        .set_env(false, "GIT_PROTOCOL", "version=2")
        .await
        .map_err(ssh)?;
    channel
        .exec(
            true,
            format!("git-upload-pack '{}'", path.replace('\'', "'\\''")),
        )
        .await
        .map_err(ssh)?;
    Ok((session, channel))
}

/// The most of `git-upload-pack`'s stderr kept for a message.
const STDERR_KEPT: usize = 2048;

/// `git-upload-pack` ended with a failure: its exit status and what it
/// said on stderr (the server's reason: no such repository, no access).
#[derive(Debug)]
pub(super) struct UploadPackFailed {
    exit_status: u32,
    said: String,
}

impl std::fmt::Display for UploadPackFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the server's git-upload-pack ended with exit status {}",
            self.exit_status
        )?;
        match self.said.is_empty() {
            true => f.write_str(", saying nothing"),
            false => write!(f, ": {}", self.said),
        }
    }
}

impl std::error::Error for UploadPackFailed {}

/// The channel's output, blocking: its data (stdout), with stderr kept
/// aside. At its end, a failed `git-upload-pack` is an error that says
/// why; a successful one an ordinary end of the stream.
struct Output {
    half: russh::ChannelReadHalf,
    /// Data received and not read yet, from this offset.
    pending: (Vec<u8>, usize),
    stderr: Vec<u8>,
    exit_status: Option<u32>,
    eof: bool,
    ended: bool,
    runtime: Handle,
    timeout: std::time::Duration,
    _session: Arc<Session<HostKeys>>,
}

impl Output {
    fn new(
        half: russh::ChannelReadHalf,
        runtime: &Handle,
        session: &Arc<Session<HostKeys>>,
        timeout: std::time::Duration,
    ) -> Self {
        Self {
            half,
            pending: (Vec::new(), 0),
            stderr: Vec::new(),
            exit_status: None,
            eof: false,
            ended: false,
            runtime: runtime.clone(),
            timeout,
            _session: session.clone(),
        }
    }

    /// The end of the output: an error if `git-upload-pack` failed.
    fn end(&mut self) -> std::io::Result<usize> {
        self.ended = true;
        match self.exit_status {
            Some(exit_status) if exit_status != 0 => {
                let said = String::from_utf8_lossy(&self.stderr);
                let said = said.split_whitespace().collect::<Vec<_>>().join(" ");
                Err(std::io::Error::other(UploadPackFailed {
                    exit_status,
                    said,
                }))
            }
            _ => Ok(0),
        }
    }
}

impl Read for Output {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use russh::ChannelMsg;
        loop {
            let (data, at) = &mut self.pending;
            if *at < data.len() {
                let n = buf.len().min(data.len() - *at);
                buf[..n].copy_from_slice(&data[*at..*at + n]);
                *at += n;
                return Ok(n);
            }
            if self.ended {
                return Ok(0);
            }
            let message = self
                .runtime
                .block_on(tokio::time::timeout(self.timeout, self.half.wait()))
                .map_err(|_| timed_out(self.timeout))?;
            match message {
                Some(ChannelMsg::Data { data }) if !self.eof => self.pending = (data.to_vec(), 0),
                Some(ChannelMsg::ExtendedData { data, ext: 1 }) => {
                    let room = STDERR_KEPT.saturating_sub(self.stderr.len());
                    self.stderr.extend_from_slice(&data[..data.len().min(room)]);
                }
                // After the output's end, the exit status follows (then
                // the channel closes): wait for it to tell how it ended.
                Some(ChannelMsg::Eof) => {
                    self.eof = true;
                    if self.exit_status.is_some() {
                        return self.end();
                    }
                }
                Some(ChannelMsg::ExitStatus { exit_status }) => {
                    self.exit_status = Some(exit_status);
                    if self.eof {
                        return self.end();
                    }
                }
                Some(ChannelMsg::Close) | None => return self.end(),
                Some(_) => {}
            }
        }
    }
}

/// The channel's input, blocking: every write runs on the runtime, bounded
/// by the I/O timeout. Holds the session open.
struct Blocking<T> {
    inner: T,
    runtime: Handle,
    timeout: std::time::Duration,
    _session: Arc<Session<HostKeys>>,
}

impl<T> Blocking<T> {
    fn new(
        inner: T,
        runtime: &Handle,
        session: &Arc<Session<HostKeys>>,
        timeout: std::time::Duration,
    ) -> Self {
        Self {
            inner,
            runtime: runtime.clone(),
            timeout,
            _session: session.clone(),
        }
    }
}

fn timed_out(after: std::time::Duration) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!("no answer over SSH within {after:?}"),
    )
}

impl<T: AsyncWrite + Unpin> Write for Blocking<T> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let Self {
            inner,
            runtime,
            timeout,
            ..
        } = self;
        runtime
            .block_on(tokio::time::timeout(*timeout, inner.write(buf)))
            .map_err(|_| timed_out(*timeout))?
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let Self {
            inner,
            runtime,
            timeout,
            ..
        } = self;
        runtime
            .block_on(tokio::time::timeout(*timeout, inner.flush()))
            .map_err(|_| timed_out(*timeout))?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ED25519: &str = "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl";

    #[test]
    fn host_keys_are_known_by_name_and_port_or_not_at_all() {
        let key = russh::keys::parse_public_key_base64(ED25519).unwrap();
        let listed =
            format!("github.com ssh-ed25519 {ED25519}\n[127.0.0.1]:2222 ssh-ed25519 {ED25519}\n");
        assert!(known(&listed, "github.com", 22, &key).unwrap());
        assert!(known(&listed, "127.0.0.1", 2222, &key).unwrap());
        assert!(!known(&listed, "gitlab.com", 22, &key).unwrap());
        assert!(
            !known(&listed, "127.0.0.1", 22, &key).unwrap(),
            "another port"
        );
    }
}
