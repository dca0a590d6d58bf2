//! Sources: where a template comes from (a Git repository or an S3
//! archive), which ref or object version to read, and the template's path
//! inside it.
//!
//! A Git URL must use a transport stacksync fetches with and carry no
//! credentials: those belong in `source.credentialsSecret`, an ARN checked
//! here too. A path inside a source must stay inside it (relative, without
//! `..`), so no entry can make stacksync read a file from outside the
//! repository or archive it names.

use super::Errors;
use super::arns::secret_arn;
use crate::source::{host_of, is_loopback_host};
use crate::spec::{Source, SourceKind};

/// Longest template path we accept inside a source.
pub const MAX_PATH_LEN: usize = 1024;
/// Most paths `source.include` may list.
pub const MAX_INCLUDES: usize = 20;

/// `source`: one Git or S3 location, its ref, the template's path inside it
/// and the secret that opens it.
pub(super) fn check_source(source: &Source, errors: &mut Errors) {
    match source.kind() {
        None => errors.push(
            "source",
            "give exactly one of `git` (a repository URL) or `s3` (s3://bucket/key)",
        ),
        Some(SourceKind::Git) => {
            errors.check("source.git", git_url(source.url()));
            if let Some(r) = &source.reference {
                errors.check("source.ref", git_ref(r));
            }
        }
        Some(SourceKind::S3) => {
            errors.check("source.s3", s3_url(source.url()));
            if let Some(r) = &source.reference {
                errors.check("source.ref", s3_version(r));
            }
        }
    }
    match (&source.deployment_file, source.path.is_empty()) {
        (Some(file), true) => errors.check("source.deploymentFile", relative_path(file)),
        (Some(file), false) => {
            errors.check("source.deploymentFile", relative_path(file));
            errors.push(
                "source.path",
                "give source.path or source.deploymentFile, not both: the deployment \
                 file's template-file-path names the template",
            );
        }
        (None, _) => errors.check("source.path", relative_path(&source.path)),
    }
    if source.include.len() > MAX_INCLUDES {
        errors.push(
            "source.include",
            format!(
                "lists {} paths; at most {MAX_INCLUDES}",
                source.include.len()
            ),
        );
    }
    for (i, path) in source.include.iter().enumerate() {
        // A folder may be written with its trailing slash.
        let path = path.strip_suffix('/').unwrap_or(path);
        errors.check(format!("source.include[{i}]"), relative_path(path));
    }
    if let Some(secret) = &source.credentials_secret {
        errors.check("source.credentialsSecret", secret_arn(secret));
        errors.check("source.credentialsSecret", credentials_fit(source));
    }
    check_signers(source, errors);
}

/// `policy`: a folder of `.guard` files, in a source checked as `source`
/// is, or (no `git`, no `s3`) in the entry's own source.
pub(super) fn check_policy(policy: Option<&Source>, errors: &mut Errors) {
    let Some(policy) = policy else {
        return;
    };
    if policy.deployment_file.is_some() || !policy.include.is_empty() {
        errors.push(
            "policy",
            "a policy names a folder of .guard files (`path`): deploymentFile and include \
             do not apply",
        );
    }
    let folder = policy.path.trim_end_matches('/');
    errors.check(
        "policy.path",
        relative_path(folder).map_err(|e| {
            if folder.is_empty() {
                "is empty: give the folder (or file) of .guard files inside the source".into()
            } else {
                e
            }
        }),
    );
    if policy.git.is_none() && policy.s3.is_none() {
        if policy.reference.is_some()
            || policy.credentials_secret.is_some()
            || !policy.signed_by.is_empty()
            || policy.insecure
        {
            errors.push(
                "policy",
                "ref, credentialsSecret, signedBy and insecure need `git` or `s3`: without \
                 them the rules are read from the entry's own source, at the run's revision",
            );
        }
        return;
    }
    let mut own = Errors::default();
    let mut checked = policy.clone();
    checked.path = "rules.guard".into();
    checked.deployment_file = None;
    checked.include.clear();
    check_source(&checked, &mut own);
    for e in own.0 {
        let field = match e.field.strip_prefix("source") {
            Some(rest) => format!("policy{rest}"),
            None => e.field,
        };
        errors.push(field, e.message);
    }
}

/// The most keys `source.signedBy` may list.
pub const MAX_SIGNERS: usize = 20;

