//! The installation's settings a step function reads from its environment.

use crate::ownership::InstallationPolicy;

/// The region whose CloudFormation stack events reach the events function
/// (the function's own: the rule is on its default bus), unless
/// `STACKSYNC_STACK_EVENTS` is `off` (every run then polls).
pub(super) fn stack_events(config: &aws_config::SdkConfig) -> Option<String> {
    let off = std::env::var("STACKSYNC_STACK_EVENTS").is_ok_and(|v| v.trim() == "off");
    config.region().map(ToString::to_string).filter(|_| !off)
}

/// `MaxRunsPerAccount` (`STACKSYNC_MAX_RUNS_PER_ACCOUNT`): 1 to
/// [`MAX_RUNS_PER_ACCOUNT`](crate::registry::slots::MAX_RUNS_PER_ACCOUNT),
/// the default when unset.
pub(super) fn max_runs_per_account(text: Option<&str>) -> Result<u32, String> {
    use crate::registry::slots::{DEFAULT_MAX_RUNS_PER_ACCOUNT, MAX_RUNS_PER_ACCOUNT};
    let Some(text) = text.map(str::trim).filter(|t| !t.is_empty()) else {
        return Ok(DEFAULT_MAX_RUNS_PER_ACCOUNT);
    };
    text.parse::<u32>()
        .ok()
        .filter(|n| (1..=MAX_RUNS_PER_ACCOUNT).contains(n))
        .ok_or_else(|| {
            format!(
                "MaxRunsPerAccount (STACKSYNC_MAX_RUNS_PER_ACCOUNT) is {text:?}: a whole number \
                 from 1 to {MAX_RUNS_PER_ACCOUNT}"
            )
        })
}

/// What the installation allows its entries, from its parameters
/// ([`InstallationPolicy::from_env`]).
pub(super) fn installation_policy() -> Result<InstallationPolicy, lambda_runtime::Error> {
    InstallationPolicy::from_env(|name| std::env::var(name).ok()).map_err(Into::into)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_runs_per_account_is_a_whole_number_within_bounds_or_the_default() {
        assert_eq!(max_runs_per_account(None), Ok(10));
        assert_eq!(max_runs_per_account(Some(" ")), Ok(10));
        assert_eq!(max_runs_per_account(Some("25")), Ok(25));
        for bad in ["0", "1001", "ten", "-1"] {
            let why = max_runs_per_account(Some(bad)).expect_err(bad);
            assert!(why.contains("a whole number from 1 to 1000"), "{why}");
        }
    }
}
