//! What CloudFormation's drift detection reports: a detection's progress
//! (`DescribeStackDriftDetectionStatus`) and each drifted resource with its
//! property differences (`DescribeStackResourceDrifts`).

/// Where a detection is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DetectionStatus {
    InProgress,
    Complete,
    Failed,
}

/// One drift detection of a stack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriftDetection {
    pub status: DetectionStatus,
    /// `DRIFTED`, `IN_SYNC`, `UNKNOWN` or `NOT_CHECKED`, once complete.
    pub stack_drift: Option<String>,
    /// Why it failed, or which resources could not be checked.
    pub reason: Option<String>,
    /// How many resources drifted, once complete.
    pub drifted_resources: Option<u32>,
}

/// One resource that is not as the template says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceDrift {
    pub logical_id: String,
    pub resource_type: String,
    pub physical_id: Option<String>,
    /// `MODIFIED` or `DELETED`.
    pub status: String,
    pub differences: Vec<PropertyDifference>,
}

/// One property of a drifted resource: what the template says, what is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PropertyDifference {
    /// CloudFormation's path in the resource's properties: `/Tags/0/Value`.
    pub path: String,
    pub expected: String,
    pub actual: String,
    /// `ADD`, `REMOVE` or `NOT_EQUAL`.
    pub kind: String,
}
