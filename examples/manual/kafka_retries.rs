//! The service of `examples/kafka_retries.rs` without macros: the handlers are types
//! implementing `Handle` over the app state, the retry bounds are steps of the mount chain, and
//! `main` runs the command line by hand.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example manual_kafka_retries -- run
//! $ cargo test --example manual_kafka_retries
//! ```

use std::collections::HashSet;
use std::convert::Infallible;
use std::future::{Future, ready};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ruststream::runtime::cli::run_main;
use serde::{Deserialize, Serialize};

#[path = "../support/live.rs"]
mod live;

#[cfg(test)]
#[path = "../support/runs.rs"]
mod runs;

// --8<-- [start:app]
use ruststream::runtime::RETRY_COUNT_HEADER;
use ruststream_kafka::prelude::*;

/// How long a text waits before it is tried again.
const RESEND_AFTER: Duration = Duration::from_millis(200);

/// Sends a text message through the carrier. A failed send is tried again after a pause.
struct Send;

impl Handle<Text, (), (), (), AppState> for Send {
    fn handle(
        &self,
        text: &Text,
        _outs: &(),
        ctx: &mut Context<'_, (), AppState>,
    ) -> impl Future<Output = Result<(), HandlerOutcome>> {
        if let Err(reason) = ctx.state().carrier.send(text) {
            tracing::warn!(text.number, reason, "text not sent, trying again later");
            return ready(Err(HandlerOutcome::retry_after(RESEND_AFTER)));
        }
        ready(Ok(()))
    }
}

/// Reads the texts that could not be sent; the retry count says how often each was tried.
struct ReportUndeliverable;

impl Handle<Text, (), (), (), AppState> for ReportUndeliverable {
    fn handle(
        &self,
        text: &Text,
        _outs: &(),
        ctx: &mut Context<'_, (), AppState>,
    ) -> impl Future<Output = Result<(), HandlerOutcome>> {
        let tries = ctx.headers().get_str(RETRY_COUNT_HEADER).unwrap_or("1");
        tracing::error!(text.number, tries, "text undeliverable");
        ready(Ok(()))
    }
}

/// What the handlers share, built once at startup.
#[derive(Clone, Default)]
struct AppState {
    carrier: Arc<Carrier>,
}

fn app() -> impl App<State = AppState> {
    let texts = KafkaTopic::new("texts.manual_kafka_retries")
        .group("sms-gateway.manual_kafka_retries")
        .commit(Commit::Tracked);
    let dead = KafkaTopic::new("texts-dead.manual_kafka_retries")
        .group("sms-support.manual_kafka_retries");
    RustStream::new(AppInfo::new("sms-gateway", "0.1.0"))
        .on_startup(|()| async { Ok::<AppState, Infallible>(AppState::default()) })
        .with_broker(KafkaBroker::new([live::bootstrap()]), |b| {
            // Three deliveries of one text, the first included; after the third failure the
            // text goes to the dead-letter topic as it arrived.
            b.include(subscriber(texts, Send).build())
                .max_attempts(nonzero!(3u32))
                .dead_letter("texts-dead.manual_kafka_retries");
            b.include(subscriber(dead, ReportUndeliverable).build());
        })
}

fn main() -> ExitCode {
    run_main(app)
}
// --8<-- [end:app]

/// A carrier that has no route to `+000` numbers, and is busy the first time it sees a roaming
/// number.
#[derive(Debug, Default)]
struct Carrier {
    seen_roaming: Mutex<HashSet<String>>,
}

impl Carrier {
    fn send(&self, text: &Text) -> Result<(), &'static str> {
        if text.number.starts_with("+000") {
            return Err("no route");
        }
        let first_roaming = text.roaming
            && self
                .seen_roaming
                .lock()
                .is_ok_and(|mut seen| seen.insert(text.number.clone()));
        if first_roaming {
            return Err("roaming partner busy");
        }
        Ok(())
    }
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct Text {
    number: String,
    roaming: bool,
}

impl OutgoingDestination for Text {
    type Form = FixedName;
    const DESTINATION: &'static str = "texts.manual_kafka_retries";
}

impl MessageHeaders for Text {
    type Contract = NoHeaders;
}

#[cfg(test)]
mod tests {
    use std::error::Error;
    use std::time::Duration;

    use ruststream::runtime::RETRY_COUNT_HEADER;
    use ruststream::testing::{Outcome, TestApp};
    use ruststream_kafka::prelude::*;

    use super::runs::topic;
    use super::{Text, app};

    const TEXTS: &str = "texts.manual_kafka_retries";
    const DEAD: &str = "texts-dead.manual_kafka_retries";

    /// On the embedded cluster in this process: nothing to start.
    #[cfg(feature = "testing")]
    #[tokio::test(start_paused = true)]
    async fn texts_are_sent_resent_or_dead_lettered_in_process() -> Result<(), Box<dyn Error>> {
        texts_are_sent_resent_or_dead_lettered_body(TestApp::start(app()).await?).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn texts_are_sent_resent_or_dead_lettered() -> Result<(), Box<dyn Error>> {
        topic(TEXTS, 1).await?;
        topic(DEAD, 1).await?;
        let tb = TestApp::start_live_within(app(), Duration::from_secs(30)).await?;
        texts_are_sent_resent_or_dead_lettered_body(tb).await
    }

    /// The test body, whichever way the service was started.
    async fn texts_are_sent_resent_or_dead_lettered_body<S: Send + Sync + 'static>(
        tb: TestApp<S>,
    ) -> Result<(), Box<dyn Error>> {
        let kafka = tb.broker::<KafkaBroker>();
        let text = |number: &str, roaming| Text {
            number: number.to_owned(),
            roaming,
        };

        // Sent at once: acked once.
        kafka.message(&text("+4915100001", false)).publish().await?;
        kafka
            .subscriber(TEXTS)
            .assert_called_once()
            .settled(HandlerOutcome::ack());

        // Busy once: the copy comes back after the pause, counted, and goes through.
        kafka.message(&text("+4915100002", true)).publish().await?;
        tb.advance(Duration::from_millis(300)).await?;
        let gateway = kafka.subscriber(TEXTS);
        assert_eq!(
            gateway.outcomes(),
            [Outcome::Ack, Outcome::Nack, Outcome::Ack]
        );
        let sent = kafka.published::<Text>(TEXTS);
        let copy = sent.messages().last().ok_or("no copy published")?;
        assert_eq!(copy.headers().get_str(RETRY_COUNT_HEADER), Some("1"));

        // No route: three deliveries, then the dead-letter topic, with the count of tries.
        kafka.message(&text("+0001234", false)).publish().await?;
        for _ in 0..10 {
            if !kafka.subscriber(DEAD).received::<Text>().is_empty() {
                break;
            }
            tb.advance(Duration::from_millis(250)).await?;
        }
        kafka
            .subscriber(DEAD)
            .assert_called_once()
            .with(&text("+0001234", false));
        let dead = kafka.published::<Text>(DEAD);
        let [dead_letter] = dead.messages() else {
            return Err(format!("one dead letter expected: {:?}", dead.messages()).into());
        };
        assert_eq!(dead_letter.headers().get_str(RETRY_COUNT_HEADER), Some("3"));
        tb.shutdown().await?;
        Ok(())
    }
}
