//! TLS and SASL against the listeners of a real single-node Kafka (`scripts/kafka up`): every
//! protocol and mechanism produces, consumes in a group and commits a transaction; bad
//! credentials and bad certificates fail the connect quickly with a clear error; sessions on
//! the short-lived listener are re-authenticated while records keep flowing.
//!
//! Needs the variables `scripts/kafka env` prints; without them every test fails (live tests
//! never skip).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use protocol_tests::{create_topic, logs, unique_topic};
use ruststream_kafka::client::{
    Admin, CaSource, Client, ClientConfig, Consumer, ConsumerConfig, ConsumerEvent, Error,
    IsolationLevel, Keystore, OffsetReset, OffsetSpec, Pem, Producer, ProducerConfig,
    ProducerRecord, SaslConfig, SaslMechanism, Secret, SecurityConfig, SecurityProtocol,
    Subscription, TLS_PROVIDER_VARIABLE, TlsConfig, TlsProvider, TransactionalProducer,
    reauthentications, tls_provider, unsecured_jwt_provider,
};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

fn env(name: &str) -> String {
    match std::env::var(name) {
        Ok(v) => v,
        Err(e) => panic!(
            "{name}: {e}; start Kafka with `scripts/kafka up` and export what \
             `scripts/kafka env` prints (live tests never skip)"
        ),
    }
}

fn trusting_test_ca() -> TlsConfig {
    TlsConfig {
        ca: CaSource::Location(env("KAFKA_CA_PEM").into()),
        ..TlsConfig::default()
    }
}

fn config(url: &str, protocol: SecurityProtocol, sasl: Option<SaslConfig>) -> ClientConfig {
    let mut config = ClientConfig::new(url);
    config.connect_timeout = CONNECT_TIMEOUT;
    config.security = SecurityConfig {
        protocol,
        tls: trusting_test_ca(),
        sasl,
    };
    config
}

fn password(mechanism: SaslMechanism, user: &str, secret: &str) -> SaslConfig {
    SaslConfig::with_password(mechanism, user, secret)
}

async fn connect(config: ClientConfig) -> Client {
    logs();
    match Client::connect(config).await {
        Ok(c) => c,
        Err(e) => panic!("connect: {e}"),
    }
}

fn value(i: usize) -> Bytes {
    Bytes::from(format!("v{i}"))
}

/// Produces 10 records, commits a transaction of 5 more, and reads all 15 back in a consumer
/// group, every connection secured as `config` says.
async fn round_trip(config: ClientConfig, label: &str) {
    let client = connect(config).await;
    let topic = unique_topic(&format!("security-{label}"));
    create_topic(&client, &topic, 2).await;

    let producer = match Producer::new(client.clone(), ProducerConfig::default()) {
        Ok(p) => p,
        Err(e) => panic!("producer: {e}"),
    };
    let mut reports = Vec::new();
    for i in 0..10 {
        match producer.send(ProducerRecord::new(&topic, value(i))).await {
            Ok(d) => reports.push(d),
            Err(e) => panic!("send: {e}"),
        }
    }
    for d in reports {
        if let Err(e) = d.await {
            panic!("delivery: {e}");
        }
    }

    let id = format!("security-{label}-{:08x}", fastrand::u32(..));
    let txn = match TransactionalProducer::new(client.clone(), ProducerConfig::transactional(id)) {
        Ok(p) => p,
        Err(e) => panic!("transactional producer: {e}"),
    };
    if let Err(e) = txn.init().await {
        panic!("init: {e}");
    }
    if let Err(e) = txn.begin() {
        panic!("begin: {e}");
    }
    for i in 10..15 {
        if let Err(e) = txn.send(ProducerRecord::new(&topic, value(i))).await {
            panic!("transactional send: {e}");
        }
    }
    if let Err(e) = txn.commit().await {
        panic!("commit: {e}");
    }

    let group = format!("security-{label}-{:08x}", fastrand::u32(..));
    let mut consumer = match Consumer::new(
        client.clone(),
        ConsumerConfig {
            group_id: Some(group),
            auto_offset_reset: OffsetReset::Earliest,
            ..ConsumerConfig::default()
        },
    ) {
        Ok(c) => c,
        Err(e) => panic!("consumer: {e}"),
    };
    if let Err(e) = consumer.subscribe(Subscription::Topics(vec![topic.clone()])) {
        panic!("subscribe: {e}");
    }
    let mut seen = BTreeSet::new();
    let deadline = tokio::time::Instant::now() + Duration::from_mins(1);
    while seen.len() < 15 {
        match tokio::time::timeout_at(deadline, consumer.poll()).await {
            Err(elapsed) => panic!("{label}: {elapsed}, {} of 15 records consumed", seen.len()),
            Ok(Err(e)) => panic!("poll: {e}"),
            Ok(Ok(ConsumerEvent::Records(batch))) => {
                for r in batch.records {
                    seen.insert(r.value.unwrap_or_default());
                }
            }
            Ok(Ok(ConsumerEvent::Error(e))) => panic!("consumer error: {e}"),
            Ok(Ok(_)) => {}
        }
    }
    assert_eq!(seen, (0..15).map(value).collect::<BTreeSet<_>>());
    if let Err(e) = consumer.commit().await {
        panic!("commit offsets: {e}");
    }
    drop(consumer.close().await);
}

