//! One property at a time: names, aliases, and every type's parsing with librdkafka's
//! messages.

use super::{check_refusal, props, refusal};
use crate::properties::{PropertyError, Value, find};

/// The value `key` has in a producer configured with `pairs`.
fn producer_value(pairs: &[(&str, &str)], key: &str) -> String {
    let producer = props(pairs).producer().expect("accepted");
    producer.value(key).expect("known").to_string()
}

fn accepted(pairs: &[(&str, &str)]) {
    if let Err(e) = props(pairs).check() {
        panic!("{pairs:?} refused: {e}");
    }
}

#[test]
fn unknown_names_are_refused_with_the_name() {
    assert_eq!(
        check_refusal(&[("foo.bar", "1")]),
        "No such configuration property: \"foo.bar\""
    );
    // Names are case-sensitive.
    assert_eq!(
        check_refusal(&[("ACKS", "all")]),
        "No such configuration property: \"ACKS\""
    );
    // A topic-level try drops `topic.` before it looks, and quotes what it looked for.
    assert_eq!(
        check_refusal(&[("topic.foo", "1")]),
        "No such configuration property: \"foo\""
    );
    let error = props(&[("foo", "x")]).check().unwrap_err();
    assert!(matches!(error, PropertyError::Unknown { .. }));
    assert_eq!(error.key(), Some("foo"));
    assert_eq!(error.value(), Some("x"));
}

#[test]
fn aliases_resolve_to_this_crates_names() {
    for (alias, name) in [
        ("request.required.acks", "acks"),
        ("queue.buffering.max.ms", "linger.ms"),
        ("sasl.mechanisms", "sasl.mechanism"),
        ("metadata.broker.list", "bootstrap.servers"),
        ("compression.codec", "compression.type"),
        ("max.in.flight", "max.in.flight.requests.per.connection"),
        ("message.send.max.retries", "retries"),
        ("delivery.timeout.ms", "message.timeout.ms"),
        ("fetch.message.max.bytes", "max.partition.fetch.bytes"),
        (
            "sasl.oauthbearer.client.credentials.client.id",
            "sasl.oauthbearer.client.id",
        ),
        (
            "sasl.oauthbearer.client.credentials.client.secret",
            "sasl.oauthbearer.client.secret",
        ),
        ("topic.enable.auto.commit", "auto.commit.enable"),
        ("topic.compression.codec", "compression.type"),
        ("topic.acks", "acks"),
    ] {
        assert_eq!(find(alias).map(|p| p.name), Some(name), "{alias}");
    }
    // The global property of a name wins over the topic one.
    assert_eq!(
        find("enable.auto.commit").map(|p| p.name),
        Some("enable.auto.commit")
    );
    assert_eq!(
        find("topic.enable.auto.commit").map(|p| p.rdkafka_name),
        Some("auto.commit.enable")
    );
    // `topic.` is only dropped when the whole key names no global property.
    assert_eq!(
        find("topic.metadata.refresh.interval.ms").map(|p| p.name),
        Some("topic.metadata.refresh.interval.ms")
    );
}

#[test]
fn get_finds_a_property_under_any_spelling() {
    let p = props(&[
        ("request.required.acks", "1"),
        ("client.id", "a"),
        ("linger.ms", "7"),
    ]);
    assert_eq!(p.get("acks"), Some("1"));
    assert_eq!(p.get("topic.acks"), Some("1"));
    assert_eq!(p.get("queue.buffering.max.ms"), Some("7"));
    assert_eq!(p.get("acks "), None);
    assert_eq!(p.get("retries"), None);
    assert_eq!(p.get_exact("acks"), None);
    assert_eq!(p.get_exact("client.id"), Some("a"));
}

