//! Every name stacksync derives rather than invents: equal inputs give equal
//! names, so a retried step, a redelivered push or an overlapping scheduler
//! run finds what the first attempt made instead of making it twice. Each
//! name keeps to the limits of the service that holds it (the table test
//! below checks them).
//!
//! | name | for | limits |
//! |---|---|---|
//! | [`change_set_name`] | a change set | CloudFormation: ≤ 128, `[A-Za-z][-A-Za-z0-9]*` |
//! | [`execution_name`] | a reconcile execution | Step Functions: ≤ 80, `[A-Za-z0-9_-]`, unique for 90 days |
//! | [`request_token`] | a stack operation's `ClientRequestToken` | CloudFormation: ≤ 128, `[a-zA-Z0-9][-a-zA-Z0-9]*` |
//! | [`artifact_key`], [`template_key`], [`parameters_key`] | objects in the bucket | S3: ≤ 1,024 bytes |

use crate::hash::sha256_hex;
use crate::source::normalize_url;

/// How stacksync's request tokens begin: the events function tells its own
/// CloudFormation operations from out-of-band ones by this prefix.
pub const OWN_TOKEN_PREFIX: &str = "stacksync-";

/// How many characters of the stack name lead an execution name.
pub const EXECUTION_PREFIX_CHARS: usize = 48;

/// The change set's name: from the stack, the spec version, the desired
/// hash and the run (its execution name), so a retried step finds the one
/// it made, and another run at the same desired state (putting back a
/// change made outside stacksync) makes its own: an executed change set of
/// the same name would otherwise pass for the new one. The stack is in it
/// so that two stacks with one template never share a name: CloudFormation
/// scopes names to a stack, but tools that look change sets up by name
/// alone (the emulator does) would mix them.
pub fn change_set_name(stack: &str, spec_version: u64, desired_hash: &str, run: &str) -> String {
    let hash = sha256_hex(format!("{stack}\0{desired_hash}\0{run}").as_bytes());
    format!("stacksync-v{spec_version}-{}", &hash[..16])
}

/// The execution name for `stack` started by `kind` for `key` (a commit, a
/// due time, a request id): `<stack, at most 48 chars>_<kind>_<16 hex>`, at
/// most 80 characters. The hash covers the whole stack name, so two long
/// names with one prefix still differ.
pub fn execution_name(stack: &str, kind: &str, key: &str) -> String {
    let prefix: String = stack
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .take(EXECUTION_PREFIX_CHARS)
        .collect();
    let kind: String = kind
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(8)
        .collect();
    let hash = sha256_hex(format!("{stack}\0{kind}\0{key}").as_bytes());
    format!("{prefix}_{kind}_{}", &hash[..16])
}

/// Whether an execution name may belong to `stack` (its prefix matches; for
/// names longer than the prefix, the execution's input decides).
pub fn execution_may_be_for(name: &str, stack: &str) -> bool {
    let prefix: String = stack.chars().take(EXECUTION_PREFIX_CHARS).collect();
    name.strip_prefix(&prefix)
        .is_some_and(|rest| rest.starts_with('_'))
}

/// The `ClientRequestToken` of one of stacksync's own stack operations:
/// CloudFormation puts it on every event of the operation (and on the
/// EventBridge "Stack Status Change" events).
pub fn request_token(operation: &str) -> String {
    let mut token = String::from(OWN_TOKEN_PREFIX);
    token.extend(
        operation
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }),
    );
    token.truncate(128);
    token
}

/// Where the files a run takes from a source at one revision are stored:
/// once per source (its normal URL), revision and set of wanted paths
/// ([`crate::content::Wanted::key`]), shared by every stack that takes
/// the same files there.
pub fn artifact_key(url: &str, revision: &str, wanted: &str) -> String {
    format!(
        "artifacts/{}/{}/{}.tar.gz",
        &sha256_hex(normalize_url(url).as_bytes())[..16],
        safe_key_part(revision),
        safe_key_part(wanted)
    )
}

