//! Source credentials: read from the secret a spec names (a Secrets Manager
//! secret or an SSM SecureString, by ARN, in the ARN's region), turned into
//! what a Git transport presents, and cached per warm function for a
//! bounded time. A GitHub App's installation token is cached until shortly
//! before it expires; CodeCommit needs no secret (the role signs).
//!
//! A secret's value never leaves this module but as a [`Secret`], whose
//! `Debug` hides it: it is never logged, put in an error, the registry, an
//! artifact or a run's state. And it goes only where the secret itself says
//! it may (`hosts`, `repositories`: [`binding`]), checked before any
//! connection is made.

pub mod api;
pub mod binding;
pub mod codecommit;
pub mod github_app;
pub mod stored;

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_sdk_secretsmanager::config::Region;

use self::binding::Binding;
use self::github_app::{AppError, InstallationToken};
use self::stored::{Stored, Unusable, token_username};
use crate::adapters::port_error;
use crate::ports::PortError;
use crate::ports::source::{FetchError, SourceLocation, rejected, transient};
use crate::source::{host_of, is_loopback_host};

/// How long a source secret read is trusted before it is read again.
pub const SECRET_CACHE: Duration = Duration::from_secs(300);
/// A GitHub App token is replaced this long before it expires.
pub const TOKEN_MARGIN: Duration = Duration::from_secs(300);
/// Longest wait for a connection to a credentials endpoint.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A credential's value: shown to nobody (`Debug` prints `***`).
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The value, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// An SSH deploy key and the host keys to trust (known_hosts lines).
#[derive(Debug, Clone)]
pub struct SshKey {
    pub private_key: Secret,
    pub passphrase: Option<Secret>,
    pub known_hosts: String,
}

/// What a Git transport presents to the server.
#[derive(Debug, Clone)]
pub enum GitAuth {
    Anonymous,
    /// HTTP basic authentication.
    Basic {
        username: String,
        password: Secret,
    },
    SshKey(SshKey),
}

impl GitAuth {
    pub fn kind(&self) -> &'static str {
        match self {
            GitAuth::Anonymous => "no",
            GitAuth::Basic { .. } => "HTTPS",
            GitAuth::SshKey(_) => "SSH key",
        }
    }
}

/// Where secrets are read from.
enum Store {
    /// Secrets Manager and SSM, with a client per region.
    Aws {
        config: Box<aws_config::SdkConfig>,
        clients: Mutex<HashMap<String, Clients>>,
    },
    /// Given by ARN (unit tests).
    Fixed(HashMap<String, String>),
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Store::Aws { .. } => f.write_str("Store::Aws"),
            Store::Fixed(map) => f
                .debug_tuple("Store::Fixed")
                .field(&map.keys().collect::<Vec<_>>())
                .finish(),
        }
    }
}

#[derive(Debug, Clone)]
struct Clients {
    secretsmanager: aws_sdk_secretsmanager::Client,
    ssm: aws_sdk_ssm::Client,
}

/// Reads source secrets, and signs for CodeCommit.
#[derive(Debug)]
pub struct Credentials {
    store: Store,
    /// The region of `codecommit://NAME` URLs (the installation's).
    region: String,
    /// Where CodeCommit is reached instead of its public endpoint (a VPC
    /// endpoint: `STACKSYNC_CODECOMMIT_ENDPOINT`).
    codecommit_endpoint: Option<String>,
    aws_keys: Option<SharedCredentialsProvider>,
    cache: Mutex<HashMap<String, (Instant, Stored, Binding)>>,
    tokens: Mutex<HashMap<String, InstallationToken>>,
}

impl Credentials {
    /// Secrets from AWS, CodeCommit signed with `config`'s credentials.
    pub fn aws(config: &aws_config::SdkConfig) -> Self {
        Self {
            region: config.region().map(ToString::to_string).unwrap_or_default(),
            codecommit_endpoint: None,
            aws_keys: config.credentials_provider(),
            store: Store::Aws {
                config: Box::new(config.clone()),
                clients: Mutex::new(HashMap::new()),
            },
            cache: Mutex::new(HashMap::new()),
            tokens: Mutex::new(HashMap::new()),
        }
    }

    /// Secrets given by ARN (tests); no AWS keys.
    pub fn fixed(secrets: impl IntoIterator<Item = (String, String)>, region: &str) -> Self {
        Self {
            region: region.to_owned(),
            codecommit_endpoint: None,
            aws_keys: None,
            store: Store::Fixed(secrets.into_iter().collect()),
            cache: Mutex::new(HashMap::new()),
            tokens: Mutex::new(HashMap::new()),
        }
    }

    /// Reaches CodeCommit at `endpoint` (`https://HOST`) instead of its
    /// public endpoint, signing for it (a VPC endpoint).
    pub fn with_codecommit_endpoint(mut self, endpoint: Option<String>) -> Self {
        self.codecommit_endpoint = endpoint.filter(|e| !e.is_empty());
        self
    }