#[test]
fn a_later_pair_wins_across_spellings() {
    assert_eq!(
        producer_value(
            &[("linger.ms", "10"), ("queue.buffering.max.ms", "20")],
            "linger.ms"
        ),
        "20"
    );
    assert_eq!(
        producer_value(
            &[("queue.buffering.max.ms", "20"), ("linger.ms", "10")],
            "linger.ms"
        ),
        "10"
    );
    // A key set again replaces its earlier value before anything is checked, as in a map.
    assert_eq!(
        producer_value(&[("acks", "sometimes"), ("acks", "1")], "acks"),
        "1"
    );
    // Re-setting a key moves it to its last place in the order.
    assert_eq!(
        producer_value(
            &[
                ("linger.ms", "10"),
                ("queue.buffering.max.ms", "20"),
                ("linger.ms", "30")
            ],
            "linger.ms"
        ),
        "30"
    );
}

#[test]
fn remove_takes_every_spelling() {
    let mut p = props(&[
        ("bootstrap.servers", "a"),
        ("metadata.broker.list", "b"),
        ("client.id", "c"),
        ("x.y", "1"),
    ]);
    assert_eq!(p.remove("metadata.broker.list"), 2);
    assert_eq!(p.remove("x.y"), 1);
    assert_eq!(p.pairs(), [("client.id".to_owned(), "c".to_owned())]);
}

#[test]
fn booleans() {
    for yes in ["true", "TRUE", "True", "t", "T", "1"] {
        assert_eq!(
            producer_value(&[("enable.idempotence", yes)], "enable.idempotence"),
            "true",
            "{yes}"
        );
    }
    for no in ["false", "FALSE", "f", "F", "0"] {
        assert_eq!(
            producer_value(&[("socket.nagle.disable", no)], "socket.nagle.disable"),
            "false",
            "{no}"
        );
    }
    for bad in ["yes", "on", " true", "true ", "01", "2", "tr"] {
        assert_eq!(
            check_refusal(&[("enable.idempotence", bad)]),
            "Expected bool value for \"enable.idempotence\": true or false",
            "{bad:?}"
        );
    }
    assert_eq!(
        check_refusal(&[("enable.idempotence", "")]),
        "Bool configuration property \"enable.idempotence\" cannot be set to empty value"
    );
}

#[test]
fn integers() {
    let v = |value: &str| producer_value(&[("message.max.bytes", value)], "message.max.bytes");
    assert_eq!(v("65536"), "65536");
    assert_eq!(v("0x10000"), "65536");
    assert_eq!(v("0200000"), "65536");
    assert_eq!(v("  65536"), "65536");
    assert_eq!(v("+65536"), "65536");
    assert_eq!(v("65536 bytes"), "65536");
    assert_eq!(v("1000e9"), "1000");
    assert_eq!(
        check_refusal(&[("message.max.bytes", "999")]),
        "Configuration property \"message.max.bytes\" value 999 is outside allowed range 1000..1000000000"
    );
    // Past 32 bits a value wraps, as librdkafka's cast to `int` wraps it: 2^32 + 1000 is 1000.
    assert_eq!(v("4294968296"), "1000");
    assert_eq!(
        check_refusal(&[("message.max.bytes", "4294967295")]),
        "Configuration property \"message.max.bytes\" value -1 is outside allowed range 1000..1000000000"
    );
    assert_eq!(
        check_refusal(&[("message.max.bytes", "lots")]),
        "Invalid value for configuration property \"message.max.bytes\""
    );
    assert_eq!(
        check_refusal(&[("message.max.bytes", "")]),
        "Integer configuration property \"message.max.bytes\" cannot be set to empty value"
    );
    assert_eq!(
        check_refusal(&[("message.max.bytes", " ")]),
        "Invalid value for configuration property \"message.max.bytes\""
    );
}

#[test]
fn acks_takes_all_and_numbers_and_names_librdkafkas_property_when_refused() {
    let acks = |value: &str| producer_value(&[("acks", value)], "acks");
    assert_eq!(acks("all"), "-1");
    assert_eq!(acks("ALL"), "-1");
    assert_eq!(acks("-1"), "-1");
    assert_eq!(acks("0"), "0");
    assert_eq!(acks("1"), "1");
    let message = check_refusal(&[("acks", "sometimes")]);
    assert_eq!(
        message,
        "Invalid value for configuration property \"request.required.acks\""
    );
    assert!(message.contains("acks"));
    assert_eq!(
        check_refusal(&[("acks", "-2")]),
        "Configuration property \"request.required.acks\" value -2 is outside allowed range -1..1000"
    );
    // `all` is the whole value, not a prefix.
    assert!(props(&[("acks", " all")]).check().is_err());
}

