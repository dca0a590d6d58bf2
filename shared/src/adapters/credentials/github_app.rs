//! GitHub App credentials: a JWT signed with the app's private key (RS256),
//! exchanged for an installation access token, which is what Git is given
//! (user `x-access-token`). Tokens last an hour; the caller caches them.

use std::time::Duration;

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{RSA_PKCS1_SHA256, RsaKeyPair};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::{Value, json};

use super::Secret;

/// Longest wait for GitHub's token endpoint.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// An installation token and when GitHub says it expires (Unix seconds).
#[derive(Debug, Clone)]
pub struct InstallationToken {
    pub token: Secret,
    pub expires_at: u64,
}

/// Why no token was made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AppError {
    /// The key, the app or the installation was refused (final).
    #[error("{0}")]
    Refused(String),
    /// The endpoint could not be reached or failed (worth another try).
    #[error("{0}")]
    Transient(String),
}

/// The API the app's JWT is sent to: `apiUrl` from the secret (GitHub
/// Enterprise Server: `https://HOST/api/v3`; it must be on one of the
/// secret's `hosts`), else GitHub's own. Never derived from a source's
/// host: whoever writes the registry chooses that, and with the JWT anyone
/// can make installation tokens for every organisation the app is in.
pub fn api_url(configured: Option<&str>) -> String {
    match configured {
        Some(url) => url.trim_end_matches('/').to_owned(),
        None => "https://api.github.com".into(),
    }
}

/// The private key of a PEM text: PKCS#1 (`BEGIN RSA PRIVATE KEY`, what
/// GitHub gives) or PKCS#8 (`BEGIN PRIVATE KEY`).
fn key_pair(pem: &str) -> Result<RsaKeyPair, AppError> {
    let refused = |why: &str| AppError::Refused(format!("the GitHub App's privateKey {why}"));
    let body: String = pem
        .lines()
        .map(str::trim)
        .filter(|l| !l.starts_with("-----") && !l.is_empty())
        .collect();
    let der = STANDARD
        .decode(body)
        .map_err(|_| refused("is not a PEM-encoded key"))?;
    if pem.contains("BEGIN RSA PRIVATE KEY") {
        RsaKeyPair::from_der(&der).map_err(|_| refused("is not an RSA key"))
    } else {
        RsaKeyPair::from_pkcs8(&der).map_err(|_| refused("is not an RSA key in PKCS#8"))
    }
}

/// The app's JWT: issued a minute back (clock skew), valid ten minutes,
/// GitHub's longest.
pub fn jwt(app_id: &str, private_key: &Secret, now_secs: u64) -> Result<Secret, AppError> {
    let key = key_pair(private_key.expose())?;
    let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"RS256","typ":"JWT"}"#);
    let claims = json!({"iat": now_secs.saturating_sub(60), "exp": now_secs + 540, "iss": app_id});
    let claims = URL_SAFE_NO_PAD.encode(claims.to_string());
    let signed = format!("{header}.{claims}");
    let mut signature = vec![0; key.public_modulus_len()];
    key.sign(
        &RSA_PKCS1_SHA256,
        &SystemRandom::new(),
        signed.as_bytes(),
        &mut signature,
    )
    .map_err(|_| AppError::Refused("the GitHub App's privateKey cannot sign".into()))?;
    Ok(Secret::new(format!(
        "{signed}.{}",
        URL_SAFE_NO_PAD.encode(signature)
    )))
}

