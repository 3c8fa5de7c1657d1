//! kcat (librdkafka 2.x, a C client nobody here wrote) against the embedded cluster over TCP:
//! its producer (Metadata, idempotence off, Produce v7, the `consistent_random` partitioner),
//! its simple consumer (`ListOffsets` v2, Fetch v11) and its group consumer, which turns groups
//! on only where v0 of every group API is offered (`FindCoordinator` v2, `JoinGroup` v5,
//! `SyncGroup` and `Heartbeat` v3, `LeaveGroup` v1, `OffsetCommit`/`OffsetFetch`).
//!
//! kcat comes from the system (`scripts/prerequisites` installs the Debian package), or from
//! `KCAT`. Without it these tests fail: a skipped interoperability test would say nothing.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use ruststream_kafka::testing::{ClusterOptions, EmbeddedCluster};
use tokio::process::Command;

#[path = "support/interop.rs"]
mod interop;

/// Bounds one kcat run.
const RUN_TIMEOUT: Duration = Duration::from_mins(1);

fn kcat() -> String {
    std::env::var("KCAT").unwrap_or_else(|_| "kcat".to_owned())
}

/// A one-node cluster with three partitions per new topic, on an ephemeral loopback port.
async fn serve() -> (EmbeddedCluster, String) {
    interop::serve(ClusterOptions {
        num_partitions: 3,
        ..ClusterOptions::default()
    })
    .await
}

/// Runs kcat with `args` and `stdin`; fails the test unless it exits 0 in time. Returns what
/// it printed to stdout (its own messages go to stderr).
async fn run(bootstrap: &str, args: &[&str], stdin: &str) -> String {
    let mut command = Command::new(kcat());
    command.args(["-b", bootstrap]).args(args);
    let output = interop::run(
        command,
        stdin,
        RUN_TIMEOUT,
        "install kcat (scripts/prerequisites) or set KCAT",
    )
    .await;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && !stderr.contains("ERROR"),
        "kcat {args:?} exited with {}\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        output.status
    );
    stdout
}

/// `partition offset key=value` lines, sorted.
fn sorted(printed: &str) -> Vec<String> {
    let mut lines: Vec<String> = printed.lines().map(str::to_owned).collect();
    lines.sort();
    lines
}

const FORMAT: &str = "%p %o %k=%s\n";

/// Records this crate wrote with every codec, at the default, lowest and highest level, read
/// back by librdkafka (kcat) byte for byte (on Kafka, which decompresses and checks every batch
/// as it appends it, under the live run; on the embedded cluster otherwise).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kcat_reads_what_this_crate_compressed() {
    let (_cluster, bootstrap, topic, sent) = interop::our_batches("kcat-reads-ours").await;
    let printed = run(
        &bootstrap,
        &["-C", "-t", &topic, "-o", "beginning", "-e", "-f", "%k=%s\n"],
        "",
    )
    .await;
    let read: Vec<String> = printed.lines().map(str::to_owned).collect();
    assert_eq!(read, sent);
}

#[tokio::test]
async fn kcat_produces_lists_and_reads_back_with_and_without_a_group() {
    let (cluster, bootstrap) = serve().await;
    let keys = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"];
    let input = keys.iter().fold(String::new(), |mut input, k| {
        let _ = writeln!(input, "{k}:{k}-value");
        input
    });
    run(&bootstrap, &["-P", "-t", "kcat-orders", "-K:"], &input).await;

    // librdkafka placed each key; the cluster's own librdkafka-compatible placement agrees.
    assert!(cluster.create_topic("kcat-mirror", 3));
    let mut placed = BTreeMap::new();
    for (partition, record) in cluster.records("kcat-orders") {
        let key = String::from_utf8_lossy(record.key.as_deref().unwrap_or_default()).into_owned();
        let (mirrored, _) = cluster
            .produce("kcat-mirror", Some(key.as_bytes()), b"x", &[])
            .expect("written");
        assert_eq!(
            partition, mirrored,
            "key {key:?}: librdkafka and this crate disagree"
        );
        placed.insert(key, partition);
    }
    assert_eq!(placed.len(), keys.len(), "every record stored: {placed:?}");

    let listed = run(&bootstrap, &["-L", "-t", "kcat-orders"], "").await;
    assert!(
        listed.contains("topic \"kcat-orders\" with 3 partitions"),
        "{listed}"
    );

    let mut want: Vec<String> = cluster
        .records("kcat-orders")
        .into_iter()
        .map(|(p, r)| {
            let text =
                |b: Option<&[u8]>| String::from_utf8_lossy(b.unwrap_or_default()).into_owned();
            format!(
                "{p} {} {}={}",
                r.offset,
                text(r.key.as_deref()),
                text(r.value.as_deref())
            )
        })
        .collect();
    want.sort();
    let simple = run(
        &bootstrap,
        &[
            "-C",
            "-t",
            "kcat-orders",
            "-o",
            "beginning",
            "-e",
            "-f",
            FORMAT,
        ],
        "",
    )
    .await;
    assert_eq!(sorted(&simple), want, "the simple consumer");

    let grouped = run(
        &bootstrap,
        &[
            "-G",
            "kcat-group",
            "-o",
            "beginning",
            "-e",
            "-f",
            FORMAT,
            "kcat-orders",
        ],
        "",
    )
    .await;
    assert_eq!(sorted(&grouped), want, "the group consumer");
}
