//! The whole-configuration checks of client creation, their messages, and the adjustments.

use super::{consumer_refusal, producer_refusal, props};
use crate::properties::PropertyError;
use crate::properties::Value;
use crate::properties::finalize::{self, ClientKind};
use crate::properties::setting::Setting;
use crate::properties::settings::Settings;
use crate::properties::table::id;

fn consumer_value(pairs: &[(&str, &str)], key: &str) -> String {
    let consumer = props(pairs).consumer().expect("accepted");
    consumer.value(key).expect("known").to_string()
}

fn producer_value(pairs: &[(&str, &str)], key: &str) -> String {
    let producer = props(pairs).producer().expect("accepted");
    producer.value(key).expect("known").to_string()
}

#[test]
fn the_reference_texts() {
    // The substrings the reference's tests look for.
    assert!(producer_refusal(&[("acks", "sometimes")]).contains("acks"));
    assert!(producer_refusal(&[("security.protocol", "SASL_TLS")]).contains("security.protocol"));
    for kind in [ClientKind::Consumer, ClientKind::Producer] {
        let p = props(&[
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "GSSAPI"),
        ]);
        let message = match kind {
            ClientKind::Consumer => p.consumer().map(|_| ()),
            ClientKind::Producer => p.producer().map(|_| ()),
        }
        .unwrap_err()
        .to_string();
        assert!(
            message.contains("No provider for SASL mechanism GSSAPI"),
            "{message}"
        );
    }
    assert!(
        producer_refusal(&[("acks", "1"), ("enable.idempotence", "true")])
            .contains("`acks` must be set to `all`")
    );
    assert!(
        consumer_refusal(&[("fetch.max.bytes", "1000")])
            .contains("`fetch.max.bytes` must be >= `message.max.bytes`")
    );
    assert!(
        producer_refusal(&[("transactional.id", "t"), ("enable.idempotence", "false")])
            .contains("`transactional.id` requires `enable.idempotence=true`")
    );
    let error = props(&[("fetch.max.bytes", "1000")])
        .consumer()
        .unwrap_err();
    assert!(matches!(error, PropertyError::Conflict { .. }));
    assert_eq!(error.key(), None);
}

#[test]
fn keystore_needs_its_password() {
    assert_eq!(
        producer_refusal(&[("ssl.keystore.location", "/k.p12")]),
        "`ssl.keystore.password` is mandatory when `ssl.keystore.location` is set"
    );
    assert!(
        props(&[
            ("ssl.keystore.location", "/k.p12"),
            ("ssl.keystore.password", "x")
        ])
        .producer()
        .is_ok()
    );
}

#[test]
fn reconnect_backoffs_in_order() {
    assert_eq!(
        consumer_refusal(&[("reconnect.backoff.ms", "20000")]),
        "`reconnect.backoff.max.ms` must be >= `reconnect.backoff.ms`"
    );
    assert!(
        props(&[
            ("reconnect.backoff.ms", "20000"),
            ("reconnect.backoff.max.ms", "20000")
        ])
        .consumer()
        .is_ok()
    );
}

#[test]
fn assignors_are_parsed_and_not_mixed() {
    let strategy = |value: &str| {
        props(&[("partition.assignment.strategy", value)])
            .consumer()
            .map(|c| c.consumer_config().assignment_strategy)
    };
    assert_eq!(
        strategy("roundrobin, range").unwrap(),
        ["roundrobin", "range"]
    );
    assert_eq!(strategy(" ,range,,range,").unwrap(), ["range"]);
    assert_eq!(
        strategy("cooperative-sticky").unwrap(),
        ["cooperative-sticky"]
    );
    assert_eq!(strategy("").unwrap(), ["range", "roundrobin"]);
    assert_eq!(
        consumer_refusal(&[("partition.assignment.strategy", "range,sticky")]),
        "Unsupported partition.assignment.strategy: sticky"
    );
    // librdkafka does not trim the end of a name.
    assert_eq!(
        consumer_refusal(&[("partition.assignment.strategy", "range ,roundrobin")]),
        "Unsupported partition.assignment.strategy: range "
    );
    assert_eq!(
        consumer_refusal(&[("partition.assignment.strategy", "range, ")]),
        "Unsupported partition.assignment.strategy: "
    );
    assert_eq!(
        consumer_refusal(&[("partition.assignment.strategy", "Range")]),
        "Unsupported partition.assignment.strategy: Range"
    );
    assert_eq!(
        consumer_refusal(&[("partition.assignment.strategy", "cooperative-sticky,range")]),
        "All partition.assignment.strategy (cooperative-sticky,range) assignors must have the \
         same protocol type, online migration between assignors with different protocol types \
         is not supported"
    );
    // librdkafka initializes the assignors of producers too.
    assert!(producer_refusal(&[("partition.assignment.strategy", "sticky")]).contains("sticky"));
}

