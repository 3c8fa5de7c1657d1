//! Into the native client's configurations.

use std::time::Duration;

use super::props;
use crate::client::{
    Acks, ClientConfig, Codec, ConsumerConfig, GroupProtocol, IsolationLevel, OffsetReset,
    Partitioner, ProducerConfig,
};
use crate::properties::convert::bootstrap_servers;
use crate::properties::{Properties, log_not_acted_on, not_acted_on};

#[test]
fn librdkafkas_defaults_are_the_clients_defaults() {
    let producer = props(&[]).producer().expect("accepted");
    assert_eq!(
        format!("{:?}", producer.client_config()),
        format!("{:?}", ClientConfig::default())
    );
    assert_eq!(
        format!("{:?}", producer.producer_config()),
        format!("{:?}", ProducerConfig::default())
    );
    let consumer = props(&[]).consumer().expect("accepted");
    assert_eq!(
        format!("{:?}", consumer.consumer_config()),
        format!("{:?}", ConsumerConfig::default())
    );
    // The one difference: consumers do not create topics unless told to.
    let expected = ClientConfig {
        allow_auto_create_topics: false,
        role: crate::client::ClientRole::Consumer,
        ..ClientConfig::default()
    };
    assert_eq!(
        format!("{:?}", consumer.client_config()),
        format!("{expected:?}")
    );
}

#[test]
fn client_config_fields() {
    let consumer = props(&[
        ("bootstrap.servers", "a:1,b:2"),
        ("client.id", "svc"),
        ("socket.timeout.ms", "20000"),
        ("socket.connection.setup.timeout.ms", "5000"),
        ("reconnect.backoff.ms", "50"),
        ("reconnect.backoff.max.ms", "2000"),
        ("retry.backoff.ms", "20"),
        ("retry.backoff.max.ms", "400"),
        ("topic.metadata.refresh.interval.ms", "1000"),
        ("receive.message.max.bytes", "60000000"),
        ("allow.auto.create.topics", "true"),
        ("statistics.interval.ms", "15000"),
    ])
    .consumer()
    .expect("accepted");
    let c = consumer.client_config();
    assert_eq!(c.statistics_interval, Duration::from_secs(15));
    assert!(c.enable_metrics_push, "librdkafka's default");
    assert_eq!(c.bootstrap_servers, ["a:1", "b:2"]);
    assert_eq!(c.client_id, "svc");
    assert_eq!(c.socket_timeout, Duration::from_secs(20));
    assert_eq!(c.connect_timeout, Duration::from_secs(5));
    assert_eq!(c.reconnect_backoff, Duration::from_millis(50));
    assert_eq!(c.reconnect_backoff_max, Duration::from_secs(2));
    assert_eq!(c.retry_backoff, Duration::from_millis(20));
    assert_eq!(c.retry_backoff_max, Duration::from_millis(400));
    assert_eq!(c.metadata_refresh_interval, Duration::from_secs(1));
    assert_eq!(c.max_response_size, 60_000_000);
    assert!(c.allow_auto_create_topics);
    let off = props(&[("topic.metadata.refresh.interval.ms", "-1")])
        .consumer()
        .expect("accepted");
    assert_eq!(
        off.client_config().metadata_refresh_interval,
        Duration::ZERO
    );
}

#[test]
fn metadata_recovery_is_read_with_librdkafkas_default() {
    let default = props(&[]).producer().expect("accepted").client_config();
    assert_eq!(
        default.metadata_recovery,
        crate::client::MetadataRecovery::Rebootstrap
    );
    assert_eq!(default.rebootstrap_trigger, Duration::from_mins(5));
    let none = props(&[
        ("metadata.recovery.strategy", "none"),
        ("metadata.recovery.rebootstrap.trigger.ms", "2500"),
    ])
    .consumer()
    .expect("accepted")
    .client_config();
    assert_eq!(
        none.metadata_recovery,
        crate::client::MetadataRecovery::None
    );
    assert_eq!(none.rebootstrap_trigger, Duration::from_millis(2500));
}