/// Exchanges the app's JWT for a token of `installation_id`.
pub async fn installation_token(
    api: &str,
    installation_id: &str,
    jwt: &Secret,
) -> Result<InstallationToken, AppError> {
    if !api.starts_with("https://") && !super::loopback_http(api) {
        return Err(AppError::Refused(format!(
            "the GitHub API URL {api} is not https:// (a JWT is sent to it)"
        )));
    }
    let url = format!("{api}/app/installations/{installation_id}/access_tokens");
    let transient = |e: reqwest::Error| AppError::Transient(format!("POST {url}: {e}"));
    let client = reqwest::Client::builder()
        .timeout(REQUEST_TIMEOUT)
        .connect_timeout(super::CONNECT_TIMEOUT)
        .build()
        .map_err(transient)?;
    let response = client
        .post(&url)
        .bearer_auth(jwt.expose())
        .header("Accept", "application/vnd.github+json")
        .header("X-GitHub-Api-Version", "2022-11-28")
        .header(
            "User-Agent",
            concat!("stacksync/", env!("CARGO_PKG_VERSION")),
        )
        .send()
        .await
        .map_err(transient)?;
    let status = response.status();
    let body = response.bytes().await.map_err(transient)?;
    // GitHub's `message`, after the status; nothing where it sent none
    // (never an empty cause).
    let said = || {
        serde_json::from_slice::<Value>(&body)
            .ok()
            .and_then(|v| v["message"].as_str().map(str::trim).map(str::to_owned))
            .filter(|m| !m.is_empty())
            .map(|m| format!(": {m}"))
            .unwrap_or_default()
    };
    match status.as_u16() {
        200 | 201 => read_token(&body),
        500..=599 | 429 => Err(AppError::Transient(format!(
            "POST {url}: HTTP {status}{}",
            said()
        ))),
        _ => Err(AppError::Refused(format!(
            "GitHub refused the app's token request for installation {installation_id} (HTTP {status}{})",
            said()
        ))),
    }
}

fn read_token(body: &[u8]) -> Result<InstallationToken, AppError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|_| AppError::Transient("the token endpoint answered no JSON".into()))?;
    let token = value["token"]
        .as_str()
        .ok_or_else(|| AppError::Transient("the token endpoint answered no token".into()))?;
    let expires_at = value["expires_at"]
        .as_str()
        .and_then(|t| humantime::parse_rfc3339(t).ok())
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_secs())
        .ok_or_else(|| AppError::Transient("the token endpoint answered no expires_at".into()))?;
    Ok(InstallationToken {
        token: Secret::new(token),
        expires_at,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_lc_rs::signature::{KeyPair, RSA_PKCS1_2048_8192_SHA256, UnparsedPublicKey};

    fn pkcs8_pem(der: &[u8]) -> String {
        format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
            STANDARD.encode(der)
        )
    }

    #[test]
    fn the_jwt_is_signed_by_the_apps_key_for_ten_minutes_at_most() {
        let generated =
            aws_lc_rs::rsa::KeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048).unwrap();
        let der = aws_lc_rs::encoding::AsDer::<aws_lc_rs::encoding::Pkcs8V1Der>::as_der(&generated)
            .unwrap();
        let key = Secret::new(pkcs8_pem(der.as_ref()));
        let token = jwt("1234", &key, 1_700_000_000).unwrap();
        let parts: Vec<&str> = token.expose().split('.').collect();
        assert_eq!(parts.len(), 3);
        let claims: Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
        assert_eq!(claims["iss"], "1234");
        assert_eq!(claims["iat"], 1_699_999_940u64);
        assert_eq!(claims["exp"], 1_700_000_540u64);
        let public =
            UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, generated.public_key().as_ref());
        let signature = URL_SAFE_NO_PAD.decode(parts[2]).unwrap();
        public
            .verify(format!("{}.{}", parts[0], parts[1]).as_bytes(), &signature)
            .unwrap();
    }

    #[test]
    fn a_key_that_is_no_key_is_refused_without_being_repeated() {
        let err = jwt(
            "1",
            &Secret::new("-----BEGIN RSA PRIVATE KEY-----\nhunter2\n-----END"),
            0,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("privateKey"), "{err}");
        assert!(!err.contains("hunter2"), "{err}");
    }

    #[test]
    fn the_api_is_github_s_own_unless_the_secret_names_another() {
        // Never the source's host: the JWT goes to GitHub, or to the
        // secret's `apiUrl` (which must be on one of its hosts).
        assert_eq!(api_url(None), "https://api.github.com");
        assert_eq!(api_url(Some("http://127.0.0.1:9/")), "http://127.0.0.1:9");
    }

    #[test]
    fn a_token_answer_gives_the_token_and_its_expiry() {
        let token =
            read_token(br#"{"token": "ghs_x", "expires_at": "2026-11-23T19:00:00Z"}"#).unwrap();
        assert_eq!(token.token.expose(), "ghs_x");
        assert_eq!(token.expires_at, 1_795_460_400);
        assert!(read_token(b"{}").is_err());
    }
}