    /// The URL to fetch from and what to present there.
    pub async fn git_access(
        &self,
        source: &SourceLocation,
    ) -> Result<(String, GitAuth), FetchError> {
        let codecommit = codecommit::repository(&source.url, &self.region)
            .transpose()
            .map_err(rejected)?
            .map(|repo| match &self.codecommit_endpoint {
                Some(endpoint) => repo.at(endpoint),
                None => repo,
            });
        let url = codecommit
            .as_ref()
            .map(|r| r.url())
            .unwrap_or_else(|| source.url.clone());
        let Some(arn) = &source.credentials else {
            return match codecommit {
                Some(repo) => Ok((url, self.codecommit(&repo).await?)),
                None => Ok((url, GitAuth::Anonymous)),
            };
        };
        let (stored, binding) = self.stored(arn).await?;
        // Before any connection: the secret goes only where it says.
        binding
            .allows(&url)
            .map_err(|why| not_for(arn, &url, &why))?;
        let auth = self.present(arn, &url, stored, &binding).await?;
        Ok((url, auth))
    }

    /// Forgets what was read of `arn` and the tokens made from it: the
    /// server refused them (a rotated secret is read again at once).
    pub fn forget(&self, arn: &str) {
        if let Ok(mut cache) = self.cache.lock() {
            cache.remove(arn);
        }
        if let Ok(mut tokens) = self.tokens.lock() {
            tokens.clear();
        }
    }

    /// What a stored secret presents to the server at `url`.
    async fn present(
        &self,
        arn: &str,
        url: &str,
        stored: Stored,
        binding: &Binding,
    ) -> Result<GitAuth, FetchError> {
        let host = host_of(url).to_ascii_lowercase();
        Ok(match stored {
            Stored::Token {
                token, username, ..
            } => {
                let username = match username {
                    Some(name) => name,
                    None => token_username(&host).map(str::to_owned).ok_or_else(|| {
                        rejected(format!(
                            "{url}: source.credentialsSecret holds a token, and stacksync cannot tell \
                             which user name {host} expects with it: add `username` to the secret"
                        ))
                    })?,
                };
                GitAuth::Basic {
                    username,
                    password: token,
                }
            }
            Stored::Password {
                username, password, ..
            } => GitAuth::Basic { username, password },
            Stored::GitHubApp {
                app_id,
                installation_id,
                private_key,
                api_url,
            } => {
                // Never derived from the source's host: GitHub's own API
                // (github.com among its hosts), or the secret's `apiUrl`
                // on one of its hosts.
                let api = github_app::api_url(api_url.as_deref());
                if api_url.is_some() {
                    binding.allows_api(&api)
                } else {
                    binding.allows_github_api()
                }
                .map_err(|why| not_for(arn, url, &why))?;
                let token = self
                    .app_token(url, &api, &app_id, &installation_id, &private_key)
                    .await?;
                GitAuth::Basic {
                    username: "x-access-token".into(),
                    password: token,
                }
            }
            Stored::Ssh {
                private_key,
                passphrase,
                known_hosts,
            } => GitAuth::SshKey(SshKey {
                private_key,
                passphrase,
                known_hosts,
            }),
        })
    }

    /// A GitHub App installation token: cached until [`TOKEN_MARGIN`]
    /// before it expires, else a new one.
    pub(crate) async fn app_token(
        &self,
        url: &str,
        api: &str,
        app_id: &str,
        installation_id: &str,
        private_key: &Secret,
    ) -> Result<Secret, FetchError> {
        let key = format!("{api}#{app_id}#{installation_id}");
        let now = now_secs();
        if let Some(token) = self.tokens.lock().ok().and_then(|t| t.get(&key).cloned())
            && token.expires_at > now + TOKEN_MARGIN.as_secs()
        {
            return Ok(token.token);
        }
        let app_error = |e: AppError| match e {
            AppError::Refused(detail) => FetchError::Authentication {
                url: url.to_owned(),
                detail,
            },
            AppError::Transient(m) => transient(m),
        };
        let jwt = github_app::jwt(app_id, private_key, now).map_err(app_error)?;
        let token = github_app::installation_token(api, installation_id, &jwt)
            .await
            .map_err(app_error)?;
        if let Ok(mut tokens) = self.tokens.lock() {
            tokens.insert(key, token.clone());
        }
        Ok(token.token)
    }

    /// CodeCommit's Git credentials, signed now with the role's keys.
    async fn codecommit(&self, repo: &codecommit::Repository) -> Result<GitAuth, FetchError> {
        let provider = self.aws_keys.as_ref().ok_or_else(|| {
            rejected(format!(
                "{}: CodeCommit needs AWS credentials, and none are configured",
                repo.url()
            ))
        })?;
        let keys = provider.provide_credentials().await.map_err(|e| {
            transient(format!(
                "{}: no AWS credentials to sign with: {e}",
                repo.url()
            ))
        })?;
        let (username, password) = codecommit::credentials(
            repo,
            &codecommit::Keys {
                access_key_id: keys.access_key_id(),
                secret_access_key: keys.secret_access_key(),
                session_token: keys.session_token(),
            },
            &codecommit::timestamp(SystemTime::now()),
        );
        Ok(GitAuth::Basic {
            username,
            password: Secret::new(password),
        })
    }