#[test]
fn the_value_in_the_error_is_the_one_written_under_the_key_written() {
    let error = props(&[("acks", "sometimes")]).check().unwrap_err();
    assert!(matches!(error, PropertyError::Invalid { .. }));
    assert_eq!(error.key(), Some("acks"));
    assert_eq!(error.value(), Some("sometimes"));
}

#[test]
fn floats() {
    let linger = |value: &str| producer_value(&[("linger.ms", value)], "linger.ms");
    assert_eq!(linger("0.5"), "0.5");
    assert_eq!(linger("1e3"), "1000");
    assert_eq!(linger(" 12.5ms"), "12.5");
    assert_eq!(linger("0x10"), "16");
    assert_eq!(linger("900000"), "900000");
    assert_eq!(
        check_refusal(&[("linger.ms", "1e6")]),
        "Configuration property \"queue.buffering.max.ms\" value 1e+06 is outside allowed range 0..900000"
    );
    assert_eq!(
        check_refusal(&[("linger.ms", "-0.5")]),
        "Configuration property \"queue.buffering.max.ms\" value -0.5 is outside allowed range 0..900000"
    );
    assert_eq!(
        check_refusal(&[("linger.ms", "inf")]),
        "Configuration property \"queue.buffering.max.ms\" value inf is outside allowed range 0..900000"
    );
    for bad in ["soon", "nan", ".", "e3"] {
        assert_eq!(
            check_refusal(&[("linger.ms", bad)]),
            "Invalid value for configuration property \"queue.buffering.max.ms\"",
            "{bad}"
        );
    }
    assert_eq!(
        check_refusal(&[("linger.ms", "")]),
        "Float configuration property \"queue.buffering.max.ms\" cannot be set to empty value"
    );
}

#[test]
fn enums_are_case_insensitive_whole_words_with_leading_space_dropped() {
    let reset = |value: &str| {
        let c = props(&[("auto.offset.reset", value)])
            .consumer()
            .expect("accepted");
        c.value("auto.offset.reset").expect("known").to_string()
    };
    for earliest in [
        "smallest",
        "earliest",
        "beginning",
        "EARLIEST",
        " \tBeginning",
    ] {
        assert_eq!(reset(earliest), "smallest", "{earliest}");
    }
    for latest in ["largest", "latest", "end", "Latest"] {
        assert_eq!(reset(latest), "largest", "{latest}");
    }
    assert_eq!(reset("error"), "error");
    // Only white space: librdkafka changes nothing.
    assert_eq!(reset("   "), "largest");
    assert_eq!(
        check_refusal(&[("auto.offset.reset", "earliest ")]),
        "Invalid value \"earliest \" for configuration property \"auto.offset.reset\""
    );
    assert_eq!(
        check_refusal(&[("auto.offset.reset", "")]),
        "Configuration property \"auto.offset.reset\" cannot be set to empty value"
    );
    let message = check_refusal(&[("security.protocol", "SASL_TLS")]);
    assert_eq!(
        message,
        "Invalid value \"SASL_TLS\" for configuration property \"security.protocol\""
    );
    for protocol in ["plaintext", "sasl_plaintext", "SASL_PLAINTEXT"] {
        accepted(&[("security.protocol", protocol)]);
    }
    for protocol in ["SSL", "SASL_SSL", "sasl_ssl"] {
        if cfg!(feature = "ssl") {
            accepted(&[("security.protocol", protocol)]);
        } else {
            // Without the `ssl` feature, as librdkafka built without OpenSSL.
            assert_eq!(
                check_refusal(&[("security.protocol", protocol)]),
                format!(
                    "Unsupported value \"{protocol}\" for configuration property \
                     \"security.protocol\": OpenSSL not available at build time"
                )
            );
        }
    }
    for codec in ["none", "gzip", "snappy", "lz4", "zstd", "LZ4"] {
        accepted(&[("compression.type", codec)]);
    }
    // `inherit` is a value of the topic property only.
    assert_eq!(
        check_refusal(&[("compression.type", "inherit")]),
        "Invalid value \"inherit\" for configuration property \"compression.codec\""
    );
    accepted(&[("topic.compression.type", "inherit")]);
}

