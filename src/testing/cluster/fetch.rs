//! Fetch: reads with long polling, isolation levels and fetch sessions.

use kafka_protocol::messages::{FetchRequest, FetchResponse};

use super::server::Cx;

pub(crate) async fn handle(_cx: &Cx<'_>, _request: FetchRequest) -> FetchResponse {
    FetchResponse::default()
}
