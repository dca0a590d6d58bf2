//! What CloudFormation's drift detection reports, as the CloudFormation
//! port answers it: values of the domain (`crate::drift::found`).

pub use crate::drift::found::{DetectionStatus, DriftDetection, PropertyDifference, ResourceDrift};
