//! Is the delivery from the host we gave the secret to?
//!
//! GitHub, Bitbucket Cloud and the generic sender sign the raw body:
//! `sha256=<hex HMAC-SHA256(secret, body)>`, checked with
//! [`Mac::verify_slice`] (constant time). GitLab sends the secret itself in
//! `X-Gitlab-Token`; it is compared as SHA-256 digests with
//! [`ConstantTimeEq`], so neither the secret's bytes nor its length leak
//! through timing. Every accepted secret is tried, without stopping at the
//! first match, so the time does not tell which one matched either.

use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};
use subtle::{Choice, ConstantTimeEq};

use super::{Headers, Provider, WebhookError};

/// GitHub's signature header.
pub const GITHUB_SIGNATURE: &str = "X-Hub-Signature-256";
/// Bitbucket Cloud's signature header (SHA-256, despite the name).
pub const BITBUCKET_SIGNATURE: &str = "X-Hub-Signature";
/// The generic sender's signature header.
pub const GENERIC_SIGNATURE: &str = "X-Stacksync-Signature-256";
/// The generic sender's signed time (Unix seconds), optional: with it, the
/// signature covers `TIMESTAMP.BODY`, and a delivery older than the window
/// deliveries are deduplicated in is refused ([`stale`]). GitHub, GitLab and
/// Bitbucket sign no time: their replays are caught by the delivery id only.
pub const GENERIC_TIMESTAMP: &str = "X-Stacksync-Timestamp";
/// How far ahead of this clock a signed time may be (the sender's clock).
pub const MAX_CLOCK_SKEW_SECONDS: i64 = 300;
/// GitLab's secret-token header.
pub const GITLAB_TOKEN: &str = "X-Gitlab-Token";

const PREFIX: &str = "sha256=";
const DIGEST_LEN: usize = 32;

/// `Ok` if the delivery carries a valid signature (or token) for any of
/// `secrets`; [`WebhookError::Unauthorized`] naming the header and what is
/// wrong with it otherwise. Blank secrets are skipped; with none left,
/// nothing is accepted.
pub fn verify<S: AsRef<[u8]>>(
    provider: Provider,
    headers: &Headers,
    body: &[u8],
    secrets: &[S],
) -> Result<(), WebhookError> {
    let secrets: Vec<&[u8]> = secrets
        .iter()
        .map(AsRef::as_ref)
        .filter(|s| !s.is_empty())
        .collect();
    if secrets.is_empty() {
        return Err(WebhookError::Unauthorized(
            "no webhook secret is configured, so no delivery can be verified".to_owned(),
        ));
    }
    match provider {
        Provider::GitHub => verify_hmac(GITHUB_SIGNATURE, headers, body, &secrets),
        Provider::Bitbucket => verify_hmac(BITBUCKET_SIGNATURE, headers, body, &secrets),
        Provider::Generic => match headers.get(GENERIC_TIMESTAMP) {
            Some(at) => {
                let signed = [at.as_bytes(), b".", body].concat();
                verify_hmac(GENERIC_SIGNATURE, headers, &signed, &secrets)
            }
            None => verify_hmac(GENERIC_SIGNATURE, headers, body, &secrets),
        },
        Provider::GitLab => verify_token(headers, &secrets),
    }
}

/// Why a verified delivery's signed time is refused (`now`: epoch ms):
/// older than `window_seconds` (the window delivery ids are kept for
/// deduplication: a replay past it would otherwise start runs again), ahead
/// of this clock by more than [`MAX_CLOCK_SKEW_SECONDS`], or not a number.
/// `None`: no signed time, or a fresh one.
pub fn stale(headers: &Headers, now: i64, window_seconds: i64) -> Option<String> {
    let at = headers.get(GENERIC_TIMESTAMP)?;
    let Ok(at) = at.trim().parse::<i64>() else {
        return Some(format!("{GENERIC_TIMESTAMP} is not a number of seconds"));
    };
    let now = now / 1000;
    if at < now - window_seconds {
        Some(format!(
            "{GENERIC_TIMESTAMP} is {} s old: older than the {window_seconds} s deliveries are \
             deduplicated in",
            now - at
        ))
    } else if at > now + MAX_CLOCK_SKEW_SECONDS {
        Some(format!(
            "{GENERIC_TIMESTAMP} is {} s ahead of this clock",
            at - now
        ))
    } else {
        None
    }
}

