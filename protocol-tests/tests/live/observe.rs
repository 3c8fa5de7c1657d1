//! Observers registered on a client hear its connections, requests, batches, fetches and group
//! work: the same tests against the embedded cluster and against Kafka. (Retries and failed
//! batches are heard in `failover.rs`, where a real broker dies under the producer.)

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use protocol_tests::{bootstrap, create_topic, unique_topic};
use ruststream_kafka::client::observe::RequestOutcome;
use ruststream_kafka::client::{
    Client, ClientConfig, Event, Interest, Observer, Observers, PartitionChange, Producer,
    ProducerConfig, ProducerRecord, Subscription,
};

use super::group::{Member, group_config};
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
    Written {
        partition: i32,
        records: usize,
        base_offset: i64,
    },
    BatchFailed {
        partition: i32,
        records: usize,
        error: String,
    },
    Retry {
        partition: i32,
        attempt: u32,
        delay: Duration,
    },
    Fetched {
        partition: i32,
        records: usize,
        lag: Option<i64>,
    },
    Rebalance {
        change: PartitionChange,
        partitions: Vec<i32>,
    },
    Commit {
        partitions: usize,
        failed: bool,
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
            Event::BatchWritten {
                partition,
                records,
                base_offset,
                ..
            } => Heard::Written {
                partition,
                records,
                base_offset,
            },
            Event::BatchFailed {
                partition,
                records,
                error,
                ..
            } => Heard::BatchFailed {
                partition,
                records,
                error: error.to_string(),
            },
            Event::ProduceRetry {
                partition,
                attempt,
                delay,
                ..
            } => Heard::Retry {
                partition,
                attempt,
                delay,
            },
            Event::Fetched {
                partition,
                records,
                lag,
                ..
            } => Heard::Fetched {
                partition,
                records,
                lag,
            },
            Event::Rebalance {
                change, partitions, ..
            } => Heard::Rebalance {
                change,
                partitions: partitions.iter().map(|tp| tp.partition).collect(),
            },
            Event::Commit {
                partitions, error, ..
            } => Heard::Commit {
                partitions,
                failed: error.is_some(),
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

/// Writes 30 records over 3 partitions of `topic` and checks that `recorder` heard each of
/// them in a batch the broker wrote.
async fn writes_ten_per_partition(client: &Client, topic: &str, recorder: &Recorder) {
    let producer = producer(
        client,
        ProducerConfig {
            linger: Duration::from_millis(5),
            ..ProducerConfig::default()
        },
    )
    .await;
    let records = (0..30)
        .map(|i| {
            ProducerRecord::new(topic.to_owned(), Bytes::from(format!("r{i}"))).partition(i % 3)
        })
        .collect();
    send_all(&producer, records).await;
    let _ = producer.close(Duration::from_secs(10)).await;
    let heard = recorder.heard();
    let mut written = [0usize; 3];
    for h in &heard {
        if let Heard::Written {
            partition,
            records,
            base_offset,
        } = h
        {
            assert!(*base_offset >= 0, "acks=all reports the base offset: {h:?}");
            written[usize::try_from(*partition).unwrap_or(0)] += records;
        }
    }
    assert_eq!(
        written,
        [10, 10, 10],
        "every record in a written batch: {heard:?}"
    );
}

/// Polls `recorder` until `done` holds of what it heard, for at most `limit`.
async fn heard_until(
    recorder: &Recorder,
    limit: Duration,
    done: impl Fn(&[Heard]) -> bool,
) -> Vec<Heard> {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let heard = recorder.heard();
        if done(&heard) || tokio::time::Instant::now() > deadline {
            return heard;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_hears_the_batches_written_the_fetches_with_their_lag_the_assignment_and_the_commits()
 {
    let recorder = Arc::new(Recorder {
        wants: Some(Interest::PRODUCE | Interest::FETCH | Interest::GROUP),
        ..Recorder::default()
    });
    let client = observed_client(&recorder).await;
    let topic = unique_topic("observed-work");
    create_topic(&client, &topic, 3).await;
    writes_ten_per_partition(&client, &topic, &recorder).await;

    let group = unique_topic("observed-group");
    let member = Member::start(
        &client,
        group_config(&group, "range"),
        Subscription::Topics(vec![topic.clone()]),
    );
    // Every record fetched, every partition caught up (lag 0), a commit answered.
    let heard = heard_until(&recorder, Duration::from_mins(1), |heard| {
        let caught_up = (0..3).all(|p| {
            heard.iter().any(
                |h| matches!(h, Heard::Fetched { partition, lag: Some(0), .. } if *partition == p),
            )
        });
        let committed = heard
            .iter()
            .any(|h| matches!(h, Heard::Commit { failed: false, .. }));
        caught_up && committed
    })
    .await;
    let seen = member.stop().await;
    let handed = seen
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .records
        .len();
    assert_eq!(handed, 30, "the member read every record");
    let fetched: usize = heard
        .iter()
        .map(|h| match h {
            Heard::Fetched { records, .. } => *records,
            _ => 0,
        })
        .sum();
    assert!(fetched >= 30, "fetches held {fetched} records: {heard:?}");
    let mut assigned: Vec<i32> = heard
        .iter()
        .filter_map(|h| match h {
            Heard::Rebalance {
                change: PartitionChange::Assigned,
                partitions,
            } => Some(partitions.clone()),
            _ => None,
        })
        .flatten()
        .collect();
    assigned.sort_unstable();
    assert_eq!(assigned, [0, 1, 2], "the assignment is reported: {heard:?}");
    for p in 0..3 {
        assert!(
            heard.iter().any(
                |h| matches!(h, Heard::Fetched { partition, lag: Some(0), .. } if *partition == p)
            ),
            "partition {p} caught up (lag 0): {heard:?}"
        );
    }
    assert!(
        heard.iter().any(|h| matches!(
            h,
            Heard::Commit {
                partitions: 1..,
                failed: false
            }
        )),
        "an answered commit: {heard:?}"
    );
    // Nothing of the requests' family, which it did not ask for.
    assert!(
        !heard.iter().any(|h| matches!(h, Heard::Request { .. })),
        "{heard:?}"
    );
    client.close();
}

/// An observer that asks the producer it watches how many records it holds, at each batch
/// written or failed.
#[derive(Default)]
struct AsksTheProducer {
    producer: Mutex<Option<Producer>>,
    answers: Mutex<Vec<usize>>,
}

impl Observer for AsksTheProducer {
    fn interest(&self) -> Interest {
        Interest::PRODUCE
    }

    fn on_event(&self, event: &Event<'_>) {
        if !matches!(
            event,
            Event::BatchWritten { .. } | Event::BatchFailed { .. } | Event::ProduceRetry { .. }
        ) {
            return;
        }
        let producer = self
            .producer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some(producer) = producer {
            let held = producer.in_flight();
            self.answers
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(held);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_may_ask_the_producer_while_it_hears_of_a_batch() {
    // The producer tells its observers after it released its state's lock: an observer that
    // takes that lock again (here through `in_flight`) must not stop the producer.
    let asks = Arc::new(AsksTheProducer::default());
    let mut config = ClientConfig::new(&bootstrap());
    config.connect_timeout = Duration::from_secs(10);
    config.observers = Observers::new().with(asks.clone());
    let client = match Client::connect(config).await {
        Ok(c) => c,
        Err(e) => panic!("no broker at {} ({e})", bootstrap()),
    };
    let topic = unique_topic("observer-asks");
    create_topic(&client, &topic, 3).await;
    let producer = producer(&client, ProducerConfig::default()).await;
    *asks.producer.lock().unwrap_or_else(PoisonError::into_inner) = Some(producer.clone());
    let records: Vec<ProducerRecord> = (0..60)
        .map(|i| ProducerRecord::new(topic.clone(), Bytes::from(format!("r{i}"))).partition(i % 3))
        .collect();
    let sent = tokio::time::timeout(Duration::from_mins(1), send_all(&producer, records)).await;
    // The observer lets go of its clone before anything can fail, so the producer can close.
    asks.producer
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take();
    let Ok(delivered) = sent else {
        panic!("the producer stopped while its observer asked it something");
    };
    assert_eq!(delivered.len(), 60);
    let answers = asks
        .answers
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    assert!(!answers.is_empty(), "the observer heard the batches");
    assert!(answers.iter().all(|held| *held <= 60), "{answers:?}");
    let _ = producer.close(Duration::from_secs(10)).await;
    client.close();
}
