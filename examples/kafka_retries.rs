//! Retries and dead letters: `retry_after(delay)` republishes a copy of the record to the topic
//! the subscription reads once the delay has passed, with the runtime's retry count incremented;
//! `max_attempts(n)` bounds the deliveries, and `dead_letter(topic)` receives the record after
//! the last one fails. A dead-letter topic is read like any other.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example kafka_retries -- run
//! $ cargo test --example kafka_retries
//! ```

use std::collections::HashSet;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};

#[path = "support/live.rs"]
mod live;

#[cfg(test)]
#[path = "support/runs.rs"]
mod runs;

// --8<-- [start:app]
use ruststream::runtime::RETRY_COUNT_HEADER;
use ruststream_kafka::prelude::*;

/// How long a text waits before it is tried again.
const RESEND_AFTER: Duration = Duration::from_millis(200);

/// Sends a text message through the carrier. A failed send is tried again after a pause.
#[subscriber(
    KafkaTopic::new("texts.kafka_retries")
        .group("sms-gateway.kafka_retries")
        .commit(Commit::Tracked)
)]
async fn send(text: &Text, State(carrier): State<Arc<Carrier>>) -> HandlerOutcome {
    if let Err(reason) = carrier.send(text) {
        tracing::warn!(text.number, reason, "text not sent, trying again later");
        return HandlerOutcome::retry_after(RESEND_AFTER);
    }
    HandlerOutcome::ack()
}

/// Reads the texts that could not be sent; the retry count says how often each was tried.
#[subscriber(KafkaTopic::new("texts-dead.kafka_retries").group("sms-support.kafka_retries"))]
async fn report_undeliverable(text: &Text, ctx: &mut Context<'_>) -> HandlerOutcome {
    let tries = ctx.headers().get_str(RETRY_COUNT_HEADER).unwrap_or("1");
    tracing::error!(text.number, tries, "text undeliverable");
    HandlerOutcome::ack()
}

/// What the handlers share, built once at startup.
#[derive(Clone, Default, FromRef)]
struct AppState {
    carrier: Arc<Carrier>,
}

#[ruststream::app]
fn app() -> impl App<State = AppState> {
    RustStream::new(AppInfo::new("sms-gateway", "0.1.0"))
        .on_startup(|()| async { Ok::<AppState, Infallible>(AppState::default()) })
        .with_broker(KafkaBroker::new([live::bootstrap()]), |b| {
            // Three deliveries of one text, the first included; after the third failure the
            // text goes to the dead-letter topic as it arrived.
            b.include(send)
                .max_attempts(nonzero!(3u32))
                .dead_letter("texts-dead.kafka_retries");
            b.include(report_undeliverable);
        })
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

#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "texts.kafka_retries")]
struct Text {
    number: String,
    roaming: bool,
}

#[cfg(test)]
mod tests {
    use std::error::Error;
    use std::time::Duration;

    use ruststream::runtime::RETRY_COUNT_HEADER;
    use ruststream::testing::{Outcome, TestApp};
    use ruststream_kafka::prelude::*;

    use super::runs::topic;
    use super::{AppState, Text, app};

    const TEXTS: &str = "texts.kafka_retries";
    const DEAD: &str = "texts-dead.kafka_retries";

    /// On the embedded cluster, on a paused clock: the pauses before each retry pass in no time.
    #[cfg(feature = "testing")]
    #[tokio::test(start_paused = true)]
    async fn texts_are_sent_resent_or_dead_lettered_in_process() -> Result<(), Box<dyn Error>> {
        sent_resent_or_dead_lettered(TestApp::start(app()).await?).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn texts_are_sent_resent_or_dead_lettered() -> Result<(), Box<dyn Error>> {
        topic(TEXTS, 1).await?;
        topic(DEAD, 1).await?;
        let tb = TestApp::start_live_within(app(), Duration::from_secs(30)).await?;
        sent_resent_or_dead_lettered(tb).await
    }

    /// The test body, whichever way the service was started.
    async fn sent_resent_or_dead_lettered(tb: TestApp<AppState>) -> Result<(), Box<dyn Error>> {
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
