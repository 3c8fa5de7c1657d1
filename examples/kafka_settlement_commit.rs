//! Commit modes: `Commit::Tracked` commits a record's offset only once it is settled, and a
//! retry hands the record back to the subscription ahead of anything newer. `Commit::Auto` (the
//! default) stores the offset as the record is handed over, so a retry has nothing to bring back.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example kafka_settlement_commit -- run
//! $ cargo test --example kafka_settlement_commit
//! ```

use std::collections::HashSet;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

#[path = "support/live.rs"]
mod live;

#[cfg(test)]
#[path = "support/runs.rs"]
mod runs;

// --8<-- [start:app]
use ruststream_kafka::prelude::*;

/// Admits a visitor at the museum gate. A smudged ticket the scanner cannot read comes back on
/// this subscription, and the group commits nothing past it until it is settled.
#[subscriber(
    KafkaTopic::new("tickets.kafka_settlement_commit")
        .group("gates.kafka_settlement_commit")
        .commit(Commit::Tracked)
)]
async fn admit(ticket: &Ticket, State(scanner): State<Arc<Scanner>>) -> HandlerOutcome {
    if !scanner.read(ticket) {
        tracing::warn!(ticket.code, "ticket unreadable, retrying");
        return HandlerOutcome::retry();
    }
    tracing::info!(ticket.code, "visitor admitted");
    HandlerOutcome::ack()
}

/// Counts visitors for the footfall chart, which can afford to miss one: the subscription keeps
/// the timer commit, so a retried count is not delivered again.
#[subscriber(
    KafkaTopic::new("turnstile-clicks.kafka_settlement_commit")
        .group("footfall.kafka_settlement_commit")
)]
async fn count(click: &TurnstileClick) -> HandlerOutcome {
    if click.glitch {
        return HandlerOutcome::retry();
    }
    HandlerOutcome::ack()
}

/// What the handlers share, built once at startup.
#[derive(Clone, Default, FromRef)]
struct AppState {
    scanner: Arc<Scanner>,
}

#[ruststream::app]
fn app() -> impl App<State = AppState> {
    RustStream::new(AppInfo::new("museum", "0.1.0"))
        .on_startup(|()| async { Ok::<AppState, Infallible>(AppState::default()) })
        .with_broker(KafkaBroker::new([live::bootstrap()]), |b| {
            b.include(admit);
            b.include(count);
        })
}
// --8<-- [end:app]

/// A scanner that cannot read a smudged ticket the first time it sees it.
#[derive(Debug, Default)]
struct Scanner {
    tried: Mutex<HashSet<String>>,
}

impl Scanner {
    fn read(&self, ticket: &Ticket) -> bool {
        let first_try = self
            .tried
            .lock()
            .is_ok_and(|mut tried| tried.insert(ticket.code.clone()));
        !(ticket.smudged && first_try)
    }
}

#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "tickets.kafka_settlement_commit")]
struct Ticket {
    code: String,
    smudged: bool,
}

#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "turnstile-clicks.kafka_settlement_commit")]
struct TurnstileClick {
    turnstile: u8,
    glitch: bool,
}

#[cfg(test)]
mod tests {
    use std::error::Error;
    use std::time::Duration;

    use ruststream::testing::{Outcome, TestApp};
    use ruststream_kafka::prelude::*;

    use super::runs::{eventually, topic};
    use super::{Ticket, TurnstileClick, app};

    /// On the embedded cluster in this process: nothing to start.
    #[cfg(feature = "testing")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_tracked_retry_comes_back_and_an_auto_retry_does_not_in_process()
    -> Result<(), Box<dyn Error>> {
        a_tracked_retry_comes_back_and_an_auto_retry_does_not_body(TestApp::start(app()).await?)
            .await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_tracked_retry_comes_back_and_an_auto_retry_does_not() -> Result<(), Box<dyn Error>> {
        topic("tickets.kafka_settlement_commit", 1).await?;
        topic("turnstile-clicks.kafka_settlement_commit", 1).await?;
        let tb = TestApp::start_live_within(app(), Duration::from_secs(30)).await?;
        a_tracked_retry_comes_back_and_an_auto_retry_does_not_body(tb).await
    }

    /// The test body, whichever way the service was started.
    async fn a_tracked_retry_comes_back_and_an_auto_retry_does_not_body<
        S: Send + Sync + 'static,
    >(
        tb: TestApp<S>,
    ) -> Result<(), Box<dyn Error>> {
        let kafka = tb.broker::<KafkaBroker>();

        let smudged = Ticket {
            code: "MUS-5521".to_owned(),
            smudged: true,
        };
        kafka.message(&smudged).publish().await?;
        let gates = kafka.subscriber("tickets.kafka_settlement_commit");
        eventually("the second scan", || gates.outcomes().len() >= 2).await?;
        let scans = gates.received::<Ticket>();
        assert!(
            scans.len() == 2 && scans.iter().all(|scan| *scan == smudged),
            "{scans:?}"
        );
        assert_eq!(gates.outcomes(), [Outcome::Nack, Outcome::Ack]);

        let glitch = TurnstileClick {
            turnstile: 2,
            glitch: true,
        };
        let click = TurnstileClick {
            turnstile: 2,
            glitch: false,
        };
        kafka.message(&glitch).publish().await?;
        kafka.message(&click).publish().await?;
        // Under Tracked the glitch would come back before the next click.
        let footfall = kafka.subscriber("turnstile-clicks.kafka_settlement_commit");
        assert_eq!(footfall.received::<TurnstileClick>(), [glitch, click]);
        assert_eq!(footfall.outcomes(), [Outcome::Nack, Outcome::Ack]);
        tb.shutdown().await?;
        Ok(())
    }
}