fn unauthorized(header: &str, what: &str) -> WebhookError {
    WebhookError::Unauthorized(format!("{header} {what}"))
}

fn verify_hmac(
    header: &str,
    headers: &Headers,
    body: &[u8],
    secrets: &[&[u8]],
) -> Result<(), WebhookError> {
    let value = headers
        .get(header)
        .ok_or_else(|| unauthorized(header, "is missing"))?;
    let hex = value
        .get(..PREFIX.len())
        .filter(|p| p.eq_ignore_ascii_case(PREFIX))
        .and_then(|_| value.get(PREFIX.len()..))
        .ok_or_else(|| unauthorized(header, "must start with `sha256=`"))?;
    if hex.len() != DIGEST_LEN * 2 {
        return Err(unauthorized(
            header,
            &format!(
                "must hold {} hex digits after `sha256=`, not {}",
                DIGEST_LEN * 2,
                hex.len()
            ),
        ));
    }
    let signature = decode_hex(hex)
        .ok_or_else(|| unauthorized(header, "is not hexadecimal after `sha256=`"))?;
    let mut matched = false;
    for secret in secrets {
        matched |= hmac_matches(secret, body, &signature);
    }
    if matched {
        Ok(())
    } else {
        Err(unauthorized(
            header,
            "does not match the body under any accepted secret",
        ))
    }
}

fn hmac_matches(secret: &[u8], body: &[u8], signature: &[u8]) -> bool {
    // HMAC takes keys of any length; the error branch cannot happen.
    let Ok(mut mac) = <Hmac<Sha256> as KeyInit>::new_from_slice(secret) else {
        return false;
    };
    mac.update(body);
    mac.verify_slice(signature).is_ok()
}

fn verify_token(headers: &Headers, secrets: &[&[u8]]) -> Result<(), WebhookError> {
    let token = headers
        .get(GITLAB_TOKEN)
        .ok_or_else(|| unauthorized(GITLAB_TOKEN, "is missing"))?;
    // Equal-length digests: the comparison's time depends on neither the
    // secret's bytes nor its length.
    let presented = Sha256::digest(token.as_bytes());
    let mut matched = Choice::from(0);
    for secret in secrets {
        matched |= Sha256::digest(secret).ct_eq(&presented);
    }
    if bool::from(matched) {
        Ok(())
    } else {
        Err(unauthorized(
            GITLAB_TOKEN,
            "does not equal any accepted secret",
        ))
    }
}

/// Lower- or upper-case hex to bytes; `None` on an odd length or a non-hex
/// digit.
pub(crate) fn decode_hex(hex: &str) -> Option<Vec<u8>> {
    let bytes = hex.as_bytes();
    if !bytes.len().is_multiple_of(2) {
        return None;
    }
    bytes
        .chunks_exact(2)
        .map(|pair| match pair {
            [high, low] => Some(hex_value(*high)? << 4 | hex_value(*low)?),
            _ => None,
        })
        .collect()
}

fn hex_value(digit: u8) -> Option<u8> {
    char::from(digit)
        .to_digit(16)
        .and_then(|v| u8::try_from(v).ok())
}