#[test]
fn sasl_mechanisms() {
    let sasl = [("security.protocol", "sasl_plaintext")];
    let with = |more: &[(&'static str, &'static str)]| {
        let mut pairs = sasl.to_vec();
        pairs.extend_from_slice(more);
        pairs
    };
    // The default mechanism is GSSAPI.
    assert!(consumer_refusal(&sasl).starts_with("No provider for SASL mechanism GSSAPI"));
    assert_eq!(
        consumer_refusal(&with(&[("sasl.mechanism", "PLAIN")])),
        "sasl.username and sasl.password must be set"
    );
    assert_eq!(
        consumer_refusal(&with(&[
            ("sasl.mechanism", "SCRAM-SHA-256"),
            ("sasl.username", "u")
        ])),
        "sasl.username and sasl.password must be set"
    );
    let credentials = [("sasl.username", "u"), ("sasl.password", "p")];
    for mechanism in ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "SCRAM-SHA-1"] {
        let mut pairs = with(&[("sasl.mechanism", mechanism)]);
        pairs.extend_from_slice(&credentials);
        assert!(props(&pairs).consumer().is_ok(), "{mechanism}");
    }
    let mut pairs = with(&[("sasl.mechanism", "SCRAM-SHA-384")]);
    pairs.extend_from_slice(&credentials);
    assert_eq!(
        consumer_refusal(&pairs),
        "Unsupported hash function: SCRAM-SHA-384 (try SCRAM-SHA-512)"
    );
    assert_eq!(
        consumer_refusal(&with(&[("sasl.mechanism", "plain")])),
        "Unsupported SASL mechanism: plain"
    );
    assert!(
        props(&with(&[("sasl.mechanism", "OAUTHBEARER")]))
            .consumer()
            .is_ok()
    );
    // Without a SASL protocol the mechanism is not looked at.
    assert!(props(&[("sasl.mechanism", "GSSAPI")]).consumer().is_ok());
}

/// `AWS_MSK_IAM` is this crate's addition to librdkafka's mechanisms: accepted in its exact
/// case without a user name or password; any other spelling keeps librdkafka's refusal.
#[test]
fn msk_iam_is_accepted_as_a_mechanism_and_other_spellings_are_not() {
    // `sasl_ssl` needs the `ssl` feature, as any mechanism does.
    let protocols: &[&str] = if cfg!(feature = "ssl") {
        &["sasl_ssl", "sasl_plaintext"]
    } else {
        &["sasl_plaintext"]
    };
    for &protocol in protocols {
        let pairs = [
            ("security.protocol", protocol),
            ("sasl.mechanism", "AWS_MSK_IAM"),
        ];
        assert!(props(&pairs).consumer().is_ok(), "{protocol}");
        assert!(props(&pairs).producer().is_ok(), "{protocol}");
    }
    for spelling in ["aws_msk_iam", "AWS-MSK-IAM", "AWS_MSK_IAM_OAUTHBEARER"] {
        assert_eq!(
            consumer_refusal(&[
                ("security.protocol", "sasl_plaintext"),
                ("sasl.mechanism", spelling)
            ]),
            format!("Unsupported SASL mechanism: {spelling}")
        );
    }
    assert!(
        consumer_refusal(&[("security.protocol", "sasl_plaintext")])
            .ends_with("OAUTHBEARER, AWS_MSK_IAM")
    );
}

