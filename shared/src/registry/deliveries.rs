//! Webhook delivery ids: each claimed once, so a redelivered or replayed
//! push starts nothing twice. The items expire by DynamoDB's TTL.

use std::collections::HashMap;
use std::future::Future;

use aws_sdk_dynamodb::types::AttributeValue;

use super::item::s;
use super::schema::{self, PK};
use super::{Registry, Result};
use crate::clock::EpochMillis;

/// Claiming delivery ids.
pub trait Deliveries: Send + Sync {
    /// Records a delivery id, once: `true` the first time, `false` for a
    /// delivery seen before (a conditional put, so two concurrent copies
    /// cannot both get `true`). The claim expires `ttl_seconds` after `now`.
    fn record_delivery(
        &self,
        id: &str,
        now: EpochMillis,
        ttl_seconds: i64,
    ) -> impl Future<Output = Result<bool>> + Send;
}

impl Deliveries for Registry {
    async fn record_delivery(&self, id: &str, now: EpochMillis, ttl_seconds: i64) -> Result<bool> {
        let expires = now / 1000 + ttl_seconds;
        self.put_if_absent(HashMap::from([
            (PK.to_owned(), s(format!("{}{id}", schema::DELIVERY_PREFIX))),
            (
                schema::TTL_ATTRIBUTE.to_owned(),
                AttributeValue::N(expires.to_string()),
            ),
        ]))
        .await
    }
}
