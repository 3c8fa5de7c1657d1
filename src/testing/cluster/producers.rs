//! Producer ids, epochs and sequence numbers (idempotence and fencing).

use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse};

use super::server::Cx;

/// Every producer id the cluster handed out, with its epoch and per-partition sequences.
#[derive(Debug, Default)]
pub(crate) struct Producers {}

pub(crate) fn init_producer_id(
    _cx: &Cx<'_>,
    _request: InitProducerIdRequest,
) -> InitProducerIdResponse {
    InitProducerIdResponse::default()
}
