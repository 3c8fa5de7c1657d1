//! Writes the seed corpus of every fuzz target into `$FUZZ_SEEDS_DIR/<target>/` and exits
//! (`scripts/fuzz --seed` runs it, then minimizes each corpus with libFuzzer's `-merge=1`):
//! valid inputs to start from, built with the crate's own encoders and `kafka-protocol`'s, in
//! the byte layouts `ruststream_kafka::fuzzing` documents. It is a libFuzzer binary itself only
//! because the instrumented build links every binary against libFuzzer's coverage hooks: the
//! work is done in its initialisation, before any fuzzing.
#![no_main]

use std::path::{Path, PathBuf};

use bytes::BytesMut;
use kafka_protocol::messages::{ApiKey, RequestHeader};
use kafka_protocol::protocol::{Encodable, Message};
use ruststream_kafka::client::records::{BatchBuilder, Codec, Header, ProducerState, compression};

/// The seeds of one target.
struct Seeds {
    dir: PathBuf,
    count: usize,
}

impl Seeds {
    fn new(root: &Path, target: &str) -> Seeds {
        let dir = root.join(target);
        std::fs::create_dir_all(&dir).expect("creates the corpus directory");
        Seeds { dir, count: 0 }
    }

    fn add(&mut self, bytes: &[u8]) {
        let path = self.dir.join(format!("seed-{:04}", self.count));
        std::fs::write(path, bytes).expect("writes a seed");
        self.count += 1;
    }
}

/// Where `key` is in `ApiKey::iter()`: the byte the `responses` target reads.
fn key_index(key: i16) -> u8 {
    let index = ApiKey::iter()
        .position(|k| k as i16 == key)
        .expect("a known API key");
    u8::try_from(index).expect("fewer than 256 keys")
}

fn encoded<T: Encodable>(message: &T, version: i16) -> Vec<u8> {
    let mut out = BytesMut::new();
    message.encode(&mut out, version).expect("encodes");
    out.to_vec()
}

