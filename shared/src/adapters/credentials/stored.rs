//! What a source's secret may hold, read from its text. Every error names
//! the secret's keys, never a value.

use serde_json::{Map, Value};

use super::Secret;
use super::binding::Binding;

/// What a bare token is told: it cannot say where it may be sent.
const PLAIN_TOKEN: &str = "the secret is a plain token, which does not say where it may be sent: \
     stacksync sends a credential only to the hosts its secret names. Store it as JSON instead: \
     {\"token\": \"<the token>\", \"hosts\": [\"github.com\"], \"repositories\": [\"acme/*\"]} \
     (README: Private repositories)";

/// Why a secret's text cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unusable {
    /// It holds none of the shapes stacksync reads.
    Invalid(String),
    /// It does not say where it may be sent (`hosts`), or says it wrongly.
    Unbound(String),
}

impl std::fmt::Display for Unusable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unusable::Invalid(m) | Unusable::Unbound(m) => f.write_str(m),
        }
    }
}

/// A source secret, read.
#[derive(Debug, Clone)]
pub enum Stored {
    /// An access token (a personal, project or repository access token),
    /// sent as the password of HTTP basic authentication.
    Token {
        token: Secret,
        username: Option<String>,
        /// Where the host's API is (`apiUrl`: GitHub Enterprise Server,
        /// a self-managed GitLab on another path, tests), for comments and
        /// statuses; on one of the secret's `hosts`.
        api_url: Option<String>,
    },
    /// A user name and password (or app password).
    Password {
        username: String,
        password: Secret,
        api_url: Option<String>,
    },
    /// A GitHub App installation: a token is made for each use.
    GitHubApp {
        app_id: String,
        installation_id: String,
        private_key: Secret,
        api_url: Option<String>,
    },
    /// An SSH deploy key and the host keys to trust.
    Ssh {
        private_key: Secret,
        passphrase: Option<Secret>,
        known_hosts: String,
    },
}

impl Stored {
    /// Reads a secret's text: JSON with one of the shapes the README lists,
    /// and the hosts (and repositories) it may be sent to.
    pub fn parse(text: &str) -> Result<(Stored, Binding), Unusable> {
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err(Unusable::Invalid("the secret is empty".into()));
        }
        let map = match serde_json::from_str::<Value>(trimmed) {
            Ok(Value::Object(map)) => map,
            Ok(_) => {
                return Err(Unusable::Invalid(
                    "the secret is JSON but not an object".into(),
                ));
            }
            Err(_) if trimmed.starts_with('{') => {
                return Err(Unusable::Invalid(
                    "the secret starts with `{` but is not valid JSON".into(),
                ));
            }
            Err(_) => return Err(Unusable::Unbound(PLAIN_TOKEN.into())),
        };
        let stored = Self::shape(&map).map_err(Unusable::Invalid)?;
        let binding = Binding::parse(&map).map_err(Unusable::Unbound)?;
        Ok((stored, binding))
    }

    /// The credential a secret's JSON object holds.
    fn shape(map: &Map<String, Value>) -> Result<Stored, String> {
        let keys: Vec<&str> = map
            .keys()
            .map(String::as_str)
            .filter(|k| !matches!(*k, "hosts" | "repositories"))
            .collect();
        let shape = |k: &str| map.contains_key(k);
        let stored = if shape("sshPrivateKey") {
            Stored::Ssh {
                private_key: Secret::new(required(map, "sshPrivateKey")?),
                passphrase: optional(map, "passphrase").map(Secret::new),
                known_hosts: required(map, "knownHosts")?,
            }
        } else if shape("appId") || shape("installationId") {
            Stored::GitHubApp {
                app_id: required(map, "appId")?,
                installation_id: required(map, "installationId")?,
                private_key: Secret::new(required(map, "privateKey")?),
                api_url: optional(map, "apiUrl"),
            }
        } else if shape("token") {
            Stored::Token {
                token: Secret::new(required(map, "token")?),
                username: optional(map, "username"),
                api_url: optional(map, "apiUrl"),
            }
        } else if shape("password") {
            Stored::Password {
                username: required(map, "username")?,
                password: Secret::new(required(map, "password")?),
                api_url: optional(map, "apiUrl"),
            }
        } else {
            return Err(format!(
                "the secret's keys {keys:?} are none stacksync reads: give `token` (and \
                 optionally `username`), `username` and `password`, `appId`, `installationId` \
                 and `privateKey` (a GitHub App), or `sshPrivateKey` and `knownHosts`"
            ));
        };
        Ok(stored)
    }

    /// What kind of credentials this is, for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Stored::Token { .. } => "token",
            Stored::Password { .. } => "username/password",
            Stored::GitHubApp { .. } => "GitHub App",
            Stored::Ssh { .. } => "SSH key",
        }
    }
}

