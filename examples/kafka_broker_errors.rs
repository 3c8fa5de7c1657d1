//! Errors of the broker: every failure is a `KafkaError`, from a publish the producer refuses
//! inside a handler to a service that cannot start. The handler decides what a refused publish
//! means for the record it was handling.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example kafka_broker_errors -- run
//! $ cargo test --example kafka_broker_errors
//! ```

use serde::{Deserialize, Serialize};

#[path = "support/live.rs"]
mod live;

#[cfg(test)]
#[path = "support/runs.rs"]
mod runs;

// --8<-- [start:app]
use ruststream_kafka::prelude::*;

#[derive(OutSlot)]
#[publishes(PrintJob)]
struct PrintJobs;

/// Lays out every copy of a photo order as one print job.
#[subscriber("photo-orders.kafka_broker_errors")]
async fn lay_out(order: &PhotoOrder, Out(jobs): Out<impl Publisher, PrintJobs>) -> HandlerOutcome {
    let job = PrintJob {
        order: order.order,
        sheets: (1..=order.copies)
            .map(|copy| format!("{}#{copy:04}", order.order))
            .collect(),
    };
    if let Err(err) = jobs.message(&job).publish().await {
        // The error names the topic and why the producer refused the record. A job over the
        // producer's size limit would be refused again, so the order is set aside, not retried.
        tracing::error!(order.order, error = %err, "print job refused");
        return HandlerOutcome::drop();
    }
    HandlerOutcome::ack()
}

#[ruststream::app]
fn app() -> impl App {
    let broker = KafkaBroker::new([live::bootstrap()])
        .default_group("print-shop.kafka_broker_errors")
        .producer_config("message.max.bytes", "4096");
    RustStream::new(AppInfo::new("print-shop", "0.1.0")).with_broker(broker, |b| {
        b.include(lay_out)
            .out(PrintJobs, Publish::default())
            .build();
    })
}
// --8<-- [end:app]

#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "photo-orders.kafka_broker_errors")]
struct PhotoOrder {
    order: u64,
    copies: u32,
}

#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "print-jobs.kafka_broker_errors")]
struct PrintJob {
    order: u64,
    sheets: Vec<String>,
}

#[cfg(test)]
mod tests {
    use std::error::Error;
    use std::time::Duration;

    use ruststream::testing::{Outcome, TestApp};
    use ruststream_kafka::KafkaError;
    use ruststream_kafka::prelude::*;

    use super::{PhotoOrder, PrintJob, PrintJobs, app, lay_out};

    /// On the embedded cluster in this process: nothing to start.
    #[cfg(feature = "testing")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_accepted_job_acks_and_a_refused_one_sets_the_order_aside_in_process()
    -> Result<(), Box<dyn Error>> {
        an_accepted_job_acks_and_a_refused_one_sets_the_order_aside_body(
            TestApp::start(app()).await?,
        )
        .await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_accepted_job_acks_and_a_refused_one_sets_the_order_aside()
    -> Result<(), Box<dyn Error>> {
        super::runs::topic("photo-orders.kafka_broker_errors", 1).await?;
        let tb = TestApp::start_live_within(app(), Duration::from_secs(30)).await?;
        an_accepted_job_acks_and_a_refused_one_sets_the_order_aside_body(tb).await
    }

    /// The test body, whichever way the service was started.
    async fn an_accepted_job_acks_and_a_refused_one_sets_the_order_aside_body<
        S: Send + Sync + 'static,
    >(
        tb: TestApp<S>,
    ) -> Result<(), Box<dyn Error>> {
        tb.broker::<KafkaBroker>()
            .message(&PhotoOrder {
                order: 41,
                copies: 2,
            })
            .publish()
            .await?;
        // About 6 000 bytes of sheets: over the producer's 4 096.
        tb.broker::<KafkaBroker>()
            .message(&PhotoOrder {
                order: 42,
                copies: 600,
            })
            .publish()
            .await?;

        let kafka = tb.broker::<KafkaBroker>();
        let orders = kafka.subscriber("photo-orders.kafka_broker_errors");
        assert_eq!(
            orders.received::<PhotoOrder>(),
            [
                PhotoOrder {
                    order: 41,
                    copies: 2,
                },
                PhotoOrder {
                    order: 42,
                    copies: 600,
                },
            ]
        );
        assert_eq!(orders.outcomes(), [Outcome::Ack, Outcome::Drop]);
        tb.broker::<KafkaBroker>()
            .published::<PrintJob>("print-jobs.kafka_broker_errors")
            .assert_called_once()
            .with(&PrintJob {
                order: 41,
                sheets: vec!["41#0001".to_owned(), "41#0002".to_owned()],
            });
        tb.shutdown().await?;
        Ok(())
    }

    /// The harness wraps the broker's error: look for it down the chain of sources.
    fn kafka_cause<'a>(err: &'a (dyn Error + 'static)) -> Option<&'a KafkaError> {
        err.downcast_ref()
            .or_else(|| err.source().and_then(kafka_cause))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn startup_refusal_surfaces_its_kafka_error() {
        // No bootstrap server to ask: the broker refuses before it opens a connection.
        let app = RustStream::new(AppInfo::new("print-shop", "0.1.0")).with_broker(
            KafkaBroker::new(Vec::<String>::new()).default_group("print-shop"),
            |b| {
                b.include(lay_out)
                    .out(PrintJobs, Publish::default())
                    .build();
            },
        );

        let Err(refusal) = TestApp::start_live_within(app, Duration::from_secs(30)).await else {
            panic!("a broker without servers must not start");
        };
        let kafka = kafka_cause(&refusal);
        assert!(
            matches!(kafka, Some(KafkaError::InvalidOptions(_))),
            "expected InvalidOptions somewhere in {refusal:?}"
        );
    }
}
