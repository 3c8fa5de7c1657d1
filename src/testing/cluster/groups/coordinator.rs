//! Which node coordinates a group or a transactional id, and `FindCoordinator`.
//!
//! Kafka places a group on a partition of `__consumer_offsets` (and a transactional id on one
//! of `__transaction_state`) by the Java hash of the key, and the partition's leader
//! coordinates it. The embedded cluster keeps no internal topics, so it does the same
//! arithmetic over 50 virtual partitions spread round robin over the nodes: the answer is
//! stable for a key and different keys land on different nodes, which is what a client's
//! coordinator lookup and its `NOT_COORDINATOR` rediscovery need.

use kafka_protocol::ResponseError;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

use super::super::server::Cx;

/// Partitions of Kafka's `__consumer_offsets` and `__transaction_state` (their defaults).
const COORDINATION_PARTITIONS: i32 = 50;
/// `FindCoordinator` key type of a transactional id.
const KEY_TYPE_TRANSACTION: i8 = 1;
/// `FindCoordinator` key type of a consumer group.
const KEY_TYPE_GROUP: i8 = 0;

/// Java's `String.hashCode` of `key` (over UTF-16 code units), as Kafka hashes group ids.
fn java_hash(key: &str) -> i32 {
    key.encode_utf16().fold(0_i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    })
}

/// The node coordinating `key` (a group id or a transactional id) in a cluster of `nodes`.
pub(crate) fn coordinator_of(key: &str, nodes: u16) -> i32 {
    // Kafka's Utils.abs: the sign bit masked off, so i32::MIN maps to 0.
    let partition = (java_hash(key) & 0x7fff_ffff) % COORDINATION_PARTITIONS;
    partition % i32::from(nodes.max(1))
}

/// Whether the node `cx` reached coordinates `key`.
pub(crate) fn is_coordinator(cx: &Cx<'_>, key: &str) -> bool {
    crate::testing::faults::coordinator_override(cx.cluster, KEY_TYPE_GROUP, key)
        .unwrap_or_else(|| coordinator_of(key, cx.cluster.options.nodes))
        == cx.node
}

/// `FindCoordinator` v0-4: one key (v0-3) or a batch of keys (v4), groups or transactional ids
/// (v0 knows only groups).
#[allow(
    clippy::needless_pass_by_value,
    reason = "dispatch hands every handler its request"
)]
pub(crate) fn find_coordinator(
    cx: &Cx<'_>,
    request: FindCoordinatorRequest,
) -> FindCoordinatorResponse {
    let known_type = matches!(request.key_type, KEY_TYPE_GROUP | KEY_TYPE_TRANSACTION);
    let locate = |key: &StrBytes| -> Coordinator {
        if !known_type {
            return Coordinator::default()
                .with_key(key.clone())
                .with_node_id(BrokerId(-1))
                .with_port(-1)
                .with_error_code(ResponseError::InvalidRequest.code())
                .with_error_message(Some(StrBytes::from_string(format!(
                    "Unknown coordinator type {}",
                    request.key_type
                ))));
        }
        if key.is_empty() && request.key_type == KEY_TYPE_GROUP {
            return Coordinator::default()
                .with_key(key.clone())
                .with_node_id(BrokerId(-1))
                .with_port(-1)
                .with_error_code(ResponseError::InvalidRequest.code());
        }
        let node = crate::testing::faults::coordinator_override(
            cx.cluster,
            request.key_type,
            key.as_str(),
        )
        .unwrap_or_else(|| coordinator_of(key.as_str(), cx.cluster.options.nodes));
        let (host, port) = cx.cluster.advertised(cx.listener, node);
        Coordinator::default()
            .with_key(key.clone())
            .with_node_id(BrokerId(node))
            .with_host(StrBytes::from_string(host))
            .with_port(i32::from(port))
    };
    if cx.version >= 4 {
        let coordinators = request.coordinator_keys.iter().map(locate).collect();
        return FindCoordinatorResponse::default().with_coordinators(coordinators);
    }
    let found = locate(&request.key);
    FindCoordinatorResponse::default()
        .with_error_code(found.error_code)
        // v0 answers no message.
        .with_error_message(found.error_message.filter(|_| cx.version >= 1))
        .with_node_id(found.node_id)
        .with_host(found.host)
        .with_port(found.port)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_like_java() {
        // "hello".hashCode() == 99162322 in Java.
        assert_eq!(java_hash("hello"), 99_162_322);
        assert_eq!(java_hash(""), 0);
    }

    #[test]
    fn coordinators_are_stable_and_spread() {
        let nodes: std::collections::BTreeSet<i32> = (0..40)
            .map(|i| coordinator_of(&format!("group-{i}"), 3))
            .collect();
        assert_eq!(nodes.len(), 3);
        assert_eq!(coordinator_of("g", 3), coordinator_of("g", 3));
        assert_eq!(coordinator_of("anything", 1), 0);
    }
}
