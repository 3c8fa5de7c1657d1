//! OAUTHBEARER with signed tokens against Kafka's `OIDC` listener (`scripts/kafka`): tokens from
//! an OIDC endpoint the test starts, configured by librdkafka's properties (feature `oidc`), and
//! from a provider installed on the `KafkaBroker`; short-lived tokens refreshed while the
//! connections re-authenticate. Kafka's JWKS validator checks every token's signature,
//! audience, issuer and expiry.

use crate::live;
use crate::token_server::{Signer, TokenServer, oidc_url};

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, UNIX_EPOCH};

use ruststream::{Broker, ConnectedBroker, Subscriber};
use ruststream_kafka::client::{
    IsolationLevel, OAuthToken, Secret, TokenProvider, reauthentications,
};
use ruststream_kafka::{KafkaBroker, KafkaTopic, StartOffset};

const CLIENT_ID: &str = "orders-service";
const CLIENT_SECRET: &str = "orders-secret";

/// A broker on the OIDC listener with SASL OAUTHBEARER, nothing about tokens yet.
fn oauthbearer_broker() -> KafkaBroker {
    KafkaBroker::new([oidc_url()])
        .default_group(live::unique("oidc"))
        .config("security.protocol", "SASL_PLAINTEXT")
        .config("sasl.mechanism", "OAUTHBEARER")
        .connect_timeout(Duration::from_secs(20))
}

/// A broker whose tokens come from `server` through librdkafka's OIDC properties.
#[cfg(feature = "oidc")]
fn oidc_broker(server: &TokenServer, secret: &str) -> KafkaBroker {
    oauthbearer_broker()
        .config("sasl.oauthbearer.method", "oidc")
        .config("sasl.oauthbearer.client.id", CLIENT_ID)
        .config("sasl.oauthbearer.client.secret", secret)
        .config("sasl.oauthbearer.token.endpoint.url", server.url())
        .config("sasl.oauthbearer.scope", "kafka")
        .config("sasl.oauthbearer.extensions", "traceId=abc,tenant=orders")
}

/// Publishes `payloads` to `topic` through `connected`, then reads them back from the start.
async fn round_trip(connected: &ruststream_kafka::ConnectedKafkaBroker, topic: &str, n: usize) {
    let publisher = live::plain_publisher(connected);
    let sent = live::numbered("oidc", n);
    for payload in &sent {
        live::send(&publisher, topic, payload).await;
    }
    let mut subscriber = live::open(
        connected,
        KafkaTopic::new(topic)
            .group(live::unique("oidc-reader"))
            .start(StartOffset::Earliest),
    )
    .await;
    let mut stream = subscriber.stream();
    assert_eq!(live::payloads(&mut stream, n, true).await, sent);
}

#[cfg(feature = "oidc")]
#[tokio::test]
async fn oidc_round_trip_through_properties() {
    if live::unsupported_on_embedded("the OIDC listener is Kafka's") {
        return;
    }
    live::logs();
    let server = TokenServer::start(CLIENT_ID, CLIENT_SECRET, Duration::from_mins(5)).await;
    let topic = live::topic("oidc-round-trip", 1).await;
    let connected = oidc_broker(&server, CLIENT_SECRET)
        .connect()
        .await
        .expect("connect with OIDC tokens");
    round_trip(&connected, &topic, 5).await;
    // One token per client while it is fresh, as librdkafka keeps one per client instance:
    // the broker's (probe and producer) and the subscription's consumer's.
    assert_eq!(server.issued(), 2, "tokens issued");
    let body = &server.bodies()[0];
    assert_eq!(body, "grant_type=client_credentials&scope=kafka");
    connected.shutdown().await.expect("shutdown");
}

#[cfg(feature = "oidc")]
#[tokio::test]
async fn oidc_wrong_client_secret_stops_startup() {
    if live::unsupported_on_embedded("the OIDC listener is Kafka's") {
        return;
    }
    let server = TokenServer::start(CLIENT_ID, CLIENT_SECRET, Duration::from_mins(5)).await;
    let error = oidc_broker(&server, "not-the-secret")
        .connect()
        .await
        .expect_err("a wrong secret must stop startup")
        .to_string();
    assert!(
        error.contains("Failed to retrieve OIDC token from")
            && error.contains(server.url())
            && error.contains("401")
            && error.contains("invalid_client"),
        "{error}"
    );
    assert!(
        !error.contains("not-the-secret"),
        "the secret leaked: {error}"
    );
    assert_eq!(server.issued(), 0);
    assert!(server.refused() >= 1);
}

