//! The API versions the embedded brokers speak, and the `ApiVersions` answer.

use kafka_protocol::messages::ApiKey;
use kafka_protocol::messages::ApiVersionsResponse;
use kafka_protocol::messages::api_versions_response::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::protocol::StrBytes;

use super::server::Cx;

/// Every API the embedded brokers answer, with the versions they speak. A client negotiates
/// within these exactly as with a real broker.
pub(crate) const SUPPORTED: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 3, 12),
    (ApiKey::Fetch, 4, 12),
    (ApiKey::ListOffsets, 1, 8),
    (ApiKey::Metadata, 4, 13),
    (ApiKey::OffsetCommit, 2, 9),
    (ApiKey::OffsetFetch, 1, 7),
    // The group APIs from v0, as Kafka 4 advertises them: librdkafka (kcat) turns its
    // consumer groups on only where v0 of each is offered.
    (ApiKey::FindCoordinator, 0, 4),
    (ApiKey::JoinGroup, 0, 9),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 5),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::DescribeGroups, 0, 5),
    (ApiKey::ListGroups, 0, 5),
    (ApiKey::ApiVersions, 0, 3),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::DeleteTopics, 1, 6),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::InitProducerId, 0, 5),
    (ApiKey::AddPartitionsToTxn, 0, 3),
    (ApiKey::AddOffsetsToTxn, 0, 3),
    (ApiKey::EndTxn, 0, 5),
    (ApiKey::TxnOffsetCommit, 0, 5),
    (ApiKey::ConsumerGroupHeartbeat, 0, 1),
    // SASL for `AWS_MSK_IAM` on the TCP listeners (`msk_iam`); KIP-152 framing only.
    (ApiKey::SaslHandshake, 1, 1),
    (ApiKey::SaslAuthenticate, 0, 2),
];

/// The feature that turns the KIP-890 transaction protocol on at level 2.
const TRANSACTION_VERSION: &str = "transaction.version";

/// The first versions of the APIs that speak the KIP-890 transaction protocol: a cluster below
/// `transaction.version` 2 does not offer them, as Kafka does not.
const TRANSACTION_V2: &[(ApiKey, i16)] = &[
    (ApiKey::Produce, 12),
    (ApiKey::TxnOffsetCommit, 5),
    (ApiKey::EndTxn, 5),
];

/// The versions of `api` a cluster at `transaction_version` speaks.
fn range(api: ApiKey, transaction_version: i16) -> Option<(i16, i16)> {
    let (_, min, max) = SUPPORTED.iter().find(|(key, _, _)| *key == api)?;
    let cap = TRANSACTION_V2
        .iter()
        .find(|(key, _)| *key == api && transaction_version < 2)
        .map_or(*max, |(_, first)| first - 1);
    Some((*min, (*max).min(cap)))
}

/// Whether `api` at `version` is answered by a cluster at `transaction_version`.
pub(crate) fn supported(api: ApiKey, version: i16, transaction_version: i16) -> bool {
    range(api, transaction_version).is_some_and(|(min, max)| (min..=max).contains(&version))
}

/// The `ApiVersions` answer; a version we do not speak gets `UNSUPPORTED_VERSION` in v0 form,
/// which the client retries at v0.
pub(crate) fn answer(cx: &Cx<'_>) -> (ApiVersionsResponse, i16) {
    let level = cx.cluster.options.transaction_version;
    let keys = SUPPORTED
        .iter()
        .filter_map(|(key, _, _)| {
            let (min, max) = range(*key, level)?;
            Some(
                ApiVersion::default()
                    .with_api_key(*key as i16)
                    .with_min_version(min)
                    .with_max_version(max),
            )
        })
        .collect();
    let name = StrBytes::from_static_str(TRANSACTION_VERSION);
    let response = ApiVersionsResponse::default()
        .with_api_keys(keys)
        .with_supported_features(vec![
            SupportedFeatureKey::default()
                .with_name(name.clone())
                .with_min_version(0)
                .with_max_version(2),
        ])
        .with_finalized_features_epoch(1)
        // A feature at level 0 is not finalized, and Kafka does not list it.
        .with_finalized_features(
            (level > 0)
                .then(|| {
                    FinalizedFeatureKey::default()
                        .with_name(name)
                        .with_min_version_level(level)
                        .with_max_version_level(level)
                })
                .into_iter()
                .collect(),
        );
    if supported(ApiKey::ApiVersions, cx.version, level) {
        (response, cx.version)
    } else {
        (response.with_error_code(35), 0)
    }
}
