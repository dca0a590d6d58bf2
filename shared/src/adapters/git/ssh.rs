//! SSH in-process (russh): Lambda has no `ssh` program. A deploy key from
//! the source's secret signs in; the server's host key must be one that
//! `knownHosts` lists for the host (an unknown or changed key is an error,
//! never a prompt); then `git-upload-pack` runs on an exec channel, asked
//! for protocol v2, and gix speaks Git over the channel as over a pipe.
//!
//! russh is async and gix's transport blocking: the channel is read and
//! written through the runtime's handle from the blocking fetch thread,
//! each read or write bounded by the I/O timeout.

use std::io::{Read, Write};
use std::sync::{Arc, Mutex, PoisonError};

use gix::protocol::transport::Protocol;
use gix::protocol::transport::client::git::ConnectMode;
use gix::protocol::transport::client::git::blocking_io::Connection;
use russh::client::Handle as Session;
use russh::keys::{PrivateKeyWithHashAlg, PublicKeyOrCertificate};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::runtime::Handle;

use super::Error;
use super::transport::{BoxedTransport, Timeouts};
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
    let (session, stream) = match opened {
        Err(_) => {
            return Err(Error::TimedOut(format!(
                "SSH to {host}:{port}: no session within {:?}",
                timeouts.connect + timeouts.io
            )));
        }
        Ok(Err(e)) => return Err(refused().map(Error::Refused).unwrap_or(e)),
        Ok(Ok(opened)) => opened,
    };
    let (read, write) = tokio::io::split(stream);
    let session = Arc::new(session);
    Ok(Box::new(Connection::new(
        Blocking::new(read, &runtime, &session, timeouts.io),
        Blocking::new(write, &runtime, &session, timeouts.io),
        Protocol::V2,
        path,
        None::<(String, Option<u16>)>,
        ConnectMode::Process,
        false,
    )))
}

/// Signs in and starts `git-upload-pack` for `path`: the session and the
/// channel's stream.
async fn open(
    checker: HostKeys,
    host: &str,
    port: u16,
    user: &str,
    private: russh::keys::PrivateKey,
    path: &str,
    timeouts: &Timeouts,
) -> Result<(Session<HostKeys>, russh::ChannelStream<russh::client::Msg>), Error> {
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
        return Err(Error::Authentication(format!(
            "{host} refused the deploy key for user {user}"
        )));
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
    Ok((session, channel.into_stream()))
}

/// One half of the channel, blocking: every read or write runs on the
/// runtime, bounded by the I/O timeout. Holds the session open.
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

impl<T: AsyncRead + Unpin> Read for Blocking<T> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let Self {
            inner,
            runtime,
            timeout,
            ..
        } = self;
        runtime
            .block_on(tokio::time::timeout(*timeout, inner.read(buf)))
            .map_err(|_| timed_out(*timeout))?
    }
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
