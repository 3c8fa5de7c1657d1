//! The prelude: one `use ruststream_kafka::prelude::*` brings the framework's service vocabulary
//! and the Kafka descriptors, settings and keys a service names.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example kafka_broker_prelude -- run
//! $ cargo test --example kafka_broker_prelude
//! ```

use serde::{Deserialize, Serialize};

#[path = "support/live.rs"]
mod live;

#[cfg(test)]
#[path = "support/runs.rs"]
mod runs;

// --8<-- [start:app]
use ruststream_kafka::prelude::*;

/// Books a court and answers with the booking's court and slot; everything named here comes
/// from the prelude.
#[subscriber(
    KafkaTopic::new("court-requests.kafka_broker_prelude")
        .group("courts.kafka_broker_prelude")
        .commit(Commit::Tracked)
        .start(StartOffset::Earliest),
    reply
)]
async fn book(request: &CourtRequest, Ctx(partition): Ctx<Partition>) -> CourtBooking {
    tracing::info!(request.member, partition, "court booked");
    CourtBooking {
        member: request.member,
        court: request.hour % 4 + 1,
        hour: request.hour,
    }
}

#[ruststream::app]
fn app() -> impl App {
    RustStream::new(AppInfo::new("courts", "0.1.0")).with_broker(
        KafkaBroker::new([live::bootstrap()]),
        |b| {
            b.include(book);
        },
    )
}
// --8<-- [end:app]

#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "court-requests.kafka_broker_prelude")]
struct CourtRequest {
    member: u32,
    hour: u8,
}

#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "court-bookings.kafka_broker_prelude")]
struct CourtBooking {
    member: u32,
    court: u8,
    hour: u8,
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
        super::runs::topic("court-requests.kafka_broker_prelude", 1).await?;
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
            .subscriber("court-requests.kafka_broker_prelude")
            .assert_called_once()
            .with(&request)
            .settled(HandlerOutcome::ack());
        tb.broker::<KafkaBroker>()
            .published::<CourtBooking>("court-bookings.kafka_broker_prelude")
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
