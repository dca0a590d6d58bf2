//! Who may answer a change set that waits for approval, and what the
//! function that answers approvals records of an answer it let through.
//!
//! Approvers are IAM principal ARN patterns (`*` any run of characters, `?`
//! one), on the entry (`approvers:`) or the installation (`Approvers`). The
//! caller's ARN comes from AWS (an IAM-authorised Function URL's
//! `requestContext.authorizer.iam.userArn`), never from the request. An
//! assumed role's session ARN (`arn:aws:sts::ACCOUNT:assumed-role/ROLE/SESSION`)
//! matches a pattern for itself or for its role
//! (`arn:aws:iam::ACCOUNT:role/ROLE`, named without the role's path): the
//! session's name is the caller's choice, so a pattern should name roles,
//! not sessions.

use serde::{Deserialize, Serialize};

use crate::clock::EpochMillis;

/// Most approver patterns an entry or an installation may name.
pub const MAX_APPROVERS: usize = 50;

/// What the function that answers approvals records of an answer it let
/// through, before it answers the run's task token: the run executes an
/// approved change set only if this names it (a token answered by anyone
/// else is no approval).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VerifiedAnswer {
    /// The change set the approver named.
    pub change_set: String,
    /// Approved (`false`: rejected).
    pub approved: bool,
    /// The caller, as AWS verified it.
    pub by: String,
    pub at: EpochMillis,
    /// When the wait it answers asked (its `requestedAt`): a run may ask
    /// again under the same change set name, and an answer to an earlier
    /// wait is none to a later one. 0 in a record from before it was kept
    /// (that wait is void, and asks again).
    #[serde(default)]
    pub requested_at: EpochMillis,
}

/// The ARNs `caller` may be named by: itself, and for an assumed role's
/// session, the role.
pub fn principal_forms(caller: &str) -> Vec<String> {
    let mut forms = vec![caller.to_owned()];
    // arn:PARTITION:sts::ACCOUNT:assumed-role/ROLE/SESSION
    let parts: Vec<&str> = caller.splitn(6, ':').collect();
    if let ["arn", partition, "sts", "", account, resource] = parts.as_slice()
        && let Some(rest) = resource.strip_prefix("assumed-role/")
        && let Some((role, _session)) = rest.split_once('/')
    {
        forms.push(format!("arn:{partition}:iam::{account}:role/{role}"));
    }
    forms
}

/// Whether `caller` is among `patterns`.
pub fn may_answer(patterns: &[String], caller: &str) -> bool {
    let forms = principal_forms(caller);
    patterns
        .iter()
        .any(|p| forms.iter().any(|form| wildcard(p, form)))
}

