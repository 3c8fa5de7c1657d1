//! Interop with the official Java client, codec by codec, in both directions.

use bytes::Bytes;
use protocol_tests::{
    bootstrap, client, create_topic, interop_line, java_interop, read_all, unique_topic,
};
use ruststream_kafka::client::{Codec, Header, ProducerRecord};

use crate::{codec_config, producer, send_all};

const COUNT: usize = 300;

/// What the Java program produces for record `i` (see scripts/interop/Interop.java).
fn java_record(topic: &str, i: usize, partitions: usize) -> ProducerRecord {
    ProducerRecord {
        topic: topic.to_owned(),
        partition: Some((i % partitions) as i32),
        key: (i != 0).then(|| Bytes::from(format!("key-{i}"))),
        value: (i != 1).then(|| Bytes::from(format!("value-{i}"))),
        headers: vec![
            Header::new("h", Some(Bytes::from(format!("{i}")))),
            Header::new("h", Some(Bytes::from_static(b"dup"))),
        ],
        timestamp: Some(1_700_000_000_000 + i as i64),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn we_read_what_the_java_client_writes_with_every_codec() {
    if protocol_tests::target() == protocol_tests::Target::Embedded
        && protocol_tests::unsupported_on_embedded(
            "runs the Java client (scripts/interop), which reaches brokers over TCP only",
        )
    {
        return;
    }
    let client = client().await;
    for codec in Codec::ALL {
        let topic = unique_topic(&format!("from-java-{}", codec.name()));
        create_topic(&client, &topic, 3).await;
        let out = java_interop(&[
            "produce",
            &bootstrap(),
            &topic,
            codec.name(),
            &COUNT.to_string(),
        ]);
        assert!(
            out.status.success(),
            "java produce: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let read = read_all(&client, &topic, 3).await;
        let mut got = Vec::new();
        for (p, records) in read.iter().enumerate() {
            for r in records {
                got.push((r.timestamp, r.clone(), p));
            }
        }
        got.sort_by_key(|(t, _, _)| *t);
        assert_eq!(got.len(), COUNT, "{codec:?}");
        for (i, (_, r, p)) in got.iter().enumerate() {
            let want = java_record(&topic, i, 3);
            assert_eq!(Some(*p as i32), want.partition, "{codec:?} record {i}");
            assert_eq!(r.key, want.key, "{codec:?} record {i}");
            assert_eq!(r.value, want.value, "{codec:?} record {i}");
            assert_eq!(
                r.headers.iter().collect::<Vec<_>>(),
                want.headers,
                "{codec:?} record {i}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_java_client_reads_what_we_write_with_every_codec() {
    if protocol_tests::target() == protocol_tests::Target::Embedded
        && protocol_tests::unsupported_on_embedded(
            "runs the Java client (scripts/interop), which reaches brokers over TCP only",
        )
    {
        return;
    }
    let client = client().await;
    for codec in Codec::ALL {
        let topic = unique_topic(&format!("to-java-{}", codec.name()));
        create_topic(&client, &topic, 3).await;
        let p = producer(&client, codec_config(codec)).await;
        let records: Vec<ProducerRecord> = (0..COUNT).map(|i| java_record(&topic, i, 3)).collect();
        send_all(&p, records).await;
        let ours = read_all(&client, &topic, 3).await;
        let mut expected: Vec<String> = ours
            .iter()
            .enumerate()
            .flat_map(|(p, rs)| rs.iter().map(move |r| interop_line(p as i32, r)))
            .collect();
        let out = java_interop(&["consume", &bootstrap(), &topic, &COUNT.to_string(), "60000"]);
        assert!(
            out.status.success(),
            "java consume: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut theirs: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect();
        expected.sort();
        theirs.sort();
        assert_eq!(
            theirs, expected,
            "{codec:?}: the Java client sees exactly what we wrote"
        );
    }
}
