//! What the supervisor and the checker learn of the cluster, from the native client's public
//! API: partition leaders, the group and transaction coordinators (`describe`, one JSON line on
//! stdout), a periodic sample of the same plus every group's committed offsets and every
//! partition's log end (`watch`, for convergence and stall times), and topic creation
//! (`setup`, which prints the log ends the run starts from).
//!
//! `watch` samples through its own bootstrap (the brokers' own listeners, not the fault
//! proxy), so it sees the cluster as it is while the clients' network is broken.

use std::collections::BTreeMap;
use std::time::Duration;

use ruststream_kafka::client::{
    Admin, Client, ClientConfig, CoordinatorKind, IsolationLevel, NewTopic, OffsetSpec, Offsets,
};
use serde_json::{Map, Value, json};

use crate::args::{Args, BoxError};
use crate::history::History;

async fn connect(args: &Args) -> Result<Client, BoxError> {
    let mut config = ClientConfig::new(args.need("bootstrap")?);
    config.allow_auto_create_topics = false;
    config.socket_timeout = Duration::from_secs(5);
    Ok(Client::connect(config).await?)
}

/// Leaders per topic, coordinators per group and transactional id, and the live brokers.
#[allow(clippy::too_many_lines)] // one sample, field by field: splitting it hides the shape
async fn snapshot(client: &Client, args: &Args, offsets: bool) -> Value {
    let topics = args.list("topics");
    let mut out = Map::new();
    let refs: Vec<&str> = topics.iter().map(String::as_str).collect();
    if let Err(e) = client.refresh_metadata(&refs).await {
        out.insert("error".into(), Value::from(e.to_string()));
    }
    let metadata = client.metadata();
    let mut brokers: Vec<i32> = metadata.brokers.keys().copied().collect();
    brokers.sort_unstable();
    out.insert("brokers".into(), json!(brokers));
    let mut leaders = Map::new();
    let mut ends = Map::new();
    let admin = Admin::new(client.clone());
    for topic in &topics {
        let Some(info) = metadata.topics.get(topic) else {
            continue;
        };
        let list: Vec<i32> = info.partitions.iter().map(|p| p.leader).collect();
        leaders.insert(topic.clone(), json!(list));
        if offsets {
            let mut topic_ends = Vec::new();
            for p in &info.partitions {
                let end = tokio::time::timeout(
                    Duration::from_secs(3),
                    admin.list_offset(
                        topic,
                        p.partition,
                        OffsetSpec::Latest,
                        IsolationLevel::ReadCommitted,
                    ),
                )
                .await;
                topic_ends.push(match end {
                    Ok(Ok((offset, _))) => offset,
                    _ => -1,
                });
            }
            ends.insert(topic.clone(), json!(topic_ends));
        }
    }
    out.insert("leaders".into(), Value::Object(leaders));
    if offsets {
        out.insert("ends".into(), Value::Object(ends));
    }
    let mut groups = Map::new();
    let mut committed = Map::new();
    for group in args.list("groups") {
        let node = tokio::time::timeout(
            Duration::from_secs(3),
            client.coordinator(CoordinatorKind::Group, &group),
        )
        .await;
        groups.insert(group.clone(), coordinator_json(&node));
        client.forget_coordinator(CoordinatorKind::Group, &group);
        if offsets {
            let partitions: Vec<(&str, i32)> = topics
                .iter()
                .filter_map(|t| metadata.topics.get(t).map(|info| (t, info)))
                .flat_map(|(t, info)| {
                    info.partitions
                        .iter()
                        .map(move |p| (t.as_str(), p.partition))
                })
                .collect();
            let fetched = tokio::time::timeout(
                Duration::from_secs(3),
                Offsets::new(client.clone(), group.clone()).fetch(&partitions, false),
            )
            .await;
            if let Ok(Ok(list)) = fetched {
                let mut per_topic: BTreeMap<String, Vec<i64>> = BTreeMap::new();
                for c in list {
                    let slot = per_topic.entry(c.topic.clone()).or_default();
                    let index = usize::try_from(c.partition).unwrap_or(0);
                    if slot.len() <= index {
                        slot.resize(index + 1, -1);
                    }
                    slot[index] = c.offset;
                }
                committed.insert(group.clone(), json!(per_topic));
            }
        }
    }
    out.insert("group_coordinators".into(), Value::Object(groups));
    if offsets {
        out.insert("committed".into(), Value::Object(committed));
    }
    let mut txns = Map::new();
    for id in args.list("txn-ids") {
        let node = tokio::time::timeout(
            Duration::from_secs(3),
            client.coordinator(CoordinatorKind::Transaction, &id),
        )
        .await;
        txns.insert(id.clone(), coordinator_json(&node));
        client.forget_coordinator(CoordinatorKind::Transaction, &id);
    }
    out.insert("txn_coordinators".into(), Value::Object(txns));
    Value::Object(out)
}

fn coordinator_json<E>(node: &Result<ruststream_kafka::client::Result<i32>, E>) -> Value {
    match node {
        Ok(Ok(node)) => Value::from(*node),
        _ => Value::Null,
    }
}

/// Prints one snapshot as a JSON line.
pub async fn describe(args: &Args) -> Result<(), BoxError> {
    let client = connect(args).await?;
    let snap = snapshot(&client, args, args.get("offsets").is_some()).await;
    println!("{snap}");
    client.close();
    Ok(())
}

/// Samples the cluster every `--every-ms` into the history until SIGTERM.
pub async fn watch(args: &Args) -> Result<(), BoxError> {
    let history = History::open(args.need("history")?, "watch")?;
    let every = Duration::from_millis(args.num("every-ms", 1000)?);
    let client = connect(args).await?;
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = term.recv() => break,
        }
        let snap = snapshot(&client, args, true).await;
        history.log("sample", snap);
    }
    client.close();
    Ok(())
}

/// Creates `--topic NAME:PARTITIONS` topics unless they exist and prints their log ends.
pub async fn setup(args: &Args) -> Result<(), BoxError> {
    let client = connect(args).await?;
    let admin = Admin::new(client.clone());
    let replication: i16 = args.num("replication", 3)?;
    let mut names = Vec::new();
    let mut create = Vec::new();
    for spec in args.all("topic") {
        let (name, partitions) = spec
            .split_once(':')
            .ok_or_else(|| format!("--topic {spec}: expected NAME:PARTITIONS"))?;
        let partitions: i32 = partitions
            .parse()
            .map_err(|_| format!("--topic {spec}: bad partition count"))?;
        if client.topic(name).await.is_err() {
            create.push(
                NewTopic::new(name, partitions, replication).config("min.insync.replicas", "2"),
            );
        }
        names.push(name.to_owned());
    }
    if !create.is_empty() {
        admin.create_topics(&create, Duration::from_mins(1)).await?;
    }
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    admin
        .wait_for_leaders(&refs, Duration::from_mins(1))
        .await?;
    let mut ends = Map::new();
    for name in &names {
        let info = client.topic(name).await?;
        let mut list = Vec::new();
        for p in &info.partitions {
            let (offset, _) = admin
                .list_offset(
                    name,
                    p.partition,
                    OffsetSpec::Latest,
                    IsolationLevel::ReadUncommitted,
                )
                .await?;
            list.push(offset);
        }
        ends.insert(name.clone(), json!(list));
    }
    println!("{}", Value::Object(ends));
    client.close();
    Ok(())
}