/// Where a template is stored: by the SHA-256 of its bytes; for a stack in
/// another account (`account`: its `assumeRoleArn`'s), under that account,
/// whose role may read only its own account's templates (the bucket's
/// policy grants `templates/accounts/${aws:PrincipalAccount}/*`).
pub fn template_key(template_sha256: &str, account: Option<&str>) -> String {
    match account.filter(|a| a.len() == 12 && a.bytes().all(|b| b.is_ascii_digit())) {
        Some(account) => format!("templates/accounts/{account}/{template_sha256}"),
        None => format!("templates/{template_sha256}"),
    }
}

/// Where a preview (`stacksync diff`, the pull-request preview) puts a
/// template over CloudFormation's body limit: `previews/<sha256>`, apart
/// from `templates/` (which only template-upload writes), expired by the
/// bucket after a day.
pub fn preview_template_key(template_sha256: &str) -> String {
    format!("previews/{template_sha256}")
}

/// The change set's `TemplateURL`: the stored template, pinned to the
/// version template-upload compared byte for byte (a versioned bucket), so
/// that CloudFormation reads exactly those bytes even if the key is written
/// again in between.
pub fn template_url(base: &str, key: &str, version: Option<&str>) -> String {
    let url = format!("{}/{key}", base.trim_end_matches('/'));
    match version {
        Some(version) => {
            let encoded: String = version
                .bytes()
                .map(|b| match b {
                    b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                        char::from(b).to_string()
                    }
                    other => format!("%{other:02X}"),
                })
                .collect();
            format!("{url}?versionId={encoded}")
        }
        None => url,
    }
}

/// Where the task token of `run`'s approval wait is kept: in the bucket,
/// where its policy lets only the approval function write it and only the
/// function that answers approvals read it (never the registry, a status
/// or a log).
pub fn approval_token_key(entry: &str, run: &str) -> String {
    format!("approvals/tokens/{}.json", approval_id(entry, run))
}

/// Where the function that answers approvals records a verified answer to
/// `run`'s wait (who, for which change set), before it answers the token:
/// the run executes an approved change set only if this says so (a token
/// answered by anyone else is no approval). Only that function may write
/// it.
pub fn approval_answer_key(entry: &str, run: &str) -> String {
    format!("approvals/answers/{}.json", approval_id(entry, run))
}

/// Where a run parked until its stack's event keeps its task token and the
/// state it goes on with (`reconcile::steps::park`): written by poll-status
/// alone, read by the events function alone (the bucket's policy), as a
/// token answers with any state its holder gives.
pub fn wait_token_key(entry: &str, run: &str) -> String {
    format!("waits/tokens/{}.json", approval_id(entry, run))
}

fn approval_id(entry: &str, run: &str) -> String {
    sha256_hex(format!("{entry}\0{run}").as_bytes())[..40].to_owned()
}

/// Where a run's merged parameters are stored: by the SHA-256 of their JSON.
pub fn parameters_key(parameters_json: &[u8]) -> String {
    format!("parameters/{}.json", sha256_hex(parameters_json))
}