#[cfg(feature = "oidc")]
#[tokio::test]
async fn oidc_short_lived_tokens_are_refreshed_and_connections_reauthenticate() {
    if live::unsupported_on_embedded("the OIDC listener is Kafka's") {
        return;
    }
    live::logs();
    // The broker ends each session when its token expires: every 5 s here, so connections
    // re-authenticate (KIP-368) with a token refreshed at 80 % of its life.
    let server = TokenServer::start(CLIENT_ID, CLIENT_SECRET, Duration::from_secs(5)).await;
    let topic = live::topic("oidc-refresh", 1).await;
    let connected = oidc_broker(&server, CLIENT_SECRET)
        .connect()
        .await
        .expect("connect");
    let before = reauthentications();
    let publisher = live::plain_publisher(&connected);
    let started = std::time::Instant::now();
    let mut sent = 0;
    while started.elapsed() < Duration::from_secs(16) {
        live::send(&publisher, &topic, format!("r{sent}").as_bytes()).await;
        sent += 1;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let reauthenticated = reauthentications() - before;
    eprintln!(
        "{sent} records in 16 s, {reauthenticated} re-authentications, {} tokens issued",
        server.issued()
    );
    assert!(
        reauthenticated >= 2,
        "re-authentications in 16 s: {reauthenticated}"
    );
    assert!(server.issued() >= 3, "tokens issued: {}", server.issued());
    // Every record arrived once, in order.
    let values = live::values(&topic, 0, IsolationLevel::ReadCommitted).await;
    let expected: Vec<String> = (0..sent).map(|i| format!("r{i}")).collect();
    assert_eq!(values, expected);
    connected.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn oidc_token_provider_installed_on_the_kafka_broker_is_used() {
    if live::unsupported_on_embedded("the OIDC listener is Kafka's") {
        return;
    }
    live::logs();
    let signer = Signer::from_env();
    let calls = Arc::new(AtomicU32::new(0));
    let counter = Arc::clone(&calls);
    let provider = TokenProvider::new(move || {
        counter.fetch_add(1, Ordering::SeqCst);
        let signer = signer.clone();
        async move {
            // An identity provider is asked asynchronously; a yield stands in for the wait.
            tokio::task::yield_now().await;
            let (jwt, exp) = signer.token("billing-service", Duration::from_mins(5));
            Ok(OAuthToken {
                value: Secret::new(jwt),
                expires: UNIX_EPOCH + Duration::from_secs(exp),
                principal: "billing-service".to_owned(),
                extensions: vec![("traceId".to_owned(), "t1".to_owned())],
            })
        }
    });
    let topic = live::topic("oidc-provider", 1).await;
    let connected = oauthbearer_broker()
        .oauthbearer_token_provider(provider)
        .connect()
        .await
        .expect("connect with the installed provider");
    round_trip(&connected, &topic, 3).await;
    assert_eq!(calls.load(Ordering::SeqCst), 1, "the token is cached");
    connected.shutdown().await.expect("shutdown");

    // A provider that fails stops startup with its words.
    let failing = TokenProvider::new(|| async { Err("the vault is sealed".to_owned()) });
    let error = oauthbearer_broker()
        .oauthbearer_token_provider(failing)
        .connect()
        .await
        .expect_err("no token, no startup")
        .to_string();
    assert!(error.contains("the vault is sealed"), "{error}");

    // The listener checks signatures: an unsigned token (librdkafka's unsecured JWT) is refused.
    let unsigned = ruststream_kafka::client::unsecured_jwt_provider("principal=billing-service")
        .expect("a valid unsecured-JWT configuration");
    let error = oauthbearer_broker()
        .oauthbearer_token_provider(unsigned)
        .connect()
        .await
        .expect_err("an unsigned token must be refused")
        .to_string();
    assert!(error.contains("token refused"), "{error}");
}
