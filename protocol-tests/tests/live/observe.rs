//! Observers registered on a client hear its connections and requests: the same tests against
//! the embedded cluster and against Kafka.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use protocol_tests::{bootstrap, create_topic, unique_topic};
use ruststream_kafka::client::observe::RequestOutcome;
use ruststream_kafka::client::{
    Client, ClientConfig, Event, Interest, Observer, Observers, ProducerConfig, ProducerRecord,
};

use super::{producer, send_all};

/// What an observer heard, as owned values.
#[derive(Debug, Clone, PartialEq)]
enum Heard {
    Opened {
        address: String,
        connection: u64,
    },
    Failed {
        address: String,
    },
    Lost {
        connection: u64,
        reason: String,
    },
    Request {
        connection: u64,
        api_key: i16,
        answered: bool,
        latency: Duration,
    },
}

#[derive(Default)]
struct Recorder {
    wants: Option<Interest>,
    heard: Mutex<Vec<Heard>>,
}

impl Recorder {
    fn heard(&self) -> Vec<Heard> {
        self.heard
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Observer for Recorder {
    fn interest(&self) -> Interest {
        self.wants.unwrap_or(Interest::ALL)
    }

    fn on_event(&self, event: &Event<'_>) {
        let heard = match *event {
            Event::ConnectionOpened { broker, .. } => Heard::Opened {
                address: broker.address.to_owned(),
                connection: broker.connection.unwrap_or_default(),
            },
            Event::ConnectFailed { broker, .. } => Heard::Failed {
                address: broker.address.to_owned(),
            },
            Event::ConnectionLost { broker, reason } => Heard::Lost {
                connection: broker.connection.unwrap_or_default(),
                reason: reason.to_owned(),
            },
            Event::Request {
                broker,
                api_key,
                latency,
                outcome,
                ..
            } => Heard::Request {
                connection: broker.connection.unwrap_or_default(),
                api_key,
                answered: matches!(outcome, RequestOutcome::Answered),
                latency,
            },
            _ => return,
        };
        self.heard
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(heard);
    }
}

async fn observed_client(recorder: &Arc<Recorder>) -> Client {
    let mut config = ClientConfig::new(&bootstrap());
    config.connect_timeout = Duration::from_secs(10);
    config.observers = Observers::new().with(recorder.clone());
    match Client::connect(config).await {
        Ok(c) => c,
        Err(e) => panic!("no broker at {} ({e})", bootstrap()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_hears_each_connection_its_requests_and_its_end() {
    let recorder = Arc::new(Recorder::default());
    let client = observed_client(&recorder).await;
    let topic = unique_topic("observed");
    create_topic(&client, &topic, 2).await;
    let producer = producer(&client, ProducerConfig::default()).await;
    let records = (0..10)
        .map(|i| ProducerRecord::new(topic.clone(), Bytes::from(format!("r{i}"))).partition(i % 2))
        .collect();
    send_all(&producer, records).await;
    let _ = producer.close(Duration::from_secs(10)).await;
    client.close();
    // The readers notice the closed sockets on their tasks.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let heard = loop {
        let heard = recorder.heard();
        let opened = heard
            .iter()
            .filter(|h| matches!(h, Heard::Opened { .. }))
            .count();
        let lost = heard
            .iter()
            .filter(|h| matches!(h, Heard::Lost { .. }))
            .count();
        if (opened > 0 && lost >= opened) || tokio::time::Instant::now() > deadline {
            break heard;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let opened: Vec<u64> = heard
        .iter()
        .filter_map(|h| match h {
            Heard::Opened { connection, .. } => Some(*connection),
            _ => None,
        })
        .collect();
    assert!(!opened.is_empty(), "no connection reported: {heard:?}");
    for id in &opened {
        assert!(*id > 0, "connection numbers start at 1");
        let lost: Vec<&Heard> = heard
            .iter()
            .filter(|h| matches!(h, Heard::Lost { connection, .. } if connection == id))
            .collect();
        assert_eq!(
            lost.len(),
            1,
            "connection {id} reported lost once: {heard:?}"
        );
        // Requests on it come after it opened and before it was lost (an open is reported once
        // the handshake, itself a request, is through).
        let position = |h: &Heard| heard.iter().position(|x| x == h);
        let lost_at = position(lost[0]).unwrap_or_default();
        for (at, h) in heard.iter().enumerate() {
            if let Heard::Request { connection, .. } = h
                && connection == id
            {
                assert!(at < lost_at, "a request after the loss of {id}: {heard:?}");
            }
        }
    }
    let requests: Vec<(i16, bool, Duration)> = heard
        .iter()
        .filter_map(|h| match h {
            Heard::Request {
                api_key,
                answered,
                latency,
                ..
            } => Some((*api_key, *answered, *latency)),
            _ => None,
        })
        .collect();
    // ApiVersions (18) on every connection, Metadata (3), CreateTopics (19), Produce (0).
    for key in [18, 3, 19, 0] {
        assert!(
            requests
                .iter()
                .any(|(k, answered, _)| *k == key && *answered),
            "no answered request of api {key}: {requests:?}"
        );
    }
    let handshakes = requests.iter().filter(|(k, _, _)| *k == 18).count();
    assert!(
        handshakes >= opened.len(),
        "one version handshake per connection at least: {handshakes} for {}",
        opened.len()
    );
    assert!(
        requests
            .iter()
            .all(|(_, _, latency)| *latency < Duration::from_secs(30)),
        "latencies are the requests' own: {requests:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_dial_is_reported_and_an_observer_hears_only_what_it_asked_for() {
    let connections = Arc::new(Recorder {
        wants: Some(Interest::CONNECTIONS),
        ..Recorder::default()
    });
    // Nothing listens on a port just freed.
    let port = match std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()) {
        Ok(a) => a.port(),
        Err(e) => panic!("a free port: {e}"),
    };
    let mut config = ClientConfig::new(&format!("127.0.0.1:{port}"));
    config.connect_timeout = Duration::from_secs(5);
    config.observers = Observers::new().with(connections.clone());
    let refused = Client::connect(config).await;
    assert!(refused.is_err(), "nothing listens on {port}");
    let heard = connections.heard();
    assert!(
        heard.contains(&Heard::Failed {
            address: format!("127.0.0.1:{port}")
        }),
        "the refused dial is reported: {heard:?}"
    );

    // Against the broker: connections heard, requests not asked for.
    let recorder = Arc::new(Recorder {
        wants: Some(Interest::CONNECTIONS),
        ..Recorder::default()
    });
    let client = observed_client(&recorder).await;
    if let Err(e) = client.refresh_metadata(&[]).await {
        panic!("metadata: {e}");
    }
    let heard = recorder.heard();
    assert!(
        heard.iter().any(|h| matches!(h, Heard::Opened { .. })),
        "{heard:?}"
    );
    assert!(
        !heard.iter().any(|h| matches!(h, Heard::Request { .. })),
        "requests were not asked for: {heard:?}"
    );
    client.close();
}