#[tokio::test]
async fn ssl() {
    let url = env("KAFKA_SSL_URL");
    round_trip(config(&url, SecurityProtocol::Ssl, None), "ssl").await;
}

#[tokio::test]
async fn sasl_plaintext_plain() {
    let url = env("KAFKA_SASL_URL");
    let sasl = Some(password(SaslMechanism::Plain, "alice", "alice-secret"));
    round_trip(config(&url, SecurityProtocol::SaslPlaintext, sasl), "plain").await;
}

#[tokio::test]
async fn sasl_plaintext_scram_sha_256() {
    let url = env("KAFKA_SASL_URL");
    let sasl = Some(password(
        SaslMechanism::ScramSha256,
        "alice",
        "alice-secret",
    ));
    round_trip(
        config(&url, SecurityProtocol::SaslPlaintext, sasl),
        "scram256",
    )
    .await;
}

#[tokio::test]
async fn sasl_plaintext_scram_sha_512() {
    let url = env("KAFKA_SASL_URL");
    let sasl = Some(password(
        SaslMechanism::ScramSha512,
        "alice",
        "alice-secret",
    ));
    round_trip(
        config(&url, SecurityProtocol::SaslPlaintext, sasl),
        "scram512",
    )
    .await;
}

#[tokio::test]
async fn sasl_plaintext_oauthbearer() {
    let url = env("KAFKA_SASL_URL");
    let provider = match unsecured_jwt_provider("principal=alice lifeSeconds=600") {
        Ok(p) => p,
        Err(e) => panic!("token provider: {e}"),
    };
    let sasl = Some(SaslConfig::oauthbearer(provider));
    round_trip(config(&url, SecurityProtocol::SaslPlaintext, sasl), "oauth").await;
}

#[tokio::test]
async fn sasl_ssl_scram_sha_512() {
    let url = env("KAFKA_SASL_SSL_URL");
    let sasl = Some(password(
        SaslMechanism::ScramSha512,
        "alice",
        "alice-secret",
    ));
    let mut config = config(&url, SecurityProtocol::SaslSsl, sasl);
    // `ssl.ca.location` naming a directory: every PEM file in it is read.
    let ca = std::path::PathBuf::from(env("KAFKA_CA_PEM"));
    if let Some(dir) = ca.parent() {
        config.security.tls.ca = CaSource::Location(dir.to_owned());
    }
    round_trip(config, "saslssl").await;
}

fn client_certificate() -> TlsConfig {
    TlsConfig {
        certificate: Some(Pem::File(env("KAFKA_CLIENT_CERT_PEM").into())),
        key: Some(Pem::File(env("KAFKA_CLIENT_KEY_PEM").into())),
        ..trusting_test_ca()
    }
}

#[tokio::test]
async fn mutual_tls() {
    let url = env("KAFKA_MTLS_URL");
    let mut config = config(&url, SecurityProtocol::Ssl, None);
    config.security.tls = client_certificate();
    round_trip(config, "mtls").await;
}

