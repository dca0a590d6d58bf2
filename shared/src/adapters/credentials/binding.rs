//! Where a source secret may be sent: the hosts its own JSON names
//! (`"hosts": ["github.com"]`) and, on the hosts where anyone may open an
//! account, the repositories (`"repositories": ["acme/*"]`). A credential
//! is presented to a URL only if its secret names that URL's host (and
//! repository), checked before any connection is made: whoever may write
//! the registry, but not read the secret, can point an entry at a server of
//! theirs and receive nothing.
//!
//! The URL is read strictly here, so that the host checked is the host a
//! transport connects to: anything an HTTP or SSH client could read
//! differently (a backslash, a percent escape, a dot segment, a query) is
//! refused, never guessed.

use serde_json::{Map, Value};

/// Hosts where anyone may make an owner or group: a secret sent there must
/// also name the repositories it is for, or a registry writer could read
/// any repository the credential reaches (another team's) with it.
pub const SHARED_HOSTS: [&str; 3] = ["github.com", "gitlab.com", "bitbucket.org"];

/// Longest list of hosts or repositories a secret may name.
const MAX_PATTERNS: usize = 100;

/// Where a secret may be sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    hosts: Vec<HostPattern>,
    /// Repository paths (`owner/name`, lower case), `*` within one segment,
    /// `**` across segments; empty: any repository of the hosts.
    repositories: Vec<String>,
}

/// One entry of `hosts`: a host name (or `*.domain` for its subdomains),
/// with a port, or any port.
#[derive(Debug, Clone, PartialEq, Eq)]
struct HostPattern {
    host: String,
    port: Option<u16>,
}

/// Where a URL leads: host, port and repository path, as a transport reads
/// them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub host: String,
    pub port: Option<u16>,
    /// Without leading or trailing `/` and `.git`, lower case.
    pub path: String,
}

impl Place {
    /// `host` or `host:port`, for messages.
    pub fn authority(&self) -> String {
        match self.port {
            Some(port) if self.host.contains(':') => format!("[{}]:{port}", self.host),
            Some(port) => format!("{}:{port}", self.host),
            None => self.host.clone(),
        }
    }
}

impl Binding {
    /// Reads `hosts` and `repositories` from a secret's JSON object. The
    /// error says what to add, never a value of the secret.
    pub fn parse(map: &Map<String, Value>) -> Result<Binding, String> {
        let hosts = match map.get("hosts") {
            None => {
                return Err(
                    "the secret names no `hosts`: stacksync sends a credential only to the hosts \
                     its secret names. Add them to the secret's JSON, e.g. \"hosts\": \
                     [\"github.com\"], \"repositories\": [\"acme/*\"] (README: Private repositories)"
                        .into(),
                );
            }
            Some(value) => strings(value, "hosts")?,
        };
        if hosts.is_empty() {
            return Err("the secret's `hosts` is empty: name at least one host".into());
        }
        let hosts = hosts
            .iter()
            .map(|h| HostPattern::parse(h))
            .collect::<Result<Vec<_>, _>>()?;
        let repositories = match map.get("repositories") {
            None => Vec::new(),
            Some(value) => strings(value, "repositories")?
                .iter()
                .map(|r| repository_pattern(r))
                .collect::<Result<Vec<_>, _>>()?,
        };
        if repositories.is_empty()
            && let Some(shared) = hosts.iter().find(|h| h.may_be_shared())
        {
            return Err(format!(
                "the secret's `hosts` names {}, where anyone may open an account: name the \
                 repositories it is for too, e.g. \"repositories\": [\"acme/*\"]",
                shared.host
            ));
        }
        Ok(Binding {
            hosts,
            repositories,
        })
    }

    /// Whether the secret may be sent to `url`; else why not (naming the
    /// host and path, which are the spec's, never the secret's values).
    pub fn allows(&self, url: &str) -> Result<(), String> {
        let place = place(url)?;
        if !self.hosts.iter().any(|h| h.matches(&place)) {
            return Err(format!(
                "its `hosts` ({}) do not include {}",
                self.hosts_shown(),
                place.authority()
            ));
        }
        if !self.repositories.is_empty() && !self.repositories.iter().any(|r| glob(r, &place.path))
        {
            return Err(format!(
                "its `repositories` ({}) do not include {} on {}",
                self.repositories.join(", "),
                place.path,
                place.authority()
            ));
        }
        Ok(())
    }

