//! Producer ids, epochs and sequence numbers (idempotence and fencing).

use std::collections::HashMap;

use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse};

use super::server::Cx;

/// Every producer id the cluster handed out, with its epoch and per-partition sequences.
#[derive(Debug, Default)]
pub(crate) struct Producers {
    /// The last producer id handed out.
    last_id: i64,
    /// The current epoch of each producer id a coordinator moved on.
    epochs: HashMap<i64, i16>,
}

impl Producers {
    /// A producer id never handed out before.
    pub(crate) fn allocate_id(&mut self) -> i64 {
        self.last_id += 1;
        self.last_id
    }

    /// Records that `producer_id` now holds `epoch` (a transaction coordinator bumped it):
    /// batches of older epochs are fenced from now on.
    pub(crate) fn bump(&mut self, producer_id: i64, epoch: i16) {
        let current = self.epochs.entry(producer_id).or_insert(epoch);
        *current = (*current).max(epoch);
    }
}

pub(crate) fn init_producer_id(
    _cx: &Cx<'_>,
    _request: InitProducerIdRequest,
) -> InitProducerIdResponse {
    InitProducerIdResponse::default()
}