/// The client's key and chain from the PKCS#12 keystore `scripts/kafka` made (the same key the
/// PEM files hold), as `ssl.keystore.location` and `ssl.keystore.password` give them.
#[tokio::test]
async fn mutual_tls_with_a_pkcs12_keystore() {
    let url = env("KAFKA_MTLS_URL");
    let mut config = config(&url, SecurityProtocol::Ssl, None);
    config.security.tls.keystore = Some(Keystore {
        path: env("KAFKA_CLIENT_P12").into(),
        password: Secret::new(env("KAFKA_KEYSTORE_PASSWORD")),
    });
    round_trip(config, "p12").await;
}

#[tokio::test]
async fn a_pkcs12_keystore_with_a_wrong_password_stops_the_start() {
    let url = env("KAFKA_MTLS_URL");
    let mut config = config(&url, SecurityProtocol::Ssl, None);
    config.security.tls.keystore = Some(Keystore {
        path: env("KAFKA_CLIENT_P12").into(),
        password: Secret::new("not-the-password"),
    });
    let e = refused(config).await;
    let text = e.to_string();
    assert!(matches!(e, Error::Tls { .. }), "{text}");
    assert!(text.contains("`ssl.keystore.location`"), "{text}");
    assert!(text.contains("wrong `ssl.keystore.password`"), "{text}");
    assert!(!text.contains("not-the-password"), "{text}");
}

/// `ssl.cipher.suites` and `ssl.curves.list` narrowed to one TLS 1.3 suite, one TLS 1.2 suite
/// and one group the broker has (P-384): every connection of a round trip handshakes with them.
#[tokio::test]
async fn chosen_cipher_suites_and_curves_connect() {
    let url = env("KAFKA_SSL_URL");
    let mut config = config(&url, SecurityProtocol::Ssl, None);
    config.security.tls.cipher_suites =
        Some("TLS_AES_256_GCM_SHA384:ECDHE-RSA-AES256-GCM-SHA384".into());
    config.security.tls.curves = Some("secp384r1".into());
    round_trip(config, "suites").await;
}

/// With `RUSTSTREAM_KAFKA_TLS_PROVIDER=rustcrypto` (how `scripts/test` runs these tests a
/// second time) every TLS test here ran on the fallback provider, not on graviola.
#[test]
fn the_tls_provider_is_the_one_asked_for() {
    let asked = std::env::var(TLS_PROVIDER_VARIABLE).unwrap_or_default();
    let used = tls_provider();
    eprintln!("{TLS_PROVIDER_VARIABLE}={asked:?}: TLS runs on {used:?}");
    if asked == "rustcrypto" {
        assert_eq!(used, TlsProvider::RustCrypto);
    }
}

/// A CRL of the broker's CA that revokes nothing: the broker is accepted, and every connection
/// of a whole round trip checks it.
#[tokio::test]
async fn crl_that_revokes_nothing_lets_the_broker_in() {
    let url = env("KAFKA_SSL_URL");
    let mut config = config(&url, SecurityProtocol::Ssl, None);
    config.security.tls.crl = Some(env("KAFKA_CRL_EMPTY_PEM").into());
    round_trip(config, "crl").await;
}

/// The same CA's CRL with the broker's certificate on it: the handshake fails, saying so.
#[tokio::test]
async fn crl_that_revokes_the_broker_fails_the_handshake() {
    let url = env("KAFKA_SSL_URL");
    let mut config = config(&url, SecurityProtocol::Ssl, None);
    config.security.tls.crl = Some(env("KAFKA_CRL_REVOKED_PEM").into());
    let e = refused(config).await;
    assert!(matches!(e, Error::Tls { .. }), "{e}");
    assert!(e.to_string().contains("certificate revoked"), "{e}");
}

/// A CRL from another issuer covers nothing of the broker's: as with librdkafka's CRL check,
/// an unknown revocation status is a failure, not a pass.
#[tokio::test]
async fn crl_of_another_issuer_fails_the_handshake() {
    let url = env("KAFKA_SSL_URL");
    let mut config = config(&url, SecurityProtocol::Ssl, None);
    config.security.tls.crl = Some(foreign_crl().into());
    let e = refused(config).await;
    assert!(matches!(e, Error::Tls { .. }), "{e}");
    assert!(e.to_string().contains("revocation unknown"), "{e}");
}