#[test]
fn consumer_group_timeouts() {
    assert_eq!(
        consumer_refusal(&[("max.poll.interval.ms", "1000")]),
        "`max.poll.interval.ms`must be >= `session.timeout.ms`"
    );
    assert!(
        props(&[("max.poll.interval.ms", "45000")])
            .consumer()
            .is_ok()
    );
    // A producer does not look.
    assert!(
        props(&[("max.poll.interval.ms", "1000")])
            .producer()
            .is_ok()
    );
    // Nor does the consumer protocol, whose session lives on the broker.
    assert!(
        props(&[
            ("group.protocol", "consumer"),
            ("max.poll.interval.ms", "1000")
        ])
        .consumer()
        .is_ok()
    );
}

#[test]
fn consumer_protocol_refuses_classic_settings() {
    let consumer = ("group.protocol", "consumer");
    assert_eq!(
        consumer_refusal(&[consumer, ("session.timeout.ms", "45000")]),
        "`session.timeout.ms` is not supported for `group.protocol=consumer`. It is defined \
         broker side"
    );
    assert_eq!(
        consumer_refusal(&[consumer, ("partition.assignment.strategy", "")]),
        "`partition.assignment.strategy` is not supported for `group.protocol=consumer`. Use \
         `group.remote.assignor` instead"
    );
    assert_eq!(
        consumer_refusal(&[consumer, ("group.protocol.type", "consumer")]),
        "`group.protocol.type` is not supported for `group.protocol=consumer`"
    );
    assert_eq!(
        consumer_refusal(&[consumer, ("heartbeat.interval.ms", "3000")]),
        "`heartbeat.interval.ms` is not supported for `group.protocol=consumer`. It is defined \
         broker side"
    );
    assert!(
        props(&[consumer, ("group.remote.assignor", "uniform")])
            .consumer()
            .is_ok()
    );
}

#[test]
fn fetch_sizes() {
    assert_eq!(
        consumer_refusal(&[("fetch.max.bytes", "999999")]),
        "`fetch.max.bytes` must be >= `message.max.bytes`"
    );
    assert_eq!(
        consumer_value(
            &[("fetch.max.bytes", "1000"), ("message.max.bytes", "1000")],
            "fetch.max.bytes"
        ),
        "1000"
    );
    // Consumer-only: a producer accepts it.
    assert!(props(&[("fetch.max.bytes", "1000")]).producer().is_ok());
    // Unless set, fetch.max.bytes fits the prefetch queue but holds one largest record.
    assert_eq!(consumer_value(&[], "fetch.max.bytes"), "52428800");
    assert_eq!(
        consumer_value(&[("queued.max.messages.kbytes", "1024")], "fetch.max.bytes"),
        "1048576"
    );
    assert_eq!(
        consumer_value(&[("queued.max.messages.kbytes", "1")], "fetch.max.bytes"),
        "1000000"
    );
    // receive.message.max.bytes leaves room for framing.
    assert_eq!(
        consumer_refusal(&[("receive.message.max.bytes", "52428811")]),
        "`receive.message.max.bytes` must be >= `fetch.max.bytes` + 512"
    );
    assert_eq!(
        consumer_value(
            &[("receive.message.max.bytes", "52429312")],
            "receive.message.max.bytes"
        ),
        "52429312"
    );
    assert_eq!(
        consumer_value(
            &[("fetch.max.bytes", "200000000")],
            "receive.message.max.bytes"
        ),
        "200000512"
    );
    assert_eq!(
        consumer_value(&[], "receive.message.max.bytes"),
        "100000000"
    );
}