/// `source.signedBy`: OpenSSH public keys, for a Git source.
fn check_signers(source: &Source, errors: &mut Errors) {
    if source.signed_by.is_empty() {
        return;
    }
    if source.kind() == Some(SourceKind::S3) {
        errors.push(
            "source.signedBy",
            "S3 objects carry no commit signature: signedBy is for Git sources",
        );
    }
    if source.signed_by.len() > MAX_SIGNERS {
        errors.push(
            "source.signedBy",
            format!(
                "lists {} keys; at most {MAX_SIGNERS}",
                source.signed_by.len()
            ),
        );
    }
    for (i, key) in source.signed_by.iter().enumerate() {
        if let Err(e) = russh::keys::ssh_key::PublicKey::from_openssh(key.trim()) {
            errors.push(
                format!("source.signedBy[{i}]"),
                format!(
                    "is not an OpenSSH public key (`ssh-ed25519 AAAA… name`, as in a .pub file): {e}"
                ),
            );
        }
    }
}

/// Whether a source's URL can carry credentials: S3 sources are read with
/// the installation's role, and credentials travel only over TLS or SSH
/// (plain http:// to a loopback address, for local tests).
fn credentials_fit(source: &Source) -> Result<(), String> {
    let url = source.url();
    let scheme = url.split_once("://").map(|(s, _)| s);
    let loopback = is_loopback_host(host_of(url));
    match scheme {
        _ if source.kind() == Some(SourceKind::S3) => Err(
            "S3 sources are read with stacksync's own role (the installation's SourceBucketNames): \
             leave credentialsSecret out"
                .into(),
        ),
        Some("http") if !loopback => Err(format!(
            "{url:?} is plain http://: credentials are sent over https:// or ssh:// only"
        )),
        Some(scheme @ ("git" | "file")) => Err(format!(
            "{url:?}: a {scheme}:// source takes no credentials; use https:// or ssh://"
        )),
        _ => Ok(()),
    }
}

/// `codecommit::REGION://NAME` or `codecommit://NAME` (the installation's
/// region), as git-remote-codecommit writes them; no profile.
fn codecommit_url(url: &str) -> Result<(), String> {
    let (region, name) = match url.strip_prefix("codecommit::") {
        Some(rest) => rest.split_once("://").ok_or_else(|| {
            format!("{url:?} is not a CodeCommit URL: write codecommit::REGION://REPOSITORY")
        })?,
        None => ("", url.strip_prefix("codecommit://").unwrap_or("")),
    };
    if !region.is_empty() {
        super::names::region_name(region).map_err(|e| format!("{url:?}: {e}"))?;
    }
    if name.contains('@') {
        return Err(format!(
            "{url:?} names an AWS profile: stacksync uses its own role; write codecommit::REGION://REPOSITORY"
        ));
    }
    let valid = (1..=100).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    if !valid {
        return Err(format!(
            "{url:?}: {name:?} is not a CodeCommit repository name (1–100 letters, digits, '.', '_', '-')"
        ));
    }
    Ok(())
}

/// `url` as it may be shown: the credentials it carries replaced by `***`
/// (all of the user part over http(s), where a lone token is a secret; the
/// password elsewhere).
pub fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    let Some((user, host)) = authority.rsplit_once('@') else {
        return url.to_owned();
    };
    let user = match user.split_once(':') {
        _ if matches!(scheme, "https" | "http") => "***".to_owned(),
        Some((name, _)) => format!("{name}:***"),
        None => user.to_owned(),
    };
    format!("{scheme}://{user}@{host}{path}")
}

/// Git repository URLs stacksync can fetch from. The message shows the URL
/// without its credentials.
pub fn git_url(url: &str) -> Result<(), String> {
    let shown = redacted(url);
    checked_git_url(url).map_err(|message| {
        message
            .replace(&format!("{url:?}"), &format!("{shown:?}"))
            .replace(url, &shown)
    })
}

fn checked_git_url(url: &str) -> Result<(), String> {
    if url.is_empty() || url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("{url:?} is not a Git URL"));
    }
    if url.starts_with("codecommit:") {
        return codecommit_url(url);
    }
    if let Some((scheme, rest)) = url.split_once("://") {
        if !matches!(scheme, "https" | "http" | "ssh" | "git" | "file") {
            return Err(format!(
                "{url:?} uses {scheme}://; stacksync fetches from https://, http://, ssh://, \
                 git:// and file:// URLs"
            ));
        }
        let authority = rest.split('/').next().unwrap_or("");
        if scheme != "file" && authority.rsplit('@').next().unwrap_or("").is_empty() {
            return Err(format!("{url:?} names no host"));
        }
        let password = authority
            .rsplit_once('@')
            .is_some_and(|(user, _)| user.contains(':'));
        if (matches!(scheme, "https" | "http") && authority.contains('@')) || password {
            return Err(format!(
                "{url:?} has credentials in it: put them in `source.credentialsSecret` instead"
            ));
        }
        if rest.len() <= authority.len() + 1 {
            return Err(format!("{url:?} names no repository"));
        }
        return Ok(());
    }
    // scp-like syntax: user@host:path
    match url.split_once(':') {
        Some((host, path)) if !host.is_empty() && !host.contains('/') && !path.is_empty() => Ok(()),
        _ => Err(format!(
            "{url:?} is not a Git URL: use https://host/org/repo.git, ssh://git@host/org/repo.git, \
             git@host:org/repo.git or file:///path"
        )),
    }
}

