//! Another Kafka client's command-line tools against the embedded cluster: the cluster served
//! on an ephemeral loopback port, and each tool run with its input fed and closed (end of
//! input is what makes a console producer flush and exit), its output kept, and a bound on
//! how long it may take, so a tool that hangs fails the test instead of stalling it.

use std::process::{Output, Stdio};
use std::time::Duration;

use ruststream_kafka::testing::{ClusterOptions, EmbeddedCluster};
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

/// A cluster listening on an ephemeral loopback port, and its bootstrap address.
pub async fn serve(options: ClusterOptions) -> (EmbeddedCluster, String) {
    let cluster = EmbeddedCluster::new(options);
    cluster
        .listen_on(&["127.0.0.1:0".parse().expect("an address")])
        .await
        .expect("listens");
    let bootstrap = cluster.loopback_bootstrap().expect("listening");
    (cluster, bootstrap)
}

/// Runs `command` with `stdin` as its input; panics (failing the test) when it cannot start
/// (`missing` says what to install) or does not exit within `bound`.
pub async fn run(mut command: Command, stdin: &str, bound: Duration, missing: &str) -> Output {
    let shown = format!("{:?}", command.as_std());
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("could not start {shown} ({e}): {missing}"));
    let mut input = child.stdin.take().expect("stdin is piped");
    input
        .write_all(stdin.as_bytes())
        .await
        .expect("writes the tool's input");
    drop(input);
    tokio::time::timeout(bound, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("{shown} did not finish within {bound:?}"))
        .expect("waits for the tool")
}
