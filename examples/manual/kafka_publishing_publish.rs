//! The lending desk of `examples/kafka_publishing_publish.rs` without macros: the reply body is a
//! type implementing `Handle`, the subscription is mounted with `subscriber(..)`, and the
//! mount site pairs the same publish policy.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example manual_kafka_publishing_publish -- run
//! $ cargo test --example manual_kafka_publishing_publish
//! ```

use std::future::{Future, ready};
use std::process::ExitCode;
use std::time::Duration;

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

/// Every loan is answered by its notice; the reply returns once the cluster has it.
struct Lend;

impl Handle<Loan, DueNotice> for Lend {
    fn handle(
        &self,
        loan: &Loan,
        _outs: &(),
        _ctx: &mut Context<'_>,
    ) -> impl Future<Output = Result<DueNotice, HandlerOutcome>> {
        ready(Ok(DueNotice {
            book: loan.book.clone(),
            member: loan.member,
            due_in_days: 21,
        }))
    }
}

fn loans() -> KafkaTopic {
    KafkaTopic::new("loans.publishing-publish").group("lending-desk.publishing-publish")
}

fn app() -> impl App<State = ()> {
    RustStream::new(AppInfo::new("lending-desk", "0.1.0")).with_broker(
        KafkaBroker::new([live::bootstrap()]),
        |b| {
            // When the producer's queue stays full for three seconds, the reply fails instead of
            // holding the handler.
            b.include(subscriber(loans(), Lend).reply().build())
                .out_reply(Publish::default().queue_timeout(Duration::from_secs(3)));
        },
    )
}

fn main() -> ExitCode {
    run_main(app)
}
// --8<-- [end:app]

/// A book handed out to a member.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct Loan {
    book: String,
    member: u64,
}

impl OutgoingDestination for Loan {
    type Form = FixedName;
    const DESTINATION: &'static str = "loans.publishing-publish";
}

impl MessageHeaders for Loan {
    type Contract = NoHeaders;
}

/// When the book has to come back.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
#[cfg_attr(
    feature = "asyncapi",
    derive(ruststream::schemars::JsonSchema),
    schemars(crate = "ruststream::schemars")
)]
struct DueNotice {
    book: String,
    member: u64,
    due_in_days: u32,
}

impl OutgoingDestination for DueNotice {
    type Form = FixedName;
    const DESTINATION: &'static str = "due-notices.publishing-publish";
}

impl MessageHeaders for DueNotice {
    type Contract = NoHeaders;
}

#[cfg(test)]
mod tests {
    use std::error::Error;
    use std::time::Duration;

    use ruststream::testing::TestApp;
    use ruststream_kafka::prelude::*;

    use super::{DueNotice, Loan, app, live, readback};

    const LOANS: &str = "loans.publishing-publish";
    const NOTICES: &str = "due-notices.publishing-publish";

    /// On the embedded cluster in this process: the harness part of the live test; what
    /// the harness says was published is read from the cluster's log.
    #[cfg(feature = "testing")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_loan_is_answered_on_the_notice_topic_in_process() -> Result<(), Box<dyn Error>> {
        let (tb, cluster) =
            super::in_process::start_with_topics(app(), (), &[(LOANS, 1), (NOTICES, 1)]).await?;
        a_loan_is_answered_on_the_notice_topic_body(tb).await?;
        drop(cluster);
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_loan_is_answered_on_the_notice_topic() -> Result<(), Box<dyn Error>> {
        live::ensure_topic(LOANS, 1).await?;
        live::ensure_topic(NOTICES, 1).await?;
        let before = readback::log_ends(NOTICES, 1).await?;

        let tb = TestApp::start_live_within(app(), Duration::from_secs(30)).await?;
        let notice = a_loan_is_answered_on_the_notice_topic_body(tb).await?;

        // The notice is on the cluster, on the topic its type names.
        let landed = readback::committed_values_since(NOTICES, &before).await?;
        assert_eq!(landed, [vec![serde_json::to_string(&notice)?]]);
        Ok(())
    }

    /// The harness part of the test, whichever way the service was started.
    async fn a_loan_is_answered_on_the_notice_topic_body<S: Send + Sync + 'static>(
        tb: TestApp<S>,
    ) -> Result<DueNotice, Box<dyn Error>> {
        let loan = Loan {
            book: "The Dispossessed".to_owned(),
            member: 31,
        };
        tb.broker::<KafkaBroker>().message(&loan).publish().await?;

        let notice = DueNotice {
            book: "The Dispossessed".to_owned(),
            member: 31,
            due_in_days: 21,
        };
        tb.broker::<KafkaBroker>()
            .subscriber(LOANS)
            .assert_called_once()
            .with(&loan)
            .settled(HandlerOutcome::ack());
        tb.broker::<KafkaBroker>()
            .published::<DueNotice>(NOTICES)
            .assert_called_once()
            .with(&notice)
            .assert_options_default();
        tb.shutdown().await?;
        Ok(notice)
    }
}
