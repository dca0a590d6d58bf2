//! `publish:`: where a stack's outputs are published for tools that are not
//! stacksync ([`crate::publish`]).

use serde::{Deserialize, Serialize};

/// Where the outputs go.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Publish {
    /// SSM Parameter Store of the stack's account and region: a path with
    /// `{output}` in place of each output's name (`/baseline/{output}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssm: Option<String>,
}
