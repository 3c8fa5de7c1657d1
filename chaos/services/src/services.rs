//! The services under test, built on the adapter as a deployment would build them.
//!
//! - `reply`/`member`: `Commit::Tracked` at-least-once reply services (`acks=all`,
//!   idempotence): each input is answered by one output record keyed like the input, and the
//!   input is acknowledged only after its output's delivery report came back, so an input whose
//!   offset was committed always has its output (a duplicate is allowed, a loss never).
//!   `member` is one of a group of three: cooperative-sticky, or `group.protocol=consumer`.
//! - `eos`: the exactly-once pipeline (`Commit::Transactional` + `KafkaEosPublish`), either
//!   publishing through `EosPipeline::publish` (style `pipeline`) or as replies carried into the
//!   window by `EosReplies` (style `replies`). Under `read_committed` each input has exactly one
//!   output. With `--doom-every N` the pipeline style publishes an output for every Nth input and
//!   then hands the input back (`retry`), which aborts that window: such an output is tagged
//!   `doomed` and must never be visible under `read_committed`.
//!
//! `--static-id NAME` makes the member static (`group.instance.id`): a restarted process takes
//! its predecessor's partitions back at once instead of after the session timeout.
//!
//! Every handled delivery is logged (`in`: id, topic, partition, offset, attempt) before its
//! output is published, and every output publish outcome is logged (`out`/`out-fail`).
//!
//! Planted defects (`--defect`): `ack-before-publish` acknowledges the input at once and
//! publishes its reply later in the background; `commit-ahead` acknowledges every input at
//! once and holds every other reply back for twenty seconds. Both let the group commit past inputs whose output was
//! never written; the checker must report the loss.

use std::borrow::Borrow;
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Duration;

use ruststream::{Broker, HeaderMap, OutgoingMessage};
use ruststream_kafka::prelude::*;
use ruststream_kafka::{EosPipeline, KafkaPublisher, PARTITION_KEY_HEADER, SourceOffset};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::args::{Args, BoxError};
use crate::history::History;

/// An input record as the load generator writes it.
#[derive(Deserialize, Debug)]
pub struct Input {
    id: String,
    key: String,
    seq: u64,
}

/// An output of the replies-style EOS pipeline (its topic is fixed by the type).
#[derive(Serialize, Deserialize, Outgoing, Debug)]
#[outgoing(name = "chaos.eosr-out")]
pub struct EosReply {
    id: String,
    key: String,
    seq: u64,
    by: String,
    attempt: String,
    doomed: bool,
}

/// What the handlers read: fixed for the life of the process.
struct Conf {
    input: String,
    output: String,
    group: String,
    txn_id: String,
    instance: String,
    protocol: String,
    static_id: String,
    defect: Option<String>,
    doom_every: u64,
    history: History,
    attempts: AtomicU64,
    doomed: Mutex<HashSet<String>>,
    publisher: OnceLock<KafkaPublisher>,
}

static CONF: OnceLock<Conf> = OnceLock::new();

fn conf() -> &'static Conf {
    CONF.get()
        .unwrap_or_else(|| unreachable!("the configuration is set before the app is built"))
}

fn set_conf(args: &Args) -> Result<&'static Conf, BoxError> {
    let instance = args.need("instance")?.to_owned();
    let config = Conf {
        input: args.need("input")?.to_owned(),
        output: args.get("output").unwrap_or("chaos.eosr-out").to_owned(),
        group: args.need("group")?.to_owned(),
        txn_id: args.get("txn-id").unwrap_or("chaos-eos").to_owned(),
        protocol: args.get("protocol").unwrap_or("classic").to_owned(),
        static_id: args.get("static-id").unwrap_or_default().to_owned(),
        defect: args.get("defect").map(str::to_owned),
        doom_every: args.num("doom-every", 0)?,
        history: History::open(args.need("history")?, &instance)?,
        instance,
        attempts: AtomicU64::new(0),
        doomed: Mutex::new(HashSet::new()),
        publisher: OnceLock::new(),
    };
    if let Some(defect) = &config.defect
        && defect != "ack-before-publish"
        && defect != "commit-ahead"
    {
        return Err(format!("unknown defect {defect}").into());
    }
    CONF.set(config).map_err(|_| "configured twice")?;
    Ok(conf())
}

/// A new attempt id: this process's instance and a counter, unique across the run.
fn next_attempt(c: &Conf) -> String {
    format!(
        "{}/{}",
        c.instance,
        c.attempts.fetch_add(1, Ordering::Relaxed)
    )
}

fn log_in(c: &Conf, input: &Input, source: &SourceOffset, attempt: &str) {
    c.history.log(
        "in",
        json!({"id": input.id, "key": input.key, "seq": input.seq, "topic": source.topic(),
               "p": source.partition(), "o": source.offset(), "attempt": attempt}),
    );
}

fn output_body(c: &Conf, input: &Input, attempt: &str, doomed: bool) -> Vec<u8> {
    json!({"id": input.id, "key": input.key, "seq": input.seq, "by": c.instance,
           "attempt": attempt, "doomed": doomed})
    .to_string()
    .into_bytes()
}

