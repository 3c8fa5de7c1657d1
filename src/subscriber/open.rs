//! Opening a subscription: its consumer, its shared state and its pump, then the wait for a
//! first assignment (or, for a manual assignment, for each partition's start).
//!
//! The invariant: `subscribe` returns only once every partition the subscription reads knows
//! where it starts (or fails naming why: a refused join, no assignment in time), so the first
//! delivery and every seek after `subscribe` act on a concrete position.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use futures::task::AtomicWaker;
use tokio::sync::{mpsc, watch};

use crate::client::Client;
use crate::client::consumer::{Consumer, StartAt, Subscription, TopicPartition};
use crate::connection::BrokerState;
use crate::error::KafkaError;
use crate::handover::Reads;
use crate::subscription::{Commit, Plan, StartOffset, Target};

use super::KafkaSubscriber;
use super::pump::pump;
use super::shared::{Command, Life, Queue, SubCore, lock};

pub(super) async fn open_here(
    state: Arc<BrokerState>,
    plan: Plan,
) -> Result<KafkaSubscriber, KafkaError> {
    let settings = plan.properties.consumer().map_err(KafkaError::subscribe)?;
    note_opened(&state, &plan);
    let mut config = settings.consumer_config();
    let auto_store = config.enable_auto_offset_store;
    let watch = state.handover().map(|handover| {
        handover.configure_reader(&mut config);
        Arc::clone(handover).watch(reads_of(&plan, &config))
    });
    // The subscription stores offsets itself: at hand-over (Auto) or on settle (Tracked).
    config.enable_auto_offset_store = false;
    // A partition handed back with nothing committed resumes where this member started, not at
    // a reset that moved on (B8, G4); the start itself is never committed (F1).
    config.remember_starts = true;
    // A batch that cannot be read: under Commit::Auto reported and read past, as librdkafka
    // does; where commits follow settled records, the partition holds there instead, so
    // no committed offset passes records nobody handled.
    config.corrupt_batches = match plan.commit {
        Commit::Auto => crate::client::CorruptBatch::Skip,
        Commit::Tracked | Commit::Transactional(_) => crate::client::CorruptBatch::Hold,
    };
    let limits = queue_limits(&config);
    let client = Client::connect(state.observed(settings.client_config()))
        .await
        .map_err(KafkaError::subscribe)?;
    let mut consumer = Consumer::new(client.clone(), config).map_err(KafkaError::subscribe)?;
    let (commands, command_rx) = mpsc::unbounded_channel();
    let (closing, closing_rx) = watch::channel(false);
    let life = Arc::new(Mutex::new(Life::default()));
    let eos = match &plan.commit {
        Commit::Transactional(id) => Some(state.eos().group(id)),
        Commit::Auto | Commit::Tracked => None,
    };
    let core = Arc::new(SubCore {
        name: plan.name.clone(),
        commit: plan.commit.clone(),
        lane_key: plan.lane_key,
        auto_store,
        state: Arc::clone(&state),
        consumer: consumer.handle(),
        parts: Mutex::new(HashMap::new()),
        queue: Mutex::new(Queue::default()),
        wake: AtomicWaker::new(),
        requeued: Mutex::new(VecDeque::new()),
        detached: AtomicBool::new(false),
        commands,
        closing,
        life: Arc::clone(&life),
        limits,
        eos,
        watch,
    });
    if let Some(group) = &core.eos {
        let source: Weak<SubCore> = Arc::downgrade(&core);
        group.add(source);
    }
    if let Some(watch) = &core.watch {
        let weak: Weak<SubCore> = Arc::downgrade(&core);
        Arc::clone(watch).opened(weak);
    }
    fence_earlier_pipeline(&state, &plan).await;
    match &plan.target {
        Target::Partitions { topic, partitions } => {
            let pump_task = (
                command_rx,
                closing_rx,
                Arc::clone(&state),
                Arc::clone(&life),
            );
            open_partitions(
                &client,
                consumer,
                &core,
                &plan,
                (topic, partitions),
                pump_task,
            )
            .await?;
        }
        Target::Group { topics, patterns } => {
            let subscription = if patterns.is_empty() {
                Subscription::Topics(topics.clone())
            } else {
                Subscription::Pattern(combined_pattern(topics, patterns))
            };
            consumer
                .subscribe(subscription)
                .map_err(KafkaError::subscribe)?;
            crate::client::outlined::spawn(pump(
                consumer,
                Arc::downgrade(&core),
                command_rx,
                closing_rx,
                (Arc::clone(&state), Arc::clone(&life)),
            ));
            // Even where none of the topics exists yet, the group's first assignment (an
            // empty one) is waited for, as the reference waits for its first rebalance: a
            // bound too short for a join fails whether or not the topics exist.
            wait_for_assignment(&core, &plan).await?;
        }
    }
    hand_over_backlog(&core).await;
    Ok(KafkaSubscriber::over(core))
}