#[test]
fn metrics_push_can_be_turned_off_and_names_the_clients_kind() {
    let off = [("enable.metrics.push", "false")];
    let producer = props(&off).producer().expect("accepted").client_config();
    assert!(!producer.enable_metrics_push);
    assert_eq!(producer.role, crate::client::ClientRole::Producer);
    let consumer = props(&off).consumer().expect("accepted").client_config();
    assert!(!consumer.enable_metrics_push);
    assert_eq!(consumer.role, crate::client::ClientRole::Consumer);
}

#[test]
fn bootstrap_lists_are_read_as_librdkafka_reads_them() {
    assert_eq!(
        bootstrap_servers("PLAINTEXT://a:1, b  c:3,[::1],[::1]:9,host/path,SASL_SSL://d"),
        [
            "a:1",
            "b:9092",
            "c:3",
            "[::1]:9092",
            "[::1]:9",
            "host:9092",
            "d:9092"
        ]
    );
    assert!(bootstrap_servers("").is_empty());
    assert!(bootstrap_servers(" , ").is_empty());
    let producer = props(&[("metadata.broker.list", "k1,k2:9093")])
        .producer()
        .expect("accepted");
    assert_eq!(
        producer.client_config().bootstrap_servers,
        ["k1:9092", "k2:9093"]
    );
}

#[test]
fn producer_config_fields() {
    let producer = props(&[
        ("acks", "1"),
        ("linger.ms", "2.5"),
        ("batch.size", "65536"),
        ("batch.num.messages", "500"),
        ("message.max.bytes", "65536"),
        ("queue.buffering.max.messages", "0"),
        ("queue.buffering.max.kbytes", "2048"),
        ("delivery.timeout.ms", "120000"),
        ("request.timeout.ms", "10000"),
        ("retries", "7"),
        ("max.in.flight", "3"),
        ("compression.type", "lz4"),
        ("compression.level", "9"),
        ("partitioner", "murmur2_random"),
        ("sticky.partitioning.linger.ms", "25"),
    ])
    .producer()
    .expect("accepted");
    let p = producer.producer_config();
    assert_eq!(p.acks, Acks::Leader);
    assert!(!p.enable_idempotence);
    assert_eq!(p.linger, Duration::from_micros(2500));
    assert_eq!(p.batch_size, 65536);
    assert_eq!(p.batch_num_messages, 500);
    assert_eq!(p.message_max_bytes, 65536);
    assert_eq!(p.queue_max_messages, usize::MAX);
    assert_eq!(p.queue_max_kbytes, 2048);
    assert_eq!(p.message_timeout, Duration::from_mins(2));
    assert_eq!(p.request_timeout, Duration::from_secs(10));
    assert_eq!(p.retries, 7);
    assert_eq!(p.max_in_flight, 3);
    assert_eq!(p.compression, Codec::Lz4);
    assert_eq!(p.compression_level, 9);
    assert_eq!(p.partitioner, Partitioner::Murmur2Random);
    assert_eq!(p.sticky_partitioning_linger, Duration::from_millis(25));

    let none = props(&[("acks", "0")])
        .producer()
        .expect("accepted")
        .producer_config();
    assert_eq!(none.acks, Acks::None);
    let idempotent = props(&[("enable.idempotence", "true")])
        .producer()
        .expect("accepted");
    let p = idempotent.producer_config();
    assert!(p.enable_idempotence);
    assert_eq!(p.acks, Acks::All);
    assert_eq!(p.max_in_flight, 5);
    assert_eq!(p.retries, i32::MAX as u32);
}

#[test]
fn topic_compression_wins_unless_inherit() {
    let codec = |pairs: &[(&str, &str)]| {
        props(pairs)
            .producer()
            .expect("accepted")
            .producer_config()
            .compression
    };
    assert_eq!(codec(&[]), Codec::None);
    assert_eq!(codec(&[("compression.codec", "gzip")]), Codec::Gzip);
    assert_eq!(
        codec(&[
            ("compression.type", "gzip"),
            ("topic.compression.type", "zstd")
        ]),
        Codec::Zstd
    );
    assert_eq!(
        codec(&[
            ("compression.type", "snappy"),
            ("topic.compression.codec", "inherit")
        ]),
        Codec::Snappy
    );
}

