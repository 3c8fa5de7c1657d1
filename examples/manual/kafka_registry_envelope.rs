//! The ledger relay of `kafka_registry_envelope`, without macros: the handler is a `Handle`
//! impl over the raw entry, the subscription is built by hand, the migrated entry names its
//! topic through `OutgoingDestination`.
//!
//! ```text
//! $ cargo test --example manual_kafka_registry_envelope --features testing,schema-registry
//! ```

use std::future::{Future, ready};
use std::process::ExitCode;

use ruststream::runtime::cli::run_main;

#[path = "../support/live.rs"]
mod live;

use ruststream_kafka::prelude::*;
use ruststream_kafka::schema_registry::{encode_envelope, parse_envelope};

/// A ledger entry as it arrived: the envelope and the datum, unread.
#[derive(Deserialized)]
struct Entry<'a>(&'a [u8]);

/// The same datum, framed with the new registry's id.
#[derive(Serialized)]
struct Migrated(Vec<u8>);

impl OutgoingDestination for Migrated {
    type Form = FixedName;
    const DESTINATION: &'static str = "migrated-entries.sr-envelope-manual";
}

impl MessageHeaders for Migrated {
    type Contract = NoHeaders;
}

/// Old registry id to new registry id, for every schema the ledger was written with.
const NEW_IDS: [(u32, u32); 2] = [(31, 931), (32, 932)];

struct Relay;

impl Handle<Entry<'_>, Migrated> for Relay {
    fn handle(
        &self,
        entry: &Entry<'_>,
        _outs: &(),
        _ctx: &mut Context<'_>,
    ) -> impl Future<Output = Result<Migrated, HandlerOutcome>> {
        let Some((old, datum)) = parse_envelope(entry.0) else {
            tracing::warn!("a ledger entry without the envelope: it names no schema");
            return ready(Err(HandlerOutcome::drop()));
        };
        let Some(&(_, new)) = NEW_IDS.iter().find(|(from, _)| *from == old) else {
            tracing::warn!(schema_id = old, "no new id is known for this schema");
            return ready(Err(HandlerOutcome::drop()));
        };
        ready(Ok(Migrated(encode_envelope(new, datum))))
    }
}

fn entries() -> KafkaTopic {
    KafkaTopic::new("ledger-entries.sr-envelope-manual").group("ledger-relay.sr-envelope-manual")
}

/// The relay; the ids travel in the bytes, so it needs no registry of its own.
fn app() -> impl App {
    RustStream::new(AppInfo::new("ledger-relay", "0.1.0")).with_broker(
        KafkaBroker::new([live::bootstrap()]),
        |b| {
            b.include(subscriber(entries(), Relay).reply().build());
        },
    )
}

fn main() -> ExitCode {
    run_main(app)
}

#[cfg(test)]
#[path = "../support/registry_checks.rs"]
mod checks;

#[cfg(test)]
mod tests {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_entry_moves_under_its_new_schema_id() -> Result<(), Box<dyn std::error::Error>> {
        super::checks::relay_moves_the_schema_id(super::app, "sr-envelope-manual").await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_entry_without_an_envelope_is_dropped() -> Result<(), Box<dyn std::error::Error>> {
        super::checks::unframed_entry_is_dropped(super::app, "sr-envelope-manual").await
    }
}
