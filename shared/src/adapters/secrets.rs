//! Secrets from Secrets Manager or an SSM SecureString, read once and
//! cached across invocations; a rotation is picked up within
//! [`SECRET_CACHE`], or at once when a caller forces a read (at most once
//! per [`FORCED_REFRESH_EVERY`], so a flood of bad requests cannot drive
//! reads). Values are never logged.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::ports::SecretStore;
use crate::ports::secrets::Accepted;

/// How long fetched secrets are trusted before they are read again.
pub const SECRET_CACHE: Duration = Duration::from_secs(300);

/// Where the webhook secret lives.
#[derive(Debug, Clone)]
pub enum SecretLocation {
    /// A Secrets Manager secret (ARN or name).
    SecretsManager(String),
    /// An SSM parameter (SecureString), by name.
    Parameter(String),
    /// Given directly (tests, the local runner).
    Fixed(Vec<String>),
}

/// The accepted secrets, read from their store and cached across invocations.
///
/// The stored value is either the secret itself, or JSON `{"current": ...,
/// "previous": ...}` so a rotation can accept both while senders switch.
#[derive(Debug)]
pub struct Secrets {
    location: SecretLocation,
    secretsmanager: Option<aws_sdk_secretsmanager::Client>,
    ssm: Option<aws_sdk_ssm::Client>,
    cache: Mutex<Option<(Instant, Accepted)>>,
    /// When a bad signature last forced a read: at most one per
    /// [`FORCED_REFRESH_EVERY`], so unsigned floods cannot drive reads.
    forced: Mutex<Option<Instant>>,
    forced_every: Duration,
}

/// The least time between two reads of the store forced by bad signatures.
pub const FORCED_REFRESH_EVERY: Duration = Duration::from_secs(30);

impl Secrets {
    pub fn new(location: SecretLocation, config: &aws_config::SdkConfig) -> Self {
        Self {
            secretsmanager: matches!(location, SecretLocation::SecretsManager(_))
                .then(|| aws_sdk_secretsmanager::Client::new(config)),
            ssm: matches!(location, SecretLocation::Parameter(_))
                .then(|| aws_sdk_ssm::Client::new(config)),
            location,
            cache: Mutex::new(None),
            forced: Mutex::new(None),
            forced_every: FORCED_REFRESH_EVERY,
        }
    }

    /// Another least time between forced reads (tests).
    pub fn with_forced_refresh_every(mut self, every: Duration) -> Self {
        self.forced_every = every;
        self
    }
}

impl Secrets {
    /// Whether a read forced by a bad signature may go to the store now.
    fn may_force(&self) -> bool {
        match self.forced.lock() {
            Ok(mut last) if last.is_none_or(|at| at.elapsed() >= self.forced_every) => {
                *last = Some(Instant::now());
                true
            }
            _ => false,
        }
    }

    fn cached(&self) -> Option<Accepted> {
        let cache = self.cache.lock().ok()?;
        let (at, secrets) = cache.as_ref()?;
        (at.elapsed() < SECRET_CACHE).then(|| secrets.clone())
    }

    /// The stored value, as text.
    async fn read_store(&self) -> Result<String, String> {
        match (&self.location, &self.secretsmanager, &self.ssm) {
            (SecretLocation::SecretsManager(id), Some(client), _) => client
                .get_secret_value()
                .secret_id(id)
                .send()
                .await
                .map_err(|e| {
                    format!(
                        "cannot read the webhook secret {id}: {}",
                        crate::ports::aws_error::failure("GetSecretValue", &e)
                    )
                })?
                .secret_string
                .ok_or_else(|| format!("the webhook secret {id} has no string value")),
            (SecretLocation::Parameter(name), _, Some(client)) => client
                .get_parameter()
                .name(name)
                .with_decryption(true)
                .send()
                .await
                .map_err(|e| {
                    format!(
                        "cannot read the webhook secret parameter {name}: {}",
                        crate::ports::aws_error::failure("GetParameter", &e)
                    )
                })?
                .parameter
                .and_then(|p| p.value)
                .ok_or_else(|| format!("the parameter {name} has no value")),
            _ => Err("the webhook secret's client is missing".into()),
        }
    }
}

