//! `targets:`: one entry for many accounts and regions (a fleet). Each
//! (account, region) is one stack with an entry of its own in the registry,
//! made from the fleet's by [`crate::fleet::expand`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::value::{ParameterValue, parameter_map};

/// Where a fleet's stacks go: accounts (listed, and the active accounts of
/// organizational units) times regions, less exclusions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Targets {
    /// Account ids (12 digits).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accounts: Vec<String>,
    /// AWS Organizations organizational units (`ou-…`) or roots (`r-…`):
    /// their accounts, read through the installation's Organizations role
    /// (`organizations:ListAccountsForParent`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub organizational_units: Vec<String>,
    /// Also the accounts of the units under each unit, to any depth.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub recursive: bool,
    /// Regions, each account gets one stack in each.
    pub regions: Vec<String>,
    /// Targets left out: `ACCOUNT` (every region) or `ACCOUNT/REGION`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<String>,
    /// Per target (`ACCOUNT/REGION`) or per account (`ACCOUNT`): parameters
    /// over the entry's (a target's own over its account's).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub overrides: BTreeMap<String, Override>,
}

/// What one target or account changes of its fleet's spec.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Override {
    #[serde(
        default,
        deserialize_with = "parameter_map",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub parameters: BTreeMap<String, ParameterValue>,
}

/// Which fleet an entry is one target of: set by stacksync on the entries
/// it makes from a fleet, never written in a file.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TargetOf {
    pub fleet: String,
    pub account: String,
    pub region: String,
}

impl TargetOf {
    /// `ACCOUNT/REGION`, as `--target` and `overrides` write it.
    pub fn label(&self) -> String {
        format!("{}/{}", self.account, self.region)
    }
}
