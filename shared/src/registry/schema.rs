//! The registry table's schema, written once: the CLI creates it from this,
//! the functions and tests read and write by these names, and `template.yaml`
//! is checked against it.
//!
//! | item | `pk` | attributes |
//! |---|---|---|
//! | a stack | `stack#<name>` | `name`, `schemaVersion`, `spec` (map), `specVersion`, `specHash`, `status` (map), `suspended`, `deletionRequestedAt`, `leaseOwner`, `leaseExpiresAt`, `nextReconcileAt`, `schedShard`, `sourceKey`, `createdAt`, `updatedAt` |
//! | a webhook delivery | `delivery#<id>` | `expiresAt` (TTL) |
//! | a source the scheduler watches | `source#<sourceKey>` | `url`, `ref`, `head`, `followersCheckedAt`, `schedShard` = `sources`, `nextReconcileAt` = 0 |
//! | a stack an entry drives | `claim#<account>#<region>#<stack name>` | `name` (the entry's) |
//! | a change approved for a fleet | `approved#<fleet>#<revision>#<rows hash>` | `by`, `expiresAt` (TTL) ([`super::fleet_approvals`]) |
//!
//! Stack items also carry `stackName` (the CloudFormation stack's name, for
//! the `by-stack-name` index that CloudFormation events are matched through)
//! and `watch` (the phase, and the stack as the last successful run left it:
//! what the scheduler's health check reads, through the narrow `by-shard`
//! index, for every stack on every run).

use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection,
    ProjectionType, ScalarAttributeType,
};

/// The partition key of every item.
pub const PK: &str = "pk";
/// Prefix of the partition key of stack items.
pub const STACK_PREFIX: &str = "stack#";
/// Prefix of the partition key of webhook-delivery items.
pub const DELIVERY_PREFIX: &str = "delivery#";
/// Prefix of the partition key of claim items: one per CloudFormation stack
/// an entry drives ([`claim_key`]), naming the entry, written in the same
/// transaction as the entry, so that two entries never drive one stack,
/// however many applies run at once.
pub const CLAIM_PREFIX: &str = "claim#";
/// The TTL attribute (epoch seconds) of items that expire.
pub const TTL_ATTRIBUTE: &str = "expiresAt";

/// The scheduler's index: due stacks, by shard, ordered by `nextReconcileAt`.
pub const INDEX_BY_NEXT_RECONCILE: &str = "by-next-reconcile";
/// The webhook's index: stacks by normalized source URL and ref.
pub const INDEX_BY_SOURCE: &str = "by-source";
/// The CloudFormation events' index: stacks by CloudFormation stack name.
pub const INDEX_BY_STACK_NAME: &str = "by-stack-name";
/// The health check's index: every stack, by shard, with only what the
/// check compares ([`WATCH_PROJECTION`]), so reading all of them is cheap.
pub const INDEX_BY_SHARD: &str = "by-shard";
/// The attributes the `by-shard` index holds besides the keys.
pub const WATCH_PROJECTION: [&str; 7] = [
    attr::NAME,
    attr::STACK_NAME,
    attr::WATCH,
    attr::SUSPENDED,
    attr::DELETION_REQUESTED_AT,
    attr::LEASE_EXPIRES_AT,
    attr::NEXT_RECONCILE_AT,
];
/// Prefix of the partition key of the scheduler's source items.
pub const SOURCE_PREFIX: &str = "source#";
/// The `schedShard` of source items: they sit in the scheduler's index apart
/// from the stacks (`nextReconcileAt` 0: looked at on every run).
pub const SOURCES_SHARD: &str = "sources";

/// The scheduler index is spread over this many partition values
/// (`schedShard` = "0".."3"), so no single index partition gets every write.
pub const SCHED_SHARDS: u32 = 4;

/// The schema of the stack items this version writes (`schemaVersion`).
/// An item of a later schema, or whose spec holds fields this version does
/// not know, is read (listed, shown, scheduled) but never acted on: a run
/// of it ends `Failed (Unsupported)`, saying why.
pub const ITEM_SCHEMA_VERSION: u64 = 1;

/// The claim item's key of the stack `spec` drives: its account (the
/// `assumeRoleArn`'s; empty: the installation's), its region (`home`, the
/// registry's, when the spec names none) and its name.
pub fn claim_key(spec: &crate::spec::StackSpec, home: Option<&str>) -> String {
    let (account, region, name) = spec.stack_key(home);
    format!(
        "{CLAIM_PREFIX}{}#{}#{name}",
        account.unwrap_or_default(),
        region.unwrap_or_default()
    )
}