/// A CRL signed by a CA other than the broker's: the test CA's revoking CRL with its issuer
/// name changed is no longer its issuer's, which is all this needs (the verifier never gets as
/// far as its signature).
fn foreign_crl() -> String {
    let path = std::env::temp_dir().join(format!("foreign-crl-{}.pem", std::process::id()));
    let pem = match std::fs::read_to_string(env("KAFKA_CRL_REVOKED_PEM")) {
        Ok(pem) => pem,
        Err(e) => panic!("CRL: {e}"),
    };
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    let mut der = match STANDARD.decode(body) {
        Ok(der) => der,
        Err(e) => panic!("CRL body: {e}"),
    };
    // The issuer's common name, as the test CA's certificate spells it.
    let name = b"ruststream-kafka-test-ca";
    let Some(at) = der.windows(name.len()).position(|w| w == name) else {
        panic!("the CRL does not name the test CA");
    };
    der[at] = b'X';
    let text = format!(
        "-----BEGIN X509 CRL-----\n{}\n-----END X509 CRL-----\n",
        STANDARD.encode(&der)
    );
    if let Err(e) = std::fs::write(&path, text) {
        panic!("write {}: {e}", path.display());
    }
    path.to_string_lossy().into_owned()
}

/// Connects with `config`, which must fail within the connect timeout; the error.
async fn refused(config: ClientConfig) -> Error {
    logs();
    let started = Instant::now();
    let outcome = tokio::time::timeout(CONNECT_TIMEOUT * 2, Client::connect(config)).await;
    let elapsed = started.elapsed();
    let error = match outcome {
        Err(elapsed) => panic!("connect hung past twice its timeout: {elapsed}"),
        Ok(Ok(_)) => panic!("connect succeeded"),
        Ok(Err(e)) => e,
    };
    assert!(
        elapsed < CONNECT_TIMEOUT + Duration::from_secs(2),
        "took {elapsed:?}: {error}"
    );
    eprintln!("refused after {elapsed:?}: {error}");
    error
}

#[tokio::test]
async fn a_wrong_password_fails_authentication() {
    let url = env("KAFKA_SASL_URL");
    for mechanism in [SaslMechanism::Plain, SaslMechanism::ScramSha512] {
        let sasl = Some(password(mechanism, "alice", "not-her-secret"));
        let e = refused(config(&url, SecurityProtocol::SaslPlaintext, sasl)).await;
        assert!(
            matches!(e, Error::Authentication { .. }),
            "{mechanism:?}: {e}"
        );
        assert!(e.to_string().contains("authentication failed"), "{e}");
        assert!(!e.to_string().contains("not-her-secret"), "{e}");
    }
}

#[tokio::test]
async fn an_unknown_user_fails_authentication() {
    let url = env("KAFKA_SASL_URL");
    for mechanism in [SaslMechanism::Plain, SaslMechanism::ScramSha256] {
        let sasl = Some(password(mechanism, "mallory", "whatever"));
        let e = refused(config(&url, SecurityProtocol::SaslPlaintext, sasl)).await;
        assert!(
            matches!(e, Error::Authentication { .. }),
            "{mechanism:?}: {e}"
        );
    }
}

#[tokio::test]
async fn an_untrusted_ca_fails_the_handshake() {
    let url = env("KAFKA_SSL_URL");
    let mut config = config(&url, SecurityProtocol::Ssl, None);
    // A real certificate, but not the broker's issuer.
    let other = match std::fs::read_to_string(env("KAFKA_CLIENT_CERT_PEM")) {
        Ok(pem) => pem,
        Err(e) => panic!("client certificate: {e}"),
    };
    config.security.tls.ca = CaSource::Pem(other);
    let e = refused(config).await;
    assert!(matches!(e, Error::Tls { .. }), "{e}");
    assert!(e.to_string().contains("certificate not trusted"), "{e}");
}

