//! The service of `examples/kafka_broker_prelude.rs` without macros: the handler is a type
//! implementing `Handle` that reads the partition off its context, and `main` runs the command
//! line by hand. The prelude still names everything.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example manual_kafka_broker_prelude -- run
//! $ cargo test --example manual_kafka_broker_prelude
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

// --8<-- [start:app]
use ruststream_kafka::context::KafkaContext;
use ruststream_kafka::prelude::*;

/// Books a court and answers with the booking's court and slot; everything named here comes
/// from the prelude.
struct Book;

impl Handle<CourtRequest, CourtBooking, (), KafkaContext> for Book {
    fn handle(
        &self,
        request: &CourtRequest,
        _outs: &(),
        ctx: &mut Context<'_, KafkaContext>,
    ) -> impl Future<Output = Result<CourtBooking, HandlerOutcome>> {
        let partition = ctx.context(Partition);
        tracing::info!(request.member, partition, "court booked");
        ready(Ok(CourtBooking {
            member: request.member,
            court: request.hour % 4 + 1,
            hour: request.hour,
        }))
    }
}

fn app() -> impl App {
    let requests = KafkaTopic::new("court-requests.manual_kafka_broker_prelude")
        .group("courts.manual_kafka_broker_prelude")
        .commit(Commit::Tracked)
        .start(StartOffset::Earliest);
    RustStream::new(AppInfo::new("courts", "0.1.0")).with_broker(
        KafkaBroker::new([live::bootstrap()]),
        |b| {
            b.include(subscriber(requests, Book).reply().build());
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
struct CourtRequest {
    member: u32,
    hour: u8,
}

impl OutgoingDestination for CourtRequest {
    type Form = FixedName;
    const DESTINATION: &'static str = "court-requests.manual_kafka_broker_prelude";
}

impl MessageHeaders for CourtRequest {
    type Contract = NoHeaders;
}

#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct CourtBooking {
    member: u32,
    court: u8,
    hour: u8,
}

impl OutgoingDestination for CourtBooking {
    type Form = FixedName;
    const DESTINATION: &'static str = "court-bookings.manual_kafka_broker_prelude";
}

impl MessageHeaders for CourtBooking {
    type Contract = NoHeaders;
}

#[cfg(test)]
mod tests {
    use std::error::Error;
    use std::time::Duration;

    use ruststream::testing::TestApp;
    use ruststream_kafka::prelude::*;

    use super::{CourtBooking, CourtRequest, app};

    /// On the embedded cluster in this process: nothing to start.
    #[cfg(feature = "testing")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_request_is_answered_with_a_booking_in_process() -> Result<(), Box<dyn Error>> {
        a_request_is_answered_with_a_booking_body(TestApp::start(app()).await?).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_request_is_answered_with_a_booking() -> Result<(), Box<dyn Error>> {
        super::runs::topic("court-requests.manual_kafka_broker_prelude", 1).await?;
        let tb = TestApp::start_live_within(app(), Duration::from_secs(30)).await?;
        a_request_is_answered_with_a_booking_body(tb).await
    }

    /// The test body, whichever way the service was started.
    async fn a_request_is_answered_with_a_booking_body<S: Send + Sync + 'static>(
        tb: TestApp<S>,
    ) -> Result<(), Box<dyn Error>> {
        let request = CourtRequest {
            member: 310,
            hour: 18,
        };
        tb.broker::<KafkaBroker>()
            .message(&request)
            .publish()
            .await?;

        tb.broker::<KafkaBroker>()
            .subscriber("court-requests.manual_kafka_broker_prelude")
            .assert_called_once()
            .with(&request)
            .settled(HandlerOutcome::ack());
        tb.broker::<KafkaBroker>()
            .published::<CourtBooking>("court-bookings.manual_kafka_broker_prelude")
            .assert_called_once()
            .with(&CourtBooking {
                member: 310,
                court: 3,
                hour: 18,
            });
        tb.shutdown().await?;
        Ok(())
    }
}