/// Attribute names.
pub mod attr {
    pub const NAME: &str = "name";
    pub const SPEC: &str = "spec";
    pub const FLEET: &str = "fleet";
    pub const SPEC_VERSION: &str = "specVersion";
    pub const SPEC_HASH: &str = "specHash";
    pub const SCHEMA_VERSION: &str = "schemaVersion";
    pub const STATUS: &str = "status";
    pub const SUSPENDED: &str = "suspended";
    /// The spec's own `suspend`, beside it, for readers that may not read
    /// the spec (the triggers).
    pub const SPEC_SUSPEND: &str = "specSuspend";
    pub const DELETION_REQUESTED_AT: &str = "deletionRequestedAt";
    pub const LEASE_OWNER: &str = "leaseOwner";
    pub const LEASE_EXPIRES_AT: &str = "leaseExpiresAt";
    /// When the lease's owner took it.
    pub const LEASE_TAKEN_AT: &str = "leaseTakenAt";
    /// The lease holder parked until its stack's event (`registry::Parked`).
    pub const LEASE_PARKED: &str = "leaseParked";
    pub const NEXT_RECONCILE_AT: &str = "nextReconcileAt";
    pub const SCHED_SHARD: &str = "schedShard";
    pub const SOURCE_KEY: &str = "sourceKey";
    pub const CREATED_AT: &str = "createdAt";
    pub const UPDATED_AT: &str = "updatedAt";
    pub const STACK_NAME: &str = "stackName";
    /// Which registry source (file, commit) wrote the entry; absent: the CLI.
    pub const OWNER: &str = "owner";
    /// The last preview posted on a pull request (`approval: pullRequest`).
    pub const REVIEWED: &str = "reviewed";
    /// The phase and the stack as last seen (`registry::schedule::Watch`).
    pub const WATCH: &str = "watch";
    /// Source items: the URL to list refs from, the ref, the last head seen.
    pub const URL: &str = "url";
    pub const REF: &str = "ref";
    pub const HEAD: &str = "head";
    /// The secret that opens the source (an ARN; never the secret).
    pub const CREDENTIALS: &str = "credentialsSecret";
    pub const FOLLOWERS_CHECKED_AT: &str = "followersCheckedAt";
}

/// A key attribute: name and DynamoDB scalar type (`S` or `N`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyAttribute {
    pub name: &'static str,
    pub kind: &'static str,
}

/// A global secondary index: name, partition key, sort key, and the
/// attributes it holds besides the keys (`None`: all of them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexSchema {
    pub name: &'static str,
    pub partition: KeyAttribute,
    pub sort: KeyAttribute,
    pub include: Option<&'static [&'static str]>,
}

/// The table's partition key.
pub const TABLE_KEY: KeyAttribute = KeyAttribute {
    name: PK,
    kind: "S",
};

/// The table's four indexes.
pub const INDEXES: [IndexSchema; 4] = [
    IndexSchema {
        name: INDEX_BY_NEXT_RECONCILE,
        partition: KeyAttribute {
            name: attr::SCHED_SHARD,
            kind: "S",
        },
        sort: KeyAttribute {
            name: attr::NEXT_RECONCILE_AT,
            kind: "N",
        },
        include: None,
    },
    IndexSchema {
        name: INDEX_BY_SOURCE,
        partition: KeyAttribute {
            name: attr::SOURCE_KEY,
            kind: "S",
        },
        sort: KeyAttribute {
            name: PK,
            kind: "S",
        },
        include: None,
    },
    IndexSchema {
        name: INDEX_BY_STACK_NAME,
        partition: KeyAttribute {
            name: attr::STACK_NAME,
            kind: "S",
        },
        sort: KeyAttribute {
            name: PK,
            kind: "S",
        },
        include: None,
    },
    IndexSchema {
        name: INDEX_BY_SHARD,
        partition: KeyAttribute {
            name: attr::SCHED_SHARD,
            kind: "S",
        },
        sort: KeyAttribute {
            name: PK,
            kind: "S",
        },
        include: Some(&WATCH_PROJECTION),
    },
];

/// The partition key of a stack's item.
pub fn stack_key(name: &str) -> String {
    format!("{STACK_PREFIX}{name}")
}

/// The scheduler shard of a stack: stable, spread by name.
pub fn sched_shard(name: &str) -> String {
    let h = name
        .bytes()
        .fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
    (h % SCHED_SHARDS).to_string()
}

fn scalar(kind: &str) -> ScalarAttributeType {
    if kind == "N" {
        ScalarAttributeType::N
    } else {
        ScalarAttributeType::S
    }
}

fn key(
    attr: KeyAttribute,
    key_type: KeyType,
) -> Result<KeySchemaElement, aws_sdk_dynamodb::error::BuildError> {
    KeySchemaElement::builder()
        .attribute_name(attr.name)
        .key_type(key_type)
        .build()
}

/// Everything `CreateTable` needs: attribute definitions, key, indexes.
pub fn create_table_request(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
) -> Result<
    aws_sdk_dynamodb::operation::create_table::builders::CreateTableFluentBuilder,
    aws_sdk_dynamodb::error::BuildError,
> {
    let mut attributes = vec![TABLE_KEY];
    for index in INDEXES {
        for a in [index.partition, index.sort] {
            if !attributes.contains(&a) {
                attributes.push(a);
            }
        }
    }
    let mut request = client
        .create_table()
        .table_name(table)
        .billing_mode(BillingMode::PayPerRequest)
        .key_schema(key(TABLE_KEY, KeyType::Hash)?);
    for a in attributes {
        request = request.attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name(a.name)
                .attribute_type(scalar(a.kind))
                .build()?,
        );
    }
    for index in INDEXES {
        request = request.global_secondary_indexes(
            GlobalSecondaryIndex::builder()
                .index_name(index.name)
                .key_schema(key(index.partition, KeyType::Hash)?)
                .key_schema(key(index.sort, KeyType::Range)?)
                .projection(match index.include {
                    None => Projection::builder()
                        .projection_type(ProjectionType::All)
                        .build(),
                    Some(attributes) => Projection::builder()
                        .projection_type(ProjectionType::Include)
                        .set_non_key_attributes(Some(
                            attributes.iter().map(|a| (*a).to_owned()).collect(),
                        ))
                        .build(),
                })
                .build()?,
        );
    }
    Ok(request)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_are_stable_and_in_range() {
        assert_eq!(sched_shard("orders-queue"), sched_shard("orders-queue"));
        let shards: std::collections::BTreeSet<String> = (0..100)
            .map(|i| sched_shard(&format!("stack-{i}")))
            .collect();
        assert_eq!(shards.len(), SCHED_SHARDS as usize);
    }
}
