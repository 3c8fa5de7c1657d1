//! The fleet tracking service of `kafka_asyncapi`, without macros: `Handle` impls, hand-built
//! subscriptions, and a position type whose topic the mount site names. Its document carries
//! the same `kafka` bindings.
//!
//! ```text
//! $ cargo test --example manual_kafka_asyncapi --features asyncapi,schema-registry
//! ```

// The tests build the document from `fleet` and `cluster` directly; a plain build only keeps
// them for `main`.
#![cfg_attr(not(test), allow(dead_code))]

use std::future::{Future, ready};
use std::process::ExitCode;

use ruststream::runtime::cli::run_main;
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

/// The position the map shows; the mount site names its topic.
#[derive(Serialize, JsonSchema)]
#[schemars(crate = "ruststream::schemars")]
struct Position {
    vehicle: String,
    lat_e6: i64,
    lon_e6: i64,
}

impl OutgoingDestination for Position {
    type Form = CallerName;
}

impl MessageHeaders for Position {
    type Contract = NoHeaders;
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

struct Locate;

impl Handle<Ping, Position> for Locate {
    fn handle(
        &self,
        ping: &Ping,
        _outs: &(),
        _ctx: &mut Context<'_>,
    ) -> impl Future<Output = Result<Position, HandlerOutcome>> {
        ready(Ok(Position {
            vehicle: ping.vehicle.clone(),
            lat_e6: ping.lat_e6,
            lon_e6: ping.lon_e6,
        }))
    }
}

struct Dispatch;

impl Handle<Breakdown> for Dispatch {
    fn handle(
        &self,
        report: &Breakdown,
        _outs: &(),
        _ctx: &mut Context<'_>,
    ) -> impl Future<Output = Result<(), HandlerOutcome>> {
        tracing::info!(report.vehicle, report.reason, "tow truck sent");
        ready(Ok(()))
    }
}

struct Tally;

impl Handle<FuelFill> for Tally {
    fn handle(
        &self,
        fill: &FuelFill,
        _outs: &(),
        _ctx: &mut Context<'_>,
    ) -> impl Future<Output = Result<(), HandlerOutcome>> {
        tracing::info!(fill.vehicle, fill.litres, "fill booked");
        ready(Ok(()))
    }
}

/// A group of its own and a client id the cluster's quotas know it by.
fn pings() -> KafkaTopic {
    KafkaTopic::new("vehicle-pings")
        .group("fleet-tracker")
        .config("client.id", "tracker-east")
}

/// Day and night breakdowns come in on two topics, read by one group.
fn breakdowns() -> KafkaTopics {
    KafkaTopics::new(["breakdowns", "breakdowns.night"]).group("roadside")
}

/// The fuel log is read partition by partition, outside any group.
fn fuel_log() -> KafkaPartitions {
    KafkaPartitions::new("fuel-log", [0, 1, 2])
}

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

fn fleet(broker: KafkaBroker) -> impl App {
    RustStream::new(AppInfo::new("fleet", "2.3.0")).with_broker_labeled("fleet", broker, |b| {
        b.include(
            subscriber(pings(), Locate)
                .reply()
                .to("vehicle-positions")
                .build(),
        );
        b.include(subscriber(breakdowns(), Dispatch).build());
        b.include(subscriber(fuel_log(), Tally).build());
    })
}

fn main() -> ExitCode {
    run_main(|| {
        let secret = std::env::var("FLEET_KAFKA_SECRET").unwrap_or_default();
        fleet(cluster(&secret))
    })
}

#[cfg(test)]
#[path = "../support/asyncapi_checks.rs"]
mod checks;

#[cfg(test)]
mod tests {
    super::checks::fleet_document_tests!();
}
