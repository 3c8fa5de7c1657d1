//! The service of the Groups and ordering guide: a bank's transfers feed two consumer groups.
//! The ledger group books every transfer into an entry keyed by account, with one lane per
//! account so an account's entries keep their order; the fraud group screens the same transfers
//! in its own group and so receives its own copy of each.
//!
//! ```text
//! $ scripts/kafka up
//! $ cargo run --example guide_groups_and_ordering -- run
//! $ cargo test --example guide_groups_and_ordering
//! ```
//!
//! The broker address comes from `KAFKA_TEST_URL` (what `scripts/kafka env` prints), else
//! `localhost:9092`.

use serde::{Deserialize, Serialize};

#[path = "../support/live.rs"]
mod live;

#[cfg(test)]
#[path = "../support/readback.rs"]
mod readback;

#[cfg(test)]
#[path = "../support/runs.rs"]
mod runs;

#[cfg(all(test, feature = "testing"))]
#[path = "../support/in_process.rs"]
mod in_process;

// --8<-- [start:app]
use ruststream_kafka::prelude::*;

/// A transfer out of an account; the record key is the account.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
struct Transfer {
    account: String,
    seq: u32,
    cents: i64,
}

/// The record key of a ledger entry: its account.
#[derive(Serialize, Deserialize, Debug, PartialEq)]
struct AccountKey {
    #[serde(rename = "kafka-partition-key")]
    account: String,
}

/// A booked transfer; one account's entries share a partition.
#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "ledger-entries.guide_groups_and_ordering", headers = AccountKey)]
struct Entry {
    account: String,
    seq: u32,
}

/// A screened transfer.
#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "screened.guide_groups_and_ordering")]
struct Screened {
    account: String,
    seq: u32,
}

#[derive(OutSlot)]
#[publishes(Entry)]
struct Ledger;

// --8<-- [start:ordering]
/// Four lanes, one account always on the same lane: an account's transfers are booked in order.
#[subscriber(
    KafkaTopic::new("transfers.guide_groups_and_ordering")
        .group("ledger.guide_groups_and_ordering")
        .lane_key(LaneKey::RecordKey),
    workers(4, by_key)
)]
async fn book(transfer: &Transfer, Out(ledger): Out<impl Publisher, Ledger>) -> HandlerOutcome {
    let key = AccountKey {
        account: transfer.account.clone(),
    };
    let entry = Entry {
        account: transfer.account.clone(),
        seq: transfer.seq,
    };
    match ledger.message(&entry).with_headers(&key).publish().await {
        Ok(()) => HandlerOutcome::ack(),
        Err(_) => HandlerOutcome::retry(),
    }
}
// --8<-- [end:ordering]

// --8<-- [start:groups]
/// Another group on the same topic: it reads every transfer too, at its own pace.
#[subscriber(
    KafkaTopic::new("transfers.guide_groups_and_ordering").group("fraud.guide_groups_and_ordering"),
    reply
)]
async fn screen(transfer: &Transfer) -> Screened {
    Screened {
        account: transfer.account.clone(),
        seq: transfer.seq,
    }
}
// --8<-- [end:groups]

#[ruststream::app]
fn app() -> impl App<State = ()> {
    RustStream::new(AppInfo::new("bank", "0.1.0")).with_broker(
        KafkaBroker::new([live::bootstrap()]),
        |b| {
            b.include(book).out(Ledger, Publish::default()).build();
            b.include(screen);
        },
    )
}
// --8<-- [end:app]

#[cfg(test)]
mod tests {
    use std::error::Error;
    use std::time::{Duration, Instant};

    use ruststream::testing::TestApp;
    use ruststream_kafka::client::IsolationLevel;

    use super::runs::{START, recreate_topic, seed_keyed};
    use super::{Entry, Screened, Transfer, app, readback};

    const TRANSFERS: &str = "transfers.guide_groups_and_ordering";
    const ENTRIES: &str = "ledger-entries.guide_groups_and_ordering";
    const SCREENED: &str = "screened.guide_groups_and_ordering";

    /// Every record of `topic`'s first `partitions` partitions, one list per partition.
    async fn all_of(topic: &str, partitions: i32) -> Result<Vec<Vec<String>>, Box<dyn Error>> {
        let mut lists = Vec::new();
        for partition in 0..partitions {
            let records =
                readback::records_since(topic, partition, 0, IsolationLevel::ReadCommitted).await?;
            lists.push(records.iter().map(readback::text).collect());
        }
        Ok(lists)
    }