/// Git ref names (branch or tag) or commit ids, per `git check-ref-format`.
pub fn git_ref(reference: &str) -> Result<(), String> {
    let name = reference
        .strip_prefix("refs/heads/")
        .or_else(|| reference.strip_prefix("refs/tags/"))
        .unwrap_or(reference);
    let bad = name.is_empty()
        || name.len() > 255
        || name.starts_with('/')
        || name.ends_with('/')
        || name.ends_with('.')
        || name.ends_with(".lock")
        || name.starts_with('-')
        || name.contains("..")
        || name.contains("//")
        || name.contains("@{")
        || name == "@"
        || name.split('/').any(|part| part.starts_with('.'))
        || name
            .chars()
            .any(|c| c.is_control() || c.is_whitespace() || "~^:?*[\\".contains(c));
    if bad {
        return Err(format!(
            "{reference:?} is not a valid Git branch, tag or commit id"
        ));
    }
    Ok(())
}

/// S3 object version ids: 1 to 1,024 characters, no whitespace.
fn s3_version(version: &str) -> Result<(), String> {
    if version.is_empty() || version.len() > 1024 || version.chars().any(|c| c.is_whitespace()) {
        return Err(format!("{version:?} is not an S3 object version id"));
    }
    Ok(())
}

/// `s3://bucket/key` with a valid bucket name and a key.
pub fn s3_url(url: &str) -> Result<(), String> {
    let Some(rest) = url.strip_prefix("s3://") else {
        return Err(format!(
            "{url:?} is not an S3 URL: write s3://bucket/key.zip"
        ));
    };
    let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
    let bucket_ok = (3..=63).contains(&bucket.len())
        && bucket
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-')
        && bucket.starts_with(|c: char| c.is_ascii_alphanumeric())
        && bucket.ends_with(|c: char| c.is_ascii_alphanumeric())
        && !bucket.contains("..");
    if !bucket_ok {
        return Err(format!("{url:?}: {bucket:?} is not a valid S3 bucket name"));
    }
    if key.is_empty() || key.len() > 1024 {
        return Err(format!(
            "{url:?} names no object key: write s3://bucket/key.zip"
        ));
    }
    Ok(())
}

