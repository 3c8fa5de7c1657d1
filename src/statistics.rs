//! `statistics.interval.ms`: librdkafka emits its statistics every interval; here one INFO
//! line of target `ruststream_kafka::statistics` carries them, as JSON with librdkafka's field
//! names (`client::StatisticsObserver` lists them), one per connected broker.
//!
//! Invariant: the reporting task lives only as long as the broker's clients: it holds the
//! tally weakly, and ends at the first tick after the last client let it go.

use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::client::{Observers, StatisticsObserver};

/// `observers` and, when `interval` is not zero, a tally of the clients' events that a task
/// of the current runtime logs every `interval`.
pub(crate) fn reporting(name: &str, interval: Duration, observers: &Observers) -> Observers {
    if interval.is_zero() {
        return observers.clone();
    }
    let tally = Arc::new(StatisticsObserver::new(name));
    crate::client::outlined::spawn(report(Arc::downgrade(&tally), interval));
    observers.with(tally)
}

async fn report(tally: Weak<StatisticsObserver>, interval: Duration) {
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
    // a runtime that was busy gives one late report, not a burst of them
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(tally) = tally.upgrade() else {
            return;
        };
        tracing::info!(
            target: "ruststream_kafka::statistics",
            statistics = %tally.to_json(),
            "statistics"
        );
    }
}