    /// In process: the topics have their partitions before the service starts, the transfers
    /// are placed keyed by account, and the entries are read from the cluster partition by
    /// partition.
    #[cfg(feature = "testing")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn each_group_has_its_copy_and_each_account_its_order_in_process()
    -> Result<(), Box<dyn Error>> {
        let topics = [(TRANSFERS, 3), (ENTRIES, 3), (SCREENED, 1)];
        let (tb, cluster) = super::in_process::start_with_topics(app(), (), &topics).await?;
        let accounts = ["acc-1", "acc-2", "acc-1", "acc-3", "acc-2", "acc-1"];
        let transfers: Vec<(&str, Transfer)> = accounts
            .iter()
            .zip(1..)
            .map(|(account, seq)| {
                let transfer = Transfer {
                    account: (*account).to_owned(),
                    seq,
                    cents: 100,
                };
                (*account, transfer)
            })
            .collect();
        super::in_process::seed_keyed(&cluster, TRANSFERS, &transfers)?;

        let kafka = tb.broker::<ruststream_kafka::KafkaBroker>();
        let give_up = Instant::now() + Duration::from_secs(30);
        while (cluster.records(ENTRIES).len() < transfers.len()
            || kafka.published::<Screened>(SCREENED).messages().len() < transfers.len())
            && Instant::now() < give_up
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // The fraud group read every transfer, independently of the ledger group.
        let mut seqs: Vec<u32> = kafka
            .published::<Screened>(SCREENED)
            .decoded()
            .iter()
            .map(|screened| screened.seq)
            .collect();
        seqs.sort_unstable();
        assert_eq!(seqs, [1, 2, 3, 4, 5, 6]);

        // Each account's entries sit in one partition, in the order the transfers were made.
        let entries: Vec<(i32, Entry)> = cluster
            .records(ENTRIES)
            .iter()
            .map(|(partition, record)| {
                serde_json::from_slice(record.value.as_deref().unwrap_or_default())
                    .map(|entry| (*partition, entry))
            })
            .collect::<Result<_, _>>()?;
        for account in ["acc-1", "acc-2", "acc-3"] {
            let mine: Vec<&(i32, Entry)> = entries
                .iter()
                .filter(|(_, entry)| entry.account == account)
                .collect();
            assert!(
                mine.iter().all(|(partition, _)| *partition == mine[0].0),
                "{account}"
            );
            let seqs: Vec<u32> = mine.iter().map(|(_, entry)| entry.seq).collect();
            let sent: Vec<u32> = transfers
                .iter()
                .filter(|(key, _)| *key == account)
                .map(|(_, transfer)| transfer.seq)
                .collect();
            assert_eq!(seqs, sent, "{account}");
        }
        tb.shutdown().await?;
        Ok(())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn each_group_has_its_copy_and_each_account_its_order() -> Result<(), Box<dyn Error>> {
        recreate_topic(TRANSFERS, 3).await?;
        recreate_topic(ENTRIES, 3).await?;
        recreate_topic(SCREENED, 1).await?;
        let tb = TestApp::start_live_within(app(), START).await?;
        let transfer = |account: &str, seq, cents| Transfer {
            account: account.to_owned(),
            seq,
            cents,
        };
        let accounts = ["acc-1", "acc-2", "acc-1", "acc-3", "acc-2", "acc-1"];
        let transfers: Vec<(&str, Transfer)> = accounts
            .iter()
            .zip(1..)
            .map(|(account, seq)| (*account, transfer(account, seq, 100)))
            .collect();
        seed_keyed(TRANSFERS, &transfers).await?;

        let give_up = Instant::now() + Duration::from_secs(30);
        let (entries, screened) = loop {
            let entries = all_of(ENTRIES, 3).await?;
            let screened = all_of(SCREENED, 1).await?;
            let done = entries.iter().map(Vec::len).sum::<usize>() >= transfers.len()
                && screened[0].len() >= transfers.len();
            if !done && Instant::now() < give_up {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
            break (entries, screened);
        };
        tb.shutdown().await?;

        // The fraud group read every transfer, independently of the ledger group.
        let mut screened: Vec<Screened> = screened[0]
            .iter()
            .map(|text| serde_json::from_str(text))
            .collect::<Result<_, _>>()?;
        screened.sort_by_key(|screened| screened.seq);
        let seqs: Vec<u32> = screened.iter().map(|screened| screened.seq).collect();
        assert_eq!(seqs, [1, 2, 3, 4, 5, 6]);

        // Each account's entries sit in one partition, in the order the transfers were made.
        for account in ["acc-1", "acc-2", "acc-3"] {
            let holding: Vec<Vec<u32>> = entries
                .iter()
                .map(|partition| {
                    partition
                        .iter()
                        .filter_map(|text| serde_json::from_str::<Entry>(text).ok())
                        .filter(|entry| entry.account == account)
                        .map(|entry| entry.seq)
                        .collect::<Vec<_>>()
                })
                .filter(|seqs| !seqs.is_empty())
                .collect();
            let sent: Vec<u32> = transfers
                .iter()
                .filter(|(key, _)| *key == account)
                .map(|(_, transfer)| transfer.seq)
                .collect();
            assert_eq!(holding, [sent], "{account}");
        }
        Ok(())
    }
}
