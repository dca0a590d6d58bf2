//! SHA-256 helpers: content addresses and change detection.

use sha2::{Digest, Sha256};

/// Lower-case hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(64);
    for byte in digest.iter() {
        out.push(char::from_digit(u32::from(byte >> 4), 16).unwrap_or('0'));
        out.push(char::from_digit(u32::from(byte & 0x0f), 16).unwrap_or('0'));
    }
    out
}

/// `value` with every map's keys in sorted order, however it was built.
///
/// serde_json keeps a map's keys in insertion order when its
/// `preserve_order` feature is on, and Guard's engine (`cfn-guard`) turns it
/// on for the whole build. Every hash of a JSON value goes through this, so
/// it stays what it was with sorted maps: a stack's desired and deployed
/// hashes, recorded by earlier versions, must not change with a dependency.
pub fn canonical(value: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k, canonical(v)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.into_iter().map(canonical).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hashes of one spec and stack, as version 5ab8084 (before Guard's
    /// engine turned serde_json's `preserve_order` on) computed them.
    #[test]
    fn hashes_recorded_by_earlier_versions_are_computed_the_same() {
        let mut spec: crate::spec::StackSpec = serde_yaml_ng::from_str(
            "name: a\nsource: {git: 'https://h/r.git', path: t.yaml}\n\
             stackPolicy: {Statement: [{Effect: Allow, Principal: '*', Action: 'Update:*', Resource: '*'}]}\n\
             rollback: {monitoringTime: 5m, triggers: [{arn: 'arn:aws:cloudwatch:us-east-1:111122223333:alarm:x'}]}\n\
             capabilities: [CAPABILITY_IAM]\n",
        )
        .unwrap();
        spec.role_arn = Some("arn:aws:iam::111122223333:role/r".into());
        let parameters = [
            ("B".to_owned(), "2".to_owned()),
            ("A".to_owned(), "1".to_owned()),
        ]
        .into();
        let tags = [("team".to_owned(), "x".to_owned())].into();
        assert_eq!(
            crate::template::desired_hash("abc", &parameters, &tags, &spec),
            "2acdd9e399532611041312ae3b4d6e65411c38ca5aa4a5700ee341d973427b30"
        );
        assert_eq!(
            crate::seen::deployed_hash("Resources: {}", &parameters, &tags),
            "1a24e5f8fde424c95647ddbb72ebcc464c48bb06d711ad767f13ed281f0e0c3f"
        );
        assert_eq!(
            spec.content_hash(),
            "fdcf1a962bebc3ee9d3a4251244c39ced142532a0149f713ee8d6fc6e036c39a"
        );
    }

    #[test]
    fn matches_the_known_digest_of_abc() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
