//! CodeCommit over HTTPS with the function's own IAM role, as
//! `git-remote-codecommit` does: the Git password is a SigV4 signature of
//! a `GIT` request for the repository's path, made with the role's keys;
//! the user name is the access key (and `%` and the session token). No
//! secret is stored anywhere; the role needs `codecommit:GitPull`.

use hmac::{KeyInit, Mac};
use sha2::{Digest, Sha256};

use crate::partition;

type HmacSha256 = hmac::Hmac<Sha256>;

/// A CodeCommit repository, from a source URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repository {
    pub region: String,
    /// `git-codecommit.REGION.amazonaws.com` (or the partition's suffix),
    /// or the endpoint configured instead (a VPC endpoint), as signed.
    pub host: String,
    /// `/v1/repos/NAME`.
    pub path: String,
    /// `https`, or `http` for a configured loopback endpoint (tests).
    pub scheme: &'static str,
}

impl Repository {
    /// The URL Git fetches from.
    pub fn url(&self) -> String {
        format!("{}://{}{}", self.scheme, self.host, self.path)
    }

    /// The same repository reached at `endpoint` (`https://HOST[:PORT]`,
    /// as git-remote-codecommit's `CODE_COMMIT_ENDPOINT`): signed for it.
    pub fn at(mut self, endpoint: &str) -> Repository {
        let (scheme, host) = match endpoint.split_once("://") {
            Some(("http", host)) => ("http", host),
            Some((_, host)) => ("https", host),
            None => ("https", endpoint),
        };
        self.scheme = scheme;
        self.host = host.trim_end_matches('/').to_owned();
        self
    }
}

/// The CodeCommit repository a URL names, if it names one:
/// `codecommit::REGION://NAME`, `codecommit://NAME` (in `default_region`),
/// or `https://git-codecommit.REGION.amazonaws.com/v1/repos/NAME`.
pub fn repository(url: &str, default_region: &str) -> Option<Result<Repository, String>> {
    let in_region = |region: &str, name: &str| {
        if name.contains('@') {
            return Err(format!(
                "{url}: a profile in a CodeCommit URL means nothing to stacksync (it uses its \
                 own role): write codecommit::REGION://REPOSITORY"
            ));
        }
        if name.is_empty() || name.contains('/') {
            return Err(format!("{url} names no CodeCommit repository"));
        }
        let host = format!(
            "git-codecommit.{region}.{}",
            partition::of_region(region).dns_suffix
        );
        Ok(Repository {
            region: region.to_owned(),
            host,
            path: format!("/v1/repos/{name}"),
            scheme: "https",
        })
    };
    if let Some(rest) = url.strip_prefix("codecommit::") {
        let (region, name) = rest.split_once("://")?;
        return Some(in_region(region, name));
    }
    if let Some(name) = url.strip_prefix("codecommit://") {
        return Some(in_region(default_region, name));
    }
    let rest = url.strip_prefix("https://")?;
    let (host, path) = rest.split_once('/')?;
    let region = host.strip_prefix("git-codecommit.")?.split('.').next()?;
    let name = path.strip_prefix("v1/repos/")?.trim_end_matches('/');
    Some(in_region(region, name))
}

/// The keys the signature is made with.
#[derive(Clone)]
pub struct Keys<'a> {
    pub access_key_id: &'a str,
    pub secret_access_key: &'a str,
    pub session_token: Option<&'a str>,
}

impl std::fmt::Debug for Keys<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keys")
            .field("access_key_id", &self.access_key_id)
            .finish_non_exhaustive()
    }
}

/// Git's user name and password for `repo`, signed at `timestamp`
/// (`YYYYMMDDTHHMMSS`, UTC).
pub fn credentials(repo: &Repository, keys: &Keys<'_>, timestamp: &str) -> (String, String) {
    let username = match keys.session_token {
        Some(token) => format!("{}%{token}", keys.access_key_id),
        None => keys.access_key_id.to_owned(),
    };
    let date = &timestamp[..8.min(timestamp.len())];
    let canonical = format!("GIT\n{}\n\nhost:{}\n\nhost\n", repo.path, repo.host);
    let scope = format!("{date}/{}/codecommit/aws4_request", repo.region);
    let to_sign = format!(
        "AWS4-HMAC-SHA256\n{timestamp}\n{scope}\n{}",
        hex(&Sha256::digest(canonical.as_bytes()))
    );
    let mut key = hmac(format!("AWS4{}", keys.secret_access_key).as_bytes(), date);
    for part in [repo.region.as_str(), "codecommit", "aws4_request"] {
        key = hmac(&key, part);
    }
    let signature = hex(&hmac(&key, &to_sign));
    (username, format!("{timestamp}Z{signature}"))
}

/// `YYYYMMDDTHHMMSS` of a time, in UTC.
pub fn timestamp(at: std::time::SystemTime) -> String {
    humantime::format_rfc3339_seconds(at)
        .to_string()
        .replace(['-', ':', 'Z'], "")
}

fn hmac(key: &[u8], data: &str) -> Vec<u8> {
    // HMAC accepts keys of any length: this cannot fail.
    let mut mac = <HmacSha256 as KeyInit>::new_from_slice(key).unwrap_or_else(|_| unreachable!());
    mac.update(data.as_bytes());
    mac.finalize().into_bytes().to_vec()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_of_a_codecommit_repository_is_read() {
        let expected = Repository {
            region: "eu-west-1".into(),
            host: "git-codecommit.eu-west-1.amazonaws.com".into(),
            path: "/v1/repos/infra".into(),
            scheme: "https",
        };
        for url in [
            "codecommit::eu-west-1://infra",
            "codecommit://infra",
            "https://git-codecommit.eu-west-1.amazonaws.com/v1/repos/infra",
        ] {
            assert_eq!(
                repository(url, "eu-west-1").unwrap().unwrap(),
                expected,
                "{url}"
            );
        }
        let china = repository("codecommit::cn-north-1://infra", "x")
            .unwrap()
            .unwrap();
        assert_eq!(
            china.url(),
            "https://git-codecommit.cn-north-1.amazonaws.com.cn/v1/repos/infra"
        );
        assert!(repository("https://github.com/acme/infra.git", "eu-west-1").is_none());
        let vpce = expected
            .clone()
            .at("https://vpce-1.git-codecommit.eu-west-1.vpce.amazonaws.com/");
        assert_eq!(
            vpce.url(),
            "https://vpce-1.git-codecommit.eu-west-1.vpce.amazonaws.com/v1/repos/infra"
        );
        let profile = repository("codecommit::eu-west-1://dev@infra", "x")
            .unwrap()
            .unwrap_err();
        assert!(profile.contains("profile"), "{profile}");
    }

    /// The known answer was computed with botocore's `SigV4Auth`, as
    /// git-remote-codecommit calls it (`sign()`), for these keys and time.
    #[test]
    fn the_password_is_the_documented_sigv4_signature_of_a_git_request() {
        let repo = repository("codecommit::eu-west-1://infra", "x")
            .unwrap()
            .unwrap();
        let keys = Keys {
            access_key_id: "AKIDEXAMPLE",
            secret_access_key: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            session_token: Some("session-token-example"),
        };
        let (user, password) = credentials(&repo, &keys, "20261123T180455");
        assert_eq!(user, "AKIDEXAMPLE%session-token-example");
        assert_eq!(
            password,
            "20261123T180455Z99f7f1b7f9520125b8b6524ca1879d5d8a095b595947d2ac9bb6700c469a2a1f"
        );
        let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_795_460_400);
        assert_eq!(timestamp(at), "20261123T190000");
    }
}