/// A revision as part of an object key: a Git commit id (or any id of
/// letters, digits, `-` and `_`) as it is; anything else (an S3 version id
/// may hold `/`, `+`, `.`) as `v-` and its SHA-256, so a key never holds a
/// path separator or `..`, and two revisions never share a key.
fn safe_key_part(revision: &str) -> String {
    let plain = !revision.is_empty()
        && revision.len() <= 128
        && revision
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if plain {
        revision.to_owned()
    } else {
        format!("v-{}", sha256_hex(revision.as_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cloudformation_name(name: &str) -> bool {
        name.len() <= 128
            && name.starts_with(|c: char| c.is_ascii_alphabetic())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    }

    #[test]
    fn every_name_keeps_to_the_limits_of_its_service() {
        let long = "a".repeat(128);
        let odd = "stack-with-unicode-é";
        for stack in ["orders", long.as_str(), odd] {
            let cs = change_set_name(stack, u64::MAX, &"f".repeat(64), &"r".repeat(80));
            assert!(cloudformation_name(&cs), "{cs}");
            let ex = execution_name(stack, "schedule", &"9".repeat(300));
            assert!(ex.len() <= 80, "{ex}");
            assert!(
                ex.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
                "{ex}"
            );
            let token = request_token(&format!("delete-{stack}"));
            assert!(
                token.len() <= 128 && token.starts_with(OWN_TOKEN_PREFIX),
                "{token}"
            );
            assert!(
                token.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'),
                "{token}"
            );
        }
        for key in [
            artifact_key(
                "https://git.example/infra.git",
                &"a".repeat(40),
                "0123456789abcdef",
            ),
            artifact_key("s3://bucket/key.zip", &"v/../../x".repeat(100), "../x"),
            artifact_key("s3://bucket/key.zip", "3/L4kqtJlcpX.roDTD+mJ", "k"),
            template_key(&"b".repeat(64), None),
            template_key(&"b".repeat(64), Some("210987654321")),
            parameters_key(b"{}"),
        ] {
            assert!(key.len() <= 1024 && !key.contains(".."), "{key}");
            let file = key.rsplit('/').next().unwrap_or_default();
            // A kind, a source, a revision, a file: never more folders.
            assert!(!file.is_empty() && key.matches('/').count() <= 3, "{key}");
        }
    }

    #[test]
    fn a_template_for_another_account_is_stored_under_that_account_only() {
        let sha = "b".repeat(64);
        assert_eq!(template_key(&sha, None), format!("templates/{sha}"));
        assert_eq!(
            template_key(&sha, Some("210987654321")),
            format!("templates/accounts/210987654321/{sha}")
        );
        // Not an account id: never a folder of its own making.
        assert_eq!(template_key(&sha, Some("../x")), format!("templates/{sha}"));
    }

    #[test]
    fn names_are_deterministic_and_tell_their_inputs_apart() {
        assert_eq!(
            change_set_name("orders", 3, "h", "run-1"),
            change_set_name("orders", 3, "h", "run-1")
        );
        assert_ne!(
            change_set_name("orders", 3, "h", "run-1"),
            change_set_name("billing", 3, "h", "run-1")
        );
        assert_ne!(
            change_set_name("orders", 3, "h", "run-1"),
            change_set_name("orders", 4, "h", "run-1")
        );
        assert_ne!(
            change_set_name("orders", 3, "h", "run-1"),
            change_set_name("orders", 3, "h", "run-2"),
            "a second run at one desired state (putting a change back) makes its own"
        );
        let long = "x".repeat(60);
        let other = format!("{long}-other");
        assert_ne!(
            execution_name(&long, "schedule", "k"),
            execution_name(&other, "schedule", "k")
        );
        assert_ne!(
            execution_name("app", "schedule", "1"),
            execution_name("app", "manual", "1")
        );
        assert!(execution_may_be_for(
            &execution_name("app", "manual", "1"),
            "app"
        ));
        assert!(!execution_may_be_for(
            &execution_name("app-db", "manual", "1"),
            "app"
        ));
        // One source, two spellings: one artifact.
        assert_eq!(
            artifact_key("https://github.com/Acme/infra.git", "abc", "w"),
            artifact_key("git@github.com:acme/infra", "abc", "w")
        );
        assert_eq!(
            request_token("orders_queue.change:1"),
            "stacksync-orders-queue-change-1"
        );
    }

    #[test]
    fn a_template_url_pins_its_version_encoded_for_a_query() {
        assert_eq!(
            template_url("https://b.s3.amazonaws.com/", "templates/ab", None),
            "https://b.s3.amazonaws.com/templates/ab"
        );
        assert_eq!(
            template_url("https://b", "templates/ab", Some("3/L4kq+tz.x_~")),
            "https://b/templates/ab?versionId=3%2FL4kq%2Btz.x_~"
        );
    }
}
