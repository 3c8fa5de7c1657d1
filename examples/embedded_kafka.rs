//! A Kafka with no Java: the embedded cluster of `ruststream_kafka::testing` served over TCP
//! until Ctrl-C, for services, kcat and Kafka's own console tools in other shells.
//!
//! ```text
//! $ cargo run --features testing --example embedded_kafka -- --topic orders   # 127.0.0.1:9092
//! $ cargo run --example kafka_quickstart -- run                # in another shell
//! $ cargo run --example kafka_producer -- 7                    # in a third: "order 7 placed"
//! $ cargo run --features testing --example embedded_kafka -- --port 19092 --partitions 3
//! ```
//!
//! `--topic` creates a topic up front: a consumer group started before its topic exists finds
//! it only at its next metadata refresh (5 minutes, librdkafka's default), on Kafka as here.
//!
//! Everything is kept in memory and gone when it stops. What the embedded brokers model (and
//! what not) is in `docs/embedded-cluster.md`.

use std::error::Error;
use std::net::SocketAddr;
use std::process::ExitCode;

use ruststream_kafka::testing::{ClusterOptions, EmbeddedCluster};

/// What the command line asks for.
#[derive(Debug, PartialEq, Eq)]
struct Args {
    port: u16,
    /// Partitions of a topic created because a client asked for it, or named by `--topic`.
    partitions: i32,
    /// Topics created before the first client comes.
    topics: Vec<String>,
}

const USAGE: &str = "usage: embedded_kafka [--port P (default 9092)] [--partitions N (default 1)] \
                     [--topic NAME (created at start; repeatable)]";

impl Args {
    fn parse(mut args: impl Iterator<Item = String>) -> Result<Option<Args>, String> {
        let mut parsed = Args {
            port: 9092,
            partitions: 1,
            topics: Vec::new(),
        };
        while let Some(arg) = args.next() {
            let mut value = |name: &str| {
                args.next()
                    .ok_or_else(|| format!("{name} needs a value\n{USAGE}"))
            };
            match arg.as_str() {
                "--port" => {
                    let v = value("--port")?;
                    parsed.port = v
                        .parse()
                        .map_err(|_| format!("--port {v}: not a port number\n{USAGE}"))?;
                }
                "--partitions" => {
                    let v = value("--partitions")?;
                    parsed.partitions = v.parse().ok().filter(|n| *n >= 1).ok_or_else(|| {
                        format!("--partitions {v}: not a positive count\n{USAGE}")
                    })?;
                }
                "--topic" => parsed.topics.push(value("--topic")?),
                "-h" | "--help" => return Ok(None),
                other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
            }
        }
        Ok(Some(parsed))
    }
}

/// Starts a one-node cluster listening on `addr` with `topics` created; it serves until the
/// returned cluster (and every connection to it) is gone.
async fn start(
    addr: SocketAddr,
    partitions: i32,
    topics: &[String],
) -> std::io::Result<EmbeddedCluster> {
    let cluster = EmbeddedCluster::new(ClusterOptions {
        num_partitions: partitions,
        ..ClusterOptions::default()
    });
    cluster.listen_on(&[addr]).await?;
    // A consumer group reads a topic that exists when it joins; one created later is found at
    // the next metadata refresh (`topic.metadata.refresh.interval.ms`, 5 minutes), as with
    // librdkafka. Creating the service's topics first makes its first records arrive at once.
    for topic in topics {
        if !cluster.create_topic(topic, partitions) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("--topic {topic:?}: not a legal topic name, or named twice"),
            ));
        }
    }
    Ok(cluster)
}

/// The line that tells the user where the cluster is and what to point at it.
fn banner(bootstrap: &str, port: u16, partitions: i32) -> String {
    // The examples default to localhost:9092; on another port they need to be told.
    let env = if port == 9092 {
        String::new()
    } else {
        format!("KAFKA_TEST_URL={bootstrap} ")
    };
    format!(
        "embedded Kafka on {bootstrap} (in memory; new topics get {partitions} partition(s); \
         Ctrl-C stops it). Try: `{env}cargo run --example kafka_quickstart -- run` and \
         `{env}cargo run --example kafka_producer -- 7`, `kcat -b {bootstrap} -L`, or \
         `kafka-console-producer.sh --bootstrap-server {bootstrap} --topic orders`"
    )
}

