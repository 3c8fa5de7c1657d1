//! The service of `examples/kafka_settlement_commit.rs` without macros: the handlers are types
//! implementing `Handle` (the gate reads the scanner off `ctx.state()`), the state's `FromRef` is
//! left out because nothing extracts a field of it, and `main` runs the command line by hand.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example manual_kafka_settlement_commit -- run
//! $ cargo test --example manual_kafka_settlement_commit
//! ```

use std::collections::HashSet;
use std::convert::Infallible;
use std::future::{Future, ready};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use ruststream::runtime::cli::run_main;
use serde::{Deserialize, Serialize};

#[path = "../support/live.rs"]
mod live;

#[cfg(test)]
#[path = "../support/runs.rs"]
mod runs;

// --8<-- [start:app]
use ruststream_kafka::prelude::*;

/// Admits a visitor at the museum gate. A smudged ticket the scanner cannot read comes back on
/// this subscription, and the group commits nothing past it until it is settled.
struct Admit;

impl Handle<Ticket, (), (), (), AppState> for Admit {
    fn handle(
        &self,
        ticket: &Ticket,
        _outs: &(),
        ctx: &mut Context<'_, (), AppState>,
    ) -> impl Future<Output = Result<(), HandlerOutcome>> {
        if !ctx.state().scanner.read(ticket) {
            tracing::warn!(ticket.code, "ticket unreadable, retrying");
            return ready(Err(HandlerOutcome::retry()));
        }
        tracing::info!(ticket.code, "visitor admitted");
        ready(Ok(()))
    }
}

/// Counts visitors for the footfall chart, which can afford to miss one.
struct Count;

impl Handle<TurnstileClick, (), (), (), AppState> for Count {
    fn handle(
        &self,
        click: &TurnstileClick,
        _outs: &(),
        _ctx: &mut Context<'_, (), AppState>,
    ) -> impl Future<Output = Result<(), HandlerOutcome>> {
        ready(if click.glitch {
            Err(HandlerOutcome::retry())
        } else {
            Ok(())
        })
    }
}

/// What the handlers share, built once at startup.
#[derive(Clone, Default)]
struct AppState {
    scanner: Arc<Scanner>,
}

fn app() -> impl App<State = AppState> {
    let tickets = KafkaTopic::new("tickets.manual_kafka_settlement_commit")
        .group("gates.manual_kafka_settlement_commit")
        .commit(Commit::Tracked);
    // The timer commit: a retried count is not delivered again.
    let clicks = KafkaTopic::new("turnstile-clicks.manual_kafka_settlement_commit")
        .group("footfall.manual_kafka_settlement_commit");
    RustStream::new(AppInfo::new("museum", "0.1.0"))
        .on_startup(|()| async { Ok::<AppState, Infallible>(AppState::default()) })
        .with_broker(KafkaBroker::new([live::bootstrap()]), |b| {
            b.include(subscriber(tickets, Admit).build());
            b.include(subscriber(clicks, Count).build());
        })
}

fn main() -> ExitCode {
    run_main(app)
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

#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct Ticket {
    code: String,
    smudged: bool,
}

impl OutgoingDestination for Ticket {
    type Form = FixedName;
    const DESTINATION: &'static str = "tickets.manual_kafka_settlement_commit";
}

impl MessageHeaders for Ticket {
    type Contract = NoHeaders;
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct TurnstileClick {
    turnstile: u8,
    glitch: bool,
}

impl OutgoingDestination for TurnstileClick {
    type Form = FixedName;
    const DESTINATION: &'static str = "turnstile-clicks.manual_kafka_settlement_commit";
}

impl MessageHeaders for TurnstileClick {
    type Contract = NoHeaders;
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
        topic("tickets.manual_kafka_settlement_commit", 1).await?;
        topic("turnstile-clicks.manual_kafka_settlement_commit", 1).await?;
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
        let gates = kafka.subscriber("tickets.manual_kafka_settlement_commit");
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
        let footfall = kafka.subscriber("turnstile-clicks.manual_kafka_settlement_commit");
        assert_eq!(footfall.received::<TurnstileClick>(), [glitch, click]);
        assert_eq!(footfall.outcomes(), [Outcome::Nack, Outcome::Ack]);
        tb.shutdown().await?;
        Ok(())
    }
}