    /// The secret at `arn`, read (or from the cache), and where it may go.
    pub(crate) async fn stored(&self, arn: &str) -> Result<(Stored, Binding), FetchError> {
        if let Some((at, stored, binding)) =
            self.cache.lock().ok().and_then(|c| c.get(arn).cloned())
            && at.elapsed() < SECRET_CACHE
        {
            return Ok((stored, binding));
        }
        let text = self.read(arn).await?;
        let (stored, binding) = Stored::parse(&text).map_err(|e| match e {
            Unusable::Invalid(m) => rejected(format!("source.credentialsSecret {arn}: {m}")),
            Unusable::Unbound(m) => FetchError::CredentialNotForHost {
                secret: arn.to_owned(),
                detail: format!("source.credentialsSecret {arn}: {m}; nothing was sent"),
            },
        })?;
        if let Ok(mut cache) = self.cache.lock() {
            cache.insert(
                arn.to_owned(),
                (Instant::now(), stored.clone(), binding.clone()),
            );
        }
        Ok((stored, binding))
    }

    /// The text of the secret or parameter at `arn`.
    async fn read(&self, arn: &str) -> Result<String, FetchError> {
        let (config, clients) = match &self.store {
            Store::Fixed(map) => {
                return map.get(arn).cloned().ok_or_else(|| {
                    rejected(format!("source.credentialsSecret {arn}: no such secret"))
                });
            }
            Store::Aws { config, clients } => (config, clients),
        };
        let parts: Vec<&str> = arn.splitn(6, ':').collect();
        let (service, region) = match parts.as_slice() {
            ["arn", _, service, region, _, _] => (*service, *region),
            _ => {
                return Err(rejected(format!(
                    "source.credentialsSecret {arn} is not an ARN"
                )));
            }
        };
        let clients = clients_for(config, clients, region);
        let port = |e: PortError| match e {
            PortError::Transient(m) => transient(format!("source.credentialsSecret: {m}")),
            other => rejected(format!(
                "source.credentialsSecret {arn}: {}",
                other.message()
            )),
        };
        let value = match service {
            "secretsmanager" => {
                clients
                    .secretsmanager
                    .get_secret_value()
                    .secret_id(arn)
                    .send()
                    .await
                    .map_err(|e| port(port_error("GetSecretValue", &e)))?
                    .secret_string
            }
            "ssm" => clients
                .ssm
                .get_parameter()
                .name(arn)
                .with_decryption(true)
                .send()
                .await
                .map_err(|e| port(port_error("GetParameter", &e)))?
                .parameter
                .and_then(|p| p.value),
            other => {
                return Err(rejected(format!(
                    "source.credentialsSecret {arn}: a {other} ARN; give a Secrets Manager secret or an SSM parameter"
                )));
            }
        };
        value.ok_or_else(|| rejected(format!("source.credentialsSecret {arn} has no text value")))
    }
}

/// The Secrets Manager and SSM clients of `region`, made once.
fn clients_for(
    config: &aws_config::SdkConfig,
    clients: &Mutex<HashMap<String, Clients>>,
    region: &str,
) -> Clients {
    let make = || {
        let region = Region::new(region.to_owned());
        Clients {
            secretsmanager: aws_sdk_secretsmanager::Client::from_conf(
                aws_sdk_secretsmanager::config::Builder::from(config)
                    .region(region.clone())
                    .build(),
            ),
            ssm: aws_sdk_ssm::Client::from_conf(
                aws_sdk_ssm::config::Builder::from(config)
                    .region(region)
                    .build(),
            ),
        }
    };
    match clients.lock() {
        Ok(mut map) => map.entry(region.to_owned()).or_insert_with(make).clone(),
        Err(_) => make(),
    }
}

/// The source at `url` is not among the places the secret at `arn` may be
/// sent to (`why`): nothing was sent.
fn not_for(arn: &str, url: &str, why: &str) -> FetchError {
    FetchError::CredentialNotForHost {
        secret: arn.to_owned(),
        detail: format!(
            "source.credentialsSecret {arn} may not be sent to {url}: {why}. Nothing was sent; \
             point the entry at a repository the secret names, or add it to the secret's \
             `hosts` (and `repositories`)"
        ),
    }
}

/// Whether a URL is plain http:// to this machine (tests, the local runner).
pub(crate) fn loopback_http(url: &str) -> bool {
    url.starts_with("http://") && is_loopback_host(host_of(url))
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