/// Every response of every version: its default value as `kafka-protocol` encodes it.
fn responses(seeds: &mut Seeds) {
    macro_rules! one {
        ($key:expr, $ty:ident) => {{
            type T = kafka_protocol::messages::$ty;
            for version in T::VERSIONS.min..=T::VERSIONS.max {
                let mut bytes = vec![
                    key_index($key),
                    u8::try_from(version - T::VERSIONS.min).expect("small"),
                ];
                bytes.extend(encoded(&T::default(), version));
                seeds.add(&bytes);
            }
        }};
    }
    one!(0, ProduceResponse);
    one!(1, FetchResponse);
    one!(2, ListOffsetsResponse);
    one!(3, MetadataResponse);
    one!(8, OffsetCommitResponse);
    one!(9, OffsetFetchResponse);
    one!(10, FindCoordinatorResponse);
    one!(11, JoinGroupResponse);
    one!(12, HeartbeatResponse);
    one!(13, LeaveGroupResponse);
    one!(14, SyncGroupResponse);
    one!(15, DescribeGroupsResponse);
    one!(16, ListGroupsResponse);
    one!(17, SaslHandshakeResponse);
    one!(18, ApiVersionsResponse);
    one!(19, CreateTopicsResponse);
    one!(20, DeleteTopicsResponse);
    one!(21, DeleteRecordsResponse);
    one!(22, InitProducerIdResponse);
    one!(23, OffsetForLeaderEpochResponse);
    one!(24, AddPartitionsToTxnResponse);
    one!(25, AddOffsetsToTxnResponse);
    one!(26, EndTxnResponse);
    one!(27, WriteTxnMarkersResponse);
    one!(28, TxnOffsetCommitResponse);
    one!(29, DescribeAclsResponse);
    one!(30, CreateAclsResponse);
    one!(31, DeleteAclsResponse);
    one!(32, DescribeConfigsResponse);
    one!(33, AlterConfigsResponse);
    one!(34, AlterReplicaLogDirsResponse);
    one!(35, DescribeLogDirsResponse);
    one!(36, SaslAuthenticateResponse);
    one!(37, CreatePartitionsResponse);
    one!(38, CreateDelegationTokenResponse);
    one!(39, RenewDelegationTokenResponse);
    one!(40, ExpireDelegationTokenResponse);
    one!(41, DescribeDelegationTokenResponse);
    one!(42, DeleteGroupsResponse);
    one!(43, ElectLeadersResponse);
    one!(44, IncrementalAlterConfigsResponse);
    one!(45, AlterPartitionReassignmentsResponse);
    one!(46, ListPartitionReassignmentsResponse);
    one!(47, OffsetDeleteResponse);
    one!(48, DescribeClientQuotasResponse);
    one!(49, AlterClientQuotasResponse);
    one!(50, DescribeUserScramCredentialsResponse);
    one!(51, AlterUserScramCredentialsResponse);
    one!(52, VoteResponse);
    one!(53, BeginQuorumEpochResponse);
    one!(54, EndQuorumEpochResponse);
    one!(55, DescribeQuorumResponse);
    one!(56, AlterPartitionResponse);
    one!(57, UpdateFeaturesResponse);
    one!(58, EnvelopeResponse);
    one!(59, FetchSnapshotResponse);
    one!(60, DescribeClusterResponse);
    one!(61, DescribeProducersResponse);
    one!(62, BrokerRegistrationResponse);
    one!(63, BrokerHeartbeatResponse);
    one!(64, UnregisterBrokerResponse);
    one!(65, DescribeTransactionsResponse);
    one!(66, ListTransactionsResponse);
    one!(67, AllocateProducerIdsResponse);
    one!(68, ConsumerGroupHeartbeatResponse);
    one!(69, ConsumerGroupDescribeResponse);
    one!(70, ControllerRegistrationResponse);
    one!(71, GetTelemetrySubscriptionsResponse);
    one!(72, PushTelemetryResponse);
    one!(73, AssignReplicasToDirsResponse);
    one!(74, ListConfigResourcesResponse);
    one!(75, DescribeTopicPartitionsResponse);
    one!(76, ShareGroupHeartbeatResponse);
    one!(77, ShareGroupDescribeResponse);
    one!(78, ShareFetchResponse);
    one!(79, ShareAcknowledgeResponse);
    one!(80, AddRaftVoterResponse);
    one!(81, RemoveRaftVoterResponse);
    one!(82, UpdateRaftVoterResponse);
    one!(83, InitializeShareGroupStateResponse);
    one!(84, ReadShareGroupStateResponse);
    one!(85, WriteShareGroupStateResponse);
    one!(86, DeleteShareGroupStateResponse);
    one!(87, ReadShareGroupStateSummaryResponse);
    one!(90, DescribeShareGroupOffsetsResponse);
    one!(91, AlterShareGroupOffsetsResponse);
    one!(92, DeleteShareGroupOffsetsResponse);
}

