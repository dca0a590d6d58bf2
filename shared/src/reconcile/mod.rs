//! The reconcile engine: the decision table ([`decide`]), the run's state
//! and errors ([`run`]), the steps the state machine's Task states run
//! ([`steps`]), and their binding to the local interpreter ([`asl_runner`]).

pub mod asl_runner;
pub mod decide;
pub mod desired;
pub mod diff;
pub mod review;
pub mod run;
pub mod steps;
pub mod values;
