//! SSH signatures on commits (`git commit -S` with `gpg.format=ssh`),
//! checked in-process against the keys a spec trusts (`source.signedBy`).

use russh::keys::ssh_key::{HashAlg, PublicKey, SshSig};

use crate::content::ContentError;

/// Git signs commits in this namespace.
const NAMESPACE: &str = "git";

/// Whether `commit` carries an SSH signature by one of `trusted` (OpenSSH
/// public keys); nothing to check when `trusted` is empty.
pub(super) fn check(commit: &gix::Commit<'_>, trusted: &[String]) -> Result<(), ContentError> {
    if trusted.is_empty() {
        return Ok(());
    }
    let id = commit.id.to_string();
    let refused = |why: String| ContentError::Unsigned {
        commit: id.clone(),
        why,
    };
    let (signature, signed) = commit
        .signature()
        .map_err(|e| refused(format!("cannot be read: {e}")))?
        .ok_or_else(|| {
            refused("is not signed, and source.signedBy asks for a signature by its keys".into())
        })?;
    let text = signature.to_string();
    if !text
        .trim_start()
        .starts_with("-----BEGIN SSH SIGNATURE-----")
    {
        return Err(refused(
            "is signed with GPG or X.509: only SSH signatures (gpg.format=ssh) are checked".into(),
        ));
    }
    let signature = SshSig::from_pem(text.trim())
        .map_err(|e| refused(format!("has a broken SSH signature: {e}")))?;
    let data = signed.to_bstring();
    let trusted_by = trusted
        .iter()
        .filter_map(|key| PublicKey::from_openssh(key.trim()).ok())
        .any(|key| key.verify(NAMESPACE, &data, &signature).is_ok());
    if trusted_by {
        return Ok(());
    }
    let signer = PublicKey::from(signature.public_key().clone()).fingerprint(HashAlg::Sha256);
    Err(refused(format!(
        "is signed by {signer}, a key source.signedBy does not list, or its signature does not match the commit"
    )))
}