/// Resolves on Ctrl-C, or on SIGTERM where there is one.
async fn stopped() -> std::io::Result<()> {
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            ctrl_c = tokio::signal::ctrl_c() => ctrl_c,
            _ = term.recv() => Ok(()),
        }
    }
    #[cfg(not(unix))]
    tokio::signal::ctrl_c().await
}

async fn serve(args: Args) -> Result<(), Box<dyn Error>> {
    let addr = SocketAddr::from(([127, 0, 0, 1], args.port));
    let cluster = start(addr, args.partitions, &args.topics)
        .await
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::AddrInUse {
                format!("{e}; is a Kafka running there? Pick another port with --port")
            } else {
                e.to_string()
            }
        })?;
    let bootstrap = cluster.loopback_bootstrap().unwrap_or_default();
    println!("{}", banner(&bootstrap, args.port, args.partitions));
    stopped().await?;
    eprintln!("embedded Kafka on {bootstrap} stopped");
    Ok(())
}

fn main() -> ExitCode {
    // Quiet unless asked (RUST_LOG=debug shows every connection the brokers close).
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .try_init();
    let args = match Args::parse(std::env::args().skip(1)) {
        Ok(Some(args)) => args,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(why) => {
            eprintln!("embedded_kafka: {why}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("embedded_kafka: no runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("embedded_kafka: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use ruststream::{Broker, ConnectedBroker, OutgoingMessage, Publisher};
    use ruststream_kafka::client::{Client, ClientConfig};
    use ruststream_kafka::{KafkaBroker, KafkaPublish};
    use std::error::Error;
    use std::net::SocketAddr;

    use super::{Args, banner, start};

    fn args(list: &[&str]) -> Result<Option<Args>, String> {
        Args::parse(list.iter().map(|s| (*s).to_owned()))
    }

    #[test]
    fn the_command_line_is_read() {
        assert_eq!(
            args(&[]),
            Ok(Some(Args {
                port: 9092,
                partitions: 1,
                topics: Vec::new(),
            }))
        );
        assert_eq!(
            args(&[
                "--port",
                "19092",
                "--partitions",
                "3",
                "--topic",
                "orders",
                "--topic",
                "audit"
            ]),
            Ok(Some(Args {
                port: 19092,
                partitions: 3,
                topics: vec!["orders".to_owned(), "audit".to_owned()],
            }))
        );
        assert_eq!(args(&["--help"]), Ok(None));
        for bad in [
            &["--port"][..],
            &["--port", "x"],
            &["--partitions", "0"],
            &["--topic"],
            &["--nodes", "3"],
        ] {
            assert!(args(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_banner_names_the_address_and_the_env_only_when_needed() {
        let default = banner("127.0.0.1:9092", 9092, 1);
        assert!(default.contains("`cargo run --example kafka_quickstart -- run`"));
        assert!(!default.contains("KAFKA_TEST_URL"));
        let other = banner("127.0.0.1:19092", 19092, 1);
        assert!(
            other.contains("KAFKA_TEST_URL=127.0.0.1:19092 cargo run --example kafka_quickstart")
        );
        assert!(other.contains("kcat -b 127.0.0.1:19092"));
    }

    /// The adapter publishes through the listener, and a plain client reads it back: what the
    /// quickstart and `kafka_producer` do against the served cluster.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_published_record_is_served_over_tcp() -> Result<(), Box<dyn Error>> {
        let cluster = start(
            SocketAddr::from(([127, 0, 0, 1], 0)),
            2,
            &["orders".to_owned()],
        )
        .await?;
        let bootstrap = cluster.loopback_bootstrap().ok_or("not listening")?;
        let connected = KafkaBroker::new([bootstrap.clone()]).connect().await?;
        connected
            .publisher(KafkaPublish::default())
            .publish(OutgoingMessage::new("orders", &b"{\"id\":7}"[..]), None)
            .await?;
        connected.shutdown().await?;

        let client = Client::connect(ClientConfig::new(&bootstrap)).await?;
        let partitions = client.topic("orders").await?.partitions.len();
        assert_eq!(partitions, 2, "created at start with --partitions");
        let values: Vec<_> = cluster
            .records("orders")
            .into_iter()
            .filter_map(|(_, record)| record.value)
            .collect();
        assert_eq!(values, [&b"{\"id\":7}"[..]]);
        client.close();
        Ok(())
    }
}