/// Every request of every version, header included: its default value.
fn broker_requests(seeds: &mut Seeds) {
    macro_rules! one {
        ($key:expr, $ty:ident) => {{
            type T = kafka_protocol::messages::$ty;
            let api = ApiKey::try_from($key).expect("a known API key");
            for version in T::VERSIONS.min..=T::VERSIONS.max {
                let header = RequestHeader::default()
                    .with_request_api_key($key)
                    .with_request_api_version(version)
                    .with_correlation_id(1);
                let header_version = api.request_header_version(version);
                let mut bytes = encoded(&header, header_version);
                bytes.extend(encoded(&T::default(), version));
                seeds.add(&bytes);
            }
        }};
    }
    one!(0, ProduceRequest);
    one!(1, FetchRequest);
    one!(2, ListOffsetsRequest);
    one!(3, MetadataRequest);
    one!(8, OffsetCommitRequest);
    one!(9, OffsetFetchRequest);
    one!(10, FindCoordinatorRequest);
    one!(11, JoinGroupRequest);
    one!(12, HeartbeatRequest);
    one!(13, LeaveGroupRequest);
    one!(14, SyncGroupRequest);
    one!(15, DescribeGroupsRequest);
    one!(16, ListGroupsRequest);
    one!(17, SaslHandshakeRequest);
    one!(18, ApiVersionsRequest);
    one!(19, CreateTopicsRequest);
    one!(20, DeleteTopicsRequest);
    one!(21, DeleteRecordsRequest);
    one!(22, InitProducerIdRequest);
    one!(23, OffsetForLeaderEpochRequest);
    one!(24, AddPartitionsToTxnRequest);
    one!(25, AddOffsetsToTxnRequest);
    one!(26, EndTxnRequest);
    one!(27, WriteTxnMarkersRequest);
    one!(28, TxnOffsetCommitRequest);
    one!(29, DescribeAclsRequest);
    one!(30, CreateAclsRequest);
    one!(31, DeleteAclsRequest);
    one!(32, DescribeConfigsRequest);
    one!(33, AlterConfigsRequest);
    one!(34, AlterReplicaLogDirsRequest);
    one!(35, DescribeLogDirsRequest);
    one!(36, SaslAuthenticateRequest);
    one!(37, CreatePartitionsRequest);
    one!(38, CreateDelegationTokenRequest);
    one!(39, RenewDelegationTokenRequest);
    one!(40, ExpireDelegationTokenRequest);
    one!(41, DescribeDelegationTokenRequest);
    one!(42, DeleteGroupsRequest);
    one!(43, ElectLeadersRequest);
    one!(44, IncrementalAlterConfigsRequest);
    one!(45, AlterPartitionReassignmentsRequest);
    one!(46, ListPartitionReassignmentsRequest);
    one!(47, OffsetDeleteRequest);
    one!(48, DescribeClientQuotasRequest);
    one!(49, AlterClientQuotasRequest);
    one!(50, DescribeUserScramCredentialsRequest);
    one!(51, AlterUserScramCredentialsRequest);
    one!(52, VoteRequest);
    one!(53, BeginQuorumEpochRequest);
    one!(54, EndQuorumEpochRequest);
    one!(55, DescribeQuorumRequest);
    one!(56, AlterPartitionRequest);
    one!(57, UpdateFeaturesRequest);
    one!(58, EnvelopeRequest);
    one!(59, FetchSnapshotRequest);
    one!(60, DescribeClusterRequest);
    one!(61, DescribeProducersRequest);
    one!(62, BrokerRegistrationRequest);
    one!(63, BrokerHeartbeatRequest);
    one!(64, UnregisterBrokerRequest);
    one!(65, DescribeTransactionsRequest);
    one!(66, ListTransactionsRequest);
    one!(67, AllocateProducerIdsRequest);
    one!(68, ConsumerGroupHeartbeatRequest);
    one!(69, ConsumerGroupDescribeRequest);
    one!(70, ControllerRegistrationRequest);
    one!(71, GetTelemetrySubscriptionsRequest);
    one!(72, PushTelemetryRequest);
    one!(73, AssignReplicasToDirsRequest);
    one!(74, ListConfigResourcesRequest);
    one!(75, DescribeTopicPartitionsRequest);
    one!(76, ShareGroupHeartbeatRequest);
    one!(77, ShareGroupDescribeRequest);
    one!(78, ShareFetchRequest);
    one!(79, ShareAcknowledgeRequest);
    one!(80, AddRaftVoterRequest);
    one!(81, RemoveRaftVoterRequest);
    one!(82, UpdateRaftVoterRequest);
    one!(83, InitializeShareGroupStateRequest);
    one!(84, ReadShareGroupStateRequest);
    one!(85, WriteShareGroupStateRequest);
    one!(86, DeleteShareGroupStateRequest);
    one!(87, ReadShareGroupStateSummaryRequest);
    one!(90, DescribeShareGroupOffsetsRequest);
    one!(91, AlterShareGroupOffsetsRequest);
    one!(92, DeleteShareGroupOffsetsRequest);
}

