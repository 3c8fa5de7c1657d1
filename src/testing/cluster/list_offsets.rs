//! ListOffsets: earliest, latest, by timestamp, max timestamp.

use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};

use super::server::Cx;

pub(crate) fn handle(_cx: &Cx<'_>, _request: ListOffsetsRequest) -> ListOffsetsResponse {
    ListOffsetsResponse::default()
}
