//! Answers to the local runner's task tokens. A deployed installation's
//! tokens are Step Functions' (`SendTaskSuccess` answers them); the local
//! runner (`reconcile --local`) has no Step Functions, so `stacksync
//! approve` and `reject` write the answer here and the waiting run reads
//! it. Each token is answered once; the items expire by TTL.

use std::collections::HashMap;
use std::future::Future;

use aws_sdk_dynamodb::types::AttributeValue;

use super::item::s;
use super::schema::{PK, TTL_ATTRIBUTE};
use super::{Registry, RegistryError, Result};
use crate::clock::EpochMillis;
use crate::hash::sha256_hex;

/// Prefix of the partition key of answer items.
pub const ANSWER_PREFIX: &str = "answer#";
/// The attribute holding the answer (JSON).
const ANSWER: &str = "answer";
/// How long an answer is kept: longer than any approval waits.
const ANSWER_TTL_SECONDS: i64 = 31 * 86_400;

pub use crate::ports::Answer;

/// Answering task tokens, and reading the answers.
pub trait Answers: Send + Sync {
    /// Answers `token`, once: `false` when it was answered already.
    fn answer(
        &self,
        token: &str,
        answer: &Answer,
        now: EpochMillis,
    ) -> impl Future<Output = Result<bool>> + Send;
    /// The answer to `token`, if there is one yet.
    fn answer_of(&self, token: &str) -> impl Future<Output = Result<Option<Answer>>> + Send;
}

/// The item key of a token (tokens are long; the key is their hash).
pub fn answer_key(token: &str) -> String {
    format!("{ANSWER_PREFIX}{}", &sha256_hex(token.as_bytes())[..40])
}

impl Answers for Registry {
    async fn answer(&self, token: &str, answer: &Answer, now: EpochMillis) -> Result<bool> {
        let text = serde_json::to_string(answer).map_err(|e| RegistryError::Corrupt {
            key: answer_key(token),
            detail: e.to_string(),
        })?;
        self.put_if_absent(HashMap::from([
            (PK.to_owned(), s(answer_key(token))),
            (ANSWER.to_owned(), s(text)),
            (
                TTL_ATTRIBUTE.to_owned(),
                AttributeValue::N((now / 1000 + ANSWER_TTL_SECONDS).to_string()),
            ),
        ]))
        .await
    }

    async fn answer_of(&self, token: &str) -> Result<Option<Answer>> {
        let key = answer_key(token);
        let out = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(PK, s(&key))
            .consistent_read(true)
            .send()
            .await
            .map_err(|e| self.aws_error("GetItem", e))?;
        let Some(text) = out
            .item()
            .and_then(|i| i.get(ANSWER))
            .and_then(|v| v.as_s().ok())
        else {
            return Ok(None);
        };
        serde_json::from_str(text)
            .map(Some)
            .map_err(|e| RegistryError::Corrupt {
                key,
                detail: e.to_string(),
            })
    }
}