/// For a `Commit::Transactional(id)` subscription, fences an earlier instance of pipeline `id`
/// before any committed offset is read (`transactional::fence_earlier_instance`). A failure is
/// not fatal: the pipeline's own initialization fences it later, and the positions wait until
/// then (at most `transaction.timeout.ms`).
async fn fence_earlier_pipeline(state: &Arc<BrokerState>, plan: &Plan) {
    let Commit::Transactional(id) = &plan.commit else {
        return;
    };
    if let Err(e) = crate::transactional::fence_earlier_instance(state, id).await {
        tracing::warn!(
            subscription = %plan.name,
            transactional_id = %id,
            error = %e,
            "could not fence an earlier instance of the exactly-once pipeline before reading \
             committed offsets; a transaction it left open holds them until it times out"
        );
    }
}

/// In process, what the log already holds for a new subscription is ready when `subscribe`
/// returns; nothing to wait for on a live connection.
async fn hand_over_backlog(core: &SubCore) {
    crate::handover::handed_over(core.state.handover(), None).await;
}

/// How much the subscription's own queue holds before the pump pauses fetching: half of
/// librdkafka's `queued.max.messages.kbytes` (at least 1 MiB) and `queued.min.messages`.
fn queue_limits(config: &crate::client::ConsumerConfig) -> (usize, usize) {
    (
        (config.queued_max_bytes / 2).max(1 << 20),
        config.queued_min_messages.max(1000),
    )
}

/// Opens a manual assignment of `partitions` of `topic` (the ones the topic has) and waits
/// until each knows where it starts.
async fn open_partitions(
    client: &Client,
    mut consumer: Consumer,
    core: &Arc<SubCore>,
    plan: &Plan,
    (topic, partitions): (&String, &[i32]),
    pump_task: PumpTask,
) -> Result<(), KafkaError> {
    let start = match plan.start {
        StartOffset::Committed => StartAt::Committed,
        StartOffset::Earliest => StartAt::Earliest,
        StartOffset::Latest => StartAt::Latest,
    };
    let existing = client.topic(topic).await.ok().map(|t| t.partitions.len());
    let assignment: Vec<(TopicPartition, StartAt)> = partitions
        .iter()
        .filter(|p| existing.is_none_or(|count| usize::try_from(**p).is_ok_and(|p| p < count)))
        .map(|p| (TopicPartition::new(topic, *p), start))
        .collect();
    for (tp, _) in &assignment {
        core.partition(tp).reposition();
    }
    consumer
        .assign(&assignment)
        .map_err(KafkaError::subscribe)?;
    let (command_rx, closing_rx, state, life) = pump_task;
    crate::client::outlined::spawn(pump(
        consumer,
        Arc::downgrade(core),
        command_rx,
        closing_rx,
        (state, life),
    ));
    wait_for_positions(core, plan).await
}

/// What the pump of a subscription is started with.
type PumpTask = (
    mpsc::UnboundedReceiver<Command>,
    watch::Receiver<bool>,
    Arc<BrokerState>,
    Arc<Mutex<Life>>,
);

