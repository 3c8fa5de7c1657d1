//! Which handler answers which API.

use bytes::Bytes;
use kafka_protocol::messages::ApiKey;

use super::server::{Close, Cx, decode, encode};
use super::{configs, fetch, groups, list_offsets, metadata, produce, producers, txn};

/// Decodes the body of `api`, runs its handler and encodes the answer.
pub(crate) async fn dispatch(
    cx: &Cx<'_>,
    api: ApiKey,
    body: Bytes,
) -> Result<Option<Bytes>, Close> {
    match api {
        ApiKey::Produce => {
            let request = decode(cx, body)?;
            match produce::handle(cx, request).await {
                Some(response) => encode(cx, &response),
                None => Ok(None),
            }
        }
        ApiKey::Fetch => encode(cx, &fetch::handle(cx, decode(cx, body)?).await),
        ApiKey::ListOffsets => encode(cx, &list_offsets::handle(cx, decode(cx, body)?)),
        ApiKey::Metadata => encode(cx, &metadata::handle(cx, decode(cx, body)?)),
        ApiKey::CreateTopics => encode(cx, &metadata::create_topics(cx, decode(cx, body)?)),
        ApiKey::DeleteTopics => encode(cx, &metadata::delete_topics(cx, decode(cx, body)?)),
        ApiKey::DescribeConfigs => encode(cx, &configs::describe(cx, decode(cx, body)?)),
        ApiKey::InitProducerId => {
            let request: kafka_protocol::messages::InitProducerIdRequest = decode(cx, body)?;
            // A transactional id is the transaction coordinator's; a plain idempotent producer
            // only needs an id.
            if request.transactional_id.is_some() {
                encode(cx, &txn::init_producer_id(cx, request))
            } else {
                encode(cx, &producers::init_producer_id(cx, request))
            }
        }
        ApiKey::AddPartitionsToTxn => encode(cx, &txn::add_partitions(cx, decode(cx, body)?)),
        ApiKey::AddOffsetsToTxn => encode(cx, &txn::add_offsets(cx, decode(cx, body)?)),
        ApiKey::EndTxn => encode(cx, &txn::end(cx, decode(cx, body)?)),
        ApiKey::TxnOffsetCommit => encode(cx, &txn::offset_commit(cx, decode(cx, body)?)),
        ApiKey::FindCoordinator => encode(cx, &groups::find_coordinator(cx, decode(cx, body)?)),
        ApiKey::JoinGroup => encode(cx, &groups::join(cx, decode(cx, body)?).await),
        ApiKey::SyncGroup => encode(cx, &groups::sync(cx, decode(cx, body)?).await),
        ApiKey::Heartbeat => encode(cx, &groups::heartbeat(cx, decode(cx, body)?)),
        ApiKey::LeaveGroup => encode(cx, &groups::leave(cx, decode(cx, body)?)),
        ApiKey::ListGroups => encode(cx, &groups::list(cx, decode(cx, body)?)),
        ApiKey::DescribeGroups => encode(cx, &groups::describe(cx, decode(cx, body)?)),
        ApiKey::ConsumerGroupHeartbeat => {
            encode(cx, &groups::consumer_heartbeat(cx, decode(cx, body)?))
        }
        ApiKey::OffsetCommit => encode(cx, &groups::offset_commit(cx, decode(cx, body)?)),
        ApiKey::OffsetFetch => encode(cx, &groups::offset_fetch(cx, decode(cx, body)?)),
        other => Err(Close::Malformed(format!("{other:?} is not served"))),
    }
}
