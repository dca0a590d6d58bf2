//! Deterministic Step Functions execution names.
//!
//! A name is unique per state machine (for 90 days after a Standard execution
//! closes), so starting an execution under a name derived from what
//! triggered it makes a redelivered webhook or event harmless: the second
//! `StartExecution` finds the first (`ExecutionAlreadyExists`, or the running
//! execution back when the input is equal) instead of starting another run.

use crate::hash::sha256_hex;

/// Step Functions' limit on execution names.
pub const MAX_EXECUTION_NAME_LEN: usize = 80;

/// Hex digits of the hash that ends every name (64 bits).
const HASH_LEN: usize = 16;
/// Hex digits of the commit kept for readability.
const COMMIT_LEN: usize = 12;

/// `<stack>-<commit, 12>-<hash, 16>`: at most 80 characters of
/// `[A-Za-z0-9_-]` (what Step Functions accepts and CloudWatch Logs can
/// show), the same for the same inputs.
///
/// `trigger` says what started the run: the webhook delivery id, an
/// EventBridge event id, or a trigger kind and time (`schedule-…`,
/// `manual-…`). The hash covers all three inputs in full, so names stay
/// distinct when a long stack name is cut short or characters are replaced.
/// An empty commit (a trigger with no revision yet) is left out.
pub fn execution_name(stack_name: &str, commit: &str, trigger: &str) -> String {
    let mut hashed = Vec::new();
    for part in [stack_name, commit, trigger] {
        // Length-prefixed, so ("a-b", "c") and ("a", "b-c") hash apart.
        hashed.extend_from_slice(&(part.len() as u64).to_be_bytes());
        hashed.extend_from_slice(part.as_bytes());
    }
    let hash = sha256_hex(&hashed);
    let hash = hash.get(..HASH_LEN).unwrap_or(&hash);

    let commit: String = sanitize(commit).chars().take(COMMIT_LEN).collect();
    let fixed = if commit.is_empty() {
        HASH_LEN + 1
    } else {
        COMMIT_LEN.min(commit.len()) + HASH_LEN + 2
    };
    let stack: String = sanitize(stack_name)
        .chars()
        .take(MAX_EXECUTION_NAME_LEN - fixed)
        .collect();
    let stack = if stack.is_empty() { "stack" } else { &stack };

    if commit.is_empty() {
        format!("{stack}-{hash}")
    } else {
        format!("{stack}-{commit}-{hash}")
    }
}

/// `s` with every character outside `[A-Za-z0-9_-]` replaced by `-`.
fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const COMMIT: &str = "6113728f27ae82c7b1a177c8d03f9e96e0adf246";

    fn is_valid(name: &str) -> bool {
        !name.is_empty()
            && name.len() <= MAX_EXECUTION_NAME_LEN
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    }

    #[test]
    fn names_read_stack_commit_and_hash() {
        let name = execution_name(
            "acme-network",
            COMMIT,
            "72d3162e-cc78-11e3-81ab-4c9367dc0958",
        );
        assert!(name.starts_with("acme-network-6113728f27ae-"), "{name}");
        assert_eq!(name.len(), "acme-network-6113728f27ae-".len() + 16);
        assert!(is_valid(&name));
    }

    #[test]
    fn the_same_inputs_give_the_same_name() {
        let a = execution_name("acme-network", COMMIT, "delivery-1");
        let b = execution_name("acme-network", COMMIT, "delivery-1");
        assert_eq!(a, b);
    }

    #[test]
    fn any_different_input_gives_a_different_name() {
        let base = execution_name("acme-network", COMMIT, "delivery-1");
        let others = [
            execution_name("acme-network", COMMIT, "delivery-2"),
            execution_name("acme-network2", COMMIT, "delivery-1"),
            execution_name("acme-network", &COMMIT.replace('6', "7"), "delivery-1"),
            execution_name("acme-network", COMMIT, "schedule-2024-05-01T00:00Z"),
            // Boundaries between the parts move: still apart.
            execution_name("acme-network-", COMMIT, "delivery-1"),
            execution_name("acme", "network", "x"),
            execution_name("acme-network", "", "x"),
        ];
        for other in &others {
            assert_ne!(&base, other);
        }
        assert_ne!(
            execution_name("a-b", "c", "d"),
            execution_name("a", "b-c", "d")
        );
    }

    #[test]
    fn long_and_odd_inputs_still_give_valid_distinct_names() {
        let long = "s".repeat(128);
        let longer = format!("{long}x");
        let odd = "Stack with spaces/slashes:and*üñíçødé[]";
        let names = [
            execution_name(&long, COMMIT, "d"),
            execution_name(&longer, COMMIT, "d"),
            execution_name(odd, COMMIT, "d"),
            execution_name(odd, "not a sha at all, with spaces", "d"),
            execution_name("", "", ""),
            execution_name(&long, "", &"t".repeat(500)),
        ];
        for name in &names {
            assert!(is_valid(name), "{name} ({} chars)", name.len());
        }
        assert_eq!(names[0].len(), MAX_EXECUTION_NAME_LEN);
        assert_eq!(names[5].len(), MAX_EXECUTION_NAME_LEN);
        // Cut to the same prefix, told apart by the hash.
        assert_ne!(names[0], names[1]);
        assert!(
            names[2].starts_with("Stack-with-spaces-slashes-and-"),
            "{}",
            names[2]
        );
        assert!(names[4].starts_with("stack-"), "{}", names[4]);
    }
}