/// Notes `plan` for routing, and tells the transport the topics it names.
fn note_opened(state: &BrokerState, plan: &Plan) {
    state.note_opened(opened_of(plan));
    if let Some(handover) = state.handover() {
        let named: Vec<&str> = match &plan.target {
            Target::Group { topics, .. } => topics.iter().map(String::as_str).collect(),
            Target::Partitions { topic, .. } => vec![topic.as_str()],
        };
        handover.subscribing(&named);
    }
}

/// How routing sees `plan`.
pub(super) fn opened_of(plan: &Plan) -> crate::connection::Opened {
    let (topics, pattern, partitions) = match &plan.target {
        Target::Group { topics, patterns } => {
            let pattern = (!patterns.is_empty())
                .then(|| regex::Regex::new(&combined_pattern(&[], patterns)).ok())
                .flatten();
            (topics.clone(), pattern, false)
        }
        Target::Partitions { topic, .. } => (vec![topic.clone()], None, true),
    };
    crate::connection::Opened {
        name: plan.name.clone(),
        group: plan.group.clone(),
        topics,
        pattern,
        partitions,
    }
}

/// One regular expression for literal topics and patterns together.
fn combined_pattern(topics: &[String], patterns: &[String]) -> String {
    let mut parts: Vec<String> = topics
        .iter()
        .map(|t| format!("^{}$", regex::escape(t)))
        .collect();
    parts.extend(patterns.iter().map(|p| format!("(?:{p})")));
    parts.join("|")
}

const WAIT_STEP: Duration = Duration::from_millis(10);

/// Waits for the first assignment and a concrete start for each of its partitions (B7-B10).
async fn wait_for_assignment(core: &SubCore, plan: &Plan) -> Result<(), KafkaError> {
    let bound = core.state.assignment_timeout();
    let deadline = Instant::now() + bound;
    let group = plan.group.as_deref().unwrap_or_default();
    loop {
        {
            let queue = lock(&core.queue);
            if let Some(fatal) = &queue.fatal {
                return Err(KafkaError::Subscribe(KafkaError::text(format!(
                    "subscription {:?} in consumer group {group:?} could not be opened: the \
                     cluster refused its join: {fatal}",
                    plan.name
                ))));
            }
        }
        if core.consumer.has_assignment() && positions_known(core) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            let mut message = format!(
                "subscription {:?} in consumer group {group:?} was not assigned its partitions \
                 within {bound:?}",
                plan.name
            );
            if let Some(err) = &lock(&core.queue).last_error {
                message.push_str("; the consumer last reported: ");
                message.push_str(err);
            }
            return Err(KafkaError::Subscribe(KafkaError::text(message)));
        }
        tokio::time::sleep(WAIT_STEP.min(deadline.saturating_duration_since(Instant::now()))).await;
    }
}

/// Waits until a manual assignment knows where each partition starts.
async fn wait_for_positions(core: &SubCore, plan: &Plan) -> Result<(), KafkaError> {
    let deadline = Instant::now() + core.state.assignment_timeout();
    while !positions_known(core) {
        if Instant::now() >= deadline {
            return Err(KafkaError::Subscribe(KafkaError::text(format!(
                "subscription {:?} could not be opened: the start positions of its partitions \
                 could not be read",
                plan.name
            ))));
        }
        tokio::time::sleep(WAIT_STEP).await;
    }
    Ok(())
}

fn positions_known(core: &SubCore) -> bool {
    core.consumer
        .assignment()
        .iter()
        .all(|tp| core.consumer.position(tp).is_some())
}

/// What `plan` read with `config` reads, as a transport's count sees it.
fn reads_of(plan: &Plan, config: &crate::client::ConsumerConfig) -> Reads {
    let opened = opened_of(plan);
    let partitions = match &plan.target {
        Target::Partitions { partitions, .. } => Some(partitions.clone()),
        Target::Group { .. } => None,
    };
    Reads {
        group: opened.group,
        topics: opened.topics,
        pattern: opened.pattern,
        partitions,
        read_committed: config.isolation == crate::client::IsolationLevel::ReadCommitted,
        earliest: config.auto_offset_reset == crate::client::OffsetReset::Earliest,
    }
}
