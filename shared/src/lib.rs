//! stacksync's library crate: everything the Lambda functions and the CLI share.
//!
//! - [`spec`]: the desired state of one stack (a registry entry), with its
//!   validation rules ([`validate`]) and the `stacks.yaml` reader ([`manifest`]).
//! - [`status`]: what stacksync observed and did, per stack.
//! - [`registry`]: the DynamoDB table that holds both, with conditional writes
//!   and a per-stack lease.
//! - [`duration`], [`source`], [`hash`], [`clock`]: small value types and helpers.
//! - [`aws`]: building SDK clients from the standard configuration chain;
//!   [`partition`]: the ARN partition and DNS suffix of a region.
//! - [`webhook`], [`events`]: trigger inputs (Git webhooks, EventBridge
//!   events) verified and parsed, without I/O.

pub mod adapters;
pub mod artifact;
pub mod asl;
pub mod aws;
pub mod clock;
pub mod duration;
pub mod events;
pub mod hash;
#[cfg(feature = "lambda")]
pub mod lambda;
pub mod manifest;
pub mod partition;
pub mod reconcile;
pub mod registry;
pub mod scheduler;
pub mod source;
pub mod spec;
pub mod status;
pub mod template;
pub mod triggers;
pub mod validate;
pub mod webhook;

pub use duration::Duration;
pub use spec::StackSpec;
pub use status::{Phase, Status};