#[tokio::test]
async fn a_missing_client_certificate_fails_mutual_tls() {
    let url = env("KAFKA_MTLS_URL");
    let e = refused(config(&url, SecurityProtocol::Ssl, None)).await;
    // TLS 1.3 clients learn of the refusal at their first read, as the broker's alert.
    assert!(matches!(e, Error::Tls { .. }), "{e}");
    assert!(e.to_string().contains("client certificate"), "{e}");
}

/// Listens on 127.0.0.2 (a loopback address the broker's certificate does not name) and
/// forwards every connection to `target`: the real broker, reached under a wrong name.
async fn forward_under_another_name(target: String) -> String {
    let listener = match tokio::net::TcpListener::bind("127.0.0.2:0").await {
        Ok(l) => l,
        Err(e) => panic!("bind 127.0.0.2: {e}"),
    };
    let address = match listener.local_addr() {
        Ok(a) => a.to_string(),
        Err(e) => panic!("local address: {e}"),
    };
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            let target = target.clone();
            tokio::spawn(async move {
                if let Ok(mut outbound) = tokio::net::TcpStream::connect(&target).await {
                    drop(tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await);
                }
            });
        }
    });
    address
}

#[tokio::test]
async fn a_wrong_host_name_fails_the_handshake() {
    let proxy = forward_under_another_name(env("KAFKA_SSL_URL")).await;
    let e = refused(config(&proxy, SecurityProtocol::Ssl, None)).await;
    assert!(matches!(e, Error::Tls { .. }), "{e}");
    assert!(e.to_string().contains("name mismatch"), "{e}");
    assert!(e.to_string().contains("127.0.0.2"), "{e}");

    // `ssl.endpoint.identification.algorithm=none`: the chain is still checked, the name not.
    let mut lenient = config(&proxy, SecurityProtocol::Ssl, None);
    lenient.security.tls.verify_hostname = false;
    let client = connect(lenient).await;
    assert!(client.with_metadata(|m| !m.brokers.is_empty()));
}

#[tokio::test]
async fn sessions_are_reauthenticated_while_producing() {
    let url = env("KAFKA_SASL_REAUTH_URL");
    let before = reauthentications();
    for (label, sasl) in [
        (
            "reauth-scram",
            Some(password(
                SaslMechanism::ScramSha512,
                "alice",
                "alice-secret",
            )),
        ),
        (
            "reauth-oauth",
            unsecured_jwt_provider("principal=alice")
                .ok()
                .map(SaslConfig::oauthbearer),
        ),
    ] {
        let client = connect(config(&url, SecurityProtocol::SaslPlaintext, sasl)).await;
        let topic = unique_topic(label);
        create_topic(&client, &topic, 1).await;
        let producer = match Producer::new(client.clone(), ProducerConfig::default()) {
            Ok(p) => p,
            Err(e) => panic!("producer: {e}"),
        };
        // Sessions last 3 s on this listener: 8 s of steady produce spans several of them,
        // and every record must be delivered across the re-authentications.
        let started = Instant::now();
        let mut sent = 0;
        while started.elapsed() < Duration::from_secs(8) {
            let mut reports = Vec::new();
            for _ in 0..20 {
                match producer
                    .send(ProducerRecord::new(&topic, value(sent)))
                    .await
                {
                    Ok(d) => reports.push(d),
                    Err(e) => panic!("send: {e}"),
                }
                sent += 1;
            }
            for d in reports {
                if let Err(e) = d.await {
                    panic!("{label}: delivery after {:?}: {e}", started.elapsed());
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let admin = Admin::new(client.clone());
        let end = admin
            .list_offset(
                &topic,
                0,
                OffsetSpec::Latest,
                IsolationLevel::ReadUncommitted,
            )
            .await;
        match end {
            Ok((offset, _)) => assert_eq!(offset, sent as i64, "{label}"),
            Err(e) => panic!("{label}: list offsets: {e}"),
        }
    }
    let reauths = reauthentications() - before;
    assert!(
        reauths >= 4,
        "only {reauths} re-authentications over two 8 s runs on 3 s sessions"
    );
}
