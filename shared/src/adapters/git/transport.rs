//! Opening a connection to a Git server, per URL scheme, with timeouts and
//! the source's credentials.

use std::net::{TcpStream, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gix::protocol::transport::Protocol;
use gix::protocol::transport::client::TransportWithoutIO;
use gix::protocol::transport::client::blocking_io::{Transport, http};
use gix::protocol::transport::client::git::ConnectMode;
use gix::protocol::transport::client::git::blocking_io::Connection;
use gix::url::Scheme;

use super::Error;
use crate::adapters::credentials::GitAuth;
use crate::source::is_loopback_host;

/// How long a Git transport waits, at most: well under a function's 300 s,
/// so a server that stops answering costs a run minutes, not half an hour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// For a connection to a Git server.
    pub connect: Duration,
    /// For any one read or write on an open connection (git://, SSH).
    pub io: Duration,
    /// For one HTTP request, its answer included (a depth-1 pack of only
    /// the wanted files is small).
    pub request: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(10),
            io: Duration::from_secs(60),
            request: Duration::from_secs(120),
        }
    }
}

pub(super) type BoxedTransport = Box<dyn Transport + Send>;

/// stacksync's agent string, sent to servers.
pub(super) const AGENT: &str = concat!("stacksync/", env!("CARGO_PKG_VERSION"));

/// A URL as gix reads it (`git@host:path` is SSH).
pub(super) fn parse(url: &str) -> Result<gix::Url, Error> {
    gix::url::parse(gix::bstr::BStr::new(url.as_bytes()))
        .map_err(|e| Error::Refused(format!("not a Git URL: {e}")))
}

/// A connection to the repository at `url`, not yet shaken hands with.
pub(super) fn open(
    url: &str,
    auth: &GitAuth,
    timeouts: &Timeouts,
) -> Result<BoxedTransport, Error> {
    let parsed = parse(url)?;
    match (parsed.scheme.clone(), auth) {
        (Scheme::Http | Scheme::Https, GitAuth::Anonymous | GitAuth::Basic { .. }) => {
            http_transport(url, parsed, auth, timeouts)
        }
        (Scheme::Git, GitAuth::Anonymous) => daemon(&parsed, timeouts),
        (Scheme::Ssh, GitAuth::SshKey(key)) => super::ssh::connect(&parsed, key, timeouts),
        (Scheme::Ssh, GitAuth::Anonymous) => Err(Error::Refused(
            "an ssh:// source needs a deploy key: set source.credentialsSecret to a secret \
             holding sshPrivateKey and knownHosts"
                .into(),
        )),
        (Scheme::File, GitAuth::Anonymous) => Ok(
            gix::protocol::transport::client::blocking_io::connect::connect(
                parsed,
                gix::protocol::transport::client::blocking_io::connect::Options {
                    version: Protocol::V2,
                    ..Default::default()
                },
            )?,
        ),
        (scheme, GitAuth::Anonymous) => Err(Error::Refused(format!(
            "{scheme}:// is not a transport stacksync fetches with"
        ))),
        (scheme, auth) => Err(Error::Refused(format!(
            "source.credentialsSecret holds {} credentials, which a {scheme}:// URL cannot use",
            auth.kind()
        ))),
    }
}

/// Smart HTTP(S) through gix's reqwest client: timeouts, our agent, and
/// the credentials as HTTP basic authentication, sent only over TLS (or
/// to a loopback address: tests and the local runner).
fn http_transport(
    url: &str,
    parsed: gix::Url,
    auth: &GitAuth,
    timeouts: &Timeouts,
) -> Result<BoxedTransport, Error> {
    let mut transport = http::connect::<http::reqwest::Remote>(parsed.clone(), Protocol::V2, false);
    let request = timeouts.request;
    let configure: Box<http::reqwest::ConfigureClientFn> =
        Box::new(move |builder| Ok(builder.timeout(request)));
    let backend = http::reqwest::Options {
        configure_client: Some(configure),
        configure_request: None,
    };
    let options = http::Options {
        connect_timeout: Some(timeouts.connect),
        user_agent: Some(AGENT.into()),
        backend: Some(Arc::new(Mutex::new(backend))),
        ..Default::default()
    };
    transport.configure(&options)?;
    if let GitAuth::Basic { username, password } = auth {
        if parsed.scheme == Scheme::Http && !parsed.host().is_some_and(is_loopback_host) {
            return Err(Error::Refused(format!(
                "{url}: credentials are sent over https:// only (or to a loopback address); \
                 this URL is plain http://"
            )));
        }
        transport
            .set_identity(gix::sec::identity::Account {
                username: username.clone(),
                password: password.expose().to_owned(),
                oauth_refresh_token: None,
            })
            .map_err(|e| Error::Refused(e.to_string()))?;
    }
    Ok(Box::new(transport))
}

/// A TCP connection with the connect timeout, and the I/O timeout on
/// every read and write, split into its two halves.
pub(super) fn tcp(
    host: &str,
    port: u16,
    timeouts: &Timeouts,
) -> Result<(TcpStream, TcpStream), Error> {
    let addr = (host, port)
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| Error::Refused(format!("{host} resolves to no address")))?;
    let stream = TcpStream::connect_timeout(&addr, timeouts.connect)?;
    stream.set_read_timeout(Some(timeouts.io))?;
    stream.set_write_timeout(Some(timeouts.io))?;
    stream.set_nodelay(true)?;
    Ok((stream.try_clone()?, stream))
}

/// `git://`: the daemon protocol over TCP, with timeouts (gix's own
/// connection has a connect timeout but none on reads).
fn daemon(url: &gix::Url, timeouts: &Timeouts) -> Result<BoxedTransport, Error> {
    let host = url
        .host()
        .ok_or_else(|| Error::Refused("a git:// URL needs a host".into()))?;
    let port = url.port.unwrap_or(9418);
    let (read, write) = tcp(host, port, timeouts)?;
    Ok(Box::new(Connection::new(
        read,
        write,
        Protocol::V2,
        url.path.clone(),
        Some((host.to_owned(), url.port)),
        ConnectMode::Daemon,
        false,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_go_over_plain_http_to_loopback_only() {
        let auth = GitAuth::Basic {
            username: "x-access-token".into(),
            password: crate::adapters::credentials::Secret::new("s3cret"),
        };
        let err = open("http://git.example.com/r.git", &auth, &Timeouts::default())
            .err()
            .map(|e| e.to_string());
        let err = err.unwrap_or_default();
        assert!(err.contains("https:// only"), "{err}");
        assert!(!err.contains("s3cret"), "{err}");
        assert!(
            open("http://127.0.0.1:9/r.git", &auth, &Timeouts::default()).is_ok(),
            "not connected yet"
        );
    }

    #[test]
    fn a_key_for_the_wrong_transport_is_refused_by_name() {
        let auth = GitAuth::Basic {
            username: "u".into(),
            password: crate::adapters::credentials::Secret::new("p"),
        };
        let err = open("git://127.0.0.1:9/r.git", &auth, &Timeouts::default())
            .err()
            .map(|e| e.to_string());
        assert!(err.unwrap_or_default().contains("cannot use"));
        let err = open(
            "ssh://git@127.0.0.1:9/r.git",
            &GitAuth::Anonymous,
            &Timeouts::default(),
        )
        .err()
        .map(|e| e.to_string());
        assert!(err.unwrap_or_default().contains("deploy key"));
    }
}
