//! AWS Organizations, read: the accounts a fleet's organizational units
//! hold (`adapters::organizations`, `fakes::MemoryOrganizations`).

use std::future::Future;
use std::pin::Pin;

use super::PortResult;

/// A read's answer (boxed: the scheduler holds the port as `dyn`).
pub type Listed<'a> = Pin<Box<dyn Future<Output = PortResult<Vec<String>>> + Send + 'a>>;

/// The most levels of units under a unit that a recursive read follows
/// (Organizations allows five under a root).
pub const MAX_UNIT_DEPTH: usize = 5;

/// Reads an organization's tree.
pub trait Organizations: Send + Sync + std::fmt::Debug {
    /// The active accounts directly under `parent` (a unit or a root).
    fn accounts_for_parent<'a>(&'a self, parent: &'a str) -> Listed<'a>;
    /// The units directly under `parent`.
    fn units_for_parent<'a>(&'a self, parent: &'a str) -> Listed<'a>;
}

/// The active accounts under `unit`, and with `recursive` under its units
/// to [`MAX_UNIT_DEPTH`] levels, sorted, each once.
pub async fn accounts_under(
    organizations: &dyn Organizations,
    unit: &str,
    recursive: bool,
) -> PortResult<Vec<String>> {
    let mut accounts = std::collections::BTreeSet::new();
    let mut level = vec![unit.to_owned()];
    for depth in 0..=MAX_UNIT_DEPTH {
        let mut next = Vec::new();
        for parent in &level {
            accounts.extend(organizations.accounts_for_parent(parent).await?);
            if recursive && depth < MAX_UNIT_DEPTH {
                next.extend(organizations.units_for_parent(parent).await?);
            }
        }
        if next.is_empty() {
            break;
        }
        level = next;
    }
    Ok(accounts.into_iter().collect())
}