#[test]
fn flags_add_and_remove_comma_separated_words() {
    let debug = |value: &str| producer_value(&[("debug", value)], "debug");
    assert_eq!(debug("broker,topic"), "broker,topic");
    assert_eq!(debug(" Topic, broker,,"), "broker,topic");
    assert_eq!(debug("all,-eos").split(',').count(), 19);
    assert!(debug("all").ends_with(",all"));
    assert_eq!(debug("+msg,-msg,fetch"), "fetch");
    // Trailing space is not dropped.
    assert_eq!(
        check_refusal(&[("debug", "broker ,topic")]),
        "Invalid value \"broker \" for configuration property \"debug\""
    );
    assert_eq!(
        check_refusal(&[("debug", "")]),
        "Configuration property \"debug\" cannot be set to empty value"
    );
    // Empty words and lone signs change nothing.
    assert_eq!(debug(", ,+,-"), "");
    // builtin.features: asking for what this build has passes, for what it lacks fails.
    accepted(&[(
        "builtin.features",
        "gzip,snappy,ssl,sasl,regex,lz4,sasl_plain,sasl_scram,zstd,sasl_oauthbearer",
    )]);
    assert_eq!(
        check_refusal(&[("builtin.features", "lz4, sasl_gssapi")]),
        "Unsupported value \"sasl_gssapi\" for configuration property \"builtin.features\": \
         ruststream-kafka has no Kerberos (GSSAPI) implementation"
    );
    accepted(&[("builtin.features", "oidc")]);
    assert!(
        check_refusal(&[("builtin.features", "plugins")])
            .starts_with("Unsupported value \"plugins\"")
    );
}

#[test]
fn strings_lose_leading_space_and_empty_means_default() {
    assert_eq!(
        producer_value(&[("client.id", "  svc ")], "client.id"),
        "svc "
    );
    assert_eq!(producer_value(&[("client.id", "")], "client.id"), "rdkafka");
    assert_eq!(producer_value(&[("client.id", "   ")], "client.id"), "");
    // Kafka strings are taken as they are.
    let consumer = props(&[("client.rack", " r1")])
        .consumer()
        .expect("accepted");
    assert_eq!(consumer.value("client.rack"), Some(Value::Str(Some(" r1"))));
    let consumer = props(&[("group.protocol.type", "")])
        .consumer()
        .expect("accepted");
    assert_eq!(
        consumer.value("group.protocol.type"),
        Some(Value::Str(Some("consumer")))
    );
}

#[test]
fn checked_strings() {
    for partitioner in [
        "random",
        "consistent",
        "consistent_random",
        "murmur2",
        "murmur2_random",
        "fnv1a",
        "fnv1a_random",
        "  murmur2",
    ] {
        accepted(&[("partitioner", partitioner)]);
    }
    assert_eq!(
        check_refusal(&[("partitioner", "Murmur2")]),
        "Invalid value for configuration property \"partitioner\": Murmur2"
    );
    assert_eq!(
        check_refusal(&[("partitioner", "")]),
        "Invalid value for configuration property \"partitioner\": (null)"
    );
    assert_eq!(
        check_refusal(&[("sasl.mechanism", "PLAIN,SCRAM-SHA-256")]),
        "Invalid value for configuration property \"sasl.mechanisms\": PLAIN,SCRAM-SHA-256"
    );
    assert!(props(&[("sasl.mechanism", "SCRAM SHA")]).check().is_err());
    accepted(&[("broker.version.fallback", "0.9.0")]);
    accepted(&[("broker.version.fallback", "2.8")]);
    assert_eq!(
        check_refusal(&[("broker.version.fallback", "0.7.2")]),
        "Invalid value for configuration property \"broker.version.fallback\": 0.7.2"
    );
}

