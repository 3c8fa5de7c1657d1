//! The API versions the embedded brokers speak, and the ApiVersions answer.

use kafka_protocol::messages::ApiKey;
use kafka_protocol::messages::ApiVersionsResponse;
use kafka_protocol::messages::api_versions_response::ApiVersion;

use super::server::Cx;

/// Every API the embedded brokers answer, with the versions they speak. A client negotiates
/// within these exactly as with a real broker.
pub(crate) const SUPPORTED: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 3, 11),
    (ApiKey::Fetch, 4, 12),
    (ApiKey::ListOffsets, 1, 8),
    (ApiKey::Metadata, 4, 12),
    (ApiKey::OffsetCommit, 2, 9),
    (ApiKey::OffsetFetch, 1, 7),
    (ApiKey::FindCoordinator, 1, 4),
    (ApiKey::JoinGroup, 5, 9),
    (ApiKey::Heartbeat, 3, 4),
    (ApiKey::LeaveGroup, 3, 5),
    (ApiKey::SyncGroup, 3, 5),
    (ApiKey::DescribeGroups, 0, 5),
    (ApiKey::ApiVersions, 0, 3),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::DeleteTopics, 1, 6),
    (ApiKey::InitProducerId, 0, 5),
    (ApiKey::AddPartitionsToTxn, 0, 3),
    (ApiKey::AddOffsetsToTxn, 0, 3),
    (ApiKey::EndTxn, 0, 3),
    (ApiKey::TxnOffsetCommit, 0, 3),
    (ApiKey::ConsumerGroupHeartbeat, 0, 1),
];

/// Whether `api` at `version` is answered.
pub(crate) fn supported(api: ApiKey, version: i16) -> bool {
    SUPPORTED
        .iter()
        .any(|(key, min, max)| *key == api && (*min..=*max).contains(&version))
}

/// The ApiVersions answer; a version we do not speak gets `UNSUPPORTED_VERSION` in v0 form,
/// which the client retries at v0.
pub(crate) fn answer(cx: &Cx<'_>) -> (ApiVersionsResponse, i16) {
    let keys = SUPPORTED
        .iter()
        .map(|(key, min, max)| {
            ApiVersion::default()
                .with_api_key(*key as i16)
                .with_min_version(*min)
                .with_max_version(*max)
        })
        .collect();
    let response = ApiVersionsResponse::default().with_api_keys(keys);
    if supported(ApiKey::ApiVersions, cx.version) {
        (response, cx.version)
    } else {
        (response.with_error_code(35), 0)
    }
}
