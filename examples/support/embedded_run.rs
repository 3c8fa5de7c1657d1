//! The quickstarts' `embedded` command: the service, unchanged, on an embedded cluster this
//! process starts, with no broker and no Java anywhere.
//!
//! It runs the production path end to end: the cluster listens on a loopback port, the
//! service (`app()`) starts through `App::start` exactly as `run` starts it (no test harness),
//! a publisher of the adapter sends orders over TCP, and the command returns once the handler
//! has placed each of them, then shuts the service down.
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::error::Error;
use std::process::ExitCode;
use std::sync::Mutex;
use std::time::Duration;

/// The orders the handler placed, in order, since the process started (every run and test of
/// the process; a run looks only at what came after it started).
static PLACED: Mutex<Vec<u64>> = Mutex::new(Vec::new());

/// Called by the quickstart's handler: what the `embedded` command waits for.
pub fn placed(id: u64) {
    PLACED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push(id);
}

/// The error a run ends with.
pub type RunError = Box<dyn Error + Send + Sync>;

/// The orders the `embedded` command publishes.
pub const ORDERS: [u64; 3] = [1, 2, 3];

/// How long the handler may take to place every order.
pub const WITHIN: Duration = Duration::from_secs(30);

/// `main` for `-- embedded`: logs at INFO (`RUST_LOG` overrides), runs [`run`] on a runtime
/// of its own, and maps the outcome to the exit code.
#[cfg(feature = "testing")]
pub fn main<A: ruststream::runtime::App>(
    app: impl FnOnce() -> A,
    body: impl Fn(u64) -> Vec<u8>,
) -> ExitCode {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .try_init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("embedded: no runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(app, "orders", &ORDERS, body, WITHIN)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("embedded: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Without the embedded cluster compiled in, say how to get it.
#[cfg(not(feature = "testing"))]
pub fn main<A>(_app: impl FnOnce() -> A, _body: impl Fn(u64) -> Vec<u8>) -> ExitCode {
    eprintln!(
        "embedded: the embedded cluster is behind the `testing` feature: \
         cargo run --features testing --example <this example> -- embedded"
    );
    ExitCode::from(2)
}

/// Starts an embedded cluster on a loopback port, starts the service `app` builds against it,
/// publishes `orders` to `topic` (`body` gives each one's payload), waits up to `within` for
/// the handler to [`placed`] each, and shuts everything down.
#[cfg(feature = "testing")]
pub async fn run<A: ruststream::runtime::App>(
    app: impl FnOnce() -> A,
    topic: &str,
    orders: &[u64],
    body: impl Fn(u64) -> Vec<u8>,
    within: Duration,
) -> Result<(), RunError> {
    use ruststream::{Broker, ConnectedBroker, OutgoingMessage, Publisher};
    use ruststream_kafka::testing::{ClusterOptions, EmbeddedCluster};
    use ruststream_kafka::{KafkaBroker, KafkaPublish};

    let cluster = EmbeddedCluster::new(ClusterOptions::default());
    cluster.listen().await?;
    let bootstrap = cluster
        .loopback_bootstrap()
        .ok_or("the embedded cluster opened no listener")?;
    // A group reads the topics that exist when it joins; this one would otherwise appear
    // with the first publish and be found only at the next metadata refresh.
    let _ = cluster.create_topic(topic, 1);
    println!("embedded Kafka on {bootstrap}; starting the service");

    let seen_before = placed_so_far().len();
    // `start` returns once the group has its partitions and their positions: what is
    // published from now on reaches the handler.
    let running = super::live::built_against(&bootstrap, app).start().await?;

    let connected = KafkaBroker::new([bootstrap])
        .producer_config("acks", "all")
        .connect()
        .await?;
    let publisher = connected.publisher(KafkaPublish::default());
    for &id in orders {
        publisher
            .publish(OutgoingMessage::new(topic, body(id).as_slice()), None)
            .await?;
        println!("order {id} published");
    }
    connected.shutdown().await?;

    let waited = wait_for(orders, seen_before, within).await;
    // Shut down whatever the wait found: a run that failed must not leave the service up,
    // and its error is the one to report.
    let stopped = running.shutdown().await;
    waited?;
    stopped?;
    println!("all {} orders placed; the service stopped", orders.len());
    Ok(())
}

fn placed_so_far() -> Vec<u64> {
    PLACED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone()
}

/// Waits until every one of `orders` was placed after the first `skip` placements.
async fn wait_for(orders: &[u64], skip: usize, within: Duration) -> Result<(), RunError> {
    let wanted: BTreeSet<u64> = orders.iter().copied().collect();
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let seen: BTreeSet<u64> = placed_so_far().into_iter().skip(skip).collect();
        let missing: Vec<u64> = wanted.difference(&seen).copied().collect();
        if missing.is_empty() {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(format!("orders {missing:?} were not placed within {within:?}").into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
