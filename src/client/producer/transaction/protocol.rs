//! Which transaction protocol to speak, and the request versions each one allows.
//!
//! KIP-890 part 2 ("transaction protocol v2") is on when the cluster's finalized feature
//! `transaction.version` is 2 or more. Its client side is a set of request versions, per the
//! message specs: Produce v12 registers a partition in the transaction implicitly (no
//! `AddPartitionsToTxn`), `TxnOffsetCommit` v5 does the same for the group (no
//! `AddOffsetsToTxn`), and `EndTxn` v5 bumps the producer epoch on every transaction and returns
//! the new id and epoch. Without it (Kafka 3.x, or a 4.x cluster left at
//! `transaction.version` 0 or 1) those versions must not be used inside a transaction: the
//! classic protocol stops at Produce v11, `TxnOffsetCommit` v4 and `EndTxn` v4.

use kafka_protocol::protocol::VersionRange;

use crate::client::net::ApiVersions;
use kafka_protocol::messages::ApiKey;

/// The transaction protocol a [`TransactionalProducer`](super::TransactionalProducer) speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransactionProtocol {
    /// Partitions and groups are registered with `AddPartitionsToTxn` and `AddOffsetsToTxn`;
    /// the producer epoch stays the same from one transaction to the next.
    Classic,
    /// KIP-890: implicit registration; each `EndTxn` gives the producer a new epoch.
    V2,
}

/// The feature whose finalized level turns the v2 protocol on.
pub(crate) const FEATURE: &str = "transaction.version";

impl TransactionProtocol {
    /// The protocol the broker behind `versions` lets us speak.
    pub(crate) fn choose(versions: &ApiVersions) -> Self {
        let level = versions.finalized_level(FEATURE).unwrap_or(0);
        let reaches = |api, version| versions.range(api).is_some_and(|r| r.max >= version);
        if level >= 2
            && reaches(ApiKey::Produce, 12)
            && reaches(ApiKey::TxnOffsetCommit, 5)
            && reaches(ApiKey::EndTxn, 5)
        {
            TransactionProtocol::V2
        } else {
            TransactionProtocol::Classic
        }
    }

    /// Produce versions for transactional batches (v13 gives topics by id; the sender keeps to
    /// v12 for a topic whose id it does not know).
    pub(crate) fn produce_versions(self) -> VersionRange {
        match self {
            TransactionProtocol::Classic => VersionRange { min: 3, max: 11 },
            TransactionProtocol::V2 => VersionRange { min: 12, max: 13 },
        }
    }

    /// `TxnOffsetCommit` versions (v6 moved to topic ids).
    pub(crate) fn txn_offset_commit_versions(self) -> VersionRange {
        match self {
            TransactionProtocol::Classic => VersionRange { min: 0, max: 4 },
            TransactionProtocol::V2 => VersionRange { min: 5, max: 5 },
        }
    }

    /// `EndTxn` versions.
    pub(crate) fn end_txn_versions(self) -> VersionRange {
        match self {
            TransactionProtocol::Classic => VersionRange { min: 0, max: 4 },
            TransactionProtocol::V2 => VersionRange { min: 5, max: 5 },
        }
    }

    /// Whether partitions and groups need explicit registration.
    pub(crate) fn registers_explicitly(self) -> bool {
        self == TransactionProtocol::Classic
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::ApiVersionsResponse;
    use kafka_protocol::messages::api_versions_response::{ApiVersion, FinalizedFeatureKey};
    use kafka_protocol::protocol::StrBytes;

    fn versions(level: Option<i16>, produce_max: i16) -> ApiVersions {
        let mut r = ApiVersionsResponse::default();
        for (key, max) in [(0, produce_max), (28, 5), (26, 5)] {
            r.api_keys.push(
                ApiVersion::default()
                    .with_api_key(key)
                    .with_min_version(0)
                    .with_max_version(max),
            );
        }
        if let Some(level) = level {
            r.finalized_features.push(
                FinalizedFeatureKey::default()
                    .with_name(StrBytes::from_static_str(FEATURE))
                    .with_max_version_level(level),
            );
        }
        ApiVersions::from_response(&r)
    }

    #[test]
    fn v2_needs_the_finalized_feature_and_the_request_versions() {
        use TransactionProtocol::{Classic, V2};
        assert_eq!(TransactionProtocol::choose(&versions(Some(2), 13)), V2);
        assert_eq!(TransactionProtocol::choose(&versions(Some(1), 13)), Classic);
        assert_eq!(TransactionProtocol::choose(&versions(None, 13)), Classic);
        assert_eq!(TransactionProtocol::choose(&versions(Some(2), 11)), Classic);
    }
}
