//! The embedded cluster answers every version it advertises, not only the ones this crate's
//! client picks: other clients (librdkafka 2.0 in kcat negotiates `ListOffsets` v2) get an
//! answer encoded at their version, where a field the version lacks stays at its default.
#![cfg(feature = "testing")]

use std::net::SocketAddr;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{
    ApiKey, BrokerId, ListOffsetsRequest, ListOffsetsResponse, RequestHeader, ResponseHeader,
    TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use ruststream_kafka::testing::{ClusterOptions, EmbeddedCluster};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Sends one `ListOffsets` at `version` for `topic[0]` at `timestamp` and decodes the answer.
async fn list_offsets(
    stream: &mut TcpStream,
    version: i16,
    topic: &str,
    timestamp: i64,
) -> ListOffsetsResponse {
    let header = RequestHeader::default()
        .with_request_api_key(ApiKey::ListOffsets as i16)
        .with_request_api_version(version)
        .with_correlation_id(i32::from(version))
        .with_client_id(Some(StrBytes::from_static_str("old-client")));
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![
            ListOffsetsTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
                .with_partitions(vec![
                    ListOffsetsPartition::default()
                        .with_partition_index(0)
                        .with_timestamp(timestamp),
                ]),
        ]);
    let mut body = BytesMut::new();
    header
        .encode(&mut body, ListOffsetsRequest::header_version(version))
        .expect("header");
    request.encode(&mut body, version).expect("request");
    let mut frame = BytesMut::new();
    frame.put_i32(i32::try_from(body.len()).expect("small"));
    frame.extend_from_slice(&body);
    stream.write_all(&frame).await.expect("sent");
    let size = stream.read_i32().await.unwrap_or_else(|e| {
        panic!("ListOffsets v{version}: the cluster closed the connection: {e}")
    });
    let mut answer = vec![0; usize::try_from(size).expect("positive")];
    stream.read_exact(&mut answer).await.expect("answer");
    let mut answer = Bytes::from(answer);
    let header = ResponseHeader::decode(&mut answer, ListOffsetsResponse::header_version(version))
        .expect("response header");
    assert_eq!(header.correlation_id, i32::from(version));
    let response = ListOffsetsResponse::decode(&mut answer, version).expect("response");
    assert!(!answer.has_remaining(), "v{version}: bytes left over");
    response
}

#[tokio::test]
async fn list_offsets_is_answered_at_every_advertised_version() {
    let cluster = EmbeddedCluster::new(ClusterOptions::default());
    let bound = cluster
        .listen_on(&[SocketAddr::from(([127, 0, 0, 1], 0))])
        .await
        .expect("listens");
    assert!(cluster.create_topic("old-versions", 1));
    for value in ["a", "b", "c"] {
        cluster
            .produce_to("old-versions", 0, None, value.as_bytes(), &[])
            .expect("written");
    }
    let mut stream = TcpStream::connect(bound[0]).await.expect("connects");
    for version in 1..=8 {
        for (timestamp, want) in [(-2, 0), (-1, 3)] {
            let response = list_offsets(&mut stream, version, "old-versions", timestamp).await;
            let partition = &response.topics[0].partitions[0];
            assert_eq!(partition.error_code, 0, "v{version}");
            assert_eq!(partition.offset, want, "v{version} at {timestamp}");
            let epoch = if version >= 4 { 0 } else { -1 };
            assert_eq!(partition.leader_epoch, epoch, "v{version}");
        }
    }
}
