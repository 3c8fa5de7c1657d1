//! Durable publishing: a box office turns every seat sale into an admission pass. The producer
//! waits for every in-sync replica (`acks=all`) and writes a retried send once (idempotence),
//! and the sale's offset is committed only once its pass is acknowledged (`Commit::Tracked`):
//! a crash in between brings the sale back rather than losing the pass.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example kafka_publishing_durability -- run
//! $ cargo test --example kafka_publishing_durability
//! ```
//!
//! The broker address comes from `KAFKA_TEST_URL` (what `scripts/kafka env` prints), else
//! `localhost:9092`.

use serde::{Deserialize, Serialize};

#[path = "support/live.rs"]
mod live;

#[cfg(all(test, feature = "testing"))]
#[path = "support/in_process.rs"]
mod in_process;

#[cfg(test)]
#[path = "support/readback.rs"]
mod readback;

// --8<-- [start:app]
use ruststream_kafka::prelude::*;

/// A seat sold for a show.
#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "seat-sales.publishing-durability")]
struct SeatSale {
    show: String,
    seat: String,
}

/// What lets the buyer in.
#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "admissions.publishing-durability")]
struct Admission {
    show: String,
    seat: String,
}

/// The sale's offset commits after the pass is on every in-sync replica.
#[subscriber(
    KafkaTopic::new("seat-sales.publishing-durability")
        .group("box-office.publishing-durability")
        .commit(Commit::Tracked),
    reply
)]
async fn admit(sale: &SeatSale) -> Admission {
    Admission {
        show: sale.show.clone(),
        seat: sale.seat.clone(),
    }
}

#[ruststream::app]
fn app() -> impl App<State = ()> {
    let broker = KafkaBroker::new([live::bootstrap()])
        .producer_config("acks", "all")
        .producer_config("enable.idempotence", "true");
    RustStream::new(AppInfo::new("box-office", "0.1.0")).with_broker(broker, |b| {
        b.include(admit).out_reply(Publish::default());
    })
}
// --8<-- [end:app]

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
