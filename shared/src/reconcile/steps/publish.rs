//! Outputs published (`publish: {ssm: PATH}`) as a run ends `Ready`: each
//! output an SSM parameter of the stack's account and region, written only
//! when its value changed, deleted when it goes ([`crate::publish::plan`]),
//! what is published recorded in the same status write as the run's end.
//! A write that fails leaves the stack `Ready`, says so, and makes it due
//! again after `retryInterval` (its next run writes what is missing); a
//! deleted stack's parameters are deleted with it.

use std::collections::BTreeMap;

use tracing::{info, warn};

use super::{Port, Ports, Steps, due, ready_status};
use crate::clock::now_millis;
use crate::ports::Publications as _;
use crate::publish::plan;
use crate::reconcile::run::RunState;
use crate::registry::StackEntry;
use crate::seen::Seen;
use crate::status::{Status, Timestamp, transitions};

impl<P: Ports> Steps<P> {
    /// The `Ready` status a run ends with ([`ready_status`]), its outputs
    /// published. `outputs`: as the registry records them (secrets masked).
    pub(super) async fn ready(
        &self,
        state: &RunState,
        entry: &StackEntry,
        cfn: &Port<P>,
        seen: Option<Seen>,
        outputs: Option<BTreeMap<String, String>>,
        message: &str,
    ) -> Status {
        let published = match &outputs {
            Some(outputs) => Some(self.publish(state, entry, cfn, outputs).await),
            // Not described: what was published stays as recorded.
            None => None,
        };
        let status = ready_status(state, entry, seen, outputs, message);
        match published {
            Some((record, note, retry)) => transitions::published(status, record, note, retry),
            None => status,
        }
    }

    /// Writes and deletes the parameters: what is published now (`None`:
    /// as recorded, some writes failed), what to say, and when to try again.
    async fn publish(
        &self,
        state: &RunState,
        entry: &StackEntry,
        cfn: &Port<P>,
        outputs: &BTreeMap<String, String>,
    ) -> (
        Option<BTreeMap<String, String>>,
        Option<String>,
        Option<Timestamp>,
    ) {
        let path = entry.spec.publish.as_ref().and_then(|p| p.ssm.as_deref());
        let recorded = &entry.status.applied.published;
        if path.is_none() && recorded.is_empty() {
            return (None, None, None);
        }
        let plan = plan(path, outputs, recorded);
        let skipped = (!plan.skipped.is_empty())
            .then(|| format!("not published: {}", plan.skipped.join(", ")));
        if plan.is_empty() {
            return (Some(plan.record), skipped, None);
        }
        let mut failed = Vec::new();
        for (name, value) in &plan.put {
            if let Err(e) = cfn.put_ssm_parameter(name, value).await {
                failed.push(format!("{name}: {e}"));
            }
        }
        for name in &plan.delete {
            if let Err(e) = cfn.delete_ssm_parameter(name).await {
                failed.push(format!("{name}: {e}"));
            }
        }
        if failed.is_empty() {
            info!(stack = %state.entry, written = plan.put.len(), deleted = plan.delete.len(), "outputs published");
            let mut note = format!(
                "outputs published to SSM: {} written, {} deleted",
                plan.put.len(),
                plan.delete.len()
            );
            if let Some(skipped) = skipped {
                note = format!("{note}; {skipped}");
            }
            return (Some(plan.record), Some(note), None);
        }
        warn!(stack = %state.entry, failed = ?failed, "outputs not published");
        let retry = Timestamp(due(now_millis(), entry.spec.retry_interval.as_secs()));
        let note = format!(
            "outputs not all published to SSM ({}): tried again at the next run",
            failed.join("; ")
        );
        (None, Some(note), Some(retry))
    }

