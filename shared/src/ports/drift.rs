//! Drift detection on the CloudFormation port: what it reports (values of
//! the domain, `crate::drift::found`) and the port's part that asks.

pub use crate::drift::found::{DetectionStatus, DriftDetection, PropertyDifference, ResourceDrift};

use super::PortResult;

/// Drift detections of a stack: started, polled, their findings read.
pub trait DriftDetections: Send + Sync {
    /// Starts a drift detection of the stack (`DetectStackDrift`): its id.
    fn detect_drift(&self, stack: &str) -> impl Future<Output = PortResult<String>> + Send;

    /// Where the detection `id` is (`DescribeStackDriftDetectionStatus`).
    fn drift_detection(&self, id: &str) -> impl Future<Output = PortResult<DriftDetection>> + Send;

    /// The stack's resources that drifted (`MODIFIED` or `DELETED`), with
    /// their property differences, as the last detection found them.
    fn resource_drifts(
        &self,
        stack: &str,
    ) -> impl Future<Output = PortResult<Vec<ResourceDrift>>> + Send;
}
