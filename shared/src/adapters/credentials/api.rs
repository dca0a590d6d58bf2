//! A Git host's API, reached with a source secret: where the API is, and
//! what to present there. The same secrets as the sources' (a token, a
//! user name and app password, a GitHub App), with the same host binding:
//! the secret must allow the repository, and the API's host must be one of
//! its `hosts` (GitHub's and Bitbucket Cloud's own API hosts count as
//! github.com's and bitbucket.org's).

use super::binding::Binding;
use super::stored::Stored;
use super::{Credentials, Secret, github_app, loopback_http};
use crate::ports::PortError;
use crate::ports::source::FetchError;
use crate::pull_request::Host;
use crate::source::host_of;

/// What a request to the API presents.
#[derive(Debug, Clone)]
pub enum ApiAuth {
    /// `Authorization: Bearer` (a token; a GitHub App's installation token).
    Bearer(Secret),
    /// HTTP basic (a Bitbucket app password).
    Basic { username: String, password: Secret },
}

/// Where a repository's host API is, and what to present there.
#[derive(Debug, Clone)]
pub struct ApiAccess {
    /// The API's root, without a trailing `/`: `https://api.github.com`,
    /// `https://gitlab.example/api/v4`, `https://api.bitbucket.org/2.0`.
    pub base: String,
    pub auth: ApiAuth,
    /// A GitHub App's token: it may make check runs (with `checks:write`).
    pub app: bool,
}

/// The API root of `host` for a repository at `url`, when the secret names
/// none: GitHub's own for github.com (`https://HOST/api/v3` for GitHub
/// Enterprise Server), `https://HOST/api/v4` for GitLab, Bitbucket Cloud's.
pub fn default_api(host: Host, url: &str) -> String {
    let server = host_of(url).to_ascii_lowercase();
    match host {
        Host::GitHub if server == "github.com" => "https://api.github.com".into(),
        Host::GitHub => format!("https://{server}/api/v3"),
        Host::GitLab => format!("https://{server}/api/v4"),
        Host::Bitbucket => "https://api.bitbucket.org/2.0".into(),
    }
}

/// Whether the secret may be sent to the API at `base` for the repository
/// at `url` (which the secret allows): on one of its `hosts`, or GitHub's
/// (Bitbucket Cloud's) own API for a repository on github.com
/// (bitbucket.org).
fn api_allowed(binding: &Binding, host: Host, base: &str, url: &str) -> Result<(), String> {
    if !base.starts_with("https://") && !loopback_http(base) {
        return Err(format!("the API URL {base} is not https://"));
    }
    let api_host = host_of(base).to_ascii_lowercase();
    let site = host_of(url).to_ascii_lowercase();
    let own = matches!(
        (host, api_host.as_str(), site.as_str()),
        (Host::GitHub, "api.github.com", "github.com")
            | (Host::Bitbucket, "api.bitbucket.org", "bitbucket.org")
    );
    if own {
        Ok(())
    } else {
        binding.allows_api(base)
    }
}

impl Credentials {
    /// The `apiUrl` the secret at `arn` names, if it can be read and names one.
    pub async fn api_url_of(&self, arn: &str) -> Option<String> {
        match self.stored(arn).await.ok()?.0 {
            Stored::Token { api_url, .. }
            | Stored::Password { api_url, .. }
            | Stored::GitHubApp { api_url, .. } => api_url,
            Stored::Ssh { .. } => None,
        }
    }

    /// The API of `host` for the repository at `url`, with what the secret
    /// at `arn` presents there. Nothing is sent before the binding is
    /// checked: the repository must be one the secret allows, and the API
    /// on one of its hosts.
    pub async fn api_access(&self, host: Host, url: &str, arn: &str) -> Result<ApiAccess, String> {
        let (stored, binding) = self.stored(arn).await.map_err(|e| e.to_string())?;
        binding
            .allows(url)
            .map_err(|why| format!("the secret {arn} may not be sent for {url}: {why}"))?;
        let not_for = |why: String| format!("the secret {arn} may not be sent to the API: {why}");
        let configured = |api: &Option<String>| {
            api.as_deref()
                .map(|a| a.trim_end_matches('/').to_owned())
                .unwrap_or_else(|| default_api(host, url))
        };
        let access = match stored {
            Stored::Token { token, api_url, .. } => ApiAccess {
                base: configured(&api_url),
                auth: ApiAuth::Bearer(token),
                app: false,
            },
            Stored::Password {
                username,
                password,
                api_url,
            } => ApiAccess {
                base: configured(&api_url),
                auth: ApiAuth::Basic { username, password },
                app: false,
            },
            Stored::GitHubApp {
                app_id,
                installation_id,
                private_key,
                api_url,
            } => {
                let base = github_app::api_url(api_url.as_deref());
                api_allowed(&binding, Host::GitHub, &base, url).map_err(not_for)?;
                let token = self
                    .app_token(url, &base, &app_id, &installation_id, &private_key)
                    .await
                    .map_err(|e: FetchError| e.to_string())?;
                ApiAccess {
                    base,
                    auth: ApiAuth::Bearer(token),
                    app: true,
                }
            }
            Stored::Ssh { .. } => {
                return Err(format!(
                    "the secret {arn} holds an SSH deploy key, which {host}'s API does not take: \
                     give the entries a token or a GitHub App to post comments and statuses"
                ));
            }
        };
        api_allowed(&binding, host, &access.base, url).map_err(not_for)?;
        Ok(access)
    }
}

