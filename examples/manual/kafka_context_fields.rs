//! The service of `examples/kafka_context_fields.rs` without macros: the handler is a type
//! implementing `Handle` over `KafkaContext` and reads each field with `ctx.context(key)`, and
//! `main` runs the command line by hand.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example manual_kafka_context_fields -- run
//! $ cargo test --example manual_kafka_context_fields
//! ```

use std::future::{Future, ready};
use std::process::ExitCode;

use ruststream::runtime::cli::run_main;
use serde::{Deserialize, Serialize};

#[path = "../support/live.rs"]
mod live;

#[cfg(test)]
#[path = "../support/runs.rs"]
mod runs;

#[cfg(all(test, feature = "testing"))]
#[path = "../support/in_process.rs"]
mod in_process;

// --8<-- [start:app]
use ruststream_kafka::context::KafkaContext;
use ruststream_kafka::context::keys::{Key, Offset, TimestampMillis};
use ruststream_kafka::prelude::*;

/// Issues a receipt for a parcel dropped into a locker: where the record sits in the log, when
/// it was stamped, and the courier it was keyed by.
struct Receipt;

impl Handle<LockerDrop, DropReceipt, (), KafkaContext> for Receipt {
    fn handle(
        &self,
        drop: &LockerDrop,
        _outs: &(),
        ctx: &mut Context<'_, KafkaContext>,
    ) -> impl Future<Output = Result<DropReceipt, HandlerOutcome>> {
        let record = format!(
            "{}/{}@{}",
            ctx.context(Topic),
            ctx.context(Partition),
            ctx.context(Offset)
        );
        ready(Ok(DropReceipt {
            locker: drop.locker,
            record,
            stamped_at: ctx.context(TimestampMillis),
            courier: ctx
                .context(Key)
                .map(|key| String::from_utf8_lossy(key).into_owned()),
        }))
    }
}

fn app() -> impl App<State = ()> {
    let drops = KafkaTopic::new("locker-drops.manual_kafka_context_fields")
        .group("lockers.manual_kafka_context_fields");
    RustStream::new(AppInfo::new("lockers", "0.1.0")).with_broker(
        KafkaBroker::new([live::bootstrap()]),
        |b| {
            b.include(subscriber(drops, Receipt).reply().build());
        },
    )
}

fn main() -> ExitCode {
    run_main(app)
}
// --8<-- [end:app]

#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct LockerDrop {
    locker: u32,
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct DropReceipt {
    locker: u32,
    record: String,
    stamped_at: Option<i64>,
    courier: Option<String>,
}

impl OutgoingDestination for DropReceipt {
    type Form = FixedName;
    const DESTINATION: &'static str = "drop-receipts.manual_kafka_context_fields";
}

impl MessageHeaders for DropReceipt {
    type Contract = NoHeaders;
}

#[cfg(test)]
mod tests {
    use std::error::Error;
    use std::time::Duration;

    use ruststream::testing::TestApp;
    use ruststream_kafka::prelude::*;

    use super::runs::{eventually, now_millis, recreate_topic, seed_keyed};
    use super::{DropReceipt, LockerDrop, app};

    const DROPS: &str = "locker-drops.manual_kafka_context_fields";

    /// The same on the embedded cluster in this process.
    #[cfg(feature = "testing")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_receipt_carries_the_delivery_fields_in_process() -> Result<(), Box<dyn Error>> {
        let (tb, cluster) = super::in_process::start_prepared(app(), (), |cluster| {
            let _ = cluster.create_topic(DROPS, 1);
            Ok(())
        })
        .await?;
        let before = now_millis();
        super::in_process::seed_keyed(
            &cluster,
            DROPS,
            &[("courier-17", LockerDrop { locker: 88 })],
        )?;

        let kafka = tb.broker::<KafkaBroker>();
        let receipts =
            || kafka.published::<DropReceipt>("drop-receipts.manual_kafka_context_fields");
        eventually("the receipt", || !receipts().messages().is_empty()).await?;
        let [receipt] = <[DropReceipt; 1]>::try_from(receipts().decoded())
            .map_err(|all| format!("one receipt expected: {all:?}"))?;
        assert_eq!(receipt.locker, 88);
        // The topic was created for this run, so the drop is its first record.
        assert_eq!(receipt.record, format!("{DROPS}/0@0"));
        assert_eq!(receipt.courier.as_deref(), Some("courier-17"));
        let stamped_at = receipt.stamped_at.ok_or("no timestamp")?;
        assert!(stamped_at >= before - 1_000, "{stamped_at} < {before}");
        tb.shutdown().await?;
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_receipt_carries_the_delivery_fields() -> Result<(), Box<dyn Error>> {
        recreate_topic(DROPS, 1).await?;
        let tb = TestApp::start_live_within(app(), Duration::from_secs(30)).await?;
        let before = now_millis();
        seed_keyed(DROPS, &[("courier-17", LockerDrop { locker: 88 })]).await?;

        let kafka = tb.broker::<KafkaBroker>();
        let receipts =
            || kafka.published::<DropReceipt>("drop-receipts.manual_kafka_context_fields");
        eventually("the receipt", || !receipts().messages().is_empty()).await?;
        let [receipt] = <[DropReceipt; 1]>::try_from(receipts().decoded())
            .map_err(|all| format!("one receipt expected: {all:?}"))?;
        assert_eq!(receipt.locker, 88);
        // The topic was created for this run, so the drop is its first record.
        assert_eq!(receipt.record, format!("{DROPS}/0@0"));
        assert_eq!(receipt.courier.as_deref(), Some("courier-17"));
        let stamped_at = receipt.stamped_at.ok_or("no timestamp")?;
        assert!(stamped_at >= before - 1_000, "{stamped_at} < {before}");
        tb.shutdown().await?;
        Ok(())
    }
}
