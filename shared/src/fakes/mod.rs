//! In-memory fakes of the ports, for fast tests of the steps, the scheduler
//! and the trigger handlers (feature `fakes`; the library's own tests always
//! have them). The registry's fake is `crate::registry::memory`.
//!
//! - [`MemoryBlobs`]: the bucket.
//! - [`MemorySources`]: Git-like sources (refs → revisions → files).
//! - [`RecordingStarter`]: executions, started once per name.
//! - [`FixedSecrets`]: the webhook's accepted secrets, as given.
//! - [`ScriptedCloudFormation`]: stack statuses that advance over successive
//!   describes, failures injected per operation — the stack states the
//!   emulator cannot produce; each call told to an observer as the AWS call
//!   it stands for ([`FakeCall`]), and the n-th call of an operation failed
//!   on demand ([`Faults`]).
//! - [`MemoryNotices`]: the event bus.
//! - [`Failing`]: the other ports (and the registry), failing the k-th call
//!   of an operation.

mod blobs;
mod calls;
mod cloudformation;
mod failing;
mod git_host;
mod notices;
mod organizations;
mod queue;
mod sources;
mod starter;

pub use blobs::MemoryBlobs;
pub use calls::{FakeCall, Faults, Observer};
pub use cloudformation::{
    Script, ScriptedCloudFormation, TEST_INSTALLATION, failed, failure_event, pending,
    queue_change, queue_drift, ready, stack_id, summary,
};
pub use failing::Failing;
pub use git_host::MemoryGitHost;
pub use notices::MemoryNotices;
pub use organizations::MemoryOrganizations;
pub use queue::MemoryQueue;
pub use sources::MemorySources;
pub use starter::{RecordingStarter, RecordingTokens};

/// The webhook's accepted secrets, as given (never cached: each read is fresh).
#[derive(Debug, Clone, Default)]
pub struct FixedSecrets(pub Vec<String>);

impl crate::ports::SecretStore for FixedSecrets {
    async fn get(&self, _fresh: bool) -> Result<(crate::ports::secrets::Accepted, bool), String> {
        let accepted = crate::ports::secrets::Accepted {
            secrets: self.0.clone(),
            repositories: None,
        };
        Ok((accepted, false))
    }
}