/// A port error of an API answer's HTTP status: 429 and 5xx transient,
/// 404 not found, the rest refused.
pub fn status_error(status: u16, what: &str) -> PortError {
    match status {
        429 | 500..=599 => PortError::Transient(what.to_owned()),
        404 => PortError::NotFound(what.to_owned()),
        _ => PortError::Refused(what.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn access(secret: &str, host: Host, url: &str) -> Result<ApiAccess, String> {
        let arn = "arn:aws:secretsmanager:us-east-1:111111111111:secret:git";
        Credentials::fixed([(arn.to_owned(), secret.to_owned())], "us-east-1")
            .api_access(host, url, arn)
            .await
    }

    #[test]
    fn each_host_has_its_default_api() {
        let gh = "https://github.com/acme/infra.git";
        assert_eq!(default_api(Host::GitHub, gh), "https://api.github.com");
        assert_eq!(
            default_api(Host::GitHub, "https://ghe.acme.example/a/b.git"),
            "https://ghe.acme.example/api/v3"
        );
        assert_eq!(
            default_api(Host::GitLab, "git@gitlab.com:g/p.git"),
            "https://gitlab.com/api/v4"
        );
        assert_eq!(
            default_api(Host::Bitbucket, "https://bitbucket.org/w/r.git"),
            "https://api.bitbucket.org/2.0"
        );
    }

    #[tokio::test]
    async fn a_token_goes_to_its_hosts_api_only() {
        let token = r#"{"token": "t", "hosts": ["github.com"], "repositories": ["acme/*"]}"#;
        let ok = access(token, Host::GitHub, "https://github.com/acme/infra.git")
            .await
            .unwrap();
        assert_eq!(ok.base, "https://api.github.com");
        assert!(matches!(ok.auth, ApiAuth::Bearer(_)) && !ok.app);

        let elsewhere = r#"{"token": "t", "hosts": ["github.com"], "repositories": ["acme/*"], "apiUrl": "https://evil.example"}"#;
        let e = access(elsewhere, Host::GitHub, "https://github.com/acme/infra.git")
            .await
            .unwrap_err();
        assert!(e.contains("may not be sent to the API"), "{e}");

        let other_repo = r#"{"token": "t", "hosts": ["github.com"], "repositories": ["acme/*"]}"#;
        let e = access(
            other_repo,
            Host::GitHub,
            "https://github.com/else/infra.git",
        )
        .await
        .unwrap_err();
        assert!(e.contains("may not be sent for"), "{e}");

        let plain_http =
            r#"{"token": "t", "hosts": ["git.example"], "apiUrl": "http://git.example/api/v4"}"#;
        let e = access(plain_http, Host::GitLab, "https://git.example/g/p.git")
            .await
            .unwrap_err();
        assert!(e.contains("not https://"), "{e}");
    }

    #[tokio::test]
    async fn an_app_password_is_basic_and_an_ssh_key_posts_nothing() {
        let password = r#"{"username": "bot", "password": "p", "hosts": ["bitbucket.org"], "repositories": ["w/*"]}"#;
        let ok = access(password, Host::Bitbucket, "https://bitbucket.org/w/r.git")
            .await
            .unwrap();
        assert_eq!(ok.base, "https://api.bitbucket.org/2.0");
        assert!(matches!(ok.auth, ApiAuth::Basic { .. }));

        let ssh = r#"{"sshPrivateKey": "k", "knownHosts": "h", "hosts": ["bitbucket.org"], "repositories": ["w/*"]}"#;
        let e = access(ssh, Host::Bitbucket, "https://bitbucket.org/w/r.git")
            .await
            .unwrap_err();
        assert!(e.contains("SSH deploy key"), "{e}");
    }
}
