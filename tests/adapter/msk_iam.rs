//! `AWS_MSK_IAM` through the native client against the embedded cluster's verifying SASL peer,
//! with credentials from local doubles of EC2's instance metadata service (`IMDSv2`) and of
//! STS (web identity), started here on loopback HTTP. The chain is given its variables
//! (`AwsCredentialChain::with_variables`), so these tests share the process safely; the cases
//! that read the process environment are in `tests/msk_iam.rs`.
#![cfg(feature = "testing")]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use ruststream_kafka::client::{
    AwsCredentialChain, AwsCredentialsProvider, Client, ClientConfig, Producer, ProducerConfig,
    ProducerRecord, SaslConfig, SecurityProtocol, reauthentications,
};
use ruststream_kafka::testing::{ClusterOptions, EmbeddedCluster, MskIamAuthority, iso8601};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const REGION: &str = "ap-southeast-2";

/// One HTTP request as the double saw it.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: String,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

type Handler = Arc<dyn Fn(&Seen) -> (u16, Vec<u8>) + Send + Sync>;

/// An HTTP/1.1 server on loopback answering each request with `handler`; returns its base URL
/// and the requests seen.
async fn http_double(handler: Handler) -> (String, Arc<Mutex<Vec<Seen>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("binds");
    let url = format!("http://{}", listener.local_addr().expect("an address"));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let (handler, log) = (handler.clone(), log.clone());
            tokio::spawn(async move {
                let mut raw = Vec::new();
                let mut buf = [0u8; 4096];
                let request = loop {
                    let Ok(n) = socket.read(&mut buf).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    raw.extend_from_slice(&buf[..n]);
                    let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") else {
                        continue;
                    };
                    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
                    let mut lines = head.split("\r\n");
                    let mut first = lines.next().unwrap_or_default().split(' ');
                    let (method, path) = (
                        first.next().unwrap_or_default(),
                        first.next().unwrap_or_default(),
                    );
                    let headers: Vec<(String, String)> = lines
                        .filter_map(|l| l.split_once(':'))
                        .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
                        .collect();
                    let length: usize = headers
                        .iter()
                        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
                        .and_then(|(_, v)| v.parse().ok())
                        .unwrap_or(0);
                    if raw.len() < end + 4 + length {
                        continue;
                    }
                    break Seen {
                        method: method.to_owned(),
                        path: path.to_owned(),
                        headers,
                        body: String::from_utf8_lossy(&raw[end + 4..end + 4 + length]).into_owned(),
                    };
                };
                let (status, body) = handler(&request);
                log.lock().expect("log").push(request);
                let head = format!(
                    "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = socket.write_all(head.as_bytes()).await;
                let _ = socket.write_all(&body).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    (url, seen)
}

/// An embedded cluster whose TCP listener requires `AWS_MSK_IAM` under `authority`.
async fn cluster(authority: Arc<MskIamAuthority>) -> (EmbeddedCluster, String) {
    let cluster = EmbeddedCluster::new(ClusterOptions::default());
    cluster.require_msk_iam(authority);
    cluster.listen().await.expect("listens");
    let bootstrap = cluster.loopback_bootstrap().expect("listening");
    (cluster, bootstrap)
}

fn config(bootstrap: &str, credentials: Arc<dyn AwsCredentialsProvider>) -> ClientConfig {
    let mut config = ClientConfig::new(bootstrap);
    config.security.protocol = SecurityProtocol::SaslPlaintext;
    let mut sasl = SaslConfig::aws_msk_iam(credentials);
    sasl.aws_region = Some(REGION.to_owned());
    config.security.sasl = Some(sasl);
    config
}

async fn produce(producer: &Producer, topic: &str, value: &str) {
    producer
        .send(ProducerRecord::new(topic, Bytes::from(value.to_owned())))
        .await
        .expect("queued")
        .await
        .expect("delivered");
}

/// An IMDS double handing out credentials that live `lifetime`, a new key pair each time, each
/// registered with `authority` until it expires.
async fn imds_double(
    authority: Arc<MskIamAuthority>,
    lifetime: Duration,
) -> (String, Arc<Mutex<Vec<Seen>>>, Arc<AtomicU64>) {
    let issued = Arc::new(AtomicU64::new(0));
    let count = issued.clone();
    let handler: Handler = Arc::new(move |seen: &Seen| {
        match (seen.method.as_str(), seen.path.as_str()) {
            ("PUT", "/latest/api/token")
                if seen
                    .header("X-aws-ec2-metadata-token-ttl-seconds")
                    .is_some() =>
            {
                (200, b"imds-session-token".to_vec())
            }
            (_, _) if seen.header("X-aws-ec2-metadata-token") != Some("imds-session-token") => {
                (401, Vec::new())
            }
            ("GET", "/latest/meta-data/iam/security-credentials/") => {
                (200, b"kafka-role\n".to_vec())
            }
            ("GET", "/latest/meta-data/iam/security-credentials/kafka-role") => {
                let n = count.fetch_add(1, Ordering::SeqCst);
                let expires = SystemTime::now() + lifetime;
                let (key, secret, token) = (
                    format!("ASIAIMDS{n}"),
                    format!("secret/{n}"),
                    format!("token+{n}"),
                );
                authority.add_key(&key, &secret, Some(token.clone()), Some(expires));
                let body = format!(
                    "{{\"Code\":\"Success\",\"LastUpdated\":\"{}\",\"Type\":\"AWS-HMAC\",\"AccessKeyId\":\"{key}\",\
                 \"SecretAccessKey\":\"{secret}\",\"Token\":\"{token}\",\"Expiration\":\"{}\"}}",
                    iso8601(SystemTime::now()),
                    iso8601(expires)
                );
                (200, body.into_bytes())
            }
            _ => (404, Vec::new()),
        }
    });
    let (url, seen) = http_double(handler).await;
    (url, seen, issued)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn msk_iam_imds_credentials_are_refreshed_before_they_expire_and_sessions_reauthenticate() {
    let authority =
        Arc::new(MskIamAuthority::new(REGION).with_session_lifetime(Duration::from_secs(1)));
    // Credentials of 6 s, replaced when fewer than 4 s remain: each set signs for about 2 s,
    // then the chain fetches the next while the current one is still valid.
    let (imds, seen, issued) = imds_double(authority.clone(), Duration::from_secs(6)).await;
    let chain = AwsCredentialChain::with_variables([
        ("HOME", "/nonexistent-ruststream-home"),
        ("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.as_str()),
    ])
    .with_refresh_margin(Duration::from_secs(4));
    let (_cluster, bootstrap) = cluster(authority.clone()).await;
    let client = Client::connect(config(&bootstrap, Arc::new(chain)))
        .await
        .expect("authenticates");
    let producer = Producer::new(client.clone(), ProducerConfig::default()).expect("producer");
    let reauthenticated_before = reauthentications();
    for i in 0..16 {
        produce(&producer, "msk-iam-imds", &format!("r{i}")).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    producer.close(Duration::from_secs(5)).await;
    client.close();
    let issued = issued.load(Ordering::SeqCst);
    assert!(issued >= 3, "credentials fetched {issued} times in 8 s");
    assert!(
        reauthentications() > reauthenticated_before + 3,
        "sessions re-authenticated"
    );
    assert_eq!(authority.refused(), 0, "no signature refused");
    assert!(
        authority.accepted() >= 5,
        "accepted {}",
        authority.accepted()
    );
    let seen = seen.lock().expect("log");
    assert_eq!(
        seen.first().map(|s| s.method.as_str()),
        Some("PUT"),
        "IMDSv2 starts with the token"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn msk_iam_web_identity_exchanges_the_token_with_sts() {
    let authority = Arc::new(MskIamAuthority::new(REGION));
    let registered = authority.clone();
    let handler: Handler = Arc::new(move |seen: &Seen| {
        let form_has = |part: &str| seen.body.split('&').any(|p| p == part);
        if seen.method != "POST"
            || !form_has("Action=AssumeRoleWithWebIdentity")
            || !form_has("RoleArn=arn%3Aaws%3Aiam%3A%3A123456789012%3Arole%2Fkafka")
            || !form_has("WebIdentityToken=eyJ.web.identity")
            || !form_has("RoleSessionName=orders-service")
        {
            let error = "<ErrorResponse><Error><Code>InvalidIdentityToken</Code><Message>bad request</Message></Error></ErrorResponse>";
            return (400, error.as_bytes().to_vec());
        }
        let expires = SystemTime::now() + Duration::from_hours(1);
        registered.add_key(
            "ASIASTS",
            "sts/secret",
            Some("sts&token".to_owned()),
            Some(expires),
        );
        let xml = format!(
            "<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult><Credentials>\
             <AccessKeyId>ASIASTS</AccessKeyId><SecretAccessKey>sts/secret</SecretAccessKey>\
             <SessionToken>sts&amp;token</SessionToken><Expiration>{}</Expiration>\
             </Credentials></AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>",
            iso8601(expires)
        );
        (200, xml.into_bytes())
    });
    let (sts, seen) = http_double(handler).await;
    let token_file =
        std::env::temp_dir().join(format!("msk-iam-web-identity-{}", std::process::id()));
    std::fs::write(&token_file, "eyJ.web.identity\n").expect("writes the token");
    let variables = |role: &str| {
        vec![
            ("HOME".to_owned(), "/nonexistent-ruststream-home".to_owned()),
            (
                "AWS_WEB_IDENTITY_TOKEN_FILE".to_owned(),
                token_file.display().to_string(),
            ),
            ("AWS_ROLE_ARN".to_owned(), role.to_owned()),
            (
                "AWS_ROLE_SESSION_NAME".to_owned(),
                "orders-service".to_owned(),
            ),
            ("AWS_ENDPOINT_URL_STS".to_owned(), sts.clone()),
            ("AWS_EC2_METADATA_DISABLED".to_owned(), "true".to_owned()),
        ]
    };
    let chain =
        AwsCredentialChain::with_variables(variables("arn:aws:iam::123456789012:role/kafka"));
    let (_cluster, bootstrap) = cluster(authority.clone()).await;
    let client = Client::connect(config(&bootstrap, Arc::new(chain)))
        .await
        .expect("authenticates");
    let producer = Producer::new(client.clone(), ProducerConfig::default()).expect("producer");
    produce(&producer, "msk-iam-sts", "hello").await;
    producer.close(Duration::from_secs(5)).await;
    client.close();
    assert_eq!(seen.lock().expect("log").len(), 1, "one STS call");
    assert!(authority.accepted() >= 1);

    // STS's refusal is the error, with its code and message.
    let refused =
        AwsCredentialChain::with_variables(variables("arn:aws:iam::123456789012:role/other"));
    let error = refused.resolve().await.expect_err("STS refuses");
    assert!(
        error.contains("InvalidIdentityToken") && error.contains("HTTP 400"),
        "{error}"
    );
    let _ = std::fs::remove_file(&token_file);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn msk_iam_hostile_imds_answers_are_errors() {
    async fn chain_against(body: Vec<u8>) -> String {
        let body = Arc::new(body);
        let handler: Handler = Arc::new(move |seen: &Seen| match seen.path.as_str() {
            "/latest/api/token" => (200, b"t".to_vec()),
            "/latest/meta-data/iam/security-credentials/" => (200, b"role".to_vec()),
            _ => (200, body.as_ref().clone()),
        });
        let (imds, _) = http_double(handler).await;
        AwsCredentialChain::with_variables([
            ("HOME", "/nonexistent-ruststream-home"),
            ("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.as_str()),
        ])
        .resolve()
        .await
        .expect_err("refused")
    }
    let huge = chain_against(vec![b'{'; 10 * 1024 * 1024]).await;
    assert!(huge.contains("over 65536 bytes"), "{huge}");
    let malformed = chain_against(b"{\"AccessKeyId\":\"A\",".to_vec()).await;
    assert!(malformed.contains("JSON"), "{malformed}");
    let nested = chain_against(b"{\"AccessKeyId\":{\"x\":1}}".to_vec()).await;
    assert!(nested.contains("nested"), "{nested}");
    let failed = chain_against(b"{\"Code\":\"Failure\",\"AccessKeyId\":\"A\"}".to_vec()).await;
    assert!(failed.contains("code Failure"), "{failed}");
    let no_expiry = chain_against(
        b"{\"Code\":\"Success\",\"AccessKeyId\":\"A\",\"SecretAccessKey\":\"s\",\"Token\":\"t\",\"Expiration\":\"soon\"}".to_vec(),
    )
    .await;
    assert!(no_expiry.contains("not a time"), "{no_expiry}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn msk_iam_expired_or_foreign_credentials_are_refused_with_a_clear_error() {
    let authority = Arc::new(MskIamAuthority::new(REGION));
    authority.add_key(
        "ASIAOLD",
        "old",
        Some("t".to_owned()),
        Some(SystemTime::now() - Duration::from_secs(1)),
    );
    let (_cluster, bootstrap) = cluster(authority.clone()).await;
    let mut expired = ruststream_kafka::client::AwsCredentials::new("ASIAOLD", "old");
    expired.session_token = Some(ruststream_kafka::client::Secret::new("t"));
    let mut settings = config(&bootstrap, Arc::new(expired));
    settings.connect_timeout = Duration::from_secs(5);
    let error = Client::connect(settings)
        .await
        .expect_err("refused")
        .to_string();
    assert!(
        error.contains("AWS_MSK_IAM refused access key ASIAOLD") && error.contains("expired"),
        "{error}"
    );
    // Signed for another region: the credential scope is not the cluster's.
    let mut elsewhere = config(
        &bootstrap,
        Arc::new(ruststream_kafka::client::AwsCredentials::new(
            "ASIAOLD", "old",
        )),
    );
    if let Some(sasl) = elsewhere.security.sasl.as_mut() {
        sasl.aws_region = Some("us-west-2".to_owned());
    }
    let error = Client::connect(elsewhere)
        .await
        .expect_err("refused")
        .to_string();
    assert!(
        error.contains("Access denied") && error.contains("scope"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn msk_iam_listener_serves_nothing_before_authentication() {
    let authority = Arc::new(MskIamAuthority::new(REGION));
    let (_cluster, bootstrap) = cluster(authority.clone()).await;
    // A plaintext client: its Metadata comes before any SASL, and the broker closes on it.
    let mut plain = ClientConfig::new(&bootstrap);
    plain.connect_timeout = Duration::from_secs(2);
    plain.socket_timeout = Duration::from_secs(2);
    let outcome = match Client::connect(plain).await {
        Ok(client) => {
            let refreshed = client.refresh_metadata(&[]).await;
            client.close();
            refreshed
        }
        Err(e) => Err(e),
    };
    assert!(outcome.is_err(), "served without authentication");
    assert_eq!(authority.accepted(), 0);
}
