//! The `AsyncAPI` document of a fleet tracking service, and what its `kafka` bindings say: the
//! cluster and its schema registry on the server, the topic behind each channel, the consumer
//! group and client id behind each receive operation. The credentials the service connects
//! with stay out of the document. The tests read the document the app generates; nothing
//! connects.
//!
//! ```text
//! $ cargo run --example kafka_asyncapi --features asyncapi,schema-registry -- asyncapi gen
//! $ cargo test --example kafka_asyncapi --features asyncapi,schema-registry
//! ```

// The tests build the document from `fleet` and `cluster` directly; a plain build only keeps
// them for `service`.
#![cfg_attr(not(test), allow(dead_code))]

// --8<-- [start:app]
use ruststream::schemars::JsonSchema;
use ruststream_kafka::SchemaRegistry;
use ruststream_kafka::prelude::*;
use serde::{Deserialize, Serialize};

/// Where a vehicle is, as its tracker reports it.
#[derive(Deserialize, JsonSchema)]
#[schemars(crate = "ruststream::schemars")]
struct Ping {
    vehicle: String,
    lat_e6: i64,
    lon_e6: i64,
}

/// The position the map shows.
#[derive(Serialize, JsonSchema, Outgoing)]
#[schemars(crate = "ruststream::schemars")]
struct Position {
    vehicle: String,
    lat_e6: i64,
    lon_e6: i64,
}

/// A vehicle that stopped on the road.
#[derive(Deserialize, JsonSchema)]
#[schemars(crate = "ruststream::schemars")]
struct Breakdown {
    vehicle: String,
    reason: String,
}

/// A tank filled at a depot.
#[derive(Deserialize, JsonSchema)]
#[schemars(crate = "ruststream::schemars")]
struct FuelFill {
    vehicle: String,
    litres: u32,
}

// --8<-- [start:operations]
/// A group of its own and a client id the cluster's quotas know it by.
#[subscriber(
    KafkaTopic::new("vehicle-pings")
        .group("fleet-tracker")
        .config("client.id", "tracker-east"),
    reply("vehicle-positions")
)]
async fn locate(ping: &Ping) -> Position {
    Position {
        vehicle: ping.vehicle.clone(),
        lat_e6: ping.lat_e6,
        lon_e6: ping.lon_e6,
    }
}

/// Day and night breakdowns come in on two topics, read by one group.
#[subscriber(KafkaTopics::new(["breakdowns", "breakdowns.night"]).group("roadside"))]
async fn dispatch(report: &Breakdown) -> HandlerOutcome {
    tracing::info!(report.vehicle, report.reason, "tow truck sent");
    HandlerOutcome::ack()
}

/// The fuel log is read partition by partition, outside any group.
#[subscriber(KafkaPartitions::new("fuel-log", [0, 1, 2]))]
async fn tally(fill: &FuelFill) -> HandlerOutcome {
    tracing::info!(fill.vehicle, fill.litres, "fill booked");
    HandlerOutcome::ack()
}
// --8<-- [end:operations]

// --8<-- [start:server]
/// The production cluster over `SASL_SSL`, and the registry its producers frame with.
fn cluster(secret: &str) -> KafkaBroker {
    let registry =
        SchemaRegistry::new("https://schemas.fleet.example:8081").basic_auth("fleet-svc", secret);
    KafkaBroker::new([
        "SASL_SSL://kafka-a.fleet.example:9093",
        "SASL_SSL://kafka-b.fleet.example:9093",
    ])
    .default_group("fleet")
    .config("security.protocol", "SASL_SSL")
    .config("sasl.mechanism", "SCRAM-SHA-256")
    .config("sasl.username", "fleet-svc")
    .config("sasl.password", secret)
    .schema_registry(registry)
}
// --8<-- [end:server]

fn fleet(broker: KafkaBroker) -> impl App {
    RustStream::new(AppInfo::new("fleet", "2.3.0")).with_broker_labeled("fleet", broker, |b| {
        b.include(locate);
        b.include(dispatch);
        b.include(tally);
    })
}

#[ruststream::app]
fn service() -> impl App {
    let secret = std::env::var("FLEET_KAFKA_SECRET").unwrap_or_default();
    fleet(cluster(&secret))
}
// --8<-- [end:app]

#[cfg(test)]
#[path = "support/asyncapi_checks.rs"]
mod checks;

#[cfg(test)]
mod tests {
    super::checks::fleet_document_tests!();
}
