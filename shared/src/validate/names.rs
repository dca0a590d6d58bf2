//! Names: the entry's `name`, its `stackName` and its `region`.
//!
//! The registry name is also the CloudFormation stack name unless
//! `stackName` is given, so both follow CloudFormation's rule for stack
//! names. A region is checked by its shape (area, optional qualifier such as
//! `gov`, direction, number) rather than against a list of regions, which
//! would go stale each time AWS opens a new one.

use super::Errors;
use crate::spec::StackSpec;

/// `name`, `stackName` and `region`: what the stack is called, and where.
pub(super) fn check_identity(spec: &StackSpec, errors: &mut Errors) {
    errors.check("name", stack_name(&spec.name));
    if let Some(name) = &spec.stack_name {
        errors.check("stackName", stack_name(name));
    }
    if let Some(region) = &spec.region {
        errors.check("region", region_name(region));
    }
}

/// CloudFormation stack names (and our registry names): 1–128 characters,
/// a letter first, then letters, digits and hyphens.
pub fn stack_name(name: &str) -> Result<(), String> {
    let rule = "a stack name is 1 to 128 characters: a letter, then letters, digits or hyphens";
    let mut chars = name.chars();
    match chars.next() {
        None => return Err(format!("is empty: {rule}")),
        Some(c) if !c.is_ascii_alphabetic() => {
            return Err(format!("{name:?} does not start with a letter: {rule}"));
        }
        _ => {}
    }
    if let Some(bad) = chars.find(|c| !(c.is_ascii_alphanumeric() || *c == '-')) {
        return Err(format!("{name:?} contains {bad:?}: {rule}"));
    }
    if name.len() > 128 {
        return Err(format!("is {} characters long: {rule}", name.len()));
    }
    Ok(())
}

/// AWS region names such as `us-east-1`, `eu-central-2`, `us-gov-west-1`, `cn-north-1`.
pub fn region_name(region: &str) -> Result<(), String> {
    let fail = || {
        Err(format!(
            "{region:?} is not an AWS region name (like us-east-1 or eu-west-2)"
        ))
    };
    let parts: Vec<&str> = region.split('-').collect();
    let (area, qualifier, direction, number) = match parts.as_slice() {
        [a, d, n] => (*a, None, *d, *n),
        [a, q, d, n] => (*a, Some(*q), *d, *n),
        _ => return fail(),
    };
    let area_ok = area.len() == 2 && area.chars().all(|c| c.is_ascii_lowercase());
    let qualifier_ok =
        qualifier.is_none_or(|q| matches!(q, "gov" | "iso" | "isob" | "isoe" | "isof"));
    let direction_ok = matches!(
        direction,
        "north"
            | "south"
            | "east"
            | "west"
            | "central"
            | "northeast"
            | "northwest"
            | "southeast"
            | "southwest"
    );
    let number_ok = !number.is_empty()
        && number.len() <= 2
        && number.chars().all(|c| c.is_ascii_digit())
        && !number.starts_with('0');
    if area_ok && qualifier_ok && direction_ok && number_ok {
        Ok(())
    } else {
        fail()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stack_names_follow_cloudformation() {
        assert!(stack_name("prod-orders-1").is_ok());
        assert!(stack_name(&"a".repeat(128)).is_ok());
        for bad in ["", "1abc", "-abc", "a_b", "a.b", "a b", "ünicode"] {
            assert!(stack_name(bad).is_err(), "{bad}");
        }
        assert!(stack_name(&"a".repeat(129)).is_err());
    }

    #[test]
    fn region_names_are_checked() {
        for ok in [
            "us-east-1",
            "eu-west-2",
            "ap-southeast-3",
            "us-gov-west-1",
            "cn-north-1",
            "us-isob-east-1",
            "il-central-1",
            "ca-west-1",
        ] {
            assert!(region_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "us-east",
            "useast1",
            "US-EAST-1",
            "us-middle-1",
            "us-east-01",
            "mars-north-1",
        ] {
            assert!(region_name(bad).is_err(), "{bad}");
        }
    }
}
