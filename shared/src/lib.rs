//! stacksync's library crate: everything the Lambda functions and the CLI
//! share, in layers (ARCHITECTURE.md at the root says which may use which):
//!
//! - the triggers ([`triggers`]: webhook, EventBridge events, scheduler)
//!   start reconcile runs;
//! - the state machine (`statemachine/reconcile.asl.json`, run by Step
//!   Functions or by the local interpreter [`asl`]) chains the steps;
//! - the steps ([`reconcile::steps`]) observe, ask the decision table
//!   ([`reconcile::decide`]) and act, through
//! - the ports ([`ports`], and the [`registry`]'s traits), implemented on AWS
//!   and Git by the [`adapters`] (and the registry's DynamoDB half), and in
//!   memory by the fakes (`fakes`, feature `fakes`);
//! - the domain: [`spec`] (the desired state, checked by [`validate`], read
//!   from `stacks.yaml` by [`manifest`]), [`status`], [`stack_status`],
//!   [`seen`] (the stack as stacksync left it, and what changed since),
//!   [`template`], [`artifact`], [`naming`], [`source`], [`partition`],
//!   [`duration`], [`hash`], [`clock`].
//!
//! [`wiring`] puts the AWS adapters together for the functions ([`lambda`],
//! feature `lambda`) and the CLI's local runner.

pub mod adapters;
pub mod approvers;
pub mod artifact;
pub mod asl;
pub mod aws;
pub mod clock;
pub mod content;
pub mod drift;
pub mod duration;
#[cfg(any(test, feature = "fakes"))]
pub mod fakes;
pub mod fleet;
pub mod guard;
pub mod hash;
#[cfg(feature = "lambda")]
pub mod lambda;
pub mod listing;
pub mod manifest;
pub mod naming;
pub mod notice;
pub mod ownership;
pub mod package;
pub mod parameters;
pub mod partition;
pub mod ports;
pub mod preview;
pub mod publish;
pub mod pull_request;
pub mod reconcile;
pub mod registry;
pub mod registry_source;
pub mod rollout;
pub mod seen;
pub mod source;
pub mod spec;
pub mod stack_status;
pub mod status;
pub mod template;
pub mod triggers;
pub mod validate;
pub mod window;
pub mod wiring;
pub mod yaml;

pub use duration::Duration;
pub use spec::StackSpec;
pub use status::{Phase, Status};