#[test]
fn transactional_producer() {
    assert_eq!(
        producer_refusal(&[("transactional.id", "t"), ("enable.idempotence", "false")]),
        "`transactional.id` requires `enable.idempotence=true`"
    );
    let pairs = [("transactional.id", "t")];
    assert_eq!(producer_value(&pairs, "enable.idempotence"), "true");
    assert_eq!(producer_value(&pairs, "socket.timeout.ms"), "59900");
    assert_eq!(producer_value(&pairs, "message.timeout.ms"), "60000");
    assert_eq!(producer_value(&pairs, "max.in.flight"), "5");
    assert_eq!(producer_value(&pairs, "acks"), "-1");
    let short = [
        ("transactional.id", "t"),
        ("transaction.timeout.ms", "1000"),
    ];
    assert_eq!(producer_value(&short, "socket.timeout.ms"), "900");
    assert_eq!(
        producer_refusal(&[("transactional.id", "t"), ("socket.timeout.ms", "60101")]),
        "`socket.timeout.ms` must be set <= `transaction.timeout.ms` + 100"
    );
    assert_eq!(
        producer_value(
            &[("transactional.id", "t"), ("socket.timeout.ms", "60100")],
            "socket.timeout.ms"
        ),
        "60100"
    );
    assert_eq!(
        producer_refusal(&[("transactional.id", "t"), ("message.timeout.ms", "60001")]),
        "`message.timeout.ms` must be set <= `transaction.timeout.ms`"
    );
    // An empty id is no id.
    assert_eq!(
        producer_value(&[("transactional.id", "")], "enable.idempotence"),
        "false"
    );
    let producer = props(&pairs).producer().expect("accepted");
    assert_eq!(producer.transactional_id(), Some("t"));
    assert_eq!(
        producer.transaction_timeout(),
        std::time::Duration::from_mins(1)
    );
}

#[test]
fn idempotent_producer() {
    let on = ("enable.idempotence", "true");
    assert_eq!(
        producer_refusal(&[on, ("max.in.flight", "6")]),
        "`max.in.flight` must be set <= 5 when `enable.idempotence` is true"
    );
    assert_eq!(
        producer_value(
            &[on, ("max.in.flight.requests.per.connection", "3")],
            "max.in.flight"
        ),
        "3"
    );
    assert_eq!(producer_value(&[on], "max.in.flight"), "5");
    assert_eq!(
        producer_refusal(&[on, ("retries", "0")]),
        "`retries` must be set >= 1 when `enable.idempotence` is true"
    );
    assert_eq!(producer_value(&[on, ("retries", "3")], "retries"), "3");
    assert_eq!(producer_value(&[on], "retries"), "2147483647");
    assert_eq!(
        producer_refusal(&[on, ("queue.buffering.backpressure.threshold", "2")]),
        "`queue.buffering.backpressure.threshold` must be set to 1 when `enable.idempotence` is true"
    );
    assert_eq!(
        producer_refusal(&[on, ("acks", "1")]),
        "`acks` must be set to `all` when `enable.idempotence` is true"
    );
    assert_eq!(
        producer_refusal(&[on, ("request.required.acks", "0")]),
        "`acks` must be set to `all` when `enable.idempotence` is true"
    );
    assert!(props(&[on, ("acks", "all")]).producer().is_ok());
    assert!(props(&[on, ("acks", "-1")]).producer().is_ok());
    assert_eq!(
        producer_refusal(&[on, ("queuing.strategy", "lifo")]),
        "`queuing.strategy` must be set to `fifo` when `enable.idempotence` is true"
    );
    // Without idempotence these are free.
    assert!(
        props(&[("max.in.flight", "100"), ("retries", "0"), ("acks", "1")])
            .producer()
            .is_ok()
    );
    // A consumer has no idempotence to check.
    assert!(props(&[on, ("acks", "1")]).consumer().is_ok());
}

#[test]
fn gapless_needs_idempotence() {
    assert_eq!(
        producer_refusal(&[("enable.gapless.guarantee", "true")]),
        "`enable.gapless.guarantee` requires `enable.idempotence` to be enabled"
    );
    assert!(
        props(&[("enable.gapless.guarantee", "false")])
            .producer()
            .is_ok()
    );
    assert!(
        props(&[
            ("enable.gapless.guarantee", "true"),
            ("enable.idempotence", "true")
        ])
        .producer()
        .is_ok()
    );
}