/// A string value (numbers are read as text: app ids are often numbers).
fn value(map: &Map<String, Value>, key: &str) -> Option<String> {
    match map.get(key)? {
        Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_owned()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn required(map: &Map<String, Value>, key: &str) -> Result<String, String> {
    value(map, key).ok_or_else(|| format!("the secret has no non-empty `{key}`"))
}

fn optional(map: &Map<String, Value>, key: &str) -> Option<String> {
    value(map, key)
}

/// The user name a host expects with an access token: GitHub (and GitHub
/// Enterprise) `x-access-token`, GitLab `oauth2`, Bitbucket `x-token-auth`.
pub fn token_username(host: &str) -> Option<&'static str> {
    let host = host.to_ascii_lowercase();
    if host.contains("github") {
        Some("x-access-token")
    } else if host.contains("gitlab") {
        Some("oauth2")
    } else if host.contains("bitbucket") {
        Some("x-token-auth")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A secret's JSON with the hosts it may be sent to.
    fn bound(json: &str) -> String {
        let inner = json.trim().trim_start_matches('{');
        format!(r#"{{"hosts": ["git.acme.internal"], {inner}"#)
    }

    fn shape(json: &str) -> Stored {
        Stored::parse(&bound(json)).unwrap().0
    }

    #[test]
    fn each_shape_of_secret_is_read() {
        assert!(matches!(
            shape(r#"{"token": "t", "username": "bot"}"#),
            Stored::Token { username: Some(u), .. } if u == "bot"
        ));
        assert!(matches!(
            shape(r#"{"token": "t"}"#),
            Stored::Token { username: None, .. }
        ));
        assert!(matches!(
            shape(r#"{"username": "u", "password": "p"}"#),
            Stored::Password { .. }
        ));
        assert!(matches!(
            shape(r#"{"appId": 12, "installationId": "34", "privateKey": "k"}"#),
            Stored::GitHubApp { app_id, .. } if app_id == "12"
        ));
        assert!(matches!(
            shape(r#"{"sshPrivateKey": "k", "knownHosts": "h ssh-ed25519 AAAA"}"#),
            Stored::Ssh {
                passphrase: None,
                ..
            }
        ));
    }

    #[test]
    fn a_secret_that_does_not_say_where_it_goes_is_refused_saying_how_to_bind_it() {
        for text in ["ghp_plain\n", r#"{"token": "ghp_plain"}"#] {
            let err = Stored::parse(text).unwrap_err();
            assert!(matches!(err, Unusable::Unbound(_)), "{err:?}");
            let err = err.to_string();
            assert!(err.contains("\"hosts\": [\"github.com\"]"), "{err}");
            assert!(!err.contains("ghp_plain"), "{err}");
        }
    }

    #[test]
    fn a_secret_stacksync_cannot_read_is_named_by_its_keys_never_its_values() {
        for (text, wants) in [
            (bound(r#"{"secret": "hunter2"}"#), "[\"secret\"]"),
            (
                bound(r#"{"appId": 1, "privateKey": "hunter2"}"#),
                "installationId",
            ),
            (bound(r#"{"sshPrivateKey": "hunter2"}"#), "knownHosts"),
            (bound(r#"{"token": ""}"#), "`token`"),
            ("{hunter2".to_owned(), "not valid JSON"),
            ("[\"hunter2\"]".to_owned(), "not an object"),
            ("  ".to_owned(), "empty"),
        ] {
            let err = Stored::parse(&text).unwrap_err();
            assert!(matches!(err, Unusable::Invalid(_)), "{text}: {err:?}");
            let err = err.to_string();
            assert!(err.contains(wants), "{text}: {err}");
            assert!(!err.contains("hunter2"), "{err}");
        }
    }

    #[test]
    fn tokens_go_under_the_user_name_their_host_expects() {
        assert_eq!(token_username("github.com"), Some("x-access-token"));
        assert_eq!(
            token_username("github.acme.internal"),
            Some("x-access-token")
        );
        assert_eq!(token_username("gitlab.com"), Some("oauth2"));
        assert_eq!(token_username("bitbucket.org"), Some("x-token-auth"));
        assert_eq!(token_username("git.acme.internal"), None);
    }
}
