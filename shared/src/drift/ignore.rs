//! What of a drift detection's findings is reported: the resources that
//! drifted, each with its property differences, less the properties an
//! entry says to ignore (`drift.ignore`: `LogicalId.Property.Path`).

use crate::drift::found::ResourceDrift;

/// One path to ignore: `Queue.VisibilityTimeout`, `Queue.Tags.*.Value`,
/// `*.Tags`, or `Queue` (the whole resource). A segment `*` matches any one
/// segment; a rule covers its path and everything under it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IgnoreRule {
    logical_id: String,
    path: Vec<String>,
}

impl IgnoreRule {
    /// Reads a rule, or says what is wrong with it.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut parts = text.split('.');
        let logical_id = parts.next().unwrap_or_default();
        let ok =
            |s: &str| s == "*" || (!s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric()));
        if !ok(logical_id) {
            return Err(format!(
                "{text:?}: a rule starts with a logical id (letters and digits) or *"
            ));
        }
        let path: Vec<String> = parts.map(str::to_owned).collect();
        if let Some(bad) = path.iter().find(|p| p.is_empty()) {
            return Err(format!("{text:?}: an empty segment ({bad:?}) between dots"));
        }
        Ok(Self {
            logical_id: logical_id.to_owned(),
            path,
        })
    }

    /// Whether the rule covers `property_path` (CloudFormation's form,
    /// `/Tags/0/Value`) of the resource `logical_id`; `None`: the resource
    /// as a whole.
    pub fn covers(&self, logical_id: &str, property_path: Option<&str>) -> bool {
        if self.logical_id != "*" && self.logical_id != logical_id {
            return false;
        }
        let Some(path) = property_path else {
            return self.path.is_empty();
        };
        let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        self.path.len() <= segments.len()
            && self
                .path
                .iter()
                .zip(&segments)
                .all(|(rule, seg)| rule == "*" || rule == seg)
    }
}

/// The drifts to report: each resource's differences less the ignored
/// ones; a modified resource left with none is not reported, nor a
/// resource a rule ignores as a whole.
pub fn reportable(drifts: Vec<ResourceDrift>, ignore: &[IgnoreRule]) -> Vec<ResourceDrift> {
    drifts
        .into_iter()
        .filter(|d| !ignore.iter().any(|r| r.covers(&d.logical_id, None)))
        .filter_map(|mut d| {
            let had = d.differences.len();
            d.differences.retain(|p| {
                !ignore
                    .iter()
                    .any(|r| r.covers(&d.logical_id, Some(&p.path)))
            });
            let emptied = had > 0 && d.differences.is_empty();
            (!emptied).then_some(d)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drift::found::PropertyDifference;

    fn drift(id: &str, status: &str, paths: &[&str]) -> ResourceDrift {
        ResourceDrift {
            logical_id: id.into(),
            resource_type: "AWS::SQS::Queue".into(),
            physical_id: None,
            status: status.into(),
            differences: paths
                .iter()
                .map(|p| PropertyDifference {
                    path: (*p).into(),
                    expected: "30".into(),
                    actual: "60".into(),
                    kind: "NOT_EQUAL".into(),
                })
                .collect(),
        }
    }

    fn rules(texts: &[&str]) -> Vec<IgnoreRule> {
        texts
            .iter()
            .map(|t| IgnoreRule::parse(t).unwrap())
            .collect()
    }

    #[test]
    fn ignored_paths_are_left_out_and_a_resource_left_with_none_is_not_reported() {
        let found = vec![
            drift(
                "Queue",
                "MODIFIED",
                &["/VisibilityTimeout", "/Tags/0/Value"],
            ),
            drift("Topic", "MODIFIED", &["/DisplayName"]),
            drift("Gone", "DELETED", &[]),
        ];
        let kept = reportable(found.clone(), &rules(&["Queue.Tags", "Topic.DisplayName"]));
        assert_eq!(kept.len(), 2);
        assert_eq!(kept[0].logical_id, "Queue");
        assert_eq!(kept[0].differences.len(), 1);
        assert_eq!(kept[0].differences[0].path, "/VisibilityTimeout");
        assert_eq!(
            kept[1].logical_id, "Gone",
            "a deleted resource has no differences to ignore"
        );
        assert_eq!(reportable(found.clone(), &rules(&["Gone"])).len(), 2);
        assert_eq!(reportable(found, &[]).len(), 3);
    }

    #[test]
    fn a_rule_matches_by_segment_with_wildcards_and_never_by_prefix_of_a_name() {
        let r = IgnoreRule::parse("*.Tags.*.Value").unwrap();
        assert!(r.covers("Queue", Some("/Tags/3/Value")));
        assert!(!r.covers("Queue", Some("/Tags/3/Key")));
        let r = IgnoreRule::parse("Queue.Visibility").unwrap();
        assert!(
            !r.covers("Queue", Some("/VisibilityTimeout")),
            "whole segments only"
        );
        assert!(!r.covers("Queue2", Some("/Visibility")));
        assert!(IgnoreRule::parse("Queue").unwrap().covers("Queue", None));
        for bad in ["", "Queue..Tags", "Que-ue.Tags", ".Tags"] {
            assert!(IgnoreRule::parse(bad).is_err(), "{bad:?}");
        }
    }
}