fn keyed(key: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(PARTITION_KEY_HEADER, key.to_owned());
    headers
}

/// Publishes `input`'s reply and logs the outcome; `true` when the cluster acknowledged it.
async fn publish_reply(c: &Conf, publisher: &KafkaPublisher, input: &Input, attempt: &str) -> bool {
    let body = output_body(c, input, attempt, false);
    let record = OutgoingMessage::new(&c.output, &body[..]).with_headers(keyed(&input.key));
    match publisher.publish(record, None).await {
        Ok(()) => {
            c.history
                .log("out", json!({"id": input.id, "attempt": attempt}));
            true
        }
        Err(e) => {
            c.history.log(
                "out-fail",
                json!({"id": input.id, "attempt": attempt, "err": e.to_string()}),
            );
            false
        }
    }
}

/// The at-least-once reply under the classic protocol, cooperative-sticky: the input is settled
/// only after its reply was acknowledged.
#[subscriber(
    KafkaTopic::new(conf().input.clone())
        .group(conf().group.clone())
        .start(StartOffset::Earliest)
        .lane_key(LaneKey::RecordKey)
        .commit(Commit::Tracked)
        .assignment(Assignment::CooperativeSticky)
        .config("group.protocol", "classic")
        .config("group.instance.id", conf().static_id.clone()),
    workers(4, by_key)
)]
async fn answer_classic(input: &Input, Ctx(source): Ctx<Source>) -> HandlerOutcome {
    answer(input, source).await
}

/// The same under `group.protocol=consumer` (KIP-848), which assigns on the broker and refuses a
/// client-side strategy.
#[subscriber(
    KafkaTopic::new(conf().input.clone())
        .group(conf().group.clone())
        .start(StartOffset::Earliest)
        .lane_key(LaneKey::RecordKey)
        .commit(Commit::Tracked)
        .config("group.protocol", "consumer")
        .config("group.instance.id", conf().static_id.clone()),
    workers(4, by_key)
)]
async fn answer_consumer(input: &Input, Ctx(source): Ctx<Source>) -> HandlerOutcome {
    answer(input, source).await
}

/// Logs the delivery, publishes its reply and settles it (or, with a planted defect, not).
async fn answer(input: &Input, source: SourceOffset) -> HandlerOutcome {
    let c = conf();
    let attempt = next_attempt(c);
    log_in(c, input, &source, &attempt);
    let Some(publisher) = c.publisher.get() else {
        return HandlerOutcome::retry();
    };
    match c.defect.as_deref() {
        Some("ack-before-publish") => {
            // DEFECT: the input is settled now and its reply written twelve seconds later, in the
            // background: longer than the auto-commit interval, so a kill loses committed inputs.
            let publisher = publisher.clone();
            let input = Input {
                id: input.id.clone(),
                key: input.key.clone(),
                seq: input.seq,
            };
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(12)).await;
                publish_reply(conf(), &publisher, &input, &attempt).await;
            });
            HandlerOutcome::ack()
        }
        Some("commit-ahead") => {
            // DEFECT: every input is settled at once, so the group commits past inputs whose
            // reply is still owed; every other reply is held back for twenty seconds.
            if input.seq.is_multiple_of(2) {
                publish_reply(c, publisher, input, &attempt).await;
            } else {
                c.history
                    .log("deferred", json!({"id": input.id, "attempt": attempt}));
                let publisher = publisher.clone();
                let input = Input {
                    id: input.id.clone(),
                    key: input.key.clone(),
                    seq: input.seq,
                };
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_secs(20)).await;
                    publish_reply(conf(), &publisher, &input, &attempt).await;
                });
            }
            HandlerOutcome::ack()
        }
        _ => {
            if publish_reply(c, publisher, input, &attempt).await {
                HandlerOutcome::ack()
            } else {
                HandlerOutcome::retry()
            }
        }
    }
}

fn broker(bootstrap: &str) -> KafkaBroker {
    let broker = KafkaBroker::new(bootstrap.split(',').map(str::to_owned));
    // The consumer protocol (KIP-848) takes its session timeout from the broker, and the
    // client refuses the property there, as librdkafka does.
    let broker = if conf().protocol == "consumer" {
        broker
    } else {
        broker.config("session.timeout.ms", "45000")
    };
    broker
        .config("socket.timeout.ms", "10000")
        .producer_config("acks", "all")
        .producer_config("enable.idempotence", "true")
        // Generous, as a deployment behind a supervisor should be: each coordinator move
        // restarts the session of every member the group still lists, so a member restarted
        // into a group that holds its dead predecessor can wait 45 s per move (4.4.0, seed 2:
        // two moves, 120 s, then an exit whose held join left one more dead member behind).
        .assignment_timeout(Duration::from_mins(5))
        .connect_timeout(Duration::from_mins(1))
}

