//! The box office of `examples/kafka_publishing_durability.rs` without macros: the reply body
//! is a type implementing `Handle`, mounted with `subscriber(..)` on the same tracked
//! subscription, on a broker with the same producer settings.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example manual_kafka_publishing_durability -- run
//! $ cargo test --example manual_kafka_publishing_durability
//! ```

use std::future::{Future, ready};
use std::process::ExitCode;

use ruststream::runtime::cli::run_main;
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

/// The sale's offset commits after the pass is on every in-sync replica.
struct Admit;

impl Handle<SeatSale, Admission> for Admit {
    fn handle(
        &self,
        sale: &SeatSale,
        _outs: &(),
        _ctx: &mut Context<'_>,
    ) -> impl Future<Output = Result<Admission, HandlerOutcome>> {
        ready(Ok(Admission {
            show: sale.show.clone(),
            seat: sale.seat.clone(),
        }))
    }
}

fn sales() -> KafkaTopic {
    KafkaTopic::new("seat-sales.publishing-durability")
        .group("box-office.publishing-durability")
        .commit(Commit::Tracked)
}

fn app() -> impl App<State = ()> {
    let broker = KafkaBroker::new([live::bootstrap()])
        .producer_config("acks", "all")
        .producer_config("enable.idempotence", "true");
    RustStream::new(AppInfo::new("box-office", "0.1.0")).with_broker(broker, |b| {
        b.include(subscriber(sales(), Admit).reply().build())
            .out_reply(Publish::default());
    })
}

fn main() -> ExitCode {
    run_main(app)
}
// --8<-- [end:app]

/// A seat sold for a show.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct SeatSale {
    show: String,
    seat: String,
}

impl OutgoingDestination for SeatSale {
    type Form = FixedName;
    const DESTINATION: &'static str = "seat-sales.publishing-durability";
}

impl MessageHeaders for SeatSale {
    type Contract = NoHeaders;
}

/// What lets the buyer in.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct Admission {
    show: String,
    seat: String,
}

impl OutgoingDestination for Admission {
    type Form = FixedName;
    const DESTINATION: &'static str = "admissions.publishing-durability";
}

impl MessageHeaders for Admission {
    type Contract = NoHeaders;
}

#[cfg(test)]
mod tests {
    use std::error::Error;
    use std::time::Duration;

    use ruststream::testing::TestApp;
    use ruststream_kafka::prelude::*;

    use super::{Admission, SeatSale, app, live, readback};

    const SALES: &str = "seat-sales.publishing-durability";
    const ADMISSIONS: &str = "admissions.publishing-durability";
    const GROUP: &str = "box-office.publishing-durability";

    /// On the embedded cluster in this process: the harness part of the live test; what
    /// the harness says was published is read from the cluster's log.
    #[cfg(feature = "testing")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_pass_is_written_before_its_sale_commits_in_process() -> Result<(), Box<dyn Error>> {
        let (tb, cluster) =
            super::in_process::start_with_topics(app(), (), &[(SALES, 1), (ADMISSIONS, 1)]).await?;
        a_pass_is_written_before_its_sale_commits_body(tb).await?;
        drop(cluster);
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_pass_is_written_before_its_sale_commits() -> Result<(), Box<dyn Error>> {
        live::ensure_topic(SALES, 1).await?;
        live::ensure_topic(ADMISSIONS, 1).await?;
        let before = readback::log_ends(ADMISSIONS, 1).await?;

        let tb = TestApp::start_live_within(app(), Duration::from_secs(30)).await?;
        let pass = a_pass_is_written_before_its_sale_commits_body(tb).await?;

        // The pass is on the cluster, and the group committed past the sale it answers.
        let landed = readback::committed_values_since(ADMISSIONS, &before).await?;
        assert_eq!(landed, [vec![serde_json::to_string(&pass)?]]);
        let sales_end = readback::log_ends(SALES, 1).await?;
        assert_eq!(
            readback::committed_offset(GROUP, SALES, 0).await?,
            sales_end[0]
        );
        Ok(())
    }

    /// The harness part of the test, whichever way the service was started.
    async fn a_pass_is_written_before_its_sale_commits_body<S: Send + Sync + 'static>(
        tb: TestApp<S>,
    ) -> Result<Admission, Box<dyn Error>> {
        let sale = SeatSale {
            show: "matinee".to_owned(),
            seat: "F12".to_owned(),
        };
        tb.broker::<KafkaBroker>().message(&sale).publish().await?;

        let pass = Admission {
            show: "matinee".to_owned(),
            seat: "F12".to_owned(),
        };
        tb.broker::<KafkaBroker>()
            .subscriber(SALES)
            .assert_called_once()
            .settled(HandlerOutcome::ack());
        tb.broker::<KafkaBroker>()
            .published::<Admission>(ADMISSIONS)
            .assert_called_once()
            .with(&pass);
        tb.shutdown().await?;
        Ok(pass)
    }
}
