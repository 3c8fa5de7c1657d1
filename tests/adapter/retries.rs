//! Retries, dead letters and `ToSourceTopic` through a real `RustStream` app against the cluster
//! (reference 4.E). The runtime republishes retry copies; what the crate contributes is where
//! they go (a `KafkaTopic`'s own topic, a named topic, or the delivery's topic) and that they
//! arrive with their headers.
//!
//! The app starts with `TestApp::start_live_within`; the test publishes its input with a plain
//! publisher and watches what the handler records.

use crate::live;

use std::future::{Future, ready};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ruststream::prelude::*;
use ruststream::runtime::RETRY_COUNT_HEADER;
use ruststream::testing::TestApp;
use ruststream::{OutgoingMessage, Publisher};
use ruststream_kafka::context::KafkaContext;
use ruststream_kafka::context::keys::Topic;
use ruststream_kafka::{
    KafkaBroker, KafkaPublish, KafkaTopic, KafkaTopics, StartOffset, ToSourceTopic,
};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
// With `asyncapi` on, a subscribed type documents its schema.
#[cfg_attr(feature = "asyncapi", derive(ruststream::schemars::JsonSchema))]
#[cfg_attr(feature = "asyncapi", schemars(crate = "ruststream::schemars"))]
struct Job {
    id: u64,
}

/// One delivery as the handler saw it: topic, job id, retry count.
type Seen = (String, u64, Option<String>);

/// A handler that records every delivery and answers per `decide`.
#[derive(Clone)]
struct Recorder<F> {
    seen: Arc<Mutex<Vec<Seen>>>,
    decide: F,
}

impl<F> Handle<Job, (), (), KafkaContext> for Recorder<F>
where
    F: Fn(&Job, Option<&str>) -> Option<HandlerOutcome> + Send + Sync,
{
    fn handle(
        &self,
        job: &Job,
        _outs: &(),
        ctx: &mut Context<'_, KafkaContext>,
    ) -> impl Future<Output = Result<(), HandlerOutcome>> + Send {
        let count = ctx.headers().get_str(RETRY_COUNT_HEADER).map(str::to_owned);
        let topic = ctx.context(Topic).to_string();
        let outcome = (self.decide)(job, count.as_deref());
        self.seen.lock().expect("lock").push((topic, job.id, count));
        ready(outcome.map_or(Ok(()), Err))
    }
}

fn broker() -> KafkaBroker {
    KafkaBroker::new([live::url()])
}

fn source(topic: &str) -> KafkaTopic {
    live::quick(
        KafkaTopic::new(topic)
            .group(live::unique("retries"))
            .start(StartOffset::Earliest),
    )
}

async fn publish(topic: &str, job: &Job) {
    let connected = live::connect(broker()).await;
    let body = serde_json::to_vec(job).expect("json");
    connected
        .publisher(KafkaPublish::default())
        .publish(OutgoingMessage::new(topic, body.as_slice()), None)
        .await
        .expect("publish");
}