#[test]
fn transactional_producer_config() {
    let producer = props(&[
        ("transactional.id", "t"),
        ("transaction.timeout.ms", "30000"),
    ])
    .producer()
    .expect("accepted");
    let p = producer.producer_config();
    assert!(p.enable_idempotence);
    assert_eq!(p.message_timeout, Duration::from_secs(30));
    assert_eq!(
        producer.client_config().socket_timeout,
        Duration::from_millis(29_900)
    );
}

#[test]
fn consumer_config_fields() {
    let consumer = props(&[
        ("group.id", "g"),
        ("group.instance.id", "i"),
        ("partition.assignment.strategy", "cooperative-sticky"),
        ("session.timeout.ms", "10000"),
        ("heartbeat.interval.ms", "1000"),
        ("max.poll.interval.ms", "60000"),
        ("auto.offset.reset", "earliest"),
        ("enable.auto.commit", "false"),
        ("auto.commit.interval.ms", "60000"),
        ("enable.auto.offset.store", "false"),
        ("isolation.level", "read_uncommitted"),
        ("check.crcs", "true"),
        ("fetch.min.bytes", "10"),
        ("fetch.max.bytes", "2000000"),
        ("fetch.wait.max.ms", "100"),
        ("max.partition.fetch.bytes", "4096"),
        ("fetch.error.backoff.ms", "50"),
        ("queued.min.messages", "10"),
        ("queued.max.messages.kbytes", "1024"),
        ("client.rack", "r1"),
    ])
    .consumer()
    .expect("accepted");
    let c = consumer.consumer_config();
    assert_eq!(c.group_id.as_deref(), Some("g"));
    assert_eq!(c.group_instance_id.as_deref(), Some("i"));
    assert_eq!(c.group_protocol, GroupProtocol::Classic);
    assert_eq!(c.assignment_strategy, ["cooperative-sticky"]);
    assert_eq!(c.session_timeout, Duration::from_secs(10));
    assert_eq!(c.heartbeat_interval, Duration::from_secs(1));
    assert_eq!(c.max_poll_interval, Duration::from_mins(1));
    assert_eq!(c.auto_offset_reset, OffsetReset::Earliest);
    assert!(!c.enable_auto_commit);
    assert_eq!(c.auto_commit_interval, Duration::from_mins(1));
    assert!(!c.enable_auto_offset_store);
    assert_eq!(c.isolation, IsolationLevel::ReadUncommitted);
    assert!(c.check_crcs);
    assert_eq!(c.fetch_min_bytes, 10);
    assert_eq!(c.fetch_max_bytes, 2_000_000);
    assert_eq!(c.fetch_wait_max, Duration::from_millis(100));
    assert_eq!(c.max_partition_fetch_bytes, 4096);
    assert_eq!(c.fetch_error_backoff, Duration::from_millis(50));
    assert_eq!(c.queued_min_messages, 10);
    assert_eq!(c.queued_max_bytes, 1024 * 1024);
    assert_eq!(c.client_rack.as_deref(), Some("r1"));
    assert!(c.validate().is_ok());
}

#[test]
fn consumer_config_translations() {
    let config =
        |pairs: &[(&str, &str)]| props(pairs).consumer().expect("accepted").consumer_config();
    // librdkafka's default: fetched batches' CRCs are not checked.
    assert!(!config(&[]).check_crcs);
    assert_eq!(
        config(&[("auto.offset.reset", "error")]).auto_offset_reset,
        OffsetReset::Error
    );
    assert_eq!(
        config(&[("auto.offset.reset", "end")]).auto_offset_reset,
        OffsetReset::Latest
    );
    assert_eq!(
        config(&[("topic.auto.offset.reset", "beginning")]).auto_offset_reset,
        OffsetReset::Earliest
    );
    assert_eq!(
        config(&[("auto.commit.interval.ms", "0")]).auto_commit_interval,
        Duration::MAX
    );
    assert_eq!(config(&[("group.id", "")]).group_id, None);
    assert_eq!(config(&[("client.rack", "")]).client_rack, None);
    let kip848 = config(&[
        ("group.protocol", "CONSUMER"),
        ("group.remote.assignor", "uniform"),
    ]);
    assert_eq!(kip848.group_protocol, GroupProtocol::Consumer);
    assert_eq!(kip848.group_remote_assignor.as_deref(), Some("uniform"));
}

