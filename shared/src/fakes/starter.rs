//! Executions in memory: each name starts once, as Step Functions keeps a
//! name for 90 days.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use crate::naming::execution_name;
use crate::ports::{PortResult, Started, Starter, Trigger};

/// The executions started, by name, with their trigger.
#[derive(Debug, Default)]
pub struct RecordingStarter {
    started: Mutex<BTreeMap<String, (String, Trigger)>>,
}

impl RecordingStarter {
    pub fn new() -> Self {
        Self::default()
    }

    /// Every execution started so far: (name, stack, trigger), by name.
    pub fn started(&self) -> Vec<(String, String, Trigger)> {
        self.started
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(name, (stack, trigger))| (name.clone(), stack.clone(), trigger.clone()))
            .collect()
    }

    /// The stacks started, by name of execution.
    pub fn stacks(&self) -> Vec<String> {
        self.started()
            .into_iter()
            .map(|(_, stack, _)| stack)
            .collect()
    }
}

impl Starter for RecordingStarter {
    async fn start(&self, stack: &str, trigger: &Trigger, key: &str) -> PortResult<Started> {
        let name = execution_name(stack, trigger.kind.as_str(), key);
        let mut started = self.started.lock().unwrap_or_else(PoisonError::into_inner);
        let new = !started.contains_key(&name);
        if new {
            started.insert(name.clone(), (stack.to_owned(), trigger.clone()));
        }
        Ok(Started {
            stack: stack.to_owned(),
            execution_arn: format!("arn:aws:states:us-east-1:123456789012:execution:fake:{name}"),
            execution_name: name,
            new,
        })
    }
}

/// Task tokens answered in memory: each is awaited until answered once,
/// unless listed as no longer awaited.
#[derive(Debug, Default)]
pub struct RecordingTokens {
    answered: Mutex<Vec<(String, crate::ports::Answer)>>,
    /// Tokens whose wait ended (timed out, execution gone).
    pub ended: Mutex<Vec<String>>,
}

impl RecordingTokens {
    /// Every answer given so far, oldest first.
    pub fn answered(&self) -> Vec<(String, crate::ports::Answer)> {
        self.answered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl crate::ports::TaskTokens for RecordingTokens {
    async fn answer_token(&self, token: &str, answer: &crate::ports::Answer) -> PortResult<bool> {
        let ended = self
            .ended
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .any(|t| t == token);
        let mut answered = self.answered.lock().unwrap_or_else(PoisonError::into_inner);
        if ended || answered.iter().any(|(t, _)| t == token) {
            return Ok(false);
        }
        answered.push((token.to_owned(), answer.clone()));
        Ok(true)
    }
}

/// On any machine: the machines asked for are not told apart here.
impl crate::ports::StartOn for RecordingStarter {
    fn start_on<'a>(
        &'a self,
        _machine: &'a str,
        stack: &'a str,
        trigger: &'a Trigger,
        key: &'a str,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = PortResult<Started>> + Send + 'a>> {
        Box::pin(self.start(stack, trigger, key))
    }
}
