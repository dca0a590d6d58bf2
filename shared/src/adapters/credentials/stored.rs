//! What a source's secret may hold, read from its text. Every error names
//! the secret's keys, never a value.

use serde_json::{Map, Value};

use super::Secret;

/// A source secret, read.
#[derive(Debug, Clone)]
pub enum Stored {
    /// An access token (a personal, project or repository access token),
    /// sent as the password of HTTP basic authentication.
    Token {
        token: Secret,
        username: Option<String>,
    },
    /// A user name and password (or app password).
    Password { username: String, password: Secret },
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
    /// or a plain token.
    pub fn parse(text: &str) -> Result<Stored, String> {
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err("the secret is empty".into());
        }
        let map = match serde_json::from_str::<Value>(trimmed) {
            Ok(Value::Object(map)) => map,
            Ok(_) => return Err("the secret is JSON but not an object".into()),
            Err(_) if trimmed.starts_with('{') => {
                return Err("the secret starts with `{` but is not valid JSON".into());
            }
            Err(_) => {
                return Ok(Stored::Token {
                    token: Secret::new(trimmed),
                    username: None,
                });
            }
        };
        let keys: Vec<&str> = map.keys().map(String::as_str).collect();
        let shape = |k: &str| map.contains_key(k);
        let stored = if shape("sshPrivateKey") {
            Stored::Ssh {
                private_key: Secret::new(required(&map, "sshPrivateKey")?),
                passphrase: optional(&map, "passphrase").map(Secret::new),
                known_hosts: required(&map, "knownHosts")?,
            }
        } else if shape("appId") || shape("installationId") {
            Stored::GitHubApp {
                app_id: required(&map, "appId")?,
                installation_id: required(&map, "installationId")?,
                private_key: Secret::new(required(&map, "privateKey")?),
                api_url: optional(&map, "apiUrl"),
            }
        } else if shape("token") {
            Stored::Token {
                token: Secret::new(required(&map, "token")?),
                username: optional(&map, "username"),
            }
        } else if shape("password") {
            Stored::Password {
                username: required(&map, "username")?,
                password: Secret::new(required(&map, "password")?),
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

    #[test]
    fn each_shape_of_secret_is_read() {
        assert!(matches!(
            Stored::parse("ghp_plain\n").unwrap(),
            Stored::Token { username: None, .. }
        ));
        assert!(matches!(
            Stored::parse(r#"{"token": "t", "username": "bot"}"#).unwrap(),
            Stored::Token { username: Some(u), .. } if u == "bot"
        ));
        assert!(matches!(
            Stored::parse(r#"{"username": "u", "password": "p"}"#).unwrap(),
            Stored::Password { .. }
        ));
        assert!(matches!(
            Stored::parse(r#"{"appId": 12, "installationId": "34", "privateKey": "k"}"#).unwrap(),
            Stored::GitHubApp { app_id, .. } if app_id == "12"
        ));
        assert!(matches!(
            Stored::parse(r#"{"sshPrivateKey": "k", "knownHosts": "h ssh-ed25519 AAAA"}"#).unwrap(),
            Stored::Ssh {
                passphrase: None,
                ..
            }
        ));
    }

    #[test]
    fn a_secret_stacksync_cannot_read_is_named_by_its_keys_never_its_values() {
        for (text, wants) in [
            (r#"{"secret": "hunter2"}"#, "[\"secret\"]"),
            (r#"{"appId": 1, "privateKey": "hunter2"}"#, "installationId"),
            (r#"{"sshPrivateKey": "hunter2"}"#, "knownHosts"),
            (r#"{"token": ""}"#, "`token`"),
            ("{hunter2", "not valid JSON"),
            ("[\"hunter2\"]", "not an object"),
            ("  ", "empty"),
        ] {
            let err = Stored::parse(text).unwrap_err();
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
