//! The first service of the Getting started guide: a library desk lends books, one handler on
//! one topic in one consumer group. A loan without a reader's card is dropped; every other loan
//! is taken.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example guide_getting_started -- run
//! $ cargo test --example guide_getting_started
//! ```
//!
//! The broker address comes from `KAFKA_TEST_URL` (what `scripts/kafka env` prints), else
//! `localhost:9092`.

use serde::{Deserialize, Serialize};

#[path = "../support/live.rs"]
mod live;

#[cfg(all(test, feature = "testing"))]
#[path = "../support/in_process.rs"]
mod in_process;

#[cfg(test)]
#[path = "../support/readback.rs"]
mod readback;

// --8<-- [start:service]
use ruststream_kafka::prelude::*;

/// A book going out on a reader's card.
#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "loans.guide_getting_started")]
struct Loan {
    book: String,
    card: Option<u32>,
}

#[subscriber("loans.guide_getting_started")]
async fn lend(loan: &Loan) -> HandlerOutcome {
    let Some(card) = loan.card else {
        tracing::warn!(loan.book, "a loan without a card is dropped");
        return HandlerOutcome::drop();
    };
    tracing::info!(loan.book, card, "book lent");
    HandlerOutcome::ack()
}

#[ruststream::app]
fn app() -> impl App<State = ()> {
    RustStream::new(AppInfo::new("library", "0.1.0")).with_broker(
        KafkaBroker::new([live::bootstrap()]).default_group("desk.guide_getting_started"),
        |b| {
            b.include(lend);
        },
    )
}
// --8<-- [end:service]

#[cfg(test)]
mod tests {
    use std::error::Error;
    use std::time::Duration;

    use ruststream::testing::TestApp;
    use ruststream_kafka::prelude::*;

    use super::{Loan, app, live, readback};

    const LOANS: &str = "loans.guide_getting_started";
    const GROUP: &str = "desk.guide_getting_started";

    /// On the embedded cluster in this process: the harness part of the live test; what
    /// the harness says was published is read from the cluster's log.
    #[cfg(feature = "testing")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_loan_needs_a_card_in_process() -> Result<(), Box<dyn Error>> {
        let (tb, cluster) = super::in_process::start_with_topics(app(), (), &[(LOANS, 1)]).await?;
        a_loan_needs_a_card_body(tb).await?;
        drop(cluster);
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_loan_needs_a_card() -> Result<(), Box<dyn Error>> {
        live::ensure_topic(LOANS, 1).await?;
        let tb = TestApp::start_live_within(app(), Duration::from_secs(30)).await?;
        a_loan_needs_a_card_body(tb).await?;

        // Both loans are settled, the dropped one too: the group resumes after them.
        let end = readback::log_ends(LOANS, 1).await?;
        assert_eq!(readback::committed_offset(GROUP, LOANS, 0).await?, end[0]);
        Ok(())
    }

    /// The harness part of the test, whichever way the service was started.
    async fn a_loan_needs_a_card_body<S: Send + Sync + 'static>(
        tb: TestApp<S>,
    ) -> Result<(), Box<dyn Error>> {
        let desk = tb.broker::<KafkaBroker>();

        let cardless = Loan {
            book: "Dune".to_owned(),
            card: None,
        };
        desk.message(&cardless).publish().await?;
        desk.subscriber(LOANS)
            .assert_called_once()
            .with(&cardless)
            .settled(HandlerOutcome::drop());

        let lent = Loan {
            book: "Emma".to_owned(),
            card: Some(4711),
        };
        desk.message(&lent).publish().await?;
        desk.subscriber(LOANS)
            .assert_called(2)
            .with(&lent)
            .settled(HandlerOutcome::ack());
        tb.shutdown().await?;
        Ok(())
    }
}