async fn until_terminated() {
    let Ok(mut term) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
    else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

/// Runs the reply service (`member` adds the group flags) until SIGTERM.
pub async fn run_reply(args: &Args, _member: bool) -> Result<(), BoxError> {
    let bootstrap = args.need("bootstrap")?.to_owned();
    let c = set_conf(args)?;
    // The replies go through a plain publisher of the adapter's own, on a connection of its
    // own, so a planted defect can hold one past its handler.
    let connected = broker(&bootstrap).connect().await?;
    let publisher = connected.publisher(Publish::default());
    c.publisher
        .set(publisher)
        .map_err(|_| "publisher set twice")?;
    c.history.log(
        "start",
        json!({"role": "reply", "group": c.group, "protocol": c.protocol, "defect": c.defect}),
    );
    let app = RustStream::new(AppInfo::new("chaos-reply", "0.1.0")).with_broker(
        broker(&bootstrap),
        |b| {
            if c.protocol == "consumer" {
                b.include(answer_consumer);
            } else {
                b.include(answer_classic);
            }
        },
    );
    let result = app.run_until(until_terminated()).await;
    c.history.log("stopped", json!({"ok": result.is_ok()}));
    drop(connected);
    result.map_err(Into::into)
}

/// The exactly-once pipeline style: outputs through `EosPipeline::publish`.
#[subscriber(
    KafkaTopic::new(conf().input.clone())
        .group(conf().group.clone())
        .start(StartOffset::Earliest)
        .lane_key(LaneKey::RecordKey)
        .commit(Commit::Transactional(conf().txn_id.clone()))
        .config("group.protocol", conf().protocol.clone())
        .config("group.instance.id", conf().static_id.clone()),
    workers(8, by_key)
)]
async fn transform(
    input: &Input,
    Ctx(source): Ctx<Source>,
    Out(window): Out<impl Borrow<EosPipeline>>,
) -> HandlerOutcome {
    let c = conf();
    let pipeline: &EosPipeline = (**window).borrow();
    let attempt = next_attempt(c);
    log_in(c, input, &source, &attempt);
    let doom = c.doom_every > 0
        && input.seq % c.doom_every == c.doom_every - 1
        && c.doomed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(input.id.clone());
    let body = output_body(c, input, &attempt, doom);
    let record = OutgoingMessage::new(&c.output, &body[..]).with_headers(keyed(&input.key));
    if let Err(e) = pipeline.publish(&source, record, None).await {
        c.history.log(
            "out-fail",
            json!({"id": input.id, "attempt": attempt, "err": e.to_string()}),
        );
        return HandlerOutcome::retry();
    }
    c.history.log(
        "out",
        json!({"id": input.id, "attempt": attempt, "doomed": doom}),
    );
    if doom {
        // The window cannot settle this input: it aborts at its deadline and replays.
        c.history
            .log("doom", json!({"id": input.id, "attempt": attempt}));
        return HandlerOutcome::retry();
    }
    HandlerOutcome::ack()
}

/// The exactly-once replies style: the reply rides the window through `EosReplies`.
#[subscriber(
    KafkaTopic::new(conf().input.clone())
        .group(conf().group.clone())
        .start(StartOffset::Earliest)
        .lane_key(LaneKey::RecordKey)
        .commit(Commit::Transactional(conf().txn_id.clone()))
        .config("group.protocol", conf().protocol.clone())
        .config("group.instance.id", conf().static_id.clone()),
    reply,
    workers(8, by_key)
)]
async fn bill(input: &Input, Ctx(source): Ctx<Source>) -> EosReply {
    let c = conf();
    let attempt = next_attempt(c);
    log_in(c, input, &source, &attempt);
    EosReply {
        id: input.id.clone(),
        key: input.key.clone(),
        seq: input.seq,
        by: c.instance.clone(),
        attempt,
        doomed: false,
    }
}

/// Runs the exactly-once pipeline until SIGTERM.
pub async fn run_eos(args: &Args) -> Result<(), BoxError> {
    let bootstrap = args.need("bootstrap")?.to_owned();
    let style = args.get("style").unwrap_or("pipeline").to_owned();
    let c = set_conf(args)?;
    c.history.log(
        "start",
        json!({"role": "eos", "style": style, "group": c.group, "txn": c.txn_id}),
    );
    let pipeline = EosPublish::new(c.txn_id.clone())
        .commit_interval(Duration::from_millis(100))
        .transaction_timeout(Duration::from_secs(10));
    let result = if style == "replies" {
        RustStream::new(AppInfo::new("chaos-eos-replies", "0.1.0"))
            .with_broker(broker(&bootstrap), |b| {
                b.include(bill).out_reply(pipeline).transform(EosReplies);
            })
            .run_until(until_terminated())
            .await
    } else {
        RustStream::new(AppInfo::new("chaos-eos", "0.1.0"))
            .with_broker(broker(&bootstrap), |b| {
                b.include(transform).out(DefaultSlot, pipeline).build();
            })
            .run_until(until_terminated())
            .await
    };
    c.history.log("stopped", json!({"ok": result.is_ok()}));
    result.map_err(Into::into)
}
