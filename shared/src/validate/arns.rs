//! ARNs: the shape every ARN in a spec shares, and the ARNs of roles and
//! secrets.
//!
//! [`parse_arn`] checks what all ARNs have in common (the `arn:` prefix, a
//! known partition, a 12-digit account id when there is one); `arn_of` adds
//! what one service's ARNs need (that service, a region, an account id and a
//! resource of the right kind). The roles (`roleArn`, the service role
//! CloudFormation deploys with, and `assumeRoleArn`, the role stacksync
//! assumes to reach the stack's account) are checked here, when the file is
//! read, because a bad ARN found later by CloudFormation or STS would come
//! back without the entry and field that hold it.

use super::Errors;
use super::names::region_name;
use crate::spec::StackSpec;

/// `roleArn` (CloudFormation's service role) and `assumeRoleArn` (the role
/// stacksync assumes to reach the stack's account).
pub(super) fn check_roles(spec: &StackSpec, errors: &mut Errors) {
    // A fleet's roles name `{account}`: checked with an account in place.
    let sample = |arn: &str| {
        if spec.targets.is_some() {
            arn.replace(crate::fleet::ACCOUNT_PLACEHOLDER, "123456789012")
        } else {
            arn.to_owned()
        }
    };
    if let Some(arn) = &spec.role_arn {
        errors.check("roleArn", iam_role_arn(&sample(arn)));
    }
    if let Some(arn) = &spec.assume_role_arn {
        errors.check("assumeRoleArn", iam_role_arn(&sample(arn)));
    }
}

/// The parts of an ARN: `arn:partition:service:region:account:resource`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arn<'a> {
    pub partition: &'a str,
    pub service: &'a str,
    pub region: &'a str,
    pub account: &'a str,
    pub resource: &'a str,
}

/// Splits an ARN into its parts, checking the partition and account id.
pub fn parse_arn(arn: &str) -> Result<Arn<'_>, String> {
    let parts: Vec<&str> = arn.splitn(6, ':').collect();
    let [prefix, partition, service, region, account, resource] = parts.as_slice() else {
        return Err(format!(
            "{arn:?} is not an ARN (arn:partition:service:region:account:resource)"
        ));
    };
    if *prefix != "arn" {
        return Err(format!(
            "{arn:?} is not an ARN: it must start with \"arn:\""
        ));
    }
    if !matches!(
        *partition,
        "aws"
            | "aws-cn"
            | "aws-us-gov"
            | "aws-iso"
            | "aws-iso-b"
            | "aws-iso-e"
            | "aws-iso-f"
            | "aws-eusc"
    ) {
        return Err(format!("{arn:?} has an unknown partition {partition:?}"));
    }
    let twelve_digits = account.len() == 12 && account.chars().all(|c| c.is_ascii_digit());
    if !account.is_empty() && !twelve_digits {
        return Err(format!(
            "{arn:?} has {account:?} as account id: it must be 12 digits"
        ));
    }
    Ok(Arn {
        partition,
        service,
        region,
        account,
        resource,
    })
}

/// An ARN of `service`, with a region and an account id, whose resource
/// part passes `resource_ok`.
pub(super) fn arn_of(
    arn: &str,
    service: &str,
    resource_ok: impl Fn(&str) -> bool,
) -> Result<(), String> {
    let parsed = parse_arn(arn)?;
    if parsed.service != service {
        return Err(format!(
            "{arn:?} is an ARN of {:?}, expected one of {service:?}",
            parsed.service
        ));
    }
    region_name(parsed.region).map_err(|_| format!("{arn:?} names no valid region"))?;
    if parsed.account.is_empty() {
        return Err(format!("{arn:?} names no account id"));
    }
    if !resource_ok(parsed.resource) {
        return Err(format!(
            "{arn:?} does not name a {service} resource of the right kind"
        ));
    }
    Ok(())
}

/// IAM role ARNs: `arn:aws:iam::123456789012:role/path/name`.
pub fn iam_role_arn(arn: &str) -> Result<(), String> {
    let parsed = parse_arn(arn)?;
    let shape = "an IAM role ARN looks like arn:aws:iam::123456789012:role/name";
    if parsed.service != "iam" || !parsed.region.is_empty() || parsed.account.is_empty() {
        return Err(format!("{arn:?} is not an IAM role ARN: {shape}"));
    }
    let Some(name) = parsed.resource.strip_prefix("role/") else {
        return Err(format!("{arn:?} does not name a role: {shape}"));
    };
    let role = name.rsplit('/').next().unwrap_or("");
    let allowed = |c: char| c.is_ascii_alphanumeric() || "+=,.@_-/".contains(c);
    if role.is_empty() || role.len() > 64 || !name.chars().all(allowed) || arn.len() > 2048 {
        return Err(format!("{arn:?} has an invalid role name: {shape}"));
    }
    Ok(())
}

/// Secrets Manager secret ARNs or SSM parameter ARNs.
pub fn secret_arn(arn: &str) -> Result<(), String> {
    let parsed = parse_arn(arn)?;
    let ok = match parsed.service {
        "secretsmanager" => parsed.resource.starts_with("secret:") && parsed.resource.len() > 7,
        "ssm" => parsed.resource.starts_with("parameter/") && parsed.resource.len() > 10,
        _ => false,
    };
    if !ok || parsed.account.is_empty() || region_name(parsed.region).is_err() {
        return Err(format!(
            "{arn:?} is neither a Secrets Manager secret ARN \
             (arn:aws:secretsmanager:REGION:ACCOUNT:secret:NAME) nor an SSM parameter ARN \
             (arn:aws:ssm:REGION:ACCOUNT:parameter/NAME)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_arns_must_name_an_iam_role() {
        assert!(iam_role_arn("arn:aws:iam::111122223333:role/cfn-exec").is_ok());
        assert!(iam_role_arn("arn:aws-us-gov:iam::111122223333:role/path/to/r+=,.@_-").is_ok());
        for bad in [
            "cfn-exec",
            "arn:aws:iam::1111:role/x",
            "arn:aws:iam::111122223333:user/x",
            "arn:aws:s3:::bucket",
            "arn:aws:iam:us-east-1:111122223333:role/x",
            "arn:nope:iam::111122223333:role/x",
            "arn:aws:iam::111122223333:role/",
            "arn:aws:iam::111122223333:role/has space",
        ] {
            assert!(iam_role_arn(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn secrets_must_be_secrets_manager_or_ssm_arns() {
        assert!(
            secret_arn("arn:aws:secretsmanager:us-east-1:111122223333:secret:git-token-AbCdEf")
                .is_ok()
        );
        assert!(secret_arn("arn:aws:ssm:eu-west-1:111122223333:parameter/git/key").is_ok());
        assert!(secret_arn("my-secret").is_err());
        assert!(secret_arn("arn:aws:s3:us-east-1:111122223333:secret:x").is_err());
    }
}