#[test]
fn message_timeout_against_linger() {
    let message = "`message.timeout.ms` must be greater than `linger.ms`";
    // With a topic property set, librdkafka checks at creation...
    assert_eq!(
        producer_refusal(&[("linger.ms", "400000"), ("acks", "all")]),
        message
    );
    assert_eq!(
        producer_refusal(&[("message.timeout.ms", "1000"), ("linger.ms", "1000")]),
        message
    );
    // ...without one, at the first produce.
    let producer = props(&[("linger.ms", "400000")])
        .producer()
        .expect("accepted");
    assert_eq!(producer.check_topic().unwrap_err().to_string(), message);
    assert!(
        props(&[("linger.ms", "100")])
            .producer()
            .expect("accepted")
            .check_topic()
            .is_ok()
    );
    // No timeout, no conflict.
    assert!(
        props(&[("message.timeout.ms", "0"), ("linger.ms", "900000")])
            .producer()
            .is_ok()
    );
    // An unset linger gives way.
    assert_eq!(
        producer_value(&[("message.timeout.ms", "3")], "linger.ms"),
        "2.9"
    );
    assert_eq!(
        producer_value(&[("message.timeout.ms", "6")], "linger.ms"),
        "5"
    );
    // A consumer does not look.
    assert!(
        props(&[("message.timeout.ms", "1000"), ("linger.ms", "1000")])
            .consumer()
            .is_ok()
    );
}

#[test]
fn producer_adjustments() {
    assert_eq!(producer_value(&[], "sticky.partitioning.linger.ms"), "10");
    assert_eq!(
        producer_value(&[("linger.ms", "7.75")], "sticky.partitioning.linger.ms"),
        "15"
    );
    assert_eq!(
        producer_value(&[("linger.ms", "500000")], "sticky.partitioning.linger.ms"),
        "900000"
    );
    assert_eq!(
        producer_value(
            &[("linger.ms", "50"), ("sticky.partitioning.linger.ms", "0")],
            "sticky.partitioning.linger.ms"
        ),
        "0"
    );
    assert_eq!(producer_value(&[], "allow.auto.create.topics"), "true");
    assert_eq!(consumer_value(&[], "allow.auto.create.topics"), "false");
    assert_eq!(
        consumer_value(
            &[("allow.auto.create.topics", "true")],
            "allow.auto.create.topics"
        ),
        "true"
    );
    assert_eq!(
        producer_value(
            &[("allow.auto.create.topics", "false")],
            "allow.auto.create.topics"
        ),
        "false"
    );
    assert_eq!(consumer_value(&[], "enable.idempotence"), "false");
    assert_eq!(
        consumer_value(&[("enable.idempotence", "true")], "enable.idempotence"),
        "false"
    );
}

#[test]
fn client_adjustments() {
    assert_eq!(
        consumer_value(
            &[("topic.metadata.refresh.interval.ms", "1000")],
            "metadata.max.age.ms"
        ),
        "3000"
    );
    assert_eq!(
        consumer_value(
            &[("topic.metadata.refresh.interval.ms", "-1")],
            "metadata.max.age.ms"
        ),
        "900000"
    );
    assert_eq!(
        consumer_value(
            &[
                ("topic.metadata.refresh.interval.ms", "1000"),
                ("metadata.max.age.ms", "5")
            ],
            "metadata.max.age.ms"
        ),
        "5"
    );
    assert_eq!(
        consumer_value(
            &[("retry.backoff.ms", "250")],
            "topic.metadata.refresh.fast.interval.ms"
        ),
        "250"
    );
    let azure = [("bootstrap.servers", "ns.servicebus.AZURE.example:9093")];
    assert_eq!(consumer_value(&azure, "connections.max.idle.ms"), "230000");
    assert_eq!(consumer_value(&[], "connections.max.idle.ms"), "0");
}

#[test]
fn producer_acks_beyond_one_are_refused_at_creation() {
    assert_eq!(
        producer_refusal(&[("acks", "2")]),
        "Unsupported value \"2\" for configuration property \"request.required.acks\": Kafka \
         brokers accept only 0, 1 and all (-1)"
    );
    // A consumer ignores acks, as librdkafka does.
    assert!(props(&[("acks", "2")]).consumer().is_ok());
}

