//! A pull request's event: checked as a push is (the signing secret's
//! repositories), forks kept out unless the installation previews them,
//! and handed to the preview function as a `Pull Request Changed` event.
//! The webhook, behind a public URL, previews nothing itself: making
//! change sets is the preview function's, with its own role.

use super::{Answer, Caller, Response, Webhook, repository_not_allowed};
use crate::clock::EpochMillis;
use crate::notice::{Notice, NoticeKind};
use crate::ports::{SecretStore, Starter};
use crate::pull_request::{PrState, PullRequest};
use crate::registry::{Deliveries, Entries, RegistrySources};
use crate::triggers::webhook::PullRequestDelivery;

/// Why an open pull request from a fork is not previewed.
pub const FORK_NOT_PREVIEWED: &str = "a pull request from a fork is not previewed: the installation \
     does not allow it (PreviewForks)";

impl<R: Entries + Deliveries + RegistrySources, X: Starter, K: SecretStore> Webhook<R, X, K> {
    /// Answers a pull request's event: 202 once it is handed to the preview
    /// function, 200 when there is nothing to preview.
    pub(super) async fn pull_request(
        &self,
        delivery: &PullRequestDelivery,
        allowed: Option<&[String]>,
        caller: Caller,
        now: EpochMillis,
    ) -> Response {
        let pr = &delivery.pull_request;
        if let Some(refusal) = repository_not_allowed(&pr.repository_urls, allowed) {
            let caller = Caller {
                delivery: delivery.delivery_id.clone(),
                ..caller
            };
            return caller.refuse(refusal);
        }
        let Some(relay) = &self.registry_sources else {
            return ignored("pull requests are not previewed here (no event bus)");
        };
        // A fork's merge is previewed by the run that follows it; its
        // opening only where the installation allows it.
        if pr.fork && pr.state == PrState::Open && !relay.preview_forks {
            return ignored(FORK_NOT_PREVIEWED);
        }
        if let Some(queue) = self.queue.get() {
            return self.queue_pull_request(queue, delivery, now).await;
        }
        match self.followed(pr).await {
            Ok(true) => {}
            Ok(false) => {
                return Response::answer(
                    200,
                    &Answer::NoFollower {
                        sources: pr.base_keys(),
                    },
                );
            }
            Err(e) => {
                tracing::error!("{e}");
                return Response::error(
                    503,
                    "Unavailable",
                    "the registry could not be reached; retry the delivery",
                );
            }
        }
        let notice = previewed(pr, &relay.installation);
        if let Err(e) = relay.bus.try_send(&notice).await {
            tracing::error!(error = %e, pr = %pr.label(), "the pull request could not be handed to the preview function");
            return Response::error(
                503,
                "Unavailable",
                "the event bus could not be reached; retry the delivery",
            );
        }
        let id = format!("{}#{}", delivery.provider.as_str(), delivery.delivery_id);
        // Recorded after the hand-over, as a push's starts: a redelivery of
        // one that failed hands it over again (the preview of one head
        // commit is the same whichever delivery asks).
        let _ = self
            .registry
            .record_delivery(&id, now, super::DELIVERY_TTL_SECONDS)
            .await;
        tracing::info!(pr = %pr.label(), head = %pr.head_commit, state = ?pr.state, "pull request handed to the preview function");
        Response::answer(
            202,
            &Answer::Previewing {
                delivery_id: delivery.delivery_id.clone(),
            },
        )
    }

    /// Whether any registered stack, or any registry source, follows the
    /// pull request's base repository and branch.
    pub(super) async fn followed(
        &self,
        pr: &PullRequest,
    ) -> Result<bool, crate::registry::RegistryError> {
        let keys = pr.base_keys();
        for key in &keys {
            if !self.registry.followers(key).await?.is_empty() {
                return Ok(true);
            }
        }
        let sources = self.registry.registry_sources().await?;
        Ok(sources.iter().any(|s| keys.contains(&s.spec.key())))
    }
}

/// The `Pull Request Changed` event the preview function takes.
pub(super) fn previewed(pr: &PullRequest, installation: &str) -> Notice {
    Notice {
        kind: Some(NoticeKind::PullRequestChanged),
        installation: installation.to_owned(),
        revision: Some(pr.head_commit.clone()),
        pull_request: Some(pr.clone()),
        ..Notice::default()
    }
}

fn ignored(reason: &str) -> Response {
    Response::answer(
        200,
        &Answer::Ignored {
            reason: reason.to_owned(),
        },
    )
}