    /// Deletes what the entry published, as its stack is deleted (best
    /// effort: logged, and the run says which it could not delete).
    pub(super) async fn unpublish(&self, entry: &StackEntry, cfn: &Port<P>) -> Option<String> {
        let mut failed = Vec::new();
        for name in entry.status.applied.published.keys() {
            if let Err(e) = cfn.delete_ssm_parameter(name).await {
                failed.push(format!("{name}: {e}"));
            }
        }
        if failed.is_empty() {
            return None;
        }
        warn!(stack = %entry.name, failed = ?failed, "published outputs not deleted");
        Some(format!(
            "published outputs not deleted from SSM: {}",
            failed.join("; ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::ports::PortError;
    use crate::spec::Publish;

    fn outputs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    /// `orders`, publishing under `/orders/`, its last status `status`.
    async fn publishing(published: &BTreeMap<String, String>) -> Test {
        let published = published.clone();
        Test::with_entry(move |e| {
            e.spec.publish = Some(Publish {
                ssm: Some("/orders/{output}".into()),
            });
            e.status.applied.published = published;
        })
        .await
    }

    #[tokio::test]
    async fn a_ready_end_writes_changed_outputs_only_and_records_their_hashes() {
        let t = publishing(&BTreeMap::new()).await;
        let state = t.input("run-1");
        let entry = t.entry();
        let status = t
            .steps
            .ready(
                &state,
                &entry,
                &t.cfn,
                None,
                Some(outputs(&[("Url", "u1"), ("Arn", "a1")])),
                "in sync",
            )
            .await;
        assert_eq!(t.cfn.calls("PutParameter"), 2);
        assert_eq!(t.cfn.script().published["/orders/Url"], "u1");
        assert_eq!(status.applied.published.len(), 2);
        assert!(
            !status.applied.published.values().any(|h| h == "u1"),
            "hashes, not values"
        );
        assert_eq!(
            status.message.as_deref(),
            Some("in sync; outputs published to SSM: 2 written, 0 deleted")
        );

        // The next end: one output changed, one gone.
        let t2 = publishing(&status.applied.published).await;
        let entry = t2.entry();
        let status = t2
            .steps
            .ready(
                &state,
                &entry,
                &t2.cfn,
                None,
                Some(outputs(&[("Url", "u2")])),
                "applied",
            )
            .await;
        assert_eq!(
            (
                t2.cfn.calls("PutParameter"),
                t2.cfn.calls("DeleteParameter")
            ),
            (1, 1)
        );
        assert_eq!(status.applied.published.len(), 1);

        // Unchanged: nothing written, nothing said.
        let t3 = publishing(&status.applied.published).await;
        let entry = t3.entry();
        let same = t3
            .steps
            .ready(
                &state,
                &entry,
                &t3.cfn,
                None,
                Some(outputs(&[("Url", "u2")])),
                "in sync",
            )
            .await;
        assert_eq!(t3.cfn.calls("PutParameter"), 0);
        assert_eq!(same.message.as_deref(), Some("in sync"));
        assert_eq!(same.applied.published, status.applied.published);
    }

    #[tokio::test]
    async fn a_failed_write_keeps_the_record_says_so_and_makes_the_stack_due_again() {
        let t = publishing(&BTreeMap::new()).await;
        t.cfn.fail(
            "PutParameter",
            1,
            PortError::Refused("AccessDeniedException: no".into()),
        );
        let entry = t.entry();
        let status = t
            .steps
            .ready(
                &t.input("run-1"),
                &entry,
                &t.cfn,
                None,
                Some(outputs(&[("Url", "u1")])),
                "in sync",
            )
            .await;
        assert!(status.applied.published.is_empty());
        let message = status.message.unwrap_or_default();
        assert!(
            message.contains(
                "outputs not all published to SSM (/orders/Url: AccessDeniedException: no)"
            ),
            "{message}"
        );
        assert!(status.times.next_reconcile_at.is_some(), "due again");
    }

    #[tokio::test]
    async fn publish_removed_deletes_what_was_published_and_a_deleted_stack_takes_them_along() {
        let recorded = BTreeMap::from([("/orders/Url".to_owned(), "h".to_owned())]);
        let t = Test::with_entry({
            let recorded = recorded.clone();
            move |e| e.status.applied.published = recorded
        })
        .await;
        let entry = t.entry();
        let status = t
            .steps
            .ready(
                &t.input("run-1"),
                &entry,
                &t.cfn,
                None,
                Some(outputs(&[("Url", "u")])),
                "in sync",
            )
            .await;
        assert_eq!(t.cfn.calls("DeleteParameter"), 1);
        assert!(status.applied.published.is_empty());

        let t = publishing(&recorded).await;
        assert_eq!(t.steps.unpublish(&t.entry(), &t.cfn).await, None);
        assert_eq!(t.cfn.calls("DeleteParameter"), 1);
    }
}
