//! Drift detection through the SDK: start one, read where it is, and read
//! the drifted resources with their property differences (all pages).

use aws_sdk_cloudformation::Client;
use aws_sdk_cloudformation::types::StackResourceDriftStatus;

use super::super::port_error;
use crate::ports::PortResult;
use crate::ports::drift::{DetectionStatus, DriftDetection, PropertyDifference, ResourceDrift};

pub(super) async fn detect(client: &Client, stack: &str) -> PortResult<String> {
    let out = client
        .detect_stack_drift()
        .stack_name(stack)
        .send()
        .await
        .map_err(|e| port_error("DetectStackDrift", &e))?;
    out.stack_drift_detection_id()
        .map(str::to_owned)
        .ok_or_else(|| crate::ports::PortError::Refused("DetectStackDrift: no detection id".into()))
}

pub(super) async fn detection(client: &Client, id: &str) -> PortResult<DriftDetection> {
    let out = client
        .describe_stack_drift_detection_status()
        .stack_drift_detection_id(id)
        .send()
        .await
        .map_err(|e| port_error("DescribeStackDriftDetectionStatus", &e))?;
    let status = match out
        .detection_status()
        .map(|s| s.as_str())
        .unwrap_or_default()
    {
        "DETECTION_COMPLETE" => DetectionStatus::Complete,
        "DETECTION_FAILED" => DetectionStatus::Failed,
        _ => DetectionStatus::InProgress,
    };
    Ok(DriftDetection {
        status,
        stack_drift: out.stack_drift_status().map(|s| s.as_str().to_owned()),
        reason: out.detection_status_reason().map(str::to_owned),
        drifted_resources: out
            .drifted_stack_resource_count()
            .and_then(|n| u32::try_from(n).ok()),
    })
}

pub(super) async fn resources(client: &Client, stack: &str) -> PortResult<Vec<ResourceDrift>> {
    let mut drifts = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let out = client
            .describe_stack_resource_drifts()
            .stack_name(stack)
            .stack_resource_drift_status_filters(StackResourceDriftStatus::Modified)
            .stack_resource_drift_status_filters(StackResourceDriftStatus::Deleted)
            .set_next_token(token.take())
            .send()
            .await
            .map_err(|e| port_error("DescribeStackResourceDrifts", &e))?;
        drifts.extend(out.stack_resource_drifts().iter().map(|d| {
            ResourceDrift {
                logical_id: d.logical_resource_id().unwrap_or_default().to_owned(),
                resource_type: d.resource_type().unwrap_or_default().to_owned(),
                physical_id: d.physical_resource_id().map(str::to_owned),
                status: d
                    .stack_resource_drift_status()
                    .map(|s| s.as_str().to_owned())
                    .unwrap_or_default(),
                differences: d
                    .property_differences()
                    .iter()
                    .map(|p| PropertyDifference {
                        path: p.property_path().unwrap_or_default().to_owned(),
                        expected: p.expected_value().unwrap_or_default().to_owned(),
                        actual: p.actual_value().unwrap_or_default().to_owned(),
                        kind: p
                            .difference_type()
                            .map(|k| k.as_str().to_owned())
                            .unwrap_or_default(),
                    })
                    .collect(),
            }
        }));
        match out.next_token() {
            Some(next) => token = Some(next.to_owned()),
            None => return Ok(drifts),
        }
    }
}
