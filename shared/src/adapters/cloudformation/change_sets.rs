//! Change sets as CloudFormation answers them: what CreateChangeSet's
//! answer means, and one resource change in the stacksync's terms.

use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;

use super::is_empty_change_set_reason;
use crate::adapters::port_error;
use crate::ports::{Created, PortResult, ResourceChange};

/// One resource change as CloudFormation describes it: what a property
/// change touches reads `Properties.Name` (other targets by their attribute
/// alone: `Tags`, `Metadata`, …).
pub(super) fn resource_change(c: &aws_sdk_cloudformation::types::ResourceChange) -> ResourceChange {
    let mut changed: Vec<String> = Vec::new();
    for target in c.details().iter().filter_map(|d| d.target()) {
        let attribute = target.attribute().map(|a| a.as_str()).unwrap_or("");
        let what = match target.name() {
            Some(name) if attribute == "Properties" => format!("Properties.{name}"),
            _ => attribute.to_owned(),
        };
        if !what.is_empty() && !changed.contains(&what) {
            changed.push(what);
        }
    }
    ResourceChange {
        action: c
            .action()
            .map(|a| a.as_str().to_owned())
            .unwrap_or_default(),
        logical_id: c.logical_resource_id().unwrap_or_default().to_owned(),
        resource_type: c.resource_type().unwrap_or_default().to_owned(),
        physical_id: c.physical_resource_id().map(str::to_owned),
        replacement: c.replacement().map(|r| r.as_str().to_owned()),
        changed,
    }
}

/// What CreateChangeSet's answer means: made (in the stack it names), made
/// already (a retried request), or nothing to change.
pub(super) fn created(
    answer: Result<
        aws_sdk_cloudformation::operation::create_change_set::CreateChangeSetOutput,
        SdkError<
            aws_sdk_cloudformation::operation::create_change_set::CreateChangeSetError,
            HttpResponse,
        >,
    >,
) -> PortResult<Created> {
    match answer {
        Ok(out) => Ok(Created::ChangeSet {
            stack_id: out.stack_id,
        }),
        Err(e) if e.code() == Some("AlreadyExistsException") => {
            Ok(Created::ChangeSet { stack_id: None })
        }
        Err(e)
            if e.code() == Some("ValidationError")
                && e.message().is_some_and(is_empty_change_set_reason) =>
        {
            Ok(Created::NothingToChange)
        }
        Err(e) => Err(port_error("CreateChangeSet", &e)),
    }
}
