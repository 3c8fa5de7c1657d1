//! The metering service of `examples/kafka_publishing_keys.rs` without macros: the handler is a
//! type implementing `Handle` over its `Out` entry, and the slot marker, the destinations and the
//! header contract are written by hand.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example manual_kafka_publishing_keys -- run
//! $ cargo test --example manual_kafka_publishing_keys
//! ```

use std::process::ExitCode;

use ruststream::WithHeaders;
use ruststream::runtime::cli::run_main;
use ruststream::runtime::{ListOffer, OutSlot, PublishedThrough};
use serde::{Deserialize, Serialize};

#[path = "../support/live.rs"]
mod live;

#[cfg(all(test, feature = "testing"))]
#[path = "../support/in_process.rs"]
mod in_process;

#[cfg(test)]
#[path = "../support/readback.rs"]
mod readback;

// --8<-- [start:app]
use ruststream_kafka::prelude::*;

/// The slot usage records leave through.
struct Billing;

impl OutSlot for Billing {
    const NAME: &'static str = "Billing";
    type Destination = <(Usage, ()) as ListOffer>::Offer;
}

impl PublishedThrough<Billing> for Usage {}

struct Meter;

impl<Entry> Handle<Reading, (), Outs<(Entry,)>> for Meter
where
    Entry: OutEntry<Billing, Wire: Publisher>,
{
    async fn handle(
        &self,
        reading: &Reading,
        outs: &Outs<(Entry,)>,
        _ctx: &mut Context<'_>,
    ) -> Result<(), HandlerOutcome> {
        let key = MeterKey {
            meter: reading.meter.clone(),
        };
        let usage = Usage {
            watt_hours: reading.watt_hours,
        };
        outs.get(Billing)
            .message(&usage)
            .with_headers(&key)
            .publish()
            .await
            .map_err(|_| HandlerOutcome::retry())
    }
}

fn readings() -> KafkaTopic {
    KafkaTopic::new("meter-readings.publishing-keys").group("metering.publishing-keys")
}

fn app() -> impl App<State = ()> {
    RustStream::new(AppInfo::new("metering", "0.1.0")).with_broker(
        KafkaBroker::new([live::bootstrap()]),
        |b| {
            b.include(subscriber(readings(), Meter).build())
                .out(Billing, Publish::default())
                .build();
        },
    )
}

fn main() -> ExitCode {
    run_main(app)
}
// --8<-- [end:app]

/// What a meter reported.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct Reading {
    meter: String,
    watt_hours: u64,
}

impl OutgoingDestination for Reading {
    type Form = FixedName;
    const DESTINATION: &'static str = "meter-readings.publishing-keys";
}

impl MessageHeaders for Reading {
    type Contract = NoHeaders;
}

/// The header of a usage record: its meter, as the record key.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct MeterKey {
    #[serde(rename = "kafka-partition-key")]
    meter: String,
}

/// Usage to bill; one meter's records share a partition, so billing reads them in order.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct Usage {
    watt_hours: u64,
}

impl OutgoingDestination for Usage {
    type Form = FixedName;
    const DESTINATION: &'static str = "usage.publishing-keys";
}

impl MessageHeaders for Usage {
    type Contract = WithHeaders<MeterKey>;
}

#[cfg(test)]
mod tests {
    use std::error::Error;
    use std::time::Duration;

    use ruststream::testing::TestApp;
    use ruststream_kafka::PARTITION_KEY_HEADER;
    use ruststream_kafka::client::IsolationLevel;
    use ruststream_kafka::prelude::*;

    use super::{Billing, Reading, Usage, app, live, readback};

    const READINGS: &str = "meter-readings.publishing-keys";
    const USAGE: &str = "usage.publishing-keys";

    /// On the embedded cluster in this process: the harness part of the live test; what
    /// the harness says was published is read from the cluster's log.
    #[cfg(feature = "testing")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_usage_of_one_meter_shares_a_key_and_a_partition_in_process()
    -> Result<(), Box<dyn Error>> {
        let (tb, cluster) =
            super::in_process::start_with_topics(app(), (), &[(READINGS, 1), (USAGE, 3)]).await?;
        the_usage_of_one_meter_shares_a_key_and_a_partition_body(tb).await?;
        // On the cluster: every record carries the meter as its key, all on one partition.
        let records = cluster.records(USAGE);
        assert_eq!(records.len(), 3);
        assert!(records.iter().all(|(partition, record)| {
            *partition == records[0].0 && record.key.as_deref() == Some(b"meter-17".as_slice())
        }));
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_usage_of_one_meter_shares_a_key_and_a_partition() -> Result<(), Box<dyn Error>> {
        live::ensure_topic(READINGS, 1).await?;
        live::ensure_topic(USAGE, 3).await?;
        let before = readback::log_ends(USAGE, 3).await?;

        let tb = TestApp::start_live_within(app(), Duration::from_secs(30)).await?;
        the_usage_of_one_meter_shares_a_key_and_a_partition_body(tb).await?;

        // On the cluster: every record carries the meter as its key, and all three sit on one
        // partition in the order they were published.
        let mut holding = Vec::new();
        for (partition, &from) in (0..).zip(&before) {
            let records =
                readback::records_since(USAGE, partition, from, IsolationLevel::ReadCommitted)
                    .await?;
            if !records.is_empty() {
                holding.push(records);
            }
        }
        assert_eq!(holding.len(), 1, "one meter's usage spans one partition");
        let records = &holding[0];
        assert!(
            records
                .iter()
                .all(|r| r.key.as_deref() == Some(b"meter-17".as_slice()))
        );
        let amounts: Vec<Usage> = records
            .iter()
            .map(|r| serde_json::from_str(&readback::text(r)))
            .collect::<Result<_, _>>()?;
        assert_eq!(
            amounts,
            [120, 80, 45].map(|watt_hours| Usage { watt_hours })
        );
        Ok(())
    }

    /// The harness part of the test, whichever way the service was started.
    async fn the_usage_of_one_meter_shares_a_key_and_a_partition_body<S: Send + Sync + 'static>(
        tb: TestApp<S>,
    ) -> Result<(), Box<dyn Error>> {
        for watt_hours in [120, 80, 45] {
            let reading = Reading {
                meter: "meter-17".to_owned(),
                watt_hours,
            };
            tb.broker::<KafkaBroker>()
                .message(&reading)
                .publish()
                .await?;
        }

        tb.out::<Billing>().assert_called(3);
        tb.broker::<KafkaBroker>()
            .published::<Usage>(USAGE)
            .assert_called(3)
            .with(&Usage { watt_hours: 45 })
            .with_header(PARTITION_KEY_HEADER, "meter-17");
        tb.shutdown().await?;
        Ok(())
    }
}
