//! The values a stack's parameters read in its account and region: SSM
//! parameters (decrypted) and Secrets Manager secrets, with their versions.

use aws_smithy_types::error::metadata::ProvideErrorMetadata;

use super::super::port_error;
use crate::ports::{PortError, PortResult, Versioned};

/// `version`: as a selector (`NAME:VERSION`, in place of one `name` may
/// have), which SSM keeps for the parameter's last 100 versions.
pub(super) async fn ssm_parameter(
    ssm: &aws_sdk_ssm::Client,
    name: &str,
    version: Option<&str>,
) -> PortResult<Option<Versioned>> {
    let name = match version {
        Some(version) => format!("{}:{version}", without_selector(name)),
        None => name.to_owned(),
    };
    match ssm
        .get_parameter()
        .name(name)
        .with_decryption(true)
        .send()
        .await
    {
        Ok(out) => Ok(out.parameter().and_then(|p| {
            Some(Versioned {
                value: p.value()?.to_owned(),
                version: p.version().to_string(),
                secret: p.r#type() == Some(&aws_sdk_ssm::types::ParameterType::SecureString),
            })
        })),
        Err(e)
            if matches!(
                e.code(),
                Some("ParameterNotFound" | "ParameterVersionNotFound")
            ) =>
        {
            Ok(None)
        }
        Err(e) => Err(port_error("GetParameter", &e)),
    }
}

/// Writes a String parameter (a new version when it exists).
pub(super) async fn put_ssm_parameter(
    ssm: &aws_sdk_ssm::Client,
    name: &str,
    value: &str,
) -> PortResult<()> {
    ssm.put_parameter()
        .name(name)
        .value(value)
        .r#type(aws_sdk_ssm::types::ParameterType::String)
        .overwrite(true)
        .send()
        .await
        .map(drop)
        .map_err(|e| port_error("PutParameter", &e))
}

/// Deletes a parameter; one that is not there is fine.
pub(super) async fn delete_ssm_parameter(ssm: &aws_sdk_ssm::Client, name: &str) -> PortResult<()> {
    match ssm.delete_parameter().name(name).send().await {
        Ok(_) => Ok(()),
        Err(e) if e.code() == Some("ParameterNotFound") => Ok(()),
        Err(e) => Err(port_error("DeleteParameter", &e)),
    }
}

/// `version`: that `VersionId` (gone once Secrets Manager drops a version
/// that no longer has a staging label: `None`).
pub(super) async fn secret_string(
    secrets: &aws_sdk_secretsmanager::Client,
    id: &str,
    version: Option<&str>,
) -> PortResult<Option<Versioned>> {
    match secrets
        .get_secret_value()
        .secret_id(id)
        .set_version_id(version.map(str::to_owned))
        .send()
        .await
    {
        Ok(out) => match (out.secret_string(), out.version_id()) {
            (Some(value), Some(version)) => Ok(Some(Versioned {
                value: value.to_owned(),
                version: version.to_owned(),
                secret: true,
            })),
            (None, _) => Ok(None),
            // Without a version a rotation could not be told: refused
            // rather than deployed blind.
            (Some(_), None) => Err(PortError::Refused(format!(
                "GetSecretValue: {id} answered without a VersionId"
            ))),
        },
        Err(e) if e.code() == Some("ResourceNotFoundException") => Ok(None),
        Err(e) => Err(port_error("GetSecretValue", &e)),
    }
}

/// An SSM parameter's name (or ARN) without its selector (`:VERSION` or
/// `:LABEL`, after the last `/`).
fn without_selector(name: &str) -> &str {
    match name.rsplit_once(':') {
        Some((base, selector)) if !selector.contains('/') && !base.is_empty() => base,
        _ => name,
    }
}

#[cfg(test)]
mod tests {
    use super::without_selector;

    #[test]
    fn a_selector_is_taken_off_a_name_or_an_arn_and_nothing_else() {
        for (name, base) in [
            ("/db/pw", "/db/pw"),
            ("/db/pw:prod", "/db/pw"),
            ("/db/pw:3", "/db/pw"),
            ("pw", "pw"),
            ("pw:prod", "pw"),
            (
                "arn:aws:ssm:eu-west-1:111122223333:parameter/db/pw",
                "arn:aws:ssm:eu-west-1:111122223333:parameter/db/pw",
            ),
            (
                "arn:aws:ssm:eu-west-1:111122223333:parameter/db/pw:prod",
                "arn:aws:ssm:eu-west-1:111122223333:parameter/db/pw",
            ),
        ] {
            assert_eq!(without_selector(name), base, "{name}");
        }
    }
}
