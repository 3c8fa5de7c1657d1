//! Allocation budgets of a delivery, against the live cluster: what the adapter adds over our
//! own native consumer loop, and what building and reading a delivery's context costs; and
//! what one publish at a time allocates on the caller's thread.
//!
//! Every allocation in the process is counted (`stats_alloc`'s counting system allocator).
//! That is fair here because the whole measurement runs on one thread: each phase gets its own
//! current-thread runtime, so the client's tasks (fetcher, group membership, auto-commit,
//! connections) and the adapter's pump run on the thread that counts, on both sides of a
//! comparison alike; dropping the runtime at the end of a phase ends all of its tasks, so one
//! phase leaves no work behind in the next. All the checks are one test, so that no other test
//! allocates while a window is counted.
//!
//! A topic of 1 partition holds 2 200 keyless, header-free 64-byte JSON records. Each phase
//! (raw loop, `Commit::Auto`, `Commit::Tracked` with an ack per delivery) reads 200 as warm-up,
//! then counts two windows of 1 000 deliveries. A window's cost is the smaller of the two, so
//! that a heartbeat or an empty long-poll fetch answered during one window does not decide the
//! verdict. Budgets are ceilings that may only go down.

mod live;

use std::alloc::System;
use std::time::Duration;

use futures::StreamExt;
use ruststream::{
    Broker, BuildContext, ConnectedBroker, ContextField, Field, IncomingMessage, Subscriber,
    SubscriptionSource,
};
use ruststream_kafka::client::{Client, Consumer, ConsumerEvent, Record, Subscription};
use ruststream_kafka::context::{KafkaContext, keys};
use ruststream_kafka::properties::Properties;
use ruststream_kafka::{Commit, KafkaBroker, KafkaError, KafkaMessage, KafkaTopic, StartOffset};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const WARM: usize = 200;
const STEP: usize = 1_000;
const RECORDS: usize = WARM + 2 * STEP;
/// Extra allocations per delivery the adapter may make over the raw loop, under
/// `Commit::Auto`.
const BUDGET: usize = 0;
/// The same under `Commit::Tracked`, with an ack per delivery.
const TRACKED_BUDGET: usize = 0;
/// The most one sequential publish through the adapter may allocate, in bytes asked of the
/// allocator, on a current-thread runtime (so the client's tasks count too), and in
/// allocations: the batch's promise, its buffer, the request's frame head with the body's
/// fields, the wait for the answer, the answer's frame, and the batch's share for the wire.
/// ruststream-rdkafka 0.7.1's own `live_publish_cost` test holds a publish to what its raw
/// librdkafka loop allocates on the calling thread, 552 bytes in jemalloc's size classes
/// (librdkafka's own threads do the rest of the work there): these six in their classes come
/// to 480.
const PUBLISH_BYTES: usize = 480;
const PUBLISH_ALLOCATIONS: usize = 6;

/// The longest a phase may take.
const PHASE_TIMEOUT: Duration = Duration::from_mins(2);

/// Allocations (reallocations included) since `region` began.
fn allocations(region: &Region<'_, System>) -> usize {
    let change = region.change();
    change.allocations + change.reallocations
}