/// `sha256=` and the hex HMAC-SHA256 of `body` under `secret`: what a sender
/// puts in the signature header. For tests and for signing test deliveries.
pub fn sign(secret: &[u8], body: &[u8]) -> String {
    let mut out = String::from(PREFIX);
    if let Ok(mut mac) = <Hmac<Sha256> as KeyInit>::new_from_slice(secret) {
        mac.update(body);
        for byte in mac.finalize().into_bytes() {
            out.push_str(&format!("{byte:02x}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"It's a Secret to Everybody";

    fn headers(pairs: &[(&str, &str)]) -> Headers {
        pairs.iter().copied().collect()
    }

    #[test]
    fn signing_matches_githubs_published_example() {
        // docs.github.com, "Validating webhook deliveries": this secret and
        // payload give this signature.
        assert_eq!(
            sign(SECRET, b"Hello, World!"),
            "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
        );
    }

    #[test]
    fn hex_decoding_takes_either_case_and_refuses_the_rest() {
        assert_eq!(decode_hex("00ffA0"), Some(vec![0, 255, 160]));
        assert_eq!(decode_hex("abc"), None);
        assert_eq!(decode_hex("zz"), None);
        assert_eq!(decode_hex("é0"), None);
        assert_eq!(decode_hex(""), Some(vec![]));
    }

    #[test]
    fn a_valid_signature_under_any_accepted_secret_passes() {
        let body = b"{}";
        let h = headers(&[(GITHUB_SIGNATURE, &sign(SECRET, body))]);
        assert!(verify(Provider::GitHub, &h, body, &[SECRET]).is_ok());
        // Rotation: the old secret still listed, in either position.
        assert!(verify(Provider::GitHub, &h, body, &[b"new".as_slice(), SECRET]).is_ok());
        assert!(verify(Provider::GitHub, &h, body, &[SECRET, b"new".as_slice()]).is_ok());
    }

    #[test]
    fn an_upper_case_signature_passes_too() {
        let body = b"{}";
        let signature = sign(SECRET, body).to_ascii_uppercase();
        let h = headers(&[(GITHUB_SIGNATURE, &signature)]);
        assert!(verify(Provider::GitHub, &h, body, &[SECRET]).is_ok());
    }

    #[test]
    fn without_a_configured_secret_nothing_passes() {
        let body = b"{}";
        let h = headers(&[(GITHUB_SIGNATURE, &sign(b"", body))]);
        let none: [&[u8]; 0] = [];
        for secrets in [&none[..], &[b"".as_slice()][..]] {
            let err = verify(Provider::GitHub, &h, body, secrets).unwrap_err();
            assert_eq!(err.status_code(), 401);
            assert!(err.to_string().contains("no webhook secret"), "{err}");
        }
    }

    #[test]
    fn each_malformed_signature_is_named() {
        let body = b"{}";
        let good = sign(SECRET, body);
        let cases = [
            (None, "X-Hub-Signature-256 is missing"),
            (Some("sha1=abcd"), "must start with `sha256=`"),
            (Some("sha256="), "64 hex digits after `sha256=`, not 0"),
            (Some(&good[..good.len() - 2]), "not 62"),
            (Some(&format!("{good}00")), "not 66"),
            (
                Some(&format!("sha256={}", "g".repeat(64))),
                "not hexadecimal",
            ),
            (
                Some(&format!("sha256={}", "é".repeat(32))),
                "not hexadecimal",
            ),
        ];
        for (value, expected) in cases {
            let h = match value {
                Some(v) => headers(&[(GITHUB_SIGNATURE, v)]),
                None => Headers::new(),
            };
            let err = verify(Provider::GitHub, &h, body, &[SECRET]).unwrap_err();
            assert_eq!(err.status_code(), 401, "{value:?}");
            assert!(err.to_string().contains(expected), "{value:?}: {err}");
        }
    }

    #[test]
    fn the_error_never_shows_the_secret() {
        let body = b"{}";
        let h = headers(&[(GITHUB_SIGNATURE, &sign(b"wrong", body))]);
        let err = verify(Provider::GitHub, &h, body, &[SECRET]).unwrap_err();
        assert!(!err.to_string().contains("Secret to Everybody"));
        let h = headers(&[(GITLAB_TOKEN, "wrong")]);
        let err = verify(Provider::GitLab, &h, body, &[SECRET]).unwrap_err();
        assert!(!err.to_string().contains("Secret to Everybody"));
    }

    #[test]
    fn gitlab_tokens_must_equal_a_secret_exactly() {
        let secret = std::str::from_utf8(SECRET).unwrap();
        let ok = headers(&[(GITLAB_TOKEN, secret)]);
        assert!(verify(Provider::GitLab, &ok, b"", &[SECRET]).is_ok());
        assert!(verify(Provider::GitLab, &ok, b"", &[b"next".as_slice(), SECRET]).is_ok());
        let prefix = &secret[..secret.len() - 1];
        let longer = format!("{secret}x");
        for wrong in [prefix, longer.as_str(), "IT'S A SECRET TO EVERYBODY"] {
            let h = headers(&[(GITLAB_TOKEN, wrong)]);
            let err = verify(Provider::GitLab, &h, b"", &[SECRET]).unwrap_err();
            assert!(err.to_string().contains("X-Gitlab-Token does not equal"));
        }
        let err = verify(Provider::GitLab, &Headers::new(), b"", &[SECRET]).unwrap_err();
        assert!(err.to_string().contains("X-Gitlab-Token is missing"));
    }
}
