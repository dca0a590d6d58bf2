//! The secret port: the webhook's accepted secrets (current, and previous
//! while a rotation is under way).

use std::future::Future;

/// What the stored secret accepts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Accepted {
    /// The secrets a delivery may be signed with.
    pub secrets: Vec<String>,
    /// The repositories (their source keys: normal URL and ref left out)
    /// whose deliveries the secret may sign; `None`: any.
    pub repositories: Option<Vec<String>>,
}

/// Where the accepted secrets come from.
pub trait SecretStore: Send + Sync {
    /// The accepted secrets, and whether they came from a cache. `fresh`
    /// asks to read the store again (a signature failed: the secret may have
    /// been rotated); a store may refuse that when asked too often. The
    /// error says why the secret cannot be read, never what it is.
    fn get(&self, fresh: bool) -> impl Future<Output = Result<(Accepted, bool), String>> + Send;
}