/// A 64-byte JSON object.
fn body(n: usize) -> Vec<u8> {
    let mut body = format!(r#"{{"id":{n:06},"kind":"order","note":""#);
    while body.len() < 62 {
        body.push('x');
    }
    body.push_str(r#""}"#);
    assert_eq!(body.len(), 64);
    body.into_bytes()
}

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// Fills `topic` through our producer, on a runtime of its own that is gone afterwards.
fn fill(topic: &str) {
    use ruststream_kafka::client::{Producer, ProducerConfig, ProducerRecord};
    current_thread().block_on(async {
        let client = live::admin_client().await;
        let producer = Producer::new(client.clone(), ProducerConfig::default()).expect("producer");
        let mut last = None;
        for n in 0..RECORDS {
            let record = ProducerRecord {
                topic: topic.to_owned(),
                value: Some(body(n).into()),
                ..ProducerRecord::default()
            };
            last = Some(producer.send(record).await.expect("send"));
        }
        last.expect("records")
            .await
            .expect("the last record delivered");
        assert_eq!(producer.close(Duration::from_secs(10)).await, 0);
        client.close();
    });
}

/// The two windows of one phase.
#[derive(Debug, Clone, Copy)]
struct Windows([usize; 2]);

impl Windows {
    fn cost(self) -> usize {
        self.0[0].min(self.0[1])
    }
}

/// Our native consumer, one record at a time, as an application without the adapter reads.
struct RawLoop {
    consumer: Consumer,
    batch: std::vec::IntoIter<Record>,
}

impl RawLoop {
    async fn next(&mut self) -> Record {
        loop {
            if let Some(record) = self.batch.next() {
                return record;
            }
            if let ConsumerEvent::Records(records) = self.consumer.poll().await.expect("poll") {
                self.batch = records.records.into_iter();
            }
        }
    }
}

/// Reads through the raw loop: warm-up, then two counted windows.
fn raw_windows(topic: &str) -> Windows {
    current_thread().block_on(async {
        let properties = Properties::new()
            .with("bootstrap.servers", live::url())
            .with("group.id", live::unique("cost-raw"))
            .with("auto.offset.reset", "earliest");
        let settings = properties.consumer().expect("consumer properties");
        let client = Client::connect(settings.client_config())
            .await
            .expect("connect");
        let mut consumer = Consumer::new(client, settings.consumer_config()).expect("consumer");
        consumer
            .subscribe(Subscription::Topics(vec![topic.to_owned()]))
            .expect("subscribe");
        let mut raw = RawLoop {
            consumer,
            batch: Vec::new().into_iter(),
        };
        tokio::time::timeout(PHASE_TIMEOUT, async {
            for _ in 0..WARM {
                std::hint::black_box(raw.next().await.value);
            }
            let mut windows = [0; 2];
            for window in &mut windows {
                let region = Region::new(GLOBAL);
                for _ in 0..STEP {
                    let record = raw.next().await;
                    std::hint::black_box(record.value.as_deref());
                }
                *window = allocations(&region);
            }
            Windows(windows)
        })
        .await
        .expect("the raw loop read its records in time")
    })
}

/// The next delivery of `stream`.
async fn next_delivery(
    stream: &mut (impl futures::Stream<Item = Result<KafkaMessage, KafkaError>> + Unpin),
) -> KafkaMessage {
    stream
        .next()
        .await
        .expect("the stream does not end")
        .expect("a delivery")
}

/// What an adapter phase measured.
struct AdapterPhase {
    windows: Windows,
    /// The first delivery, held through the windows (under `Commit::Auto` only: an unsettled
    /// delivery would hold back the tracked ring).
    held: Option<KafkaMessage>,
}

/// Reads through the adapter under `commit`, acking every delivery, and hands the phase's
/// results (and its held delivery) to `then` while the subscription is still open.
fn adapter_windows<T>(topic: &str, commit: Commit, then: impl FnOnce(AdapterPhase) -> T) -> T {
    let keep_first = commit == Commit::Auto;
    current_thread().block_on(async {
        let broker = KafkaBroker::new([live::url()])
            .connect()
            .await
            .expect("connect");
        let mut subscriber = KafkaTopic::new(topic)
            .group(live::unique("cost-adapter"))
            .start(StartOffset::Earliest)
            .commit(commit)
            .subscribe(&broker)
            .await
            .expect("subscribe");
        let mut stream = subscriber.stream();
        let phase = tokio::time::timeout(PHASE_TIMEOUT, async {
            let mut held = None;
            for n in 0..WARM {
                let message = next_delivery(&mut stream).await;
                std::hint::black_box(message.payload());
                if keep_first && n == 0 {
                    held = Some(message);
                } else {
                    message.ack().await.expect("ack");
                }
            }
            let mut windows = [0; 2];
            for window in &mut windows {
                let region = Region::new(GLOBAL);
                for _ in 0..STEP {
                    let message = next_delivery(&mut stream).await;
                    std::hint::black_box(message.payload());
                    message.ack().await.expect("ack");
                }
                *window = allocations(&region);
            }
            AdapterPhase {
                windows: Windows(windows),
                held,
            }
        })
        .await
        .expect("the adapter read its records in time");
        let out = then(phase);
        drop(stream);
        drop(subscriber);
        let _ = broker.shutdown().await;
        out
    })
}

/// Builds the context of `message` 1 000 times, then reads three fields 1 000 times each.
fn context_costs(message: &KafkaMessage) -> (usize, [usize; 3]) {
    let region = Region::new(GLOBAL);
    for _ in 0..STEP {
        std::hint::black_box(KafkaContext::build(message));
    }
    let builds = allocations(&region);
    let context = KafkaContext::build(message);
    let mut reads = [0; 3];
    let region = Region::new(GLOBAL);
    for _ in 0..STEP {
        std::hint::black_box(keys::Topic.read(&context));
        std::hint::black_box(keys::Topic.get(&context));
    }
    reads[0] = allocations(&region);
    let region = Region::new(GLOBAL);
    for _ in 0..STEP {
        std::hint::black_box(keys::Key.read(&context));
        std::hint::black_box(keys::Key.get(&context));
    }
    reads[1] = allocations(&region);
    let region = Region::new(GLOBAL);
    for _ in 0..STEP {
        std::hint::black_box(keys::Source.read(&context));
        std::hint::black_box(keys::Source.get(&context));
    }
    reads[2] = allocations(&region);
    (builds, reads)
}

/// What one publish (keyless, header-free, 8 bytes) costs at the least over five, after a
/// warm-up: (bytes asked of the allocator, allocations).
fn publish_cost(topic: &str) -> (usize, usize) {
    use ruststream::{OutgoingMessage, Publisher};
    current_thread().block_on(async {
        let broker = live::connect(KafkaBroker::new([live::url()])).await;
        let publisher = broker.publisher(ruststream_kafka::KafkaPublish::default());
        let publish = || async {
            publisher
                .publish(OutgoingMessage::new(topic, b"{\"id\":1}".as_slice()), None)
                .await
                .expect("the cluster accepts the publish");
        };
        for _ in 0..3 {
            publish().await;
        }
        let mut least = (usize::MAX, usize::MAX);
        for _ in 0..5 {
            let region = Region::new(GLOBAL);
            publish().await;
            let change = region.change();
            let cost = (
                change.bytes_allocated + change.bytes_reallocated.max(0).unsigned_abs(),
                change.allocations + change.reallocations,
            );
            least = least.min(cost);
        }
        least
    })
}

#[test]
fn a_delivery_costs_nothing_over_the_raw_client_and_its_context_nothing_at_all() {
    let region = Region::new(GLOBAL);
    std::hint::black_box(Box::new(7_u64));
    assert_eq!(allocations(&region), 1, "the counting allocator counts");

    let topic = live::unique("delivery-cost");
    current_thread().block_on(live::create_topic(&topic, 1));
    fill(&topic);

    let raw = raw_windows(&topic);
    let (auto, context_builds, field_reads) = adapter_windows(&topic, Commit::Auto, |phase| {
        let held = phase.held.expect("the first delivery, held");
        assert!(held.key().is_none(), "the records are keyless");
        let (builds, reads) = context_costs(&held);
        (phase.windows, builds, reads)
    });
    let tracked = adapter_windows(&topic, Commit::Tracked, |phase| phase.windows);
    println!(
        "allocations per window of {STEP} deliveries: raw {:?}, Commit::Auto {:?}, \
         Commit::Tracked {:?}; {STEP} context builds: {context_builds}; {STEP} reads of \
         Topic, Key, Source: {field_reads:?}",
        raw.0, auto.0, tracked.0,
    );

    assert!(
        auto.cost() <= raw.cost() + BUDGET * STEP,
        "Commit::Auto: {} allocations per {STEP} deliveries over the raw loop's {} (budget \
         {BUDGET} per delivery); windows {:?} vs {:?}",
        auto.cost(),
        raw.cost(),
        auto.0,
        raw.0
    );
    assert!(
        tracked.cost() <= raw.cost() + TRACKED_BUDGET * STEP,
        "Commit::Tracked with an ack per delivery: {} allocations per {STEP} deliveries over \
         the raw loop's {} (budget {TRACKED_BUDGET} per delivery); windows {:?} vs {:?}",
        tracked.cost(),
        raw.cost(),
        tracked.0,
        raw.0
    );
    assert_eq!(
        context_builds, 0,
        "building KafkaContext {STEP} times from one keyless delivery"
    );
    for (field, count) in ["Topic", "Key", "Source"].iter().zip(field_reads) {
        assert_eq!(count, 0, "reading context::keys::{field} {STEP} times");
    }

    // The embedded cluster answers from this process: its own allocations would count.
    if live::unsupported_on_embedded("a publish's allocations, with the broker in the process") {
        return;
    }
    let published = live::unique("publish-cost");
    current_thread().block_on(live::create_topic(&published, 1));
    let (bytes, count) = publish_cost(&published);
    println!("a sequential publish: {bytes} bytes in {count} allocations");
    assert!(
        bytes <= PUBLISH_BYTES && count <= PUBLISH_ALLOCATIONS,
        "a sequential publish allocates {bytes} bytes in {count} allocations (budget \
         {PUBLISH_BYTES} bytes in {PUBLISH_ALLOCATIONS})"
    );
}