/// The OIDC checks, on settings forced in place (no value parsing in the way).
fn oidc(extra: &[(usize, Setting)]) -> Result<(), String> {
    let mut s = Settings::defaults();
    s.force(
        id::SASL_MECHANISM,
        Setting::Str(Some("oauthbearer".to_owned())),
    );
    s.force(id::SASL_OAUTHBEARER_METHOD, Setting::Enum(1));
    for (index, setting) in extra {
        s.force(*index, setting.clone());
    }
    finalize::finalize(&mut s, ClientKind::Consumer)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

fn text(s: &str) -> Setting {
    Setting::Str(Some(s.to_owned()))
}

#[test]
fn oauthbearer_oidc_exclusions() {
    let url = (
        id::SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL,
        text("https://idp/token"),
    );
    let client = [
        url.clone(),
        (id::SASL_OAUTHBEARER_CLIENT_ID, text("c")),
        (id::SASL_OAUTHBEARER_CLIENT_SECRET, text("s")),
    ];
    assert_eq!(oidc(&client), Ok(()));
    let mut unsecure = client.to_vec();
    unsecure.push((
        id::ENABLE_SASL_OAUTHBEARER_UNSECURE_JWT,
        Setting::Bool(true),
    ));
    assert_eq!(
        oidc(&unsecure).unwrap_err(),
        "`enable.sasl.oauthbearer.unsecure.jwt` and `sasl.oauthbearer.method=oidc` are mutually \
         exclusive"
    );
    assert_eq!(
        oidc(&[]).unwrap_err(),
        "`sasl.oauthbearer.token.endpoint.url` is mandatory when `sasl.oauthbearer.method=oidc` \
         is set"
    );
    let azure = (
        id::SASL_OAUTHBEARER_METADATA_AUTHENTICATION_TYPE,
        Setting::Enum(1),
    );
    assert_eq!(
        oidc(std::slice::from_ref(&azure)).unwrap_err(),
        "`sasl.oauthbearer.token.endpoint.url` is mandatory for Azure IMDS authentication when \
         `query` isn't set"
    );
    assert_eq!(
        oidc(&[
            azure,
            (
                id::SASL_OAUTHBEARER_CONFIG,
                text("a=1, query=api-version=1")
            )
        ]),
        Ok(())
    );
    assert_eq!(
        oidc(std::slice::from_ref(&url)).unwrap_err(),
        "`sasl.oauthbearer.client.id` is mandatory when `sasl.oauthbearer.method=oidc` is set"
    );
    assert_eq!(
        oidc(&[url.clone(), (id::SASL_OAUTHBEARER_CLIENT_ID, text("c"))]).unwrap_err(),
        "`sasl.oauthbearer.client.secret` is mandatory when `sasl.oauthbearer.method=oidc` is set"
    );
    // Only when the mechanism is OAUTHBEARER.
    let mut s = Settings::defaults();
    s.force(id::SASL_OAUTHBEARER_METHOD, Setting::Enum(1));
    assert!(finalize::finalize(&mut s, ClientKind::Consumer).is_ok());
}

#[test]
fn oauthbearer_jwt_bearer_exclusions() {
    let base = vec![
        (
            id::SASL_OAUTHBEARER_TOKEN_ENDPOINT_URL,
            text("https://idp/token"),
        ),
        (id::SASL_OAUTHBEARER_GRANT_TYPE, Setting::Enum(1)),
    ];
    let with = |more: &[(usize, Setting)]| {
        let mut all = base.clone();
        all.extend_from_slice(more);
        oidc(&all)
    };
    assert_eq!(
        with(&[]).unwrap_err(),
        "`sasl.oauthbearer.assertion.private.key.file` or \
         `sasl.oauthbearer.assertion.private.key.pem` is mandatory when \
         `sasl.oauthbearer.grant.type` is set to `urn:ietf:params:oauth:grant-type:jwt-bearer`"
    );
    let key_file = (
        id::SASL_OAUTHBEARER_ASSERTION_PRIVATE_KEY_FILE,
        text("/k.pem"),
    );
    let key_pem = (
        id::SASL_OAUTHBEARER_ASSERTION_PRIVATE_KEY_PEM,
        text("-----BEGIN"),
    );
    assert_eq!(with(std::slice::from_ref(&key_file)), Ok(()));
    assert_eq!(with(std::slice::from_ref(&key_pem)), Ok(()));
    assert_eq!(
        with(&[key_file.clone(), key_pem]).unwrap_err(),
        "Mutually exclusive properties set. `sasl.oauthbearer.assertion.private.key.file` and \
         `sasl.oauthbearer.assertion.private.key.pem` cannot both be set"
    );
    let file = (id::SASL_OAUTHBEARER_ASSERTION_FILE, text("/assertion.jwt"));
    assert_eq!(with(std::slice::from_ref(&file)), Ok(()));
    for (index, setting, name) in [
        (
            id::SASL_OAUTHBEARER_ASSERTION_PRIVATE_KEY_FILE,
            text("x"),
            "private.key.file",
        ),
        (
            id::SASL_OAUTHBEARER_ASSERTION_PRIVATE_KEY_PEM,
            text("x"),
            "private.key.pem",
        ),
        (
            id::SASL_OAUTHBEARER_ASSERTION_PRIVATE_KEY_PASSPHRASE,
            text("x"),
            "private.key.passphrase",
        ),
        (
            id::SASL_OAUTHBEARER_ASSERTION_JWT_TEMPLATE_FILE,
            text("x"),
            "jwt.template.file",
        ),
        (
            id::SASL_OAUTHBEARER_ASSERTION_CLAIM_SUB,
            text("x"),
            "claim.sub",
        ),
        (
            id::SASL_OAUTHBEARER_ASSERTION_CLAIM_AUD,
            text("x"),
            "claim.aud",
        ),
        (
            id::SASL_OAUTHBEARER_ASSERTION_CLAIM_ISS,
            text("x"),
            "claim.iss",
        ),
        (
            id::SASL_OAUTHBEARER_ASSERTION_CLAIM_JTI_INCLUDE,
            Setting::Bool(false),
            "claim.jti.include",
        ),
        (
            id::SASL_OAUTHBEARER_ASSERTION_CLAIM_EXP_SECONDS,
            Setting::Int(300),
            "claim.exp.seconds",
        ),
        (
            id::SASL_OAUTHBEARER_ASSERTION_CLAIM_NBF_SECONDS,
            Setting::Int(60),
            "claim.nbf.seconds",
        ),
    ] {
        assert_eq!(
            with(&[file.clone(), (index, setting)]).unwrap_err(),
            format!(
                "Mutually exclusive properties set. `sasl.oauthbearer.assertion.file` and \
                 `sasl.oauthbearer.assertion.{name}` cannot both be set"
            )
        );
    }
}

#[test]
fn warnings_follow_librdkafkas() {
    let producer = props(&[
        ("session.timeout.ms", "10000"),
        ("queuing.strategy", "fifo"),
    ])
    .producer()
    .expect("accepted");
    let warnings = producer.warnings();
    assert!(
        warnings
            .iter()
            .any(|w| w.starts_with("`session.timeout.ms` is a consumer property")),
        "{warnings:?}"
    );
    assert!(
        warnings
            .iter()
            .any(|w| w.starts_with("`queuing.strategy` is deprecated")),
        "{warnings:?}"
    );
    let consumer = props(&[
        ("acks", "1"),
        ("sasl.mechanism", "PLAIN"),
        ("fetch.wait.max.ms", "60000"),
    ])
    .consumer()
    .expect("accepted");
    let warnings = consumer.warnings();
    assert!(
        warnings
            .iter()
            .any(|w| w.starts_with("`acks` is a producer property")),
        "{warnings:?}"
    );
    assert!(
        warnings
            .iter()
            .any(|w| w.starts_with("`sasl.mechanism` is set but")),
        "{warnings:?}"
    );
    assert!(
        warnings
            .iter()
            .any(|w| w.starts_with("`fetch.wait.max.ms` should be")),
        "{warnings:?}"
    );
    assert!(
        props(&[])
            .consumer()
            .expect("accepted")
            .warnings()
            .is_empty()
    );
    let consumer = props(&[("enable.auto.offset.store", "false")])
        .consumer()
        .expect("accepted");
    assert_eq!(
        consumer.value("enable.auto.offset.store"),
        Some(Value::Bool(false))
    );
}