/// Checks one pattern: an IAM principal ARN (`arn:PARTITION:iam::` or
/// `arn:PARTITION:sts::`), with wildcards where it names the principal. A
/// role is named without its path: its sessions' ARNs
/// (`assumed-role/NAME/SESSION`) have none, so a pattern with one would
/// let no one in.
pub fn check_pattern(pattern: &str) -> Result<(), String> {
    let parts: Vec<&str> = pattern.splitn(6, ':').collect();
    let valid = matches!(
        parts.as_slice(),
        ["arn", partition, service @ ("iam" | "sts"), "", account, resource]
            if partition
                .strip_prefix("aws")
                .is_some_and(|rest| rest.bytes().all(|b| b.is_ascii_lowercase() || b == b'-'))
                && (account.len() == 12 && account.bytes().all(|b| b.is_ascii_digit()))
                && match *service {
                    "iam" => ["user/", "role/"].as_slice(),
                    _ => ["assumed-role/"].as_slice(),
                }
                .iter()
                .any(|kind| resource.len() > kind.len() && resource.starts_with(kind))
                && resource
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+=,.@_-/*?".contains(c))
    );
    if !valid {
        return Err(format!(
            "{pattern:?} is not an IAM principal ARN pattern: give \
             arn:aws:iam::ACCOUNT:role/NAME, arn:aws:iam::ACCOUNT:user/NAME or \
             arn:aws:sts::ACCOUNT:assumed-role/ROLE/SESSION (`*` and `?` allowed in the name; \
             the account is a 12-digit number)"
        ));
    }
    if parts[5]
        .strip_prefix("role/")
        .is_some_and(|name| name.contains('/'))
    {
        return Err(format!(
            "{pattern:?} names a role with its path, which its sessions' ARNs \
             (arn:aws:sts::ACCOUNT:assumed-role/NAME/SESSION) do not have, so it would let no \
             one in: name the role without its path (arn:aws:iam::ACCOUNT:role/NAME)"
        ));
    }
    Ok(())
}

/// IAM's wildcard match: `*` any run of characters, `?` one.
fn wildcard(pattern: &str, text: &str) -> bool {
    fn go(p: &[u8], t: &[u8]) -> bool {
        match p {
            [] => t.is_empty(),
            [b'*', rest @ ..] => (0..=t.len()).any(|i| go(rest, &t[i..])),
            [b'?', rest @ ..] => !t.is_empty() && go(rest, &t[1..]),
            [c, rest @ ..] => t.first() == Some(c) && go(rest, &t[1..]),
        }
    }
    go(pattern.as_bytes(), text.as_bytes())
}

/// A rejection, as the task that waits for an approval is failed with it
/// (the cause `by ARN: reason`): written by the answer function and by a
/// local answer (`stacksync reject`), read back by the run's finalize.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// Who rejected (`None`: a cause that does not say).
    pub by: Option<String>,
    pub reason: String,
}

impl Rejection {
    /// `reason` trimmed, or "no reason given".
    pub fn new(by: &str, reason: Option<&str>) -> Self {
        Self {
            by: Some(by.to_owned()),
            reason: reason
                .map(str::trim)
                .filter(|r| !r.is_empty())
                .unwrap_or("no reason given")
                .to_owned(),
        }
    }

    /// The task failure's cause.
    pub fn cause(&self) -> String {
        format!(
            "by {}: {}",
            self.by.as_deref().unwrap_or("an unknown caller"),
            self.reason
        )
    }

    /// The rejection a cause says; a cause of another shape is all reason.
    pub fn from_cause(cause: &str) -> Self {
        match cause.split_once(": ") {
            Some((by, reason)) if by.starts_with("by ") => Self {
                by: Some(by.trim_start_matches("by ").to_owned()),
                reason: reason.to_owned(),
            },
            _ => Self {
                by: None,
                reason: cause.to_owned(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rejection_reads_back_as_it_was_written() {
        let by = "arn:aws:iam::1:user/ana";
        let written = Rejection::new(by, Some("  not on a Friday: wait  "));
        assert_eq!(written.cause(), format!("by {by}: not on a Friday: wait"));
        assert_eq!(Rejection::from_cause(&written.cause()), written);
        assert_eq!(Rejection::new(by, Some(" ")).reason, "no reason given");
        assert_eq!(
            Rejection::from_cause("the operator said no"),
            Rejection {
                by: None,
                reason: "the operator said no".into()
            }
        );
    }

    fn patterns(p: &[&str]) -> Vec<String> {
        p.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_role_pattern_lets_in_every_session_of_that_role_and_no_other_role() {
        let approvers = patterns(&["arn:aws:iam::111122223333:role/platform-approvers"]);
        assert!(may_answer(
            &approvers,
            "arn:aws:sts::111122223333:assumed-role/platform-approvers/alice"
        ));
        assert!(!may_answer(
            &approvers,
            "arn:aws:sts::111122223333:assumed-role/developers/platform-approvers"
        ));
        assert!(!may_answer(
            &approvers,
            "arn:aws:sts::444455556666:assumed-role/platform-approvers/alice"
        ));
        assert!(!may_answer(
            &approvers,
            "arn:aws:iam::111122223333:user/platform-approvers"
        ));
    }

    #[test]
    fn users_and_wildcards_match_as_iam_matches_them() {
        let approvers = patterns(&[
            "arn:aws:iam::111122223333:user/ops-*",
            "arn:aws:iam::111122223333:role/team-?",
        ]);
        assert!(may_answer(
            &approvers,
            "arn:aws:iam::111122223333:user/ops-bob"
        ));
        assert!(!may_answer(
            &approvers,
            "arn:aws:iam::111122223333:user/dev-bob"
        ));
        assert!(may_answer(
            &approvers,
            "arn:aws:sts::111122223333:assumed-role/team-a/s"
        ));
        assert!(!may_answer(
            &approvers,
            "arn:aws:sts::111122223333:assumed-role/team-ab/s"
        ));
        assert!(!may_answer(&[], "arn:aws:iam::111122223333:user/ops-bob"));
    }

    #[test]
    fn a_pattern_that_names_no_principal_is_refused() {
        for good in [
            "arn:aws:iam::111122223333:role/approvers",
            "arn:aws-us-gov:iam::111122223333:user/*",
            "arn:aws:sts::111122223333:assumed-role/r/alice",
        ] {
            assert_eq!(check_pattern(good), Ok(()), "{good}");
        }
        for bad in [
            "*",
            "arn:aws:iam::*:role/x",
            "arn:aws:s3:::bucket",
            "arn:aws:iam::111122223333:group/admins",
            "arn:aws:iam::1:role/x",
            "arn:*:iam::111122223333:role/x",
            "arn:aws:iam::111122223333:role/x y",
            "arn:aws:iam::111122223333:role/x:y",
            "arn:aws?:iam::111122223333:role/x",
            "arn:awsX:iam::111122223333:role/x",
            // Kinds of the other service's ARNs: they would match no one.
            "arn:aws:sts::111122223333:role/x",
            "arn:aws:iam::111122223333:assumed-role/r/alice",
        ] {
            let err = check_pattern(bad).unwrap_err();
            assert!(err.contains("IAM principal ARN pattern"), "{bad}: {err}");
        }
        // A role's path is not in its sessions' ARNs
        // (assumed-role/NAME/SESSION): such a pattern would match no one.
        for path in [
            "arn:aws:iam::111122223333:role/teams/approvers",
            "arn:aws:iam::111122223333:role/teams/*",
        ] {
            let err = check_pattern(path).unwrap_err();
            assert!(err.contains("without its path"), "{path}: {err}");
        }
        assert_eq!(
            check_pattern("arn:aws:iam::111122223333:user/teams/alice"),
            Ok(()),
            "a user's ARN has its path"
        );
    }
}