impl SecretStore for Secrets {
    /// The accepted secrets; `fresh` reads the store even if the cache is
    /// recent (at most once per [`FORCED_REFRESH_EVERY`]). Returns whether
    /// they came from the cache.
    async fn get(&self, fresh: bool) -> Result<(Accepted, bool), String> {
        if let SecretLocation::Fixed(secrets) = &self.location {
            let accepted = Accepted {
                secrets: secrets.clone(),
                repositories: None,
            };
            return Ok((accepted, false));
        }
        if !(fresh && self.may_force())
            && let Some(secrets) = self.cached()
        {
            return Ok((secrets, true));
        }
        let secrets = parse_accepted(&self.read_store().await?)?;
        if let Ok(mut cache) = self.cache.lock() {
            *cache = Some((Instant::now(), secrets.clone()));
        }
        Ok((secrets, false))
    }
}

/// What a stored value accepts: [`parse_secret`]'s secrets, and the
/// repositories of an optional `"repositories": [URL, …]` (normalized as
/// source URLs are: any spelling of a repository is the same).
pub fn parse_accepted(raw: &str) -> Result<Accepted, String> {
    let secrets = parse_secret(raw)?;
    let repositories = match serde_json::from_str::<Value>(raw) {
        Ok(Value::Object(map)) => match map.get("repositories") {
            None => None,
            Some(Value::Array(items)) => Some(
                items
                    .iter()
                    .map(|v| {
                        v.as_str().map(crate::source::normalize_url).ok_or_else(|| {
                            "the webhook secret's \"repositories\" must be a list of URLs"
                                .to_owned()
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?,
            ),
            Some(_) => {
                return Err("the webhook secret's \"repositories\" must be a list of URLs".into());
            }
        },
        _ => None,
    };
    Ok(Accepted {
        secrets,
        repositories,
    })
}

/// The accepted secrets of a stored value: JSON `{"current", "previous"}` or
/// the plain secret (surrounding whitespace and newlines dropped). A JSON
/// object without a non-empty `current` is an error, not "no secret".
pub fn parse_secret(raw: &str) -> Result<Vec<String>, String> {
    if let Ok(Value::Object(map)) = serde_json::from_str::<Value>(raw) {
        let current = map.get("current").and_then(Value::as_str).map(str::trim);
        if current.is_none_or(str::is_empty) {
            let keys: Vec<&String> = map.keys().collect();
            return Err(format!(
                "the webhook secret is JSON without a \"current\" value (keys: {keys:?}); \
                 store the plain secret, or {{\"current\": ..., \"previous\": ...}}"
            ));
        }
        return Ok(["current", "previous"]
            .iter()
            .filter_map(|k| map.get(*k).and_then(Value::as_str))
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect());
    }
    let secret = raw.trim();
    if secret.is_empty() {
        return Err("the webhook secret is empty".into());
    }
    Ok(vec![secret.to_owned()])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_may_list_the_repositories_it_signs_for() {
        let accepted = parse_accepted(
            r#"{"current": "s", "repositories": ["https://github.com/Acme/infra.git", "git@github.com:acme/other"]}"#,
        )
        .unwrap();
        assert_eq!(accepted.secrets, ["s"]);
        assert_eq!(
            accepted.repositories.unwrap(),
            [
                crate::source::normalize_url("https://github.com/acme/infra"),
                crate::source::normalize_url("ssh://git@github.com/acme/other.git")
            ]
        );
        assert_eq!(parse_accepted("plain").unwrap().repositories, None);
        assert!(
            parse_accepted(r#"{"current": "s", "repositories": "github.com/acme"}"#)
                .unwrap_err()
                .contains("must be a list of URLs")
        );
    }

    #[test]
    fn stored_secrets_are_plain_or_current_and_previous() {
        assert_eq!(parse_secret("s3cret\n").unwrap(), vec!["s3cret"]);
        assert_eq!(
            parse_secret(r#"{"current": "new", "previous": "old"}"#).unwrap(),
            vec!["new", "old"]
        );
        assert_eq!(
            parse_secret(r#"{"current": "new", "previous": ""}"#).unwrap(),
            vec!["new"]
        );
        // The console's default key/value JSON: an error that names the keys, never the value.
        let console_default = parse_secret(r#"{"secret": "hunter2"}"#).unwrap_err();
        assert!(console_default.contains("\"current\""), "{console_default}");
        assert!(!console_default.contains("hunter2"), "{console_default}");
        assert!(parse_secret("  ").is_err());
    }
}
