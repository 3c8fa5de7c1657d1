//! What the examples' in-process tests share: a service started on an embedded cluster whose
//! topics the test shapes before any subscription opens, and records placed on a partition of
//! it as an outside producer would write them.
#![allow(dead_code)]

use std::error::Error;

use ruststream::testing::TestApp;
use ruststream_kafka::KafkaBroker;
use ruststream_kafka::prelude::App;
use ruststream_kafka::testing::EmbeddedCluster;
use serde::Serialize;

/// Starts `app` in process with `state` as its state, after creating each of `topics` (name and
/// partition count) on its fresh cluster. Returns the harness and the cluster.
pub async fn start_with_topics<A, S>(
    app: A,
    state: S,
    topics: &[(&str, i32)],
) -> Result<(TestApp<S>, EmbeddedCluster), Box<dyn Error>>
where
    A: App<State = S>,
    S: Send + Sync + 'static,
{
    start_prepared(app, state, |cluster| {
        for (topic, partitions) in topics {
            // A topic that exists already keeps its partitions: nothing to do then.
            let _ = cluster.create_topic(topic, *partitions);
        }
        Ok(())
    })
    .await
}

/// Starts `app` in process with `state` as its state, after `prepare` has shaped its fresh
/// cluster (topics, records already there when the service starts reading). Returns the
/// harness and the cluster.
pub async fn start_prepared<A, S, F>(
    app: A,
    state: S,
    prepare: F,
) -> Result<(TestApp<S>, EmbeddedCluster), Box<dyn Error>>
where
    A: App<State = S>,
    S: Send + Sync + 'static,
    F: FnOnce(&EmbeddedCluster) -> Result<(), Box<dyn Error>>,
{
    let mut cluster = None;
    let mut prepared = Ok(());
    let tb = TestApp::with_state(app, |brokers| {
        cluster = brokers.broker::<KafkaBroker>().embedded_cluster();
        if let Some(cluster) = &cluster {
            prepared = prepare(cluster);
        }
        state
    })
    .await?;
    prepared?;
    let cluster = cluster.ok_or("the broker is connected in process")?;
    Ok((tb, cluster))
}

/// Writes each of `values`, JSON-encoded and without a key, onto `partition` of `topic`.
pub fn place<T: Serialize>(
    cluster: &EmbeddedCluster,
    topic: &str,
    partition: i32,
    values: &[T],
) -> Result<(), Box<dyn Error>> {
    for value in values {
        cluster.produce_to(topic, partition, None, &serde_json::to_vec(value)?, &[])?;
    }
    Ok(())
}

/// Writes each of `values`, JSON-encoded and without a key, onto `partition` of `topic`, or
/// onto its partitions in turn with none named: what `runs::seed` does on a live cluster.
pub fn seed<T: Serialize>(
    cluster: &EmbeddedCluster,
    topic: &str,
    partition: Option<i32>,
    values: &[T],
) -> Result<(), Box<dyn Error>> {
    for value in values {
        let value = serde_json::to_vec(value)?;
        match partition {
            Some(partition) => cluster.produce_to(topic, partition, None, &value, &[])?,
            None => cluster.produce(topic, None, &value, &[])?,
        };
    }
    Ok(())
}

/// Writes each of `records`, JSON-encoded, with its key: what `runs::seed_keyed` does on a live
/// cluster.
pub fn seed_keyed<T: Serialize>(
    cluster: &EmbeddedCluster,
    topic: &str,
    records: &[(&str, T)],
) -> Result<(), Box<dyn Error>> {
    for (key, value) in records {
        cluster.produce(
            topic,
            Some(key.as_bytes()),
            &serde_json::to_vec(value)?,
            &[],
        )?;
    }
    Ok(())
}
