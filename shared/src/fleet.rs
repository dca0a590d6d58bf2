//! Fleets: one entry (`targets:`) for many accounts and regions.
//!
//! A fleet is kept as its own record (`registry::fleets`) and expanded
//! into one ordinary entry per target, named `NAME-ACCOUNT-REGION`, which
//! drives the stack `stackName` (or `NAME`) in that account and region:
//! each target has its own status, lease, history, drift and outputs, and
//! everything a run does works on it unchanged. This module is the pure
//! part: the targets of a fleet given the accounts its organizational units
//! hold, and the spec of each.

use std::collections::{BTreeMap, BTreeSet};

use crate::duration::Duration;
use crate::spec::{StackSpec, TargetOf, Targets};

/// How often the scheduler reads a fleet's organizational units again
/// when `targetsInterval` is not given.
pub const DEFAULT_TARGETS_INTERVAL: Duration = Duration::from_mins(60);
/// The shortest and longest `targetsInterval`.
pub const MIN_TARGETS_INTERVAL: Duration = Duration::from_mins(5);
pub const MAX_TARGETS_INTERVAL: Duration = Duration::from_secs(7 * 86_400);
/// The most targets one fleet may have (each one an item of its own).
pub const MAX_TARGETS: usize = 2_000;
/// The longest fleet name: its targets' names add `-ACCOUNT-REGION` (up to
/// 34 characters) within CloudFormation's 128.
pub const MAX_FLEET_NAME_LEN: usize = 94;
/// What `assumeRoleArn` and `roleArn` say where each target's account goes.
pub const ACCOUNT_PLACEHOLDER: &str = "{account}";

/// The registry name of a fleet's target.
pub fn target_name(fleet: &str, account: &str, region: &str) -> String {
    format!("{fleet}-{account}-{region}")
}

/// `ACCOUNT/REGION` read, as `--target`, `exclude` and `overrides` write it.
pub fn parse_target(text: &str) -> Result<(String, String), String> {
    match text.split_once('/') {
        Some((account, region)) if is_account(account) && !region.is_empty() => {
            Ok((account.to_owned(), region.to_owned()))
        }
        _ => Err(format!(
            "{text:?} is not a target: write ACCOUNT/REGION (12 digits, a slash, a region)"
        )),
    }
}

/// An AWS account id: 12 digits.
pub fn is_account(text: &str) -> bool {
    text.len() == 12 && text.bytes().all(|b| b.is_ascii_digit())
}

/// An organizational unit id (`ou-` and two parts) or a root id (`r-…`).
pub fn is_unit(text: &str) -> bool {
    let lower_alnum = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase())
    };
    if let Some(rest) = text.strip_prefix("ou-") {
        return match rest.split_once('-') {
            Some((root, unit)) => {
                (4..=32).contains(&root.len())
                    && (8..=32).contains(&unit.len())
                    && lower_alnum(root)
                    && lower_alnum(unit)
            }
            None => false,
        };
    }
    text.strip_prefix("r-")
        .is_some_and(|root| (4..=32).contains(&root.len()) && lower_alnum(root))
}

/// The accounts of a fleet: those it lists and those its units hold
/// (`units`: each unit's accounts, as read), less the excluded ones, in
/// order. A unit not in `units` adds none.
pub fn accounts(targets: &Targets, units: &BTreeMap<String, Vec<String>>) -> Vec<String> {
    let excluded: BTreeSet<&str> = targets
        .exclude
        .iter()
        .filter(|e| !e.contains('/'))
        .map(String::as_str)
        .collect();
    let listed = targets.accounts.iter();
    let held = targets
        .organizational_units
        .iter()
        .filter_map(|unit| units.get(unit))
        .flatten();
    listed
        .chain(held)
        .filter(|a| !excluded.contains(a.as_str()))
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// The fleet's targets as (account, region): its accounts times its
/// regions, less the excluded pairs, account by account.
pub fn targets_of(targets: &Targets, units: &BTreeMap<String, Vec<String>>) -> Vec<TargetOf> {
    let excluded: BTreeSet<&str> = targets.exclude.iter().map(String::as_str).collect();
    accounts(targets, units)
        .into_iter()
        .flat_map(|account| {
            targets
                .regions
                .iter()
                .map(move |region| (account.clone(), region.clone()))
        })
        .filter(|(account, region)| !excluded.contains(format!("{account}/{region}").as_str()))
        .map(|(account, region)| TargetOf {
            fleet: String::new(),
            account,
            region,
        })
        .collect()
}

/// Why a fleet cannot be expanded as read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpandError {
    #[error("{0:?} is not a fleet: it has no targets")]
    NotAFleet(String),
    #[error(
        "the fleet {fleet:?} would have {count} targets: at most {MAX_TARGETS} (exclude some, or split it)"
    )]
    TooMany { fleet: String, count: usize },
}

/// The spec of each of `fleet`'s targets: the fleet's, in that account and
/// region, under the target's name, with the account in its roles and its
/// overrides (the account's, then the target's) over its parameters.
pub fn expand(
    fleet: &StackSpec,
    units: &BTreeMap<String, Vec<String>>,
) -> Result<Vec<StackSpec>, ExpandError> {
    let Some(targets) = &fleet.targets else {
        return Err(ExpandError::NotAFleet(fleet.name.clone()));
    };
    let all = targets_of(targets, units);
    if all.len() > MAX_TARGETS {
        return Err(ExpandError::TooMany {
            fleet: fleet.name.clone(),
            count: all.len(),
        });
    }
    Ok(all
        .into_iter()
        .map(|t| target_spec(fleet, targets, t))
        .collect())
}

fn target_spec(fleet: &StackSpec, targets: &Targets, target: TargetOf) -> StackSpec {
    let mut spec = fleet.clone();
    let for_account = |arn: &Option<String>| {
        arn.as_ref()
            .map(|a| a.replace(ACCOUNT_PLACEHOLDER, &target.account))
    };
    spec.name = target_name(&fleet.name, &target.account, &target.region);
    spec.stack_name = Some(fleet.effective_stack_name().to_owned());
    spec.region = Some(target.region.clone());
    spec.assume_role_arn = for_account(&fleet.assume_role_arn);
    spec.role_arn = for_account(&fleet.role_arn);
    for key in [target.account.clone(), target.label()] {
        if let Some(over) = targets.overrides.get(&key) {
            spec.parameters.extend(over.parameters.clone());
        }
    }
    spec.targets = None;
    spec.targets_interval = None;
    spec.target_of = Some(TargetOf {
        fleet: fleet.name.clone(),
        ..target
    });
    spec
}

/// How often the scheduler reads `fleet`'s units again; `None` when it has
/// none (its targets change only with its spec).
pub fn reread_every(fleet: &StackSpec) -> Option<Duration> {
    let targets = fleet.targets.as_ref()?;
    if targets.organizational_units.is_empty() {
        return None;
    }
    Some(fleet.targets_interval.unwrap_or(DEFAULT_TARGETS_INTERVAL))
}

#[cfg(test)]
mod tests;
