//! Transactions: the coordinator's side (partitions and offsets added, commit and abort).

use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse, EndTxnRequest, EndTxnResponse, TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
};

use kafka_protocol::ResponseError;
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse};

use super::server::Cx;
use super::state::State;

/// Every transactional id the cluster knows.
#[derive(Debug, Default)]
pub(crate) struct Transactions {}

/// InitProducerId with a transactional id: the id's producer id, its epoch bumped (fencing the
/// previous holder and aborting its open transaction).
pub(crate) fn init_producer_id(
    _cx: &Cx<'_>,
    _request: InitProducerIdRequest,
) -> InitProducerIdResponse {
    InitProducerIdResponse::default()
}

/// Checks a transactional produce to `topic`/`partition` by `producer_id` at `epoch`: the
/// producer must hold the current epoch of its transactional id and have added the partition
/// to its open transaction. Called by Produce, under the state lock, before it appends.
pub(crate) fn check_produce(
    _state: &State,
    _producer_id: i64,
    _epoch: i16,
    _topic: &str,
    _partition: i32,
) -> Result<(), ResponseError> {
    Ok(())
}

pub(crate) fn add_partitions(
    _cx: &Cx<'_>,
    _request: AddPartitionsToTxnRequest,
) -> AddPartitionsToTxnResponse {
    AddPartitionsToTxnResponse::default()
}

pub(crate) fn add_offsets(
    _cx: &Cx<'_>,
    _request: AddOffsetsToTxnRequest,
) -> AddOffsetsToTxnResponse {
    AddOffsetsToTxnResponse::default()
}

pub(crate) fn end(_cx: &Cx<'_>, _request: EndTxnRequest) -> EndTxnResponse {
    EndTxnResponse::default()
}

pub(crate) fn offset_commit(
    _cx: &Cx<'_>,
    _request: TxnOffsetCommitRequest,
) -> TxnOffsetCommitResponse {
    TxnOffsetCommitResponse::default()
}

/// Whether a transaction holds offsets for `group` on `topic`/`partition` that are not yet
/// committed or aborted (`OffsetFetch` with `require_stable` then answers
/// `UNSTABLE_OFFSET_COMMIT`).
pub(crate) fn has_pending_offsets(
    _state: &State,
    _group: &str,
    _topic: &str,
    _partition: i32,
) -> bool {
    false
}