#[test]
fn pattern_lists() {
    accepted(&[("topic.blacklist", "^internal\\..*,__consumer_offsets")]);
    accepted(&[("topic.blacklist", "")]);
    let message = check_refusal(&[("topic.blacklist", "ok,(unclosed")]);
    assert!(
        message.starts_with("Failed to parse pattern \"(unclosed\": "),
        "{message}"
    );
    assert_eq!(
        crate::properties::validate::split_patterns("a,,b,"),
        ["a", "", "b"]
    );
}

#[test]
fn what_a_string_cannot_set() {
    assert_eq!(
        check_refusal(&[("dr_msg_cb", "x")]),
        "Property \"dr_msg_cb\" must be set through dedicated .._set_..() function"
    );
    assert_eq!(
        check_refusal(&[("topic.partitioner_cb", "x")]),
        "Property \"partitioner_cb\" must be set through dedicated .._set_..() function"
    );
    assert_eq!(
        check_refusal(&[("ssl_key", "x")]),
        "Internal property \"ssl_key\" not settable"
    );
    assert!(check_refusal(&[("sasl.jaas.config", "x")]).contains("sasl.mechanism"));
    assert!(check_refusal(&[("ssl.truststore.location", "x")]).contains("ssl.ca.location"));
}

#[test]
fn properties_this_build_does_not_support() {
    assert_eq!(
        check_refusal(&[("ssl.engine.id", "pkcs11")]),
        "Configuration property \"ssl.engine.id\" not supported in this build: OpenSSL engines \
         do not exist in ruststream-kafka's TLS (rustls)"
    );
    for key in [
        "https.ca.location",
        "ssl.providers",
        "plugin.library.paths",
        "ssl.ca.certificate.stores",
        "test.mock.num.brokers",
    ] {
        let message = check_refusal(&[(key, "1")]);
        assert!(
            message.starts_with(&format!(
                "Configuration property \"{key}\" not supported in this build: "
            )),
            "{message}"
        );
    }
    // Even empty: the build check comes first.
    assert!(check_refusal(&[("ssl.providers", "")]).contains("not supported in this build"));
    // What librdkafka gates on OpenSSL, this crate has through rustls.
    for (key, value) in [
        ("ssl.ca.location", "probe"),
        ("ssl.endpoint.identification.algorithm", "none"),
        ("sasl.oauthbearer.config", "principal=admin"),
        ("ssl.curves.list", "P-256"),
    ] {
        accepted(&[(key, value)]);
    }
}

#[test]
fn values_read_back_as_librdkafka_prints_them() {
    let producer = props(&[
        ("linger.ms", "2.5"),
        ("debug", "eos,msg"),
        ("compression.codec", "LZ4"),
    ])
    .producer()
    .expect("accepted");
    assert_eq!(producer.value("linger.ms"), Some(Value::Float(2.5)));
    assert_eq!(
        producer.value("debug"),
        Some(Value::Flags(vec!["msg", "eos"]))
    );
    assert_eq!(
        producer.value("debug").map(|v| v.to_string()).as_deref(),
        Some("msg,eos")
    );
    assert_eq!(producer.value("compression.type"), Some(Value::Enum("lz4")));
    assert_eq!(
        producer.value("topic.compression.type"),
        Some(Value::Enum("inherit"))
    );
    assert_eq!(producer.value("transactional.id"), Some(Value::Str(None)));
    // As librdkafka reports it: the features this build has.
    assert_eq!(
        producer
            .value("builtin.features")
            .map(|v| v.to_string())
            .as_deref(),
        Some("gzip,snappy,ssl,sasl,regex,lz4,sasl_plain,sasl_scram,zstd,sasl_oauthbearer,oidc")
    );
    assert_eq!(producer.value("dr_cb"), None);
    assert_eq!(producer.value("nope"), None);
}

#[test]
fn refusal_helper_reports_the_message() {
    assert_eq!(refusal::<()>(Err(PropertyError::conflict("x"))), "x");
}