#[test]
fn not_acted_on_properties_are_found_under_any_spelling_and_logged_once() {
    let p: Properties = [
        ("client.id", "svc"),
        ("socket.keepalive.enable", "true"),
        ("enable_sasl_queue", "true"),
        ("topic.auto.commit.interval.ms", "1000"),
        ("auto.commit.interval.ms", "1000"),
        ("socket.keepalive.enable", "false"),
        ("not.a.property", "x"),
    ]
    .into_iter()
    .collect();
    assert_eq!(
        not_acted_on(&p),
        [
            "socket.keepalive.enable",
            "enable_sasl_queue",
            "topic.auto.commit.interval.ms"
        ]
    );
    // Properties no other test logs, so that the process-wide memory is this test's.
    let q: Properties = [
        ("log.thread.name", "false"),
        ("enable.random.seed", "false"),
    ]
    .into_iter()
    .collect();
    assert_eq!(
        log_not_acted_on(&q),
        ["log.thread.name", "enable.random.seed"]
    );
    assert!(log_not_acted_on(&q).is_empty());
}

/// The first token (or the refusal) of the OAUTHBEARER provider `pairs` configure.
async fn first_token(pairs: &[(&str, &str)]) -> Result<String, String> {
    let mut all = vec![
        ("security.protocol", "sasl_plaintext"),
        ("sasl.mechanism", "OAUTHBEARER"),
    ];
    all.extend_from_slice(pairs);
    let config = props(&all).producer().expect("accepted").client_config();
    let provider = config
        .security
        .sasl
        .and_then(|s| s.token_provider)
        .ok_or("no provider")?;
    provider.token().await.map(|t| t.principal)
}

#[tokio::test]
async fn oauthbearer_properties_choose_the_token_source() {
    let oidc = [
        ("sasl.oauthbearer.method", "oidc"),
        (
            "sasl.oauthbearer.token.endpoint.url",
            "http://127.0.0.1:1/token",
        ),
        ("sasl.oauthbearer.client.id", "c"),
        ("sasl.oauthbearer.client.secret", "s"),
    ];
    let refusal = first_token(&oidc).await.unwrap_err();
    if cfg!(feature = "oidc") {
        // nothing listens on port 1
        assert!(
            refusal.starts_with("Failed to retrieve OIDC token from \"http://127.0.0.1:1/token\""),
            "{refusal}"
        );
    } else {
        assert!(refusal.contains("needs the `oidc` feature"), "{refusal}");
    }
    let mut jwt_bearer = oidc.to_vec();
    jwt_bearer.extend([
        (
            "sasl.oauthbearer.grant.type",
            "urn:ietf:params:oauth:grant-type:jwt-bearer",
        ),
        ("sasl.oauthbearer.assertion.private.key.pem", "x"),
    ]);
    let refusal = first_token(&jwt_bearer).await.unwrap_err();
    assert!(
        refusal.contains("jwt-bearer` is not implemented"),
        "{refusal}"
    );
    let mut azure = oidc.to_vec();
    azure.push((
        "sasl.oauthbearer.metadata.authentication.type",
        "azure_imds",
    ));
    let refusal = first_token(&azure).await.unwrap_err();
    assert!(
        refusal.contains("azure_imds` is not implemented"),
        "{refusal}"
    );
    if cfg!(feature = "oidc") {
        let mut extensions = oidc.to_vec();
        extensions.push(("sasl.oauthbearer.extensions", "a=1,b"));
        let refusal = first_token(&extensions).await.unwrap_err();
        assert!(refusal.contains("sasl.oauthbearer.extensions"), "{refusal}");
    }
    let unsecured = [
        ("enable.sasl.oauthbearer.unsecure.jwt", "true"),
        ("sasl.oauthbearer.config", "principal=alice"),
    ];
    assert_eq!(first_token(&unsecured).await.as_deref(), Ok("alice"));
    assert_eq!(first_token(&[]).await, Err("no provider".to_owned()));
}
