// The commit and seek semantics of ruststream-rdkafka 0.7.1, as scenarios written once against
// the public API both crates share. `commit_semantics!(name, crate, bootstrap)` expands them
// into a module of tests for one crate: live ones against the broker `bootstrap()` names, and
// in-process ones on the crate's own in-process cluster. The repository's test
// `tests/adapter/commit_semantics.rs` runs them for this crate; the package `parity/` runs the very
// same text for both crates side by side (`scripts/parity`), so a scenario that passes here
// and there pins a behaviour of the reference rather than our reading of it.
//
// Every scenario observes the group's committed offset the way a service would: by what the
// next member of the group is handed first after the previous one closed (a close commits
// what is stored, so a stored offset that should not be there shows up as a wrong first
// record).

/// Expands the scenarios for the crate `$krate` into `mod $name`, reaching real Kafka at
/// `$bootstrap()`.
#[allow(unused_macros)]
macro_rules! commit_semantics {
    ($name:ident, $krate:ident, $bootstrap:path) => {
        #[allow(clippy::missing_panics_doc, clippy::unwrap_used)]
        mod $name {
            use std::time::Duration;

            use futures::StreamExt;
            use ruststream::testing::InProcess;
            use ruststream::{
                Broker, ConnectedBroker, IncomingMessage, OutgoingMessage, Publisher, Seekable,
                Seeker, StartAt, Subscriber,
            };
            use $krate::{
                Assignment, Commit, ConnectedKafkaBroker, KafkaBroker, KafkaMessage,
                KafkaOptions, KafkaPosition, KafkaPublish, KafkaTopic, StartOffset,
            };

            /// How long a record that must come may take.
            const ARRIVES: Duration = Duration::from_secs(30);
            /// How long to watch for a record that must not come.
            const QUIET: Duration = Duration::from_secs(2);
            /// Long enough for a periodic commit (`auto.commit.interval.ms` = 100) to run
            /// several times.
            const COMMITS_RUN: Duration = Duration::from_millis(1_500);

            fn unique(what: &str) -> String {
                let nanos = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos());
                format!(
                    "parity-{}-{what}-{}-{nanos:x}",
                    stringify!($name),
                    std::process::id()
                )
            }

            async fn live() -> ConnectedKafkaBroker {
                KafkaBroker::new([$bootstrap()])
                    .connect()
                    .await
                    .expect("no broker at the live bootstrap address (scripts/kafka up)")
            }

            async fn in_process() -> ConnectedKafkaBroker {
                KafkaBroker::new(["kafka.internal:9092"])
                    .connect_in_process()
                    .await
                    .expect("connects in process")
            }

            async fn publish(broker: &ConnectedKafkaBroker, topic: &str, bodies: std::ops::Range<u32>) {
                let publisher = broker.publisher(KafkaPublish::default());
                for n in bodies {
                    publisher
                        .publish(OutgoingMessage::new(topic, format!("r{n}").as_bytes()), None)
                        .await
                        .expect("publish");
                }
            }

            /// Creates `topic` with `partitions` partitions on the live cluster (through this
            /// repository's own client: only the adapters differ between the two runs).
            async fn create_topic(topic: &str, partitions: i32) {
                use ruststream_kafka::client::{Admin, Client, ClientConfig, NewTopic};
                let client = Client::connect(ClientConfig::new(&$bootstrap()))
                    .await
                    .expect("no broker at the live bootstrap address (scripts/kafka up)");
                let admin = Admin::new(client.clone());
                admin
                    .create_topics(&[NewTopic::new(topic, partitions, 1)], Duration::from_secs(30))
                    .await
                    .expect("create the topic");
                admin
                    .wait_for_leaders(&[topic], Duration::from_secs(30))
                    .await
                    .expect("the topic's leaders");
                client.close();
            }

            async fn publish_to(broker: &ConnectedKafkaBroker, topic: &str, partition: i32, bodies: std::ops::Range<u32>) {
                let publisher = broker.publisher(KafkaPublish::default());
                let options = KafkaOptions::default().partition(partition);
                for n in bodies {
                    publisher
                        .publish(
                            OutgoingMessage::new(topic, format!("p{partition}-r{n}").as_bytes()),
                            Some(&options),
                        )
                        .await
                        .expect("publish");
                }
            }

            /// A group subscription of `topic` with a fast periodic commit.
            fn topic(topic: &str, group: &str, commit: Commit) -> KafkaTopic {
                KafkaTopic::new(topic)
                    .group(group)
                    .commit(commit)
                    .config("auto.commit.interval.ms", "100")
            }

            async fn next<S>(stream: &mut S, what: &str) -> KafkaMessage
            where
                S: futures::Stream<Item = Result<KafkaMessage, $krate::KafkaError>> + Unpin,
            {
                tokio::time::timeout(ARRIVES, stream.next())
                    .await
                    .unwrap_or_else(|_| panic!("{what}: no delivery within {ARRIVES:?}"))
                    .expect("the stream does not end")
                    .expect("a delivery")
            }

            /// A seek commits nothing: after a handler acks 0..5, a record 5 makes it seek to
            /// the earliest offset and ack 5; record 0 is replayed and left unsettled. The
            /// group's offset stays at 5 (the acks before the seek), so the next member starts
            /// at 5: neither the seek's target nor the ack of the record that caused it was
            /// committed.
            pub async fn a_seek_commits_nothing(broker: ConnectedKafkaBroker) {
                let (t, g) = (unique("seek"), unique("seek-group"));
                publish(&broker, &t, 0..5).await;
                {
                    let mut first = broker
                        .subscribe_with(topic(&t, &g, Commit::Tracked).start(StartOffset::Earliest))
                        .await
                        .expect("subscribe");
                    let seeker = first.seeker();
                    let mut stream = std::pin::pin!(first.stream());
                    for offset in 0..5 {
                        let message = next(&mut stream, "the backlog").await;
                        assert_eq!(message.offset(), offset);
                        message.ack().await.expect("ack");
                    }
                    tokio::time::sleep(COMMITS_RUN).await;
                    publish(&broker, &t, 5..6).await;
                    let rebuild = next(&mut stream, "the record that starts the rebuild").await;
                    assert_eq!(rebuild.offset(), 5);
                    seeker.seek(KafkaPosition::earliest()).await.expect("seek");
                    rebuild.ack().await.expect("ack after the seek");
                    let replayed = next(&mut stream, "the replay").await;
                    assert_eq!(replayed.offset(), 0, "the seek moved the read position");
                    tokio::time::sleep(COMMITS_RUN).await;
                    drop(replayed);
                }
                let mut second = broker
                    .subscribe_with(topic(&t, &g, Commit::Tracked).start(StartOffset::Earliest))
                    .await
                    .expect("subscribe again");
                let mut stream = std::pin::pin!(second.stream());
                let resumed = next(&mut stream, "the next member").await;
                assert_eq!(
                    resumed.offset(),
                    5,
                    "the group's offset must stay where the acks before the seek put it"
                );
                drop(resumed);
                let _ = broker.shutdown().await;
            }

            /// A start taken from `StartOffset` / `auto.offset.reset` is not committed before a
            /// record is settled: a fresh group at the default start reads nothing of the 10
            /// records in the log and closes; the group then has no offset, so a member that
            /// starts at the earliest offset reads record 0.
            pub async fn a_start_position_is_not_committed(broker: ConnectedKafkaBroker, commit: Commit) {
                let (t, g) = (unique("start"), unique("start-group"));
                publish(&broker, &t, 0..10).await;
                {
                    let mut first = broker
                        .subscribe_with(topic(&t, &g, commit.clone()))
                        .await
                        .expect("subscribe");
                    let mut stream = std::pin::pin!(first.stream());
                    let nothing = tokio::time::timeout(QUIET, stream.next()).await;
                    assert!(nothing.is_err(), "the default start is the log end: nothing to read");
                }
                let mut second = broker
                    .subscribe_with(topic(&t, &g, commit).start(StartOffset::Earliest))
                    .await
                    .expect("subscribe again");
                let mut stream = std::pin::pin!(second.stream());
                let first = next(&mut stream, "the member starting at the earliest offset").await;
                assert_eq!(
                    first.offset(),
                    0,
                    "the group must hold no offset: nothing was settled"
                );
                drop(first);
                let _ = broker.shutdown().await;
            }

            /// The next rebalance discards a seek: a member acks 0..5, seeks back to 2 and
            /// receives 2 without settling it; a second member joins the group, and whichever
            /// of the two owns the partition next resumes at the group's offset, 5.
            pub async fn a_rebalance_discards_a_seek(broker: ConnectedKafkaBroker) {
                let (t, g) = (unique("rebalance"), unique("rebalance-group"));
                publish(&broker, &t, 0..5).await;
                let subscription =
                    || topic(&t, &g, Commit::Tracked).start(StartOffset::Earliest);
                let mut first = broker.subscribe_with(subscription()).await.expect("subscribe");
                let seeker = first.seeker();
                let mut one = std::pin::pin!(first.stream());
                for offset in 0..5 {
                    let message = next(&mut one, "the backlog").await;
                    assert_eq!(message.offset(), offset);
                    message.ack().await.expect("ack");
                }
                tokio::time::sleep(COMMITS_RUN).await;
                seeker
                    .seek(KafkaPosition::offset(0, 2))
                    .await
                    .expect("seek");
                let replayed = next(&mut one, "the replay").await;
                assert_eq!(replayed.offset(), 2, "the seek moved the read position");
                drop(replayed);
                // The first member is read while the second joins: librdkafka answers a
                // rebalance only while its consumer is polled. What it hands out meanwhile
                // was fetched before the rebalance and is left unsettled.
                let mut joined = {
                    let subscribing = broker.subscribe_with(subscription());
                    tokio::pin!(subscribing);
                    loop {
                        tokio::select! {
                            joined = &mut subscribing => {
                                break joined.expect("the second member subscribes");
                            }
                            stale = one.next() => drop(stale),
                        }
                    }
                };
                let mut two = std::pin::pin!(joined.stream());
                publish(&broker, &t, 5..6).await;
                let resumed = tokio::time::timeout(ARRIVES, async {
                    tokio::select! {
                        Some(m) = one.next() => m,
                        Some(m) = two.next() => m,
                    }
                })
                .await
                .expect("a member resumes the partition")
                .expect("a delivery");
                assert_eq!(
                    resumed.offset(),
                    5,
                    "the partition's next owner resumes from the group's committed offset"
                );
                drop(resumed);
                let _ = broker.shutdown().await;
            }

            /// Under `Assignment::CooperativeSticky`, a start position applies to the first
            /// assignment only: member A joins with `start_at(earliest)` beside member B, which
            /// read and committed both partitions to offset 3; A replays the partition it gets
            /// first from 0. When B leaves, its partition reaches A in a later increment, and
            /// that one resumes at the group's offset, 3, not at the start position.
            pub async fn a_later_increment_is_not_moved_by_start_at(broker: ConnectedKafkaBroker) {
                let (t, g) = (unique("increment"), unique("increment-group"));
                create_topic(&t, 2).await;
                for partition in 0..2 {
                    publish_to(&broker, &t, partition, 0..3).await;
                }
                let subscription = || {
                    topic(&t, &g, Commit::Tracked)
                        .start(StartOffset::Earliest)
                        .assignment(Assignment::CooperativeSticky)
                };
                let mut b = broker.subscribe_with(subscription()).await.expect("B subscribes");
                // Boxed, not pinned in place: B leaves the group when both are dropped below.
                let mut b_stream = Box::pin(b.stream());
                for _ in 0..6 {
                    next(&mut b_stream, "B reads the backlog").await.ack().await.expect("ack");
                }
                tokio::time::sleep(COMMITS_RUN).await;
                // B is read while A joins (librdkafka answers a rebalance only while polled);
                // it has nothing left to hand out.
                let mut a = {
                    let subscribing = broker.subscribe_with(StartAt::new(
                        subscription(),
                        KafkaPosition::earliest(),
                    ));
                    tokio::pin!(subscribing);
                    loop {
                        tokio::select! {
                            a = &mut subscribing => break a.expect("A subscribes"),
                            stray = b_stream.next() => {
                                panic!("B had nothing left to read: {:?}", stray.map(|m| m.map(|m| m.offset())));
                            }
                        }
                    }
                };
                let mut a_stream = std::pin::pin!(a.stream());
                let mut replayed = Vec::new();
                for _ in 0..3 {
                    let m = tokio::time::timeout(ARRIVES, async {
                        tokio::select! {
                            Some(m) = a_stream.next() => m,
                            Some(stray) = b_stream.next() => {
                                panic!("B had nothing left to read: {:?}", stray.map(|m| m.offset()));
                            }
                        }
                    })
                    .await
                    .expect("A replays its first partition")
                    .expect("a delivery");
                    replayed.push((m.partition(), m.offset()));
                }
                let first = replayed[0].0;
                assert_eq!(
                    replayed,
                    vec![(first, 0), (first, 1), (first, 2)],
                    "start_at(earliest) applies to the first assignment"
                );
                drop(b_stream);
                drop(b);
                let later = 1 - first;
                for partition in 0..2 {
                    publish_to(&broker, &t, partition, 3..4).await;
                }
                let mut seen = Vec::new();
                while !seen.iter().any(|&(p, _)| p == later) {
                    let m = next(&mut a_stream, "A takes over B's partition").await;
                    seen.push((m.partition(), m.offset()));
                    m.ack().await.expect("ack");
                }
                assert_eq!(
                    seen.iter().find(|&&(p, _)| p == later),
                    Some(&(later, 3)),
                    "a partition of a later increment resumes at the group's offset: {seen:?}"
                );
                let _ = broker.shutdown().await;
            }

            /// The marker the service process prints once it has published its reply.
            const REPLIED: &str = "parity-service-replied-offset";

            /// The service process of [`a_killed_service_gets_its_input_back`]: started by that
            /// test as this same test binary with `PARITY_SERVICE=input,replies,group`, it reads
            /// one input with `Commit::Tracked`, publishes its reply with `acks=all` and
            /// idempotence, says so on stdout and waits, the input unsettled, to be killed.
            /// Run by the harness without that variable, it has nothing to do.
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn service_process() {
                let Ok(spec) = std::env::var("PARITY_SERVICE") else {
                    return;
                };
                let parts: Vec<&str> = spec.split(',').collect();
                let [input, replies, group] = parts[..] else {
                    panic!("PARITY_SERVICE={spec}: expected input,replies,group");
                };
                let broker = KafkaBroker::new([$bootstrap()])
                    .producer_config("acks", "all")
                    .producer_config("enable.idempotence", "true")
                    .connect()
                    .await
                    .expect("the service connects");
                let mut subscriber = broker
                    .subscribe_with(
                        topic(input, group, Commit::Tracked)
                            .start(StartOffset::Earliest)
                            .config("session.timeout.ms", "6000")
                            .config("heartbeat.interval.ms", "1000"),
                    )
                    .await
                    .expect("the service subscribes");
                let mut stream = std::pin::pin!(subscriber.stream());
                let delivery = next(&mut stream, "the service's input").await;
                broker
                    .publisher(KafkaPublish::default())
                    .publish(OutgoingMessage::new(replies, delivery.payload()), None)
                    .await
                    .expect("the reply is acknowledged");
                println!("{REPLIED} {}", delivery.offset());
                std::future::pending::<()>().await;
            }

            /// A service process killed (SIGKILL) between the reply's publish and the input's
            /// settle gets the input back: the reply is in its topic, and the group's next
            /// member reads the input again, since nothing settled it (at least once).
            pub async fn a_killed_service_gets_its_input_back(broker: ConnectedKafkaBroker) {
                use tokio::io::AsyncBufReadExt;
                let (input, replies, group) =
                    (unique("durable-in"), unique("durable-out"), unique("durable-group"));
                publish(&broker, &input, 0..1).await;
                let test_name = module_path!()
                    .split_once("::")
                    .map_or("service_process".to_owned(), |(_, m)| format!("{m}::service_process"));
                let mut service = tokio::process::Command::new(
                    std::env::current_exe().expect("the test binary"),
                )
                .args(["--exact", &test_name, "--nocapture", "--test-threads=1"])
                .env("PARITY_SERVICE", format!("{input},{replies},{group}"))
                .stdout(std::process::Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .expect("start the service process");
                let stdout = service.stdout.take().expect("piped stdout");
                let mut lines = tokio::io::BufReader::new(stdout).lines();
                let replied = tokio::time::timeout(Duration::from_mins(1), async {
                    while let Some(line) = lines.next_line().await.expect("read the service") {
                        // The harness may have written `test NAME ... ` on the same line.
                        if let Some((_, offset)) = line.split_once(REPLIED) {
                            return offset.trim().to_owned();
                        }
                    }
                    panic!("the service process ended before it replied");
                })
                .await
                .expect("the service replies within 60 s");
                assert_eq!(replied, "0");
                service.start_kill().expect("SIGKILL the service");
                let _ = service.wait().await;

                let mut restarted = broker
                    .subscribe_with(
                        topic(&input, &group, Commit::Tracked).start(StartOffset::Earliest),
                    )
                    .await
                    .expect("the next member subscribes");
                let mut stream = std::pin::pin!(restarted.stream());
                let again = next(&mut stream, "the input, back after the kill").await;
                assert_eq!(again.offset(), 0, "the unsettled input comes back");
                again.ack().await.expect("ack");
                let mut reader = broker
                    .subscribe_with(
                        topic(&replies, &unique("durable-reader"), Commit::Auto)
                            .start(StartOffset::Earliest),
                    )
                    .await
                    .expect("read the replies");
                let mut reader_stream = std::pin::pin!(reader.stream());
                let reply = next(&mut reader_stream, "the reply the killed service published").await;
                assert_eq!(reply.payload(), b"r0");
                let _ = broker.shutdown().await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_seek_commits_nothing_live() {
                a_seek_commits_nothing(live().await).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_seek_commits_nothing_in_process() {
                a_seek_commits_nothing(in_process().await).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_start_position_is_not_committed_live() {
                a_start_position_is_not_committed(live().await, Commit::Tracked).await;
                a_start_position_is_not_committed(live().await, Commit::Auto).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_start_position_is_not_committed_in_process() {
                a_start_position_is_not_committed(in_process().await, Commit::Tracked).await;
                a_start_position_is_not_committed(in_process().await, Commit::Auto).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_rebalance_discards_a_seek_live() {
                a_rebalance_discards_a_seek(live().await).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_later_increment_is_not_moved_by_start_at_live() {
                a_later_increment_is_not_moved_by_start_at(live().await).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_killed_service_gets_its_input_back_live() {
                if std::env::var("KAFKA_TEST_TARGET").as_deref() == Ok("embedded") {
                    eprintln!("not run on the in-memory embedded cluster: it lives in one process");
                    return;
                }
                a_killed_service_gets_its_input_back(live().await).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_rebalance_discards_a_seek_in_process() {
                a_rebalance_discards_a_seek(in_process().await).await;
            }
        }
    };
}
