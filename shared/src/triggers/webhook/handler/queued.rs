//! Deliveries through the queue (`DeliveryQueue`, SQS in a deployment): the
//! webhook verifies a delivery, puts it on the queue, records its id, and
//! answers 202 at once, whatever follows the pushed ref; the consumer (the
//! same function, on the queue's messages) starts the followers 32 at a
//! time, or hands a pull request to the preview function, as the webhook
//! did before it answered. A message delivered again starts nothing twice:
//! executions are named from the stack and the commit. A message that
//! cannot be handled is tried again, then kept in the dead-letter queue
//! (and alarmed on).

use serde::{Deserialize, Serialize};

use super::{Answer, Response, Webhook};
use crate::clock::EpochMillis;
use crate::notice::NoticePush;
use crate::ports::{Enqueue, SecretStore, Starter, TriggerKind};
use crate::pull_request::PullRequest;
use crate::registry::{Deliveries, Entries, RegistrySources};
use crate::triggers::webhook::{Delivery, Provider, PullRequestDelivery};
use crate::triggers::{
    MAX_STARTS_PER_QUEUED_DELIVERY, RefMoved, Starts, TriggerError, start_ref_followers_up_to,
};

/// A queued delivery, as the message's body holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Queued {
    /// Refs pushed.
    #[serde(rename = "push", rename_all = "camelCase")]
    Push {
        provider: String,
        delivery_id: String,
        refs: Vec<NoticePush>,
    },
    /// A pull request's event, for the preview function.
    #[serde(rename = "pullRequest", rename_all = "camelCase")]
    PullRequest {
        provider: String,
        delivery_id: String,
        pull_request: PullRequest,
    },
}

/// Why a queued message could not be handled: tried again, then kept in
/// the dead-letter queue.
#[derive(Debug, thiserror::Error)]
pub enum ConsumeError {
    #[error("the message is not a queued delivery: {0}")]
    Malformed(String),
    #[error(transparent)]
    Trigger(#[from] TriggerError),
    #[error("the event bus: {0}")]
    Bus(String),
}

impl<R: Entries + Deliveries + RegistrySources, X: Starter, K: SecretStore> Webhook<R, X, K> {
    /// Queues a push's refs; 202 once queued and its id recorded.
    pub(super) async fn queue_push(
        &self,
        queue: &dyn Enqueue,
        delivery: &Delivery,
        now: EpochMillis,
    ) -> Response {
        let message = Queued::Push {
            provider: delivery.provider.as_str().to_owned(),
            delivery_id: delivery.delivery_id.clone(),
            refs: delivery
                .refs
                .iter()
                .map(|r| NoticePush {
                    repository_urls: r.repository_urls.clone(),
                    reference: r.reference.clone(),
                    commit: r.commit.clone(),
                })
                .collect(),
        };
        self.queue(
            queue,
            &message,
            delivery.provider,
            &delivery.delivery_id,
            now,
        )
        .await
    }

    /// Queues a pull request's event; 202 once queued and its id recorded.
    pub(super) async fn queue_pull_request(
        &self,
        queue: &dyn Enqueue,
        delivery: &PullRequestDelivery,
        now: EpochMillis,
    ) -> Response {
        let message = Queued::PullRequest {
            provider: delivery.provider.as_str().to_owned(),
            delivery_id: delivery.delivery_id.clone(),
            pull_request: delivery.pull_request.clone(),
        };
        self.queue(
            queue,
            &message,
            delivery.provider,
            &delivery.delivery_id,
            now,
        )
        .await
    }

    /// Queued first, recorded second: a crash in between makes the sender's
    /// retry queue it again (harmless: starts are named), never a
    /// "duplicate" that nobody handled.
    async fn queue(
        &self,
        queue: &dyn Enqueue,
        message: &Queued,
        provider: Provider,
        delivery_id: &str,
        now: EpochMillis,
    ) -> Response {
        let body = serde_json::to_string(message).unwrap_or_default();
        if let Err(e) = queue.enqueue(&body).await {
            tracing::error!(error = %e, delivery = delivery_id, "the delivery could not be queued");
            return Response::error(
                503,
                "Unavailable",
                "the delivery queue could not be reached; retry the delivery",
            );
        }
        let id = format!("{}#{delivery_id}", provider.as_str());
        let delivery_id = delivery_id.to_owned();
        match self
            .registry
            .record_delivery(&id, now, super::DELIVERY_TTL_SECONDS)
            .await
        {
            Ok(false) => Response::answer(200, &Answer::Duplicate { delivery_id }),
            // Queued either way: the consumer starts it; a record that
            // failed only lets a redelivery be queued again.
            Ok(true) | Err(_) => {
                tracing::info!(delivery = %delivery_id, "delivery queued");
                Response::answer(202, &Answer::Queued { delivery_id })
            }
        }
    }

    /// Handles one queued message (the consumer): what it did, as the
    /// webhook would have answered.
    pub async fn consume(&self, body: &str, now: EpochMillis) -> Result<Answer, ConsumeError> {
        let message: Queued =
            serde_json::from_str(body).map_err(|e| ConsumeError::Malformed(e.to_string()))?;
        match message {
            Queued::Push {
                delivery_id, refs, ..
            } => {
                let refs: Vec<RefMoved> = refs
                    .into_iter()
                    .map(|r| RefMoved {
                        repository_urls: r.repository_urls,
                        reference: r.reference,
                        commit: r.commit,
                    })
                    .collect();
                let (starts, relayed) = self.start_queued(&refs, now).await?;
                let keys: Vec<String> = refs.iter().flat_map(RefMoved::source_keys).collect();
                Ok(super::answer_of(&starts, relayed, delivery_id, keys).1)
            }
            Queued::PullRequest {
                delivery_id,
                pull_request,
                ..
            } => self.relay_pull_request(&pull_request, delivery_id).await,
        }
    }

    /// Starts the followers of `refs` (relaying a registry source's), up
    /// to [`MAX_STARTS_PER_QUEUED_DELIVERY`].
    async fn start_queued(
        &self,
        refs: &[RefMoved],
        now: EpochMillis,
    ) -> Result<(Starts, usize), TriggerError> {
        let mut starts = Starts::default();
        let mut relayed = 0;
        for moved in refs {
            if self.relayed(moved).await? {
                relayed += 1;
                continue;
            }
            start_ref_followers_up_to(
                MAX_STARTS_PER_QUEUED_DELIVERY,
                &self.registry,
                &self.starter,
                moved,
                TriggerKind::Webhook,
                &mut starts,
            )
            .await?;
        }
        super::counted::count_each_start_once(&self.registry, &mut starts, now).await;
        Ok((starts, relayed))
    }

    /// Hands a queued pull request to the preview function, if anything
    /// follows its base.
    async fn relay_pull_request(
        &self,
        pr: &PullRequest,
        delivery_id: String,
    ) -> Result<Answer, ConsumeError> {
        if !self.followed(pr).await.map_err(TriggerError::from)? {
            return Ok(Answer::NoFollower {
                sources: pr.base_keys(),
            });
        }
        let Some(relay) = &self.registry_sources else {
            return Ok(Answer::Ignored {
                reason: "pull requests are not previewed here (no event bus)".into(),
            });
        };
        relay
            .bus
            .try_send(&super::pull_request::previewed(pr, &relay.installation))
            .await
            .map_err(|e| ConsumeError::Bus(e.to_string()))?;
        tracing::info!(pr = %pr.label(), head = %pr.head_commit, "pull request handed to the preview function");
        Ok(Answer::Previewing { delivery_id })
    }
}
