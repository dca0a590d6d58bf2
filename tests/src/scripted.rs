//! The library's scripted CloudFormation (`stacksync::fakes`), for the stack
//! states the emulator cannot produce, with every call it gets recorded for
//! the IAM conformance test as the AWS call it stands for ([`recorded`]).

use stacksync::fakes::FakeCall;
pub use stacksync::fakes::{Script, ScriptedCloudFormation, failed, failure_event, pending, ready};

use crate::iam::call::Call;
use crate::iam::record::{TAG_CONDITIONED, record, recording, template_transforms};

/// `fake`, its calls recorded from now on under the function that makes
/// them, as the AWS calls they stand for (what the SDK adapter would send).
pub fn recorded(fake: ScriptedCloudFormation) -> ScriptedCloudFormation {
    fake.observe(record_fake_call);
    fake
}

fn record_fake_call(call: &FakeCall) {
    if !recording() {
        return;
    }
    if call.service != "cloudformation" {
        // A parameter value read through the stack's port (SSM, Secrets
        // Manager), or the role assumed for a stack (the session is tagged
        // with the entry and installation).
        record(Call {
            service: call.service.into(),
            operation: call.operation.into(),
            region: "us-east-1".into(),
            status: 200,
            target: call.target.clone(),
            tagged: call.operation == "AssumeRole",
            ..Call::default()
        });
        return;
    }
    let tagged = TAG_CONDITIONED.contains(&call.operation);
    let mut recorded = Call {
        service: "cloudformation".into(),
        operation: call.operation.into(),
        region: "us-east-1".into(),
        status: 200,
        stack: call.stack.clone(),
        role_arn: call.role_arn.clone(),
        stack_installation: call.stack_installation.clone().filter(|_| tagged),
        ..Call::default()
    };
    if let Some(request) = &call.request {
        recorded.role_arn.clone_from(&request.role_arn);
        recorded.template_url = Some(request.template_url.clone());
        recorded.transforms = template_transforms(&request.template_url);
        recorded.tagged = !request.tags.is_empty();
        recorded.request_installation = request
            .tags
            .iter()
            .find(|(k, _)| k == stacksync::ownership::INSTALLATION_TAG)
            .map(|(_, v)| v.clone());
        recorded
            .stack_installation
            .clone_from(&call.stack_installation);
    }
    record(recorded);
}
