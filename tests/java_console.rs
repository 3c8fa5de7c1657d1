//! Kafka's own Java console tools against the embedded cluster over TCP: a client nobody here
//! wrote, with its own idea of every request (`ConsoleProducer`: Metadata, `InitProducerId`,
//! idempotent Produce; `ConsoleConsumer`: `FindCoordinator`, both group protocols,
//! `OffsetFetch`/`OffsetCommit`, `ListOffsets`, Fetch sessions).
//!
//! The jars come from `KAFKA_JAVA_CLASSPATH`, else from `scripts/kafka java-classpath` (Maven,
//! cached in `~/.cache/ruststream-kafka`). Without java or the jars these tests fail: a skipped
//! interoperability test would say nothing.

use std::fmt::Write as _;
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::Duration;

use ruststream_kafka::testing::{ClusterOptions, EmbeddedCluster};
use tokio::process::Command;

#[path = "support/interop.rs"]
mod interop;

use interop::serve;

/// The Kafka version whose tools are used: the one `scripts/kafka` runs by default.
const KAFKA_VERSION: &str = "4.1.2";
const PRODUCER: &str = "org.apache.kafka.tools.ConsoleProducer";
const CONSUMER: &str = "org.apache.kafka.tools.consumer.ConsoleConsumer";
/// Bounds one tool run (a JVM starts in about a second; two share these two cores).
const RUN_TIMEOUT: Duration = Duration::from_mins(2);

fn java() -> String {
    std::env::var("JAVA").unwrap_or_else(|_| "java".to_owned())
}

/// The tools' classpath, fetched once per test process.
fn classpath() -> &'static str {
    static CLASSPATH: OnceLock<String> = OnceLock::new();
    CLASSPATH.get_or_init(|| {
        if let Ok(cp) = std::env::var("KAFKA_JAVA_CLASSPATH")
            && !cp.trim().is_empty()
        {
            return cp.trim().to_owned();
        }
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/kafka");
        let out = std::process::Command::new(script)
            .args(["java-classpath", "--version", KAFKA_VERSION])
            .stderr(Stdio::inherit())
            .output()
            .unwrap_or_else(|e| panic!("could not run {script} java-classpath: {e}"));
        let cp = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        assert!(
            out.status.success() && cp.contains("kafka-tools"),
            "`scripts/kafka java-classpath --version {KAFKA_VERSION}` found no Kafka tools \
             ({}); it needs Maven and the network once, or set KAFKA_JAVA_CLASSPATH",
            out.status
        );
        cp
    })
}

/// What a tool printed; the tools log to stderr, records go to stdout.
struct Ran {
    stdout: String,
    stderr: String,
}

/// Runs `class` with `args`, feeding it `stdin`; panics (failing the test) unless it exits 0
/// within [`RUN_TIMEOUT`].
async fn run_tool(class: &str, args: &[&str], stdin: &str) -> Ran {
    let mut command = Command::new(java());
    command
        .arg("-cp")
        .arg(classpath())
        // The tools' own defaults, minus the JIT work a short run never pays back.
        .args(["-XX:TieredStopAtLevel=1", "-Xshare:auto"])
        .arg(class)
        .args(args);
    let output = interop::run(
        command,
        stdin,
        RUN_TIMEOUT,
        "these tests need Java 17+ (or set JAVA)",
    )
    .await;
    let ran = Ran {
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    };
    assert!(
        output.status.success(),
        "{class} {args:?} exited with {}\n--- stdout\n{}\n--- stderr\n{}",
        output.status,
        ran.stdout,
        ran.stderr
    );
    ran
}

/// Produces `lines` with the console producer (`extra` adds options).
async fn produce(bootstrap: &str, topic: &str, lines: &[String], extra: &[&str]) {
    let mut input = String::new();
    for line in lines {
        writeln!(input, "{line}").expect("a string takes writes");
    }
    let mut args = vec!["--bootstrap-server", bootstrap, "--topic", topic];
    args.extend_from_slice(extra);
    run_tool(PRODUCER, &args, &input).await;
}

/// Consumes exactly `count` records with the console consumer and returns the lines it
/// printed; `extra` adds options (a group, properties).
async fn consume(bootstrap: &str, topic: &str, count: usize, extra: &[&str]) -> Vec<String> {
    let count = count.to_string();
    let mut args = vec![
        "--bootstrap-server",
        bootstrap,
        "--topic",
        topic,
        "--max-messages",
        &count,
        // The consumer exits with an error when nothing comes for this long: a missing record
        // fails the test instead of hanging it.
        "--timeout-ms",
        "30000",
    ];
    args.extend_from_slice(extra);
    let ran = run_tool(CONSUMER, &args, "").await;
    assert!(
        ran.stderr
            .contains(&format!("Processed a total of {count} messages")),
        "the consumer did not read {count} records:\n{}",
        ran.stderr
    );
    ran.stdout.lines().map(str::to_owned).collect()
}

fn lines(prefix: &str, range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("{prefix} {i}")).collect()
}

