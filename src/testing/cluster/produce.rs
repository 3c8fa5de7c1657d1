//! Produce: validation, idempotence checks, appends.

use kafka_protocol::messages::{ProduceRequest, ProduceResponse};

use super::server::Cx;

pub(crate) async fn handle(_cx: &Cx<'_>, _request: ProduceRequest) -> Option<ProduceResponse> {
    Some(ProduceResponse::default())
}
