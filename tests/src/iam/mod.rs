//! IAM conformance: the AWS calls each function makes are recorded while the
//! integration suite runs ([`record`]), turned into the authorizations IAM
//! would check ([`requests`]), and held against each function's role as
//! `template.yaml` and the CDK app deploy it ([`policy`]). The emulator
//! enforces no IAM, so this is what proves the roles (`tests/tests/iam.rs`).

pub mod call;
pub mod policy;
pub mod record;
pub mod requests;

pub use record::{as_function, as_installation, current_function};