/// Record sets: one small batch per codec, plain and transactional, and two batches in a row.
fn batches() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for codec in Codec::ALL {
        let mut builder = BatchBuilder::new(256);
        builder.push(1_700_000_000_000, Some(b"key"), Some(b"value"), &[]);
        let headers = [
            Header::new("h", Some(bytes::Bytes::from_static(b"v"))),
            Header::new("h", None),
        ];
        builder.push(1_700_000_000_005, None, Some(&[7u8; 40]), &headers);
        builder.push(1_700_000_000_009, Some(b""), None, &[]);
        let plain = builder
            .build(codec, -1, ProducerState::NONE)
            .expect("builds");
        let transactional = ProducerState {
            producer_id: 5,
            producer_epoch: 0,
            base_sequence: 0,
            transactional: true,
        };
        let txn = builder.build(codec, -1, transactional).expect("builds");
        let mut both = plain.to_vec();
        both.extend_from_slice(&txn);
        out.push(plain.to_vec());
        out.push(both);
    }
    out
}

/// Compressed frames of a few inputs for `codec`, each after the bound byte (5: 1 MiB).
fn compressed(seeds: &mut Seeds, codec: Codec) {
    let inputs: [Vec<u8>; 4] = [
        Vec::new(),
        b"hello, kafka".to_vec(),
        b"abcabcabcabcabcabcabcabcabcabcabcabcabcabc".repeat(20),
        (0..=255u8).cycle().take(3000).collect(),
    ];
    for input in &inputs {
        for level in [-1, 1] {
            let mut bytes = vec![5u8];
            compression::compress(codec, level, input, &mut bytes).expect("compresses");
            seeds.add(&bytes);
        }
    }
}

libfuzzer_sys::fuzz_target!(init: write_seeds(), |_data: &[u8]| {});

fn write_seeds() {
    let root = PathBuf::from(std::env::var_os("FUZZ_SEEDS_DIR").expect("FUZZ_SEEDS_DIR is set"));
    responses(&mut Seeds::new(&root, "responses"));
    broker_requests(&mut Seeds::new(&root, "broker_requests"));
    let mut record_batches = Seeds::new(&root, "record_batches");
    let mut fetch_decode = Seeds::new(&root, "fetch_decode");
    for batch in batches() {
        for flags in [0u8, 1] {
            let mut bytes = vec![flags];
            bytes.extend_from_slice(&batch);
            record_batches.add(&bytes);
        }
        // read_committed with one aborted transaction of producer 5 from offset 0, and
        // read_uncommitted with none.
        let mut bytes = vec![3u8, 0, 1, 5, 0];
        bytes.extend_from_slice(&batch);
        fetch_decode.add(&bytes);
        let mut bytes = vec![0u8, 1, 0];
        bytes.extend_from_slice(&batch);
        fetch_decode.add(&bytes);
    }
    for (target, codec) in [
        ("gzip", Codec::Gzip),
        ("snappy", Codec::Snappy),
        ("lz4", Codec::Lz4),
        ("zstd", Codec::Zstd),
    ] {
        compressed(&mut Seeds::new(&root, target), codec);
    }
    // Raw snappy (no xerial framing), as some producers send it.
    let mut raw = vec![5u8];
    raw.extend(
        snap::raw::Encoder::new()
            .compress_vec(b"raw snappy, raw snappy, raw snappy")
            .expect("compresses"),
    );
    Seeds::new(&root, "snappy").add(&raw);
    let mut sasl = Seeds::new(&root, "sasl");
    // RFC 7677's exchange (SHA-256), and the same messages read as SHA-512.
    let exchange = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096\0v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";
    for selector in [0u8, 2] {
        let mut bytes = vec![selector];
        bytes.extend_from_slice(exchange);
        sasl.add(&bytes);
    }
    sasl.add(b"\0e=invalid-proof");
    sasl.add(b"\x01principal=admin scope=read,write lifeSeconds=60 extension_traceId=123");
    sasl.add(b"\x01principal=admin principalClaimName=sub scopeClaimName=scope");
    std::process::exit(0);
}