    /// Whether a GitHub App's JWT may be sent to the API at `api_url` (the
    /// secret's own `apiUrl`): its host must be one of `hosts`.
    pub fn allows_api(&self, api_url: &str) -> Result<(), String> {
        let place = place(api_url)?;
        if self.hosts.iter().any(|h| h.matches(&place)) {
            Ok(())
        } else {
            Err(format!(
                "its `apiUrl` is on {}, which its `hosts` ({}) do not include",
                place.authority(),
                self.hosts_shown()
            ))
        }
    }

    /// Whether a GitHub App's JWT may be sent to GitHub's own API (the
    /// secret names no `apiUrl`): `github.com` must be one of `hosts`.
    pub fn allows_github_api(&self) -> Result<(), String> {
        let github = place("https://github.com")?;
        if self.hosts.iter().any(|h| h.matches(&github)) {
            Ok(())
        } else {
            Err(format!(
                "it names no `apiUrl`, so its app's JWT would go to GitHub's API \
                 (api.github.com), and its `hosts` ({}) do not include github.com: add the \
                 `apiUrl` of your GitHub Enterprise Server (on one of its hosts)",
                self.hosts_shown()
            ))
        }
    }

    fn hosts_shown(&self) -> String {
        self.hosts
            .iter()
            .map(HostPattern::shown)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl HostPattern {
    fn parse(text: &str) -> Result<HostPattern, String> {
        let bad = || {
            format!(
                "the secret's `hosts` entry {text:?} is not a host name: give `github.com`, \
                 `*.acme.internal` or `git.acme.internal:8443`"
            )
        };
        let text = text.trim().to_ascii_lowercase();
        let (host, port) = split_port(&text).ok_or_else(bad)?;
        let name = host.strip_prefix("*.").unwrap_or(host);
        let ipv6 = host.contains(':') && host.parse::<std::net::Ipv6Addr>().is_ok();
        let valid = ipv6
            || (!name.is_empty()
                && !name.starts_with(['.', '-'])
                && !name.ends_with('.')
                && !name.contains("..")
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_')));
        if !valid || (ipv6 && host.starts_with("*.")) {
            return Err(bad());
        }
        Ok(HostPattern {
            host: host.to_owned(),
            port,
        })
    }

    fn matches(&self, place: &Place) -> bool {
        let host_ok = match self.host.strip_prefix("*.") {
            Some(domain) => place
                .host
                .strip_suffix(domain)
                .is_some_and(|sub| sub.len() > 1 && sub.ends_with('.')),
            None => self.host == place.host,
        };
        host_ok && self.port.is_none_or(|p| place.port == Some(p))
    }

    /// A public host anyone may make an owner on (not a subdomain pattern).
    fn may_be_shared(&self) -> bool {
        SHARED_HOSTS.contains(&self.host.as_str())
    }

    fn shown(&self) -> String {
        Place {
            host: self.host.clone(),
            port: self.port,
            path: String::new(),
        }
        .authority()
    }
}

/// `host`, `host:port`, `[v6]` or `[v6]:port`: the host and the port.
fn split_port(text: &str) -> Option<(&str, Option<u16>)> {
    if let Some(rest) = text.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        return match after {
            "" => Some((host, None)),
            port => Some((host, Some(port.strip_prefix(':')?.parse().ok()?))),
        };
    }
    match text.rsplit_once(':') {
        // A bare IPv6 address has colons and no port.
        Some(_) if text.parse::<std::net::Ipv6Addr>().is_ok() => Some((text, None)),
        Some((host, port)) => Some((host, Some(port.parse().ok()?))),
        None => Some((text, None)),
    }
}

fn strings(value: &Value, field: &str) -> Result<Vec<String>, String> {
    let Value::Array(items) = value else {
        return Err(format!("the secret's `{field}` is not a list of strings"));
    };
    if items.len() > MAX_PATTERNS {
        return Err(format!(
            "the secret's `{field}` has {} entries; at most {MAX_PATTERNS}",
            items.len()
        ));
    }
    items
        .iter()
        .map(|item| match item {
            Value::String(s) if !s.trim().is_empty() => Ok(s.trim().to_owned()),
            _ => Err(format!(
                "the secret's `{field}` holds an entry that is not a non-empty string"
            )),
        })
        .collect()
}

fn repository_pattern(text: &str) -> Result<String, String> {
    let pattern = text.trim_matches('/').to_ascii_lowercase();
    let pattern = pattern.strip_suffix(".git").unwrap_or(&pattern).to_owned();
    let valid = !pattern.is_empty()
        && pattern.split('/').all(|segment| {
            !segment.is_empty()
                && segment != "."
                && segment != ".."
                && segment
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '*' | '~'))
        });
    if valid {
        Ok(pattern)
    } else {
        Err(format!(
            "the secret's `repositories` entry {text:?} is not a repository path: give \
             `acme/infra`, `acme/*` (one level) or `group/**` (any depth)"
        ))
    }
}

