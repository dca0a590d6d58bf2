//! One spelling per source, so a push event finds every stack that follows it.
//!
//! `https://github.com/Acme/infra.git`, `git@github.com:acme/infra` and
//! `ssh://git@github.com/acme/infra.git` are one repository; the registry's
//! source index is keyed by this normal form plus the ref.

/// What stacksync says of a repository whose objects are named by SHA-256.
pub const SHA256_REFUSED: &str = "a SHA-256 repository (object ids of 64 hex digits): stacksync \
     reads SHA-1 repositories only (the Git library it uses in-process does not fetch SHA-256 \
     ones yet); use a SHA-1 mirror of it, or an S3 source";

/// The normal form of a Git or S3 source URL: no scheme (for network URLs),
/// no user, no default port, no `.git`, no trailing slash, lower case.
pub fn normalize_url(url: &str) -> String {
    let url = url.trim();
    if url.starts_with("s3://") || url.starts_with("file://") {
        return url.trim_end_matches('/').to_owned();
    }
    let (host_and_port, path) = if let Some((_, rest)) = url.split_once("://") {
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        (authority.rsplit('@').next().unwrap_or(authority), path)
    } else if let Some((user_host, path)) = url.split_once(':') {
        // scp-like: git@github.com:acme/infra.git
        (user_host.rsplit('@').next().unwrap_or(user_host), path)
    } else {
        (url, "")
    };
    let host = match host_and_port.rsplit_once(':') {
        Some((host, "22" | "80" | "443" | "9418")) => host,
        _ => host_and_port,
    };
    let path = path.trim_matches('/');
    let path = path.strip_suffix(".git").unwrap_or(path);
    format!("{host}/{path}").to_ascii_lowercase()
}

/// The host of a URL (`https://user@host:port/…`, `git@host:path`), as
/// written (case kept), without user or port.
pub fn host_of(url: &str) -> &str {
    let authority = match url.split_once("://") {
        Some((_, rest)) => rest.split('/').next().unwrap_or(""),
        None => url.split(':').next().unwrap_or(""),
    };
    let host = authority.rsplit('@').next().unwrap_or(authority);
    if host.starts_with('[') {
        // [::1]:8080
        return host
            .split_once(']')
            .map_or(host, |(h, _)| h)
            .trim_start_matches('[');
    }
    match host.rsplit_once(':') {
        Some((h, port)) if port.chars().all(|c| c.is_ascii_digit()) => h,
        _ => host,
    }
}

/// Whether `host` is this machine: `localhost` or a loopback address.
/// Credentials may go over plain http:// only to such a host (local tests
/// and the local runner).
pub fn is_loopback_host(host: &str) -> bool {
    host == "localhost"
        || host
            .trim_matches(['[', ']'])
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// A branch or tag without its `refs/heads/` or `refs/tags/` prefix.
pub fn normalize_ref(reference: &str) -> &str {
    reference
        .strip_prefix("refs/heads/")
        .or_else(|| reference.strip_prefix("refs/tags/"))
        .unwrap_or(reference)
}

/// The key of the registry's source index: normal URL and ref. A ref that
/// names its kind (`refs/heads/x`, `refs/tags/x`) keeps it: a tag and a
/// branch of one name are two sources. A short one (`x`) is what it
/// resolves to when a run looks (git's order: a tag first), and keyed so.
pub fn source_key(url: &str, reference: Option<&str>) -> String {
    format!("{}#{}", normalize_url(url), reference.unwrap_or(""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn https_ssh_and_scp_spellings_of_one_repo_are_one_source() {
        let forms = [
            "https://github.com/Acme/infra.git",
            "https://github.com/acme/infra",
            "https://github.com:443/acme/infra/",
            "http://github.com/acme/infra.git",
            "ssh://git@github.com/acme/infra.git",
            "ssh://git@github.com:22/acme/infra",
            "git@github.com:acme/infra.git",
            "git://github.com/acme/infra.git",
        ];
        for form in forms {
            assert_eq!(normalize_url(form), "github.com/acme/infra", "{form}");
        }
    }

    #[test]
    fn other_repos_hosts_and_ports_stay_apart() {
        assert_ne!(
            normalize_url("https://github.com/acme/infra"),
            normalize_url("https://github.com/acme/infra2")
        );
        assert_ne!(
            normalize_url("https://github.com/acme/infra"),
            normalize_url("https://gitlab.com/acme/infra")
        );
        assert_eq!(
            normalize_url("http://127.0.0.1:8080/r.git"),
            "127.0.0.1:8080/r"
        );
    }

    #[test]
    fn local_and_s3_sources_keep_their_scheme() {
        assert_eq!(normalize_url("file:///tmp/repo/"), "file:///tmp/repo");
        assert_eq!(normalize_url("s3://bucket/a/b.zip"), "s3://bucket/a/b.zip");
    }

    #[test]
    fn hosts_are_read_from_every_url_form_and_loopback_is_told_apart() {
        assert_eq!(host_of("https://user@github.com:443/a/b"), "github.com");
        assert_eq!(host_of("git@gitlab.com:a/b.git"), "gitlab.com");
        assert_eq!(host_of("ssh://git@host:2222/a"), "host");
        assert_eq!(host_of("http://[::1]:8080/r"), "::1");
        for host in ["127.0.0.1", "127.1.2.3", "localhost", "::1", "[::1]"] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in [
            "10.0.0.1",
            "github.com",
            "localhost.example.com",
            "0.0.0.0",
            "",
        ] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }

    /// Issue "Real payloads and real templates" (1): the key dropped the
    /// ref's kind, so a tag and a branch of one name were one source.
    #[test]
    fn source_keys_combine_url_and_ref_and_keep_its_kind() {
        assert_eq!(
            source_key("git@github.com:acme/infra.git", Some("refs/heads/main")),
            "github.com/acme/infra#refs/heads/main"
        );
        assert_ne!(
            source_key("https://github.com/acme/infra", Some("refs/tags/main")),
            source_key("https://github.com/acme/infra", Some("refs/heads/main"))
        );
        assert_eq!(
            source_key("https://github.com/acme/infra", Some("main")),
            "github.com/acme/infra#main",
            "a short ref keeps the key it has today"
        );
        assert_eq!(source_key("s3://b/k.zip", None), "s3://b/k.zip#");
    }
}
