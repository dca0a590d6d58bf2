//! A fleet's `targets:` and what goes with them: where each account goes in
//! its roles, its regions, exclusions and overrides, how often its units are
//! read again. (Checked once here; each target's spec is the fleet's with an
//! account and a region in place, so it is checked by the same rules.)

use std::collections::BTreeSet;

use super::Errors;
use super::names::region_name;
use crate::fleet::{
    ACCOUNT_PLACEHOLDER, MAX_FLEET_NAME_LEN, MAX_TARGETS_INTERVAL, MIN_TARGETS_INTERVAL,
    is_account, is_unit, parse_target,
};
use crate::spec::{Amount, StackSpec};

/// The fleet's own rules, and `targetOf` refused (stacksync sets it).
pub(super) fn check_targets(spec: &StackSpec, errors: &mut Errors) {
    if spec.target_of.is_some() {
        errors.push(
            "targetOf",
            "is set by stacksync on the entries it makes from a fleet; write `targets:` instead",
        );
    }
    let Some(targets) = &spec.targets else {
        if spec.targets_interval.is_some() {
            errors.push(
                "targetsInterval",
                "is for a fleet: the entry has no `targets:`",
            );
        }
        // A target carries its fleet's.
        if spec.rollout.is_some() && spec.target_of.is_none() {
            errors.push("rollout", "is for a fleet: the entry has no `targets:`");
        }
        return;
    };
    if spec.name.len() > MAX_FLEET_NAME_LEN {
        errors.push(
            "name",
            format!(
                "is {} characters long: a fleet's name is at most {MAX_FLEET_NAME_LEN}, as its \
                 targets' entries add -ACCOUNT-REGION",
                spec.name.len()
            ),
        );
    }
    if spec.region.is_some() {
        errors.push("region", "a fleet names its regions in targets.regions");
    }
    match &spec.assume_role_arn {
        Some(arn) if arn.contains(ACCOUNT_PLACEHOLDER) => {}
        _ => errors.push(
            "assumeRoleArn",
            format!(
                "a fleet reaches each account through a role: give one naming {ACCOUNT_PLACEHOLDER}, \
                 like arn:aws:iam::{ACCOUNT_PLACEHOLDER}:role/stacksync-deploy"
            ),
        ),
    }
    check_ids(targets, errors);
    check_regions(&targets.regions, errors);
    for (index, excluded) in targets.exclude.iter().enumerate() {
        errors.check(
            format!("targets.exclude[{index}]"),
            account_or_target(excluded),
        );
    }
    for key in targets.overrides.keys() {
        errors.check(format!("targets.overrides.{key}"), account_or_target(key));
    }
    check_interval(spec, errors);
    check_rollout(spec, targets, errors);
}

/// `rollout:`: waves of at least one target, an order naming the fleet's
/// own regions and units, a pause of at most a week.
fn check_rollout(spec: &StackSpec, targets: &crate::spec::Targets, errors: &mut Errors) {
    let Some(rollout) = &spec.rollout else {
        return;
    };
    if matches!(
        rollout.max_concurrent,
        Amount::Count(0) | Amount::Percent(0)
    ) {
        errors.push(
            "rollout.maxConcurrent",
            "is 0: a wave holds at least one target",
        );
    }
    let mut seen = BTreeSet::new();
    for (index, item) in rollout.order.iter().enumerate() {
        let known = targets.regions.contains(item) || targets.organizational_units.contains(item);
        if !known {
            errors.push(
                format!("rollout.order[{index}]"),
                format!(
                    "{item:?} is none of the fleet's targets.regions or targets.organizationalUnits"
                ),
            );
        } else if !seen.insert(item) {
            errors.push(
                format!("rollout.order[{index}]"),
                format!("{item:?} is named twice"),
            );
        }
    }
    if rollout
        .pause_between_waves
        .is_some_and(|p| p > MAX_TARGETS_INTERVAL)
    {
        errors.push(
            "rollout.pauseBetweenWaves",
            format!("is at most {MAX_TARGETS_INTERVAL}"),
        );
    }
}

fn check_interval(spec: &StackSpec, errors: &mut Errors) {
    if let Some(every) = spec.targets_interval
        && (every < MIN_TARGETS_INTERVAL || every > MAX_TARGETS_INTERVAL)
    {
        errors.push(
            "targetsInterval",
            format!("{every} is out of range: {MIN_TARGETS_INTERVAL} to {MAX_TARGETS_INTERVAL}"),
        );
    }
}

/// The accounts and units, by their shapes.
fn check_ids(targets: &crate::spec::Targets, errors: &mut Errors) {
    if targets.accounts.is_empty() && targets.organizational_units.is_empty() {
        errors.push(
            "targets",
            "names no account: give targets.accounts or targets.organizationalUnits",
        );
    }
    for (index, account) in targets.accounts.iter().enumerate() {
        if !is_account(account) {
            errors.push(
                format!("targets.accounts[{index}]"),
                format!("{account:?} is not an account id (12 digits)"),
            );
        }
    }
    for (index, unit) in targets.organizational_units.iter().enumerate() {
        if !is_unit(unit) {
            errors.push(
                format!("targets.organizationalUnits[{index}]"),
                format!(
                    "{unit:?} is not an organizational unit id (ou-xxxx-xxxxxxxx) or a root id (r-xxxx)"
                ),
            );
        }
    }
}

fn check_regions(regions: &[String], errors: &mut Errors) {
    if regions.is_empty() {
        errors.push("targets.regions", "names no region: give at least one");
    }
    let mut seen = BTreeSet::new();
    for (index, region) in regions.iter().enumerate() {
        errors.check(format!("targets.regions[{index}]"), region_name(region));
        if !seen.insert(region) {
            errors.push(
                format!("targets.regions[{index}]"),
                format!("{region:?} is named twice"),
            );
        }
    }
}

fn account_or_target(text: &str) -> Result<(), String> {
    if is_account(text) {
        return Ok(());
    }
    let (_, region) = parse_target(text)
        .map_err(|_| format!("{text:?} is neither an account (12 digits) nor ACCOUNT/REGION"))?;
    region_name(&region)
}