/// What the cluster stored, in offset order, as text.
fn stored(cluster: &EmbeddedCluster, topic: &str) -> Vec<String> {
    cluster
        .records_in_order(topic)
        .into_iter()
        .map(|r| String::from_utf8_lossy(r.value.as_deref().unwrap_or_default()).into_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_producer_then_console_consumer_from_the_beginning() {
    let (cluster, bootstrap) = serve(ClusterOptions::default()).await;
    let sent = lines("line", 0..20);
    // The topic does not exist: the producer's Metadata request creates it.
    produce(&bootstrap, "java-plain", &sent, &[]).await;
    assert_eq!(stored(&cluster, "java-plain"), sent, "what the broker kept");
    let read = consume(&bootstrap, "java-plain", sent.len(), &["--from-beginning"]).await;
    assert_eq!(read, sent);
}

/// Records this crate wrote with every codec, at the default, lowest and highest level, read
/// back by Kafka's own console consumer byte for byte (on Kafka, which decompresses and checks
/// every batch as it appends it, under the live run; on the embedded cluster otherwise).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_consumer_reads_what_this_crate_compressed() {
    let (_cluster, bootstrap, topic, sent) = interop::our_batches("java-reads-ours").await;
    let read = consume(
        &bootstrap,
        &topic,
        sent.len(),
        &[
            "--from-beginning",
            "--property",
            "print.key=true",
            "--property",
            "key.separator==",
        ],
    )
    .await;
    assert_eq!(read, sent);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_codec_and_keys_reach_the_console_consumer() {
    let (cluster, bootstrap) = serve(ClusterOptions::default()).await;
    let mut sent = Vec::new();
    for codec in ["none", "gzip", "snappy", "lz4", "zstd"] {
        let batch: Vec<String> = (0..3).map(|i| format!("k{i}:{codec} {i}")).collect();
        produce(
            &bootstrap,
            "java-codecs",
            &batch,
            &[
                "--compression-codec",
                codec,
                "--property",
                "parse.key=true",
                "--property",
                "key.separator=:",
            ],
        )
        .await;
        sent.extend(batch);
    }
    let keys: Vec<String> = cluster
        .records_in_order("java-codecs")
        .into_iter()
        .map(|r| String::from_utf8_lossy(r.key.as_deref().unwrap_or_default()).into_owned())
        .collect();
    assert_eq!(
        keys,
        ["k0", "k1", "k2"].repeat(5),
        "the keys the broker kept"
    );
    let read = consume(
        &bootstrap,
        "java-codecs",
        sent.len(),
        &[
            "--from-beginning",
            "--property",
            "print.key=true",
            "--property",
            "key.separator=:",
        ],
    )
    .await;
    assert_eq!(read, sent);
}

/// A named group: its first run reads from the beginning and commits, its second run starts
/// from the committed offsets and sees only what came after. Both group protocols.
async fn a_group_resumes_where_it_committed(protocol: &str) {
    let (_cluster, bootstrap) = serve(ClusterOptions::default()).await;
    let topic = format!("java-group-{protocol}");
    let group = format!("console-{protocol}");
    let protocol_property = format!("group.protocol={protocol}");
    let group_args = [
        "--group",
        group.as_str(),
        "--consumer-property",
        protocol_property.as_str(),
    ];
    let first = lines("first", 0..5);
    produce(&bootstrap, &topic, &first, &[]).await;
    let mut args = group_args.to_vec();
    args.push("--from-beginning");
    assert_eq!(consume(&bootstrap, &topic, first.len(), &args).await, first);

    let second = lines("second", 0..3);
    produce(&bootstrap, &topic, &second, &[]).await;
    // `--from-beginning` only applies to a group with no committed offsets.
    assert_eq!(
        consume(&bootstrap, &topic, second.len(), &args).await,
        second,
        "the group resumed from its commit"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_classic_group_resumes_where_it_committed() {
    a_group_resumes_where_it_committed("classic").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kip848_group_resumes_where_it_committed() {
    a_group_resumes_where_it_committed("consumer").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_reads_every_partition_in_order() {
    let (cluster, bootstrap) = serve(ClusterOptions {
        num_partitions: 3,
        ..ClusterOptions::default()
    })
    .await;
    assert!(cluster.create_topic("java-spread", 3));
    // Keys spread the records over the partitions; each partition keeps its own order.
    let sent: Vec<String> = (0..30)
        .map(|i| format!("key-{}:value {i}", i % 7))
        .collect();
    produce(
        &bootstrap,
        "java-spread",
        &sent,
        &[
            "--property",
            "parse.key=true",
            "--property",
            "key.separator=:",
        ],
    )
    .await;
    let by_partition = cluster.records("java-spread");
    let used: std::collections::BTreeSet<i32> = by_partition.iter().map(|(p, _)| *p).collect();
    assert!(used.len() > 1, "the keys landed on one partition only");
    let read = consume(
        &bootstrap,
        "java-spread",
        sent.len(),
        &[
            "--from-beginning",
            "--group",
            "spread",
            "--property",
            "print.partition=true",
            "--property",
            "print.key=true",
            "--property",
            "key.separator=:",
        ],
    )
    .await;
    // `Partition:N:key:value` (the key separator also separates the fields), in the order
    // the consumer printed them.
    let mut printed: Vec<(i32, String)> = read
        .iter()
        .map(|line| {
            let (partition, record) = line
                .strip_prefix("Partition:")
                .and_then(|rest| rest.split_once(':'))
                .unwrap_or_else(|| panic!("partition and record in {line:?}"));
            let partition = partition.parse().expect("a partition number");
            (partition, record.to_owned())
        })
        .collect();
    for partition in &used {
        let expected: Vec<String> = by_partition
            .iter()
            .filter(|(p, _)| p == partition)
            .map(|(_, r)| {
                let key = String::from_utf8_lossy(r.key.as_deref().unwrap_or_default());
                let value = String::from_utf8_lossy(r.value.as_deref().unwrap_or_default());
                format!("{key}:{value}")
            })
            .collect();
        let got: Vec<String> = printed
            .iter()
            .filter(|(p, _)| p == partition)
            .map(|(_, r)| r.clone())
            .collect();
        assert_eq!(got, expected, "partition {partition}, in order");
    }
    printed.sort();
    let mut all: Vec<String> = printed.into_iter().map(|(_, r)| r).collect();
    all.sort();
    let mut sent_sorted = sent;
    sent_sorted.sort();
    assert_eq!(all, sent_sorted, "every record, once");
}

const TOPICS: &str = "org.apache.kafka.tools.TopicCommand";

/// `kafka-topics`: create with a config, list, describe (Metadata and `DescribeConfigs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_topics_creates_lists_and_describes() {
    let (cluster, bootstrap) = serve(ClusterOptions::default()).await;
    let topics = |args: &'static [&'static str]| {
        let mut all = vec!["--bootstrap-server", bootstrap.as_str()];
        all.extend_from_slice(args);
        all
    };
    let created = run_tool(
        TOPICS,
        &topics(&[
            "--create",
            "--topic",
            "java-admin",
            "--partitions",
            "3",
            "--config",
            "cleanup.policy=compact",
        ]),
        "",
    )
    .await;
    assert!(
        created.stdout.contains("Created topic java-admin."),
        "{}",
        created.stdout
    );
    assert_eq!(cluster.records("java-admin").len(), 0);

    let listed = run_tool(TOPICS, &topics(&["--list"]), "").await;
    assert_eq!(listed.stdout.lines().collect::<Vec<_>>(), ["java-admin"]);

    let described = run_tool(
        TOPICS,
        &topics(&["--describe", "--topic", "java-admin"]),
        "",
    )
    .await;
    let text = described.stdout;
    assert!(
        text.contains("Topic: java-admin")
            && text.contains("PartitionCount: 3")
            && text.contains("Configs: cleanup.policy=compact"),
        "{text}"
    );
    for partition in 0..3 {
        assert!(
            text.contains(&format!("Partition: {partition}\tLeader: 0")),
            "{text}"
        );
    }
}

const GROUPS: &str = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand";

/// `kafka-consumer-groups`: groups of both protocols listed (`ListGroups`) with their state
/// and type, and a classic group's offsets and lag described.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_consumer_groups_lists_and_describes() {
    let (_cluster, bootstrap) = serve(ClusterOptions::default()).await;
    produce(&bootstrap, "java-lag", &lines("lag", 0..3), &[]).await;
    for protocol in ["classic", "consumer"] {
        let group = format!("lag-{protocol}");
        let property = format!("group.protocol={protocol}");
        consume(
            &bootstrap,
            "java-lag",
            1,
            &[
                "--from-beginning",
                "--group",
                &group,
                "--consumer-property",
                &property,
            ],
        )
        .await;
    }
    let groups = |args: &'static [&'static str]| {
        let mut all = vec!["--bootstrap-server", bootstrap.as_str()];
        all.extend_from_slice(args);
        all
    };
    let listed = run_tool(GROUPS, &groups(&["--list"]), "").await.stdout;
    let mut names: Vec<&str> = listed.lines().filter(|l| !l.is_empty()).collect();
    names.sort_unstable();
    assert_eq!(names, ["lag-classic", "lag-consumer"], "{listed}");

    let typed = run_tool(GROUPS, &groups(&["--list", "--state", "--type"]), "")
        .await
        .stdout;
    let rows: Vec<Vec<&str>> = typed
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    for (group, kind) in [("lag-classic", "Classic"), ("lag-consumer", "Consumer")] {
        assert!(
            rows.iter().any(|r| r[..] == [group, kind, "Empty"]),
            "{group}: {typed}"
        );
    }

    // The console consumer commits what it printed: one record read of three.
    let described = run_tool(
        GROUPS,
        &groups(&["--describe", "--group", "lag-classic"]),
        "",
    )
    .await
    .stdout;
    let row: Vec<&str> = described
        .lines()
        .find(|l| l.starts_with("lag-classic"))
        .unwrap_or_else(|| panic!("no offsets row: {described}"))
        .split_whitespace()
        .collect();
    assert_eq!(
        row[..6],
        ["lag-classic", "java-lag", "0", "1", "3", "2"],
        "{described}"
    );
}
