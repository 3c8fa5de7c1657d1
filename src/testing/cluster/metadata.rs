//! Metadata, CreateTopics and DeleteTopics.

use kafka_protocol::messages::{
    CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse,
    MetadataRequest, MetadataResponse,
};

use super::server::Cx;

pub(crate) fn handle(_cx: &Cx<'_>, _request: MetadataRequest) -> MetadataResponse {
    MetadataResponse::default()
}

pub(crate) fn create_topics(_cx: &Cx<'_>, _request: CreateTopicsRequest) -> CreateTopicsResponse {
    CreateTopicsResponse::default()
}

pub(crate) fn delete_topics(_cx: &Cx<'_>, _request: DeleteTopicsRequest) -> DeleteTopicsResponse {
    DeleteTopicsResponse::default()
}
