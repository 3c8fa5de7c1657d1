//! What the structural response check costs next to kafka-protocol's own decoding.
//!
//! ```text
//! cargo bench --bench response_check
//! ```
//!
//! Prints nanoseconds per response for a large Fetch answer (records are one byte blob, so
//! the check is cheap) and a Metadata answer with 1000 partitions (many small fields).

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::MetadataResponse;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use ruststream_kafka::client::check_response;

fn main() {
    use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
    use kafka_protocol::messages::metadata_response::{
        MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
    };
    use kafka_protocol::messages::{BrokerId, FetchResponse, TopicName};

    /// The fastest of 20 batches of 100 runs, per run: the least disturbed by other load.
    fn fastest(mut run: impl FnMut()) -> u128 {
        (0..20)
            .map(|_| {
                let start = std::time::Instant::now();
                for _ in 0..100 {
                    run();
                }
                start.elapsed().as_nanos() / 100
            })
            .min()
            .unwrap_or_default()
    }

    fn time<T: Decodable>(what: &str, api_key: i16, version: i16, body: &Bytes) {
        assert_eq!(check_response(api_key, version, body), Ok(()));
        let check = fastest(|| {
            std::hint::black_box(check_response(api_key, version, std::hint::black_box(body)))
                .expect("passes");
        });
        let decode = fastest(|| {
            let mut b = body.clone();
            std::hint::black_box(T::decode(&mut b, version).expect("decodes"));
        });
        println!(
            "{what} ({} bytes): check {check} ns, kafka-protocol decode {decode} ns",
            body.len()
        );
    }

    let topics = (0..10)
        .map(|t| {
            FetchableTopicResponse::default()
                .with_topic(TopicName(StrBytes::from_string(format!("topic-{t}"))))
                .with_partitions(
                    (0..10)
                        .map(|p| {
                            PartitionData::default()
                                .with_partition_index(p)
                                .with_high_watermark(1_000_000)
                                .with_records(Some(Bytes::from(vec![0x5a; 256 * 1024])))
                        })
                        .collect(),
                )
        })
        .collect();
    let fetch = FetchResponse::default().with_responses(topics);
    let mut buf = BytesMut::new();
    fetch.encode(&mut buf, 16).expect("encodes");
    time::<FetchResponse>(
        "Fetch v16, 10 topics x 10 partitions x 256 KiB",
        1,
        16,
        &buf.freeze(),
    );

    let partitions = (0..1000)
        .map(|p| {
            MetadataResponsePartition::default()
                .with_partition_index(p)
                .with_leader_id(BrokerId(p % 5))
                .with_leader_epoch(3)
                .with_replica_nodes((0..3).map(|r| BrokerId((p + r) % 5)).collect())
                .with_isr_nodes((0..3).map(|r| BrokerId((p + r) % 5)).collect())
        })
        .collect();
    let metadata = MetadataResponse::default()
        .with_brokers(
            (0..5)
                .map(|b| {
                    MetadataResponseBroker::default()
                        .with_node_id(BrokerId(b))
                        .with_host(StrBytes::from_string(format!("broker-{b}.example")))
                        .with_port(9092)
                })
                .collect(),
        )
        .with_topics(vec![
            MetadataResponseTopic::default()
                .with_name(Some(TopicName(StrBytes::from_static_str("big"))))
                .with_partitions(partitions),
        ]);
    let mut buf = BytesMut::new();
    metadata.encode(&mut buf, 12).expect("encodes");
    time::<MetadataResponse>(
        "Metadata v12, 1000 partitions x 3 replicas",
        3,
        12,
        &buf.freeze(),
    );
}
