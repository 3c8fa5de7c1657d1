//! Transactions: the coordinator's side (partitions and offsets added, commit and abort).

use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse, EndTxnRequest, EndTxnResponse, TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
};

use super::server::Cx;

/// Every transactional id the cluster knows.
#[derive(Debug, Default)]
pub(crate) struct Transactions {}

pub(crate) fn add_partitions(
    _cx: &Cx<'_>,
    _request: AddPartitionsToTxnRequest,
) -> AddPartitionsToTxnResponse {
    AddPartitionsToTxnResponse::default()
}

pub(crate) fn add_offsets(_cx: &Cx<'_>, _request: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse {
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
