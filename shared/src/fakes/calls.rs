//! What a fake is asked, for the tests that watch it: each call told to an
//! observer as the AWS call it stands for (the test kit records them for
//! the IAM conformance test), and faults planned for the n-th call of an
//! operation. One place for both, so that a port's method is written once
//! in the fake and needs no forwarding wrapper to be watched or failed.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::ports::{ChangeSetRequest, PortError, PortResult};

/// One call a fake received, as the AWS call it stands for.
#[derive(Debug, Clone, Default)]
pub struct FakeCall {
    /// `cloudformation`, `ssm`, `secretsmanager`, `sts`.
    pub service: &'static str,
    /// As AWS names it (`DescribeStacks`).
    pub operation: &'static str,
    /// The stack it names (`Some("")` for a call about none in particular,
    /// as a listing); `None` for a call to another service.
    pub stack: Option<String>,
    /// The service role it passes.
    pub role_arn: Option<String>,
    /// What else it names (the role `AssumeRole` assumes).
    pub target: Option<String>,
    /// The stack's `stacksync:installation` tag when it was called (none: no
    /// stack, or untagged).
    pub stack_installation: Option<String>,
    /// The change set asked for (`CreateChangeSet`).
    pub request: Option<ChangeSetRequest>,
}

impl FakeCall {
    /// A CloudFormation call about `stack`.
    pub fn cloudformation(operation: &'static str, stack: &str) -> Self {
        Self {
            service: "cloudformation",
            operation,
            stack: Some(stack.to_owned()),
            ..Self::default()
        }
    }

    /// A call to another service, about no stack.
    pub fn to(service: &'static str, operation: &'static str) -> Self {
        Self {
            service,
            operation,
            ..Self::default()
        }
    }

    pub fn with_role(mut self, role_arn: Option<&str>) -> Self {
        self.role_arn = role_arn.map(str::to_owned);
        self
    }
}

/// A function told of each call.
type Observe = dyn Fn(&FakeCall) + Send + Sync;

/// What is told of each call (one at a time; set again, it replaces).
#[derive(Clone, Default)]
pub struct Observer(Option<Arc<Observe>>);

impl Observer {
    pub fn new(observe: impl Fn(&FakeCall) + Send + Sync + 'static) -> Self {
        Self(Some(Arc::new(observe)))
    }

    pub fn tell(&self, call: &FakeCall) {
        if let Some(observe) = &self.0 {
            observe(call);
        }
    }
}

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Observer(set)"
        } else {
            "Observer(none)"
        })
    }
}

/// Faults planned by operation and call number, and the calls counted.
#[derive(Debug, Default)]
pub struct Faults {
    /// Operation → (call number, error), in the order planned.
    planned: BTreeMap<String, Vec<(usize, PortError)>>,
    counted: BTreeMap<String, usize>,
}

impl Faults {
    /// The `nth` call (from 1) of `operation` fails with `error`.
    pub fn plan(&mut self, operation: &str, nth: usize, error: PortError) {
        self.planned
            .entry(operation.to_owned())
            .or_default()
            .push((nth, error));
    }

    /// How many times `operation` was called.
    pub fn calls(&self, operation: &str) -> usize {
        self.counted.get(operation).copied().unwrap_or(0)
    }

    /// Counts a call of `operation`; its planned error, if this is the one.
    pub fn count(&mut self, operation: &str) -> PortResult<()> {
        let n = self.counted.entry(operation.to_owned()).or_default();
        *n += 1;
        let n = *n;
        let planned = self.planned.get_mut(operation);
        match planned.and_then(|f| f.iter().position(|(k, _)| *k == n).map(|i| f.remove(i))) {
            Some((_, error)) => Err(error),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_planned_call_fails_and_the_others_are_counted() {
        let mut faults = Faults::default();
        faults.plan(
            "DescribeStacks",
            2,
            PortError::Transient("throttled".into()),
        );
        assert!(faults.count("DescribeStacks").is_ok());
        assert_eq!(
            faults.count("DescribeStacks"),
            Err(PortError::Transient("throttled".into()))
        );
        assert!(faults.count("DescribeStacks").is_ok());
        assert_eq!(faults.calls("DescribeStacks"), 3);
        assert_eq!(faults.calls("ListStacks"), 0);
    }
}