/// Whether `path` matches `pattern`: `*` any run of characters but `/`,
/// `**` any run at all.
fn glob(pattern: &str, path: &str) -> bool {
    fn go(p: &[u8], s: &[u8]) -> bool {
        match p {
            [] => s.is_empty(),
            [b'*', b'*', rest @ ..] => (0..=s.len()).any(|i| go(rest, &s[i..])),
            [b'*', rest @ ..] => (0..=s.len())
                .take_while(|&i| i == 0 || s[i - 1] != b'/')
                .any(|i| go(rest, &s[i..])),
            [c, rest @ ..] => s.first() == Some(c) && go(rest, &s[1..]),
        }
    }
    go(pattern.as_bytes(), path.as_bytes())
}

/// Where `url` leads, read strictly: `scheme://[user@]host[:port]/path` or
/// scp-like `user@host:path`. Anything a transport might read otherwise is
/// refused.
pub fn place(url: &str) -> Result<Place, String> {
    let refuse = |why: &str| {
        Err(format!(
            "{url:?} cannot be checked against the secret's hosts ({why}), so nothing is sent to it"
        ))
    };
    if url
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '\\' | '%' | '?' | '#'))
    {
        return refuse("it holds a space, a backslash, a percent escape, a query or a fragment");
    }
    let (authority, path) = match url.split_once("://") {
        Some((_, rest)) => rest.split_once('/').unwrap_or((rest, "")),
        // scp-like: git@host:path (no scheme, a colon before any slash).
        None => match url.split_once(':') {
            Some((authority, path)) if !authority.contains('/') => (authority, path),
            _ => return refuse("it is not a URL"),
        },
    };
    let (user, host_port) = match authority.rsplit_once('@') {
        Some((user, host)) => (Some(user), host),
        None => (None, authority),
    };
    if user.is_some_and(|u| u.contains('@') || u.contains(':') || u.is_empty()) {
        return refuse("its user part is not a plain user name");
    }
    let scp = !url.contains("://");
    let (host, port) = if scp {
        (host_port, None)
    } else {
        match split_port(host_port) {
            Some(found) => found,
            None => return refuse("its port is not a number"),
        }
    };
    let host = host.to_ascii_lowercase();
    let host_ok = host.parse::<std::net::IpAddr>().is_ok()
        || (!host.is_empty()
            && host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_')));
    if !host_ok {
        return refuse("its host is not a plain host name");
    }
    let trimmed = path.trim_matches('/');
    if trimmed
        .split('/')
        .any(|segment| segment == "." || segment == ".." || segment.is_empty())
        && !trimmed.is_empty()
    {
        return refuse("its path has an empty, `.` or `..` segment");
    }
    let path = trimmed.strip_suffix(".git").unwrap_or(trimmed);
    Ok(Place {
        host,
        port,
        path: path.to_ascii_lowercase(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn binding(value: Value) -> Result<Binding, String> {
        match value {
            Value::Object(map) => Binding::parse(&map),
            _ => unreachable!(),
        }
    }

    #[test]
    fn a_secret_without_hosts_is_refused_with_what_to_add() {
        let err = binding(json!({"token": "hunter2"})).unwrap_err();
        assert!(err.contains("\"hosts\": [\"github.com\"]"), "{err}");
        assert!(!err.contains("hunter2"), "{err}");
        let err = binding(json!({"hosts": []})).unwrap_err();
        assert!(err.contains("empty"), "{err}");
        let err = binding(json!({"hosts": "github.com"})).unwrap_err();
        assert!(err.contains("not a list"), "{err}");
    }

    #[test]
    fn a_shared_host_needs_the_repositories_too() {
        let err = binding(json!({"hosts": ["GitHub.com"]})).unwrap_err();
        assert!(
            err.contains("github.com") && err.contains("repositories"),
            "{err}"
        );
        binding(json!({"hosts": ["github.com"], "repositories": ["acme/*"]})).unwrap();
        binding(json!({"hosts": ["git.acme.internal"]})).unwrap();
    }

    #[test]
    fn hosts_that_are_no_host_names_are_refused() {
        for bad in [
            "https://github.com",
            "git hub",
            "*.",
            "host:port",
            "a/b",
            "*.*.x",
            ".x",
        ] {
            let err = binding(json!({"hosts": [bad]})).unwrap_err();
            assert!(err.contains("not a host name"), "{bad}: {err}");
        }
        for bad in ["../x", "a//b", "a b", "/"] {
            let err = binding(json!({"hosts": ["h"], "repositories": [bad]})).unwrap_err();
            assert!(err.contains("not a repository path"), "{bad}: {err}");
        }
    }

    #[test]
    fn a_secret_goes_only_to_the_hosts_and_repositories_it_names() {
        let b = binding(json!({
            "hosts": ["github.com", "*.acme.internal", "127.0.0.1:8080", "[::1]"],
            "repositories": ["acme/*", "platform/**", "Solo/Repo.git"]
        }))
        .unwrap();
        for url in [
            "https://github.com/acme/infra.git",
            "https://GITHUB.COM/Acme/Infra",
            "ssh://git@github.com/acme/infra.git",
            "git@github.com:acme/infra.git",
            "https://github.com:443/acme/infra",
            "https://git.acme.internal/platform/net/vpc.git",
            "http://127.0.0.1:8080/solo/repo.git",
            "http://[::1]:9000/acme/x",
        ] {
            assert_eq!(b.allows(url), Ok(()), "{url}");
        }
        for (url, says) in [
            ("https://evil.example/acme/infra.git", "evil.example"),
            (
                "https://github.com.evil.example/acme/infra",
                "github.com.evil.example",
            ),
            ("https://acme.internal/acme/x", "acme.internal"),
            ("http://127.0.0.1:8081/acme/x", "127.0.0.1:8081"),
            ("https://github.com/other/infra", "other/infra"),
            ("https://github.com/acme/group/infra", "acme/group/infra"),
            ("https://github.com@evil.example/acme/infra", "evil.example"),
            ("git@evil.example:acme/infra.git", "evil.example"),
        ] {
            let err = b.allows(url).unwrap_err();
            assert!(err.contains(says), "{url}: {err}");
        }
    }

    #[test]
    fn urls_a_transport_could_read_otherwise_are_refused() {
        let b = binding(json!({"hosts": ["git.acme.internal"]})).unwrap();
        for url in [
            "https://evil.example\\@git.acme.internal/x",
            "https://git.acme.internal/a/../../x",
            "https://git.acme.internal/./x",
            "https://git.acme.internal/%2e%2e/x",
            "https://git.acme.internal/x?y",
            "https://git.acme.internal:port/x",
            "https://a:b@git.acme.internal/x",
            "https://git.acme.internal /x",
        ] {
            let err = b.allows(url).unwrap_err();
            assert!(err.contains("nothing is sent"), "{url}: {err}");
        }
    }

    #[test]
    fn an_api_url_must_be_on_a_named_host() {
        let b = binding(json!({"hosts": ["ghe.acme.internal"]})).unwrap();
        assert_eq!(b.allows_api("https://ghe.acme.internal/api/v3"), Ok(()));
        let err = b.allows_api("https://evil.example/api/v3").unwrap_err();
        assert!(err.contains("evil.example"), "{err}");
    }

    #[test]
    fn globs_keep_star_within_a_segment() {
        assert!(glob("acme/*", "acme/infra"));
        assert!(!glob("acme/*", "acme/a/b"));
        assert!(glob("acme/**", "acme/a/b"));
        assert!(glob("acme/infra-*", "acme/infra-prod"));
        assert!(!glob("acme/*", "acmex/infra"));
        assert!(glob("*/infra", "anyone/infra"));
    }
}
