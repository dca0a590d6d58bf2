//! AWS Organizations (`ListAccountsForParent`, `ListOrganizationalUnitsForParent`),
//! every page read.

use aws_sdk_organizations::Client;
use aws_sdk_organizations::types::AccountStatus;

use super::port_error;
use crate::ports::organizations::Listed;
use crate::ports::{Organizations, PortResult};

/// An organization's tree, read through one client (the installation's
/// Organizations role's, or the caller's own credentials).
#[derive(Debug, Clone)]
pub struct SdkOrganizations {
    client: Client,
}

impl SdkOrganizations {
    pub fn new(client: Client) -> Self {
        Self { client }
    }
}

impl Organizations for SdkOrganizations {
    fn accounts_for_parent<'a>(&'a self, parent: &'a str) -> Listed<'a> {
        Box::pin(self.accounts(parent))
    }

    fn units_for_parent<'a>(&'a self, parent: &'a str) -> Listed<'a> {
        Box::pin(self.units(parent))
    }
}

impl SdkOrganizations {
    async fn accounts(&self, parent: &str) -> PortResult<Vec<String>> {
        let mut accounts = Vec::new();
        let mut token = None;
        loop {
            let out = self
                .client
                .list_accounts_for_parent()
                .parent_id(parent)
                .set_next_token(token)
                .send()
                .await
                .map_err(|e| port_error("ListAccountsForParent", &e))?;
            accounts.extend(
                out.accounts()
                    .iter()
                    // Suspended and closing accounts take no stacks.
                    .filter(|a| a.status().is_none_or(|s| *s == AccountStatus::Active))
                    .filter_map(|a| a.id().map(str::to_owned)),
            );
            token = out.next_token().map(str::to_owned);
            if token.is_none() {
                return Ok(accounts);
            }
        }
    }

    async fn units(&self, parent: &str) -> PortResult<Vec<String>> {
        let mut units = Vec::new();
        let mut token = None;
        loop {
            let out = self
                .client
                .list_organizational_units_for_parent()
                .parent_id(parent)
                .set_next_token(token)
                .send()
                .await
                .map_err(|e| port_error("ListOrganizationalUnitsForParent", &e))?;
            units.extend(
                out.organizational_units()
                    .iter()
                    .filter_map(|u| u.id().map(str::to_owned)),
            );
            token = out.next_token().map(str::to_owned);
            if token.is_none() {
                return Ok(units);
            }
        }
    }
}
