//! The reconcile engine: the decision table, and (as they land) the ports and
//! handlers the state machine's steps run.

pub mod decide;
pub mod local;
pub mod ports;
pub mod run;
pub mod status;
pub mod steps;