/// A path inside a source: relative, and unable to leave the source.
pub fn relative_path(path: &str) -> Result<(), String> {
    if path.is_empty() {
        return Err("is empty: give the file's path inside the source".into());
    }
    if path.starts_with('/') || path.starts_with('~') || path.as_bytes().get(1) == Some(&b':') {
        return Err(format!(
            "{path:?} is absolute: give a path relative to the root of the source"
        ));
    }
    if path.contains('\\') {
        return Err(format!(
            "{path:?} contains a backslash: separate folders with /"
        ));
    }
    if path.chars().any(char::is_control) {
        return Err(format!("{path:?} contains a control character"));
    }
    if path.split('/').any(|part| part == "..") {
        return Err(format!(
            "{path:?} leaves the source: \"..\" is not allowed in a path"
        ));
    }
    if path.split('/').all(|part| part.is_empty() || part == ".") || path.ends_with('/') {
        return Err(format!("{path:?} names a folder, not a file"));
    }
    if path.len() > MAX_PATH_LEN {
        return Err(format!(
            "is {} bytes long; at most {MAX_PATH_LEN}",
            path.len()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_cannot_escape_the_source() {
        for ok in [
            "t.yaml",
            "a/b/c.json",
            "./a.yaml",
            "dir.with.dots/x..y.yaml",
        ] {
            assert!(relative_path(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "/etc/passwd",
            "../x.yaml",
            "a/../../x",
            "a/..",
            "~/x",
            "C:/x",
            "a\\b",
            "a/",
            ".",
            "a\0b",
        ] {
            assert!(relative_path(bad).is_err(), "{bad:?}");
        }
    }

    fn source(url: &str) -> Source {
        let (git, s3) = if url.starts_with("s3://") {
            (None, Some(url.to_owned()))
        } else {
            (Some(url.to_owned()), None)
        };
        Source {
            git,
            s3,
            deployment_file: None,
            reference: None,
            path: "t.yaml".into(),
            credentials_secret: Some(
                "arn:aws:secretsmanager:us-east-1:111122223333:secret:git-AbCdEf".into(),
            ),
            include: vec![],
            insecure: false,
            signed_by: vec![],
        }
    }

    #[test]
    fn signers_are_openssh_public_keys_of_a_git_source() {
        let check = |url: &str, keys: &[&str]| {
            let mut s = source(url);
            s.credentials_secret = None;
            s.signed_by = keys.iter().map(|k| (*k).to_owned()).collect();
            let mut errors = Errors::default();
            check_source(&s, &mut errors);
            errors.0.into_iter().map(|e| e.field).collect::<Vec<_>>()
        };
        let key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl alice";
        assert!(check("https://h/r.git", &[key]).is_empty());
        assert_eq!(
            check("https://h/r.git", &[key, "ssh-rsa nope"]),
            ["source.signedBy[1]"]
        );
        assert_eq!(check("s3://bucket/k.zip", &[key]), ["source.signedBy"]);
        assert_eq!(
            check("https://h/r.git", &vec![key; MAX_SIGNERS + 1]),
            ["source.signedBy"]
        );
    }

    #[test]
    fn credentials_go_only_where_they_can_be_used_safely() {
        for ok in [
            "https://github.com/acme/infra.git",
            "ssh://git@github.com/acme/infra.git",
            "git@github.com:acme/infra.git",
            "http://127.0.0.1:8080/infra.git",
            "codecommit::eu-west-1://infra",
        ] {
            assert!(credentials_fit(&source(ok)).is_ok(), "{ok}");
        }
        for (bad, says) in [
            ("http://git.acme.internal/infra.git", "plain http://"),
            ("git://git.acme.internal/infra.git", "takes no credentials"),
            ("file:///tmp/repo", "takes no credentials"),
            ("s3://bucket/app.zip", "own role"),
        ] {
            let err = credentials_fit(&source(bad)).unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn a_url_is_never_shown_with_its_credentials() {
        for (url, shown) in [
            (
                "https://user:s3cr3t@github.com/a/b.git",
                "https://***@github.com/a/b.git",
            ),
            (
                "https://s3cr3t@github.com/a/b.git",
                "https://***@github.com/a/b.git",
            ),
            ("ssh://git:s3cr3t@host/a.git", "ssh://git:***@host/a.git"),
            ("ssh://git@host/a.git", "ssh://git@host/a.git"),
            ("https://github.com/a@b.git", "https://github.com/a@b.git"),
            ("git@host:a.git", "git@host:a.git"),
        ] {
            assert_eq!(redacted(url), shown, "{url}");
        }
        for bad in [
            "https://user:s3cr3t@github.com/a/b.git",
            "https://s3cr3t@github.com",
            "ssh://git:s3cr3t@host/a.git",
            "https://user:s3cr3t@github.com/a b.git",
            "ftp://user:s3cr3t@h/r",
            "https://user:s3cr3t@github.com/a\"b\n.git",
        ] {
            let err = git_url(bad).unwrap_err();
            assert!(!err.contains("s3cr3t"), "{bad}: {err}");
        }
    }

    #[test]
    fn git_urls_and_refs() {
        for ok in [
            "https://github.com/acme/infra.git",
            "http://127.0.0.1:9418/repo",
            "ssh://git@github.com/acme/infra.git",
            "git@github.com:acme/infra.git",
            "git://127.0.0.1/repo.git",
            "file:///tmp/repo",
            "codecommit::eu-west-1://infra",
            "codecommit://infra.repo_1",
        ] {
            assert!(git_url(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "ftp://h/r",
            "https://",
            "https://host",
            "https://u:p@host/r.git",
            "not a url",
            "/tmp/repo",
            "codecommit::eu-west-1://dev@infra",
            "codecommit::mars-1://infra",
            "codecommit://",
            "codecommit://a/b",
        ] {
            assert!(git_url(bad).is_err(), "{bad}");
        }
        for ok in [
            "main",
            "release/1.2",
            "v1.0.0",
            "refs/heads/main",
            "0123456789abcdef0123456789abcdef01234567",
        ] {
            assert!(git_ref(ok).is_ok(), "{ok}");
        }
        for bad in [
            "", "a..b", "a b", "x.lock", "-x", "a~1", "a^", "a:b", "/a", "a/", ".hidden", "@",
        ] {
            assert!(git_ref(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn s3_sources() {
        assert!(s3_url("s3://my-bucket/infra/app.zip").is_ok());
        for bad in [
            "s3://",
            "s3://Bucket/k",
            "s3://b/k",
            "s3://bucket",
            "s3://bucket/",
            "https://bucket/k",
        ] {
            assert!(s3_url(bad).is_err(), "{bad}");
        }
    }
}