/// Waits until `seen` holds `n` entries, then a moment more to catch extras.
async fn seen_after(seen: &Arc<Mutex<Vec<Seen>>>, n: usize) -> Vec<Seen> {
    let deadline = Instant::now() + live::WAIT;
    while seen.lock().expect("lock").len() < n {
        assert!(
            Instant::now() < deadline,
            "only {:?} within {:?}",
            seen.lock().expect("lock"),
            live::WAIT
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(live::QUIET).await;
    seen.lock().expect("lock").clone()
}

const SETTLE: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_after_republishes_a_counted_copy_to_the_topic() {
    live::logs();
    let topic = live::topic("retry-after", 1).await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let handler = Recorder {
        seen: Arc::clone(&seen),
        decide: |_: &Job, count: Option<&str>| {
            count
                .is_none()
                .then(|| HandlerOutcome::retry_after(Duration::from_millis(500)))
        },
    };
    let app = RustStream::new(AppInfo::new("retries", "0.0.0")).with_broker(broker(), |b| {
        b.include(subscriber(source(&topic), handler).build());
    });
    let tb = TestApp::start_live_within(app, SETTLE)
        .await
        .expect("start");
    let started = Instant::now();
    publish(&topic, &Job { id: 1 }).await;
    let got = seen_after(&seen, 2).await;
    assert!(started.elapsed() >= Duration::from_millis(500));
    assert_eq!(
        got,
        [
            (topic.clone(), 1, None),
            (topic.clone(), 1, Some("1".to_owned()))
        ]
    );
    tb.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_attempt_goes_to_the_dead_letter_topic() {
    live::logs();
    let topic = live::topic("spent", 1).await;
    let dead = live::topic("spent-dead", 1).await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let dead_seen = Arc::new(Mutex::new(Vec::new()));
    let handler = Recorder {
        seen: Arc::clone(&seen),
        decide: |_: &Job, _: Option<&str>| Some(HandlerOutcome::retry()),
    };
    let dead_handler = Recorder {
        seen: Arc::clone(&dead_seen),
        decide: |_: &Job, _: Option<&str>| None,
    };
    let app = RustStream::new(AppInfo::new("retries", "0.0.0")).with_broker(broker(), |b| {
        b.include(subscriber(source(&topic), handler).build())
            .max_attempts(nonzero!(3u32))
            .dead_letter(dead.clone());
        b.include(subscriber(source(&dead), dead_handler).build());
    });
    let tb = TestApp::start_live_within(app, SETTLE)
        .await
        .expect("start");
    publish(&topic, &Job { id: 7 }).await;
    let got = seen_after(&seen, 3).await;
    assert_eq!(
        got,
        [
            (topic.clone(), 7, None),
            (topic.clone(), 7, Some("1".to_owned())),
            (topic.clone(), 7, Some("2".to_owned())),
        ]
    );
    let letters = seen_after(&dead_seen, 1).await;
    assert_eq!(letters, [(dead.clone(), 7, Some("3".to_owned()))]);
    tb.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_set_without_a_retry_destination_does_not_start() {
    live::logs();
    let topic = live::topic("set-unnamed", 1).await;
    let handler = Recorder {
        seen: Arc::new(Mutex::new(Vec::new())),
        decide: |_: &Job, _: Option<&str>| None,
    };
    let set = KafkaTopics::new([topic.clone()]).group(live::unique("set"));
    let app = RustStream::new(AppInfo::new("retries", "0.0.0")).with_broker(broker(), |b| {
        b.include(subscriber(set, handler).build());
    });
    let err = match TestApp::start_live_within(app, SETTLE).await {
        Ok(_) => panic!("a topic set owes a retry destination"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("retry"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn to_source_topic_sends_a_copy_back_where_it_came_from() {
    live::logs();
    let prefix = live::unique("source-topic");
    let (a, b) = (format!("{prefix}.a"), format!("{prefix}.b"));
    live::create_topic(&a, 1).await;
    live::create_topic(&b, 1).await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let handler = Recorder {
        seen: Arc::clone(&seen),
        decide: |job: &Job, count: Option<&str>| {
            // A delayed retry is a republished copy (an immediate one without a cap is a
            // requeue, which `Commit::Auto` does not do).
            (job.id == 2 && count.is_none())
                .then(|| HandlerOutcome::retry_after(Duration::from_millis(200)))
        },
    };
    let set = KafkaTopics::new([a.clone(), b.clone()])
        .group(live::unique("set"))
        .start(StartOffset::Earliest);
    let app = RustStream::new(AppInfo::new("retries", "0.0.0")).with_broker(broker(), |br| {
        br.include(subscriber(set, handler).build())
            .out_retry(KafkaPublish::default())
            .transform(ToSourceTopic);
    });
    let tb = TestApp::start_live_within(app, SETTLE)
        .await
        .expect("start");
    publish(&a, &Job { id: 1 }).await;
    publish(&b, &Job { id: 2 }).await;
    let mut got = seen_after(&seen, 3).await;
    got.sort();
    assert_eq!(
        got,
        [
            (a.clone(), 1, None),
            (b.clone(), 2, None),
            (b.clone(), 2, Some("1".to_owned())),
        ]
    );
    tb.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_set_spends_its_attempts_then_dead_letters_once() {
    live::logs();
    let prefix = live::unique("set-spent");
    let (a, b, dead) = (
        format!("{prefix}.a"),
        format!("{prefix}.b"),
        format!("{prefix}.dead"),
    );
    for name in [&a, &b, &dead] {
        live::create_topic(name, 1).await;
    }
    let seen = Arc::new(Mutex::new(Vec::new()));
    let dead_seen = Arc::new(Mutex::new(Vec::new()));
    let handler = Recorder {
        seen: Arc::clone(&seen),
        decide: |_: &Job, _: Option<&str>| {
            Some(HandlerOutcome::retry_after(Duration::from_millis(100)))
        },
    };
    let dead_handler = Recorder {
        seen: Arc::clone(&dead_seen),
        decide: |_: &Job, _: Option<&str>| None,
    };
    let set = KafkaTopics::new([a.clone(), b.clone()])
        .group(live::unique("set"))
        .start(StartOffset::Earliest);
    let app = RustStream::new(AppInfo::new("retries", "0.0.0")).with_broker(broker(), |br| {
        br.include(subscriber(set, handler).build())
            .max_attempts(nonzero!(3u32))
            .dead_letter(dead.clone())
            .out_retry(KafkaPublish::default())
            .transform(ToSourceTopic);
        br.include(subscriber(source(&dead), dead_handler).build());
    });
    let tb = TestApp::start_live_within(app, SETTLE)
        .await
        .expect("start");
    publish(&b, &Job { id: 9 }).await;
    let letters = seen_after(&dead_seen, 1).await;
    assert_eq!(letters, [(dead.clone(), 9, Some("3".to_owned()))]);
    // The spent copy went to the dead-letter topic only: the source saw exactly three attempts
    // and topic `a` none.
    let got = seen.lock().expect("lock").clone();
    assert_eq!(
        got,
        [
            (b.clone(), 9, None),
            (b.clone(), 9, Some("1".to_owned())),
            (b.clone(), 9, Some("2".to_owned())),
        ]
    );
    tb.shutdown().await.expect("shutdown");
}

/// How long the held jobs below wait between attempts in process: longer than the group's
/// session timeout and the auto-commit interval, so one step of a paused clock passes both.
const HOLD: Duration = Duration::from_mins(1);

/// The app of the held-job tests: every delivery asks for a retry after `hold`, three
/// attempts at most, the spent one to `<topic>.review`.
fn holding(
    broker: KafkaBroker,
    topic: &str,
    hold: Duration,
    seen: &Arc<Mutex<Vec<Seen>>>,
) -> RustStream {
    let handler = Recorder {
        seen: Arc::clone(seen),
        decide: move |_: &Job, _: Option<&str>| Some(HandlerOutcome::retry_after(hold)),
    };
    let source = KafkaTopic::new(topic).commit(ruststream_kafka::Commit::Tracked);
    let review = format!("{topic}.review");
    RustStream::new(AppInfo::new("retries", "0.0.0")).with_broker(broker, |b| {
        b.include(subscriber(source, handler).build())
            .max_attempts(nonzero!(3u32))
            .dead_letter(review);
    })
}

/// On a paused clock each step of [`HOLD`] passes the group's session timeout and the
/// auto-commit interval at once. Each attempt is still handled and settled once: three
/// deliveries, three settlements, the third to the review topic, as the reference's in-process
/// transport has it.
#[cfg(feature = "testing")]
#[tokio::test(start_paused = true)]
async fn in_process_a_held_job_is_handled_once_per_attempt_on_a_paused_clock() {
    live::logs();
    let topic = "held-jobs";
    let seen = Arc::new(Mutex::new(Vec::new()));
    let broker = KafkaBroker::new(["kafka.internal:9092"]).default_group("held");
    let tb = TestApp::start(holding(broker, topic, HOLD, &seen))
        .await
        .expect("start");
    held_three_times(tb, topic, HOLD, &seen).await;
}

/// The same service on the cluster under test, its hold short: each attempt handled and
/// settled once there too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_job_is_handled_once_per_attempt() {
    live::logs();
    let topic = live::topic("held-jobs", 1).await;
    live::create_topic(&format!("{topic}.review"), 1).await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let hold = Duration::from_secs(1);
    let tb = TestApp::start_live_within(holding(live::broker(), &topic, hold, &seen), SETTLE)
        .await
        .expect("start");
    held_three_times(tb, &topic, hold, &seen).await;
}

/// Publishes one job to the holding service `tb` runs and lets two holds pass: three attempts,
/// each settled once, the last one to the review topic.
async fn held_three_times(
    tb: TestApp<()>,
    topic: &str,
    hold: Duration,
    seen: &Arc<Mutex<Vec<Seen>>>,
) {
    use ruststream::testing::Outcome;
    tb.publish(topic, &Job { id: 3 }).await.expect("publish");
    tb.advance(hold).await.expect("first hold");
    tb.advance(hold).await.expect("second hold");
    let attempts: Vec<Option<String>> = seen
        .lock()
        .expect("lock")
        .iter()
        .map(|(_, _, count)| count.clone())
        .collect();
    assert_eq!(attempts, [None, Some("1".to_owned()), Some("2".to_owned())]);
    let handle = tb.broker::<KafkaBroker>();
    assert_eq!(
        handle.subscriber(topic).outcomes(),
        [Outcome::Nack, Outcome::Nack, Outcome::Nack]
    );
    handle
        .published::<Job>(&format!("{topic}.review"))
        .assert_called_once()
        .with(&Job { id: 3 });
    tb.shutdown().await.expect("shutdown");
}
