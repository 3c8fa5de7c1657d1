//! Every codec carries keys, values, headers and timestamps unchanged, nulls included.

use std::collections::HashMap;

use bytes::Bytes;
use protocol_tests::{client, create_topic, read_all, unique_topic};
use ruststream_kafka::client::{Codec, Header, ProducerRecord};

use crate::{bytes, codec_config, producer, send_all};

fn record(topic: &str, i: i64) -> ProducerRecord {
    let mut r = ProducerRecord {
        topic: topic.to_owned(),
        partition: Some((i % 3) as i32),
        key: (i % 5 != 0).then(|| bytes(format!("key-{i}"))),
        value: (i % 7 != 0).then(|| bytes(format!("value-{i}-{}", "x".repeat((i % 50) as usize)))),
        headers: Vec::new(),
        timestamp: Some(1_700_000_000_000 + i * 3),
    };
    if i % 2 == 0 {
        r.headers
            .push(Header::new("trace", Some(bytes(format!("t{i}")))));
        r.headers.push(Header::new("trace", None));
        r.headers.push(Header::new("empty", Some(Bytes::new())));
    }
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_codec_round_trips_every_field() {
    let client = client().await;
    for codec in Codec::ALL {
        let topic = unique_topic(&format!("codec-{}", codec.name()));
        create_topic(&client, &topic, 3).await;
        let p = producer(&client, codec_config(codec)).await;
        let sent: Vec<ProducerRecord> = (0..600).map(|i| record(&topic, i)).collect();
        let reports = send_all(&p, sent.clone()).await;
        let read = read_all(&client, &topic, 3).await;
        let mut by_offset: HashMap<(i32, i64), _> = HashMap::new();
        for (partition, records) in read.iter().enumerate() {
            for r in records {
                by_offset.insert((partition as i32, r.offset), r);
            }
        }
        assert_eq!(by_offset.len(), sent.len(), "{codec:?}: records read back");
        for (s, m) in sent.iter().zip(&reports) {
            let Some(r) = by_offset.get(&(m.partition, m.offset)) else {
                panic!("{codec:?}: no record at {}-{}", m.partition, m.offset);
            };
            assert_eq!(Some(m.partition), s.partition);
            assert_eq!(r.key, s.key, "{codec:?} key");
            assert_eq!(r.value, s.value, "{codec:?} value");
            assert_eq!(Some(r.timestamp), s.timestamp, "{codec:?} timestamp");
            assert_eq!(m.timestamp, r.timestamp, "{codec:?} reported timestamp");
            let headers: Vec<Header> = r.headers.iter().collect();
            assert_eq!(headers, s.headers, "{codec:?} headers");
        }
    }
}
