//! The service of the production guide: a claims intake that runs against a secured cluster.
//! Everything that differs between deployments (addresses, the SCRAM login, the CA file) comes
//! from the environment; what the service needs from the cluster is fixed in code: SASL over
//! TLS, replies acknowledged by every in-sync replica without duplicates (`acks=all`,
//! idempotence), bounded waits at startup and at shutdown, and offsets committed only once a
//! claim is settled.
//!
//! ```text
//! CLAIMS_KAFKA_SERVERS=kafka-1.internal:9096 CLAIMS_KAFKA_USER=claims-intake \
//!     CLAIMS_KAFKA_PASSWORD=... \
//!     cargo run --example guide_production --features ssl,testing -- run
//! $ cargo test --example guide_production --features testing,ssl
//! ```
//!
//! The tests run the same configuration on the embedded cluster in this process: nothing to
//! start, no credentials needed.

use std::time::Duration;

use serde::{Deserialize, Serialize};

// --8<-- [start:settings]
use ruststream_kafka::prelude::*;

/// What a deployment tells the service about its cluster.
struct Deployment {
    servers: String,
    user: String,
    password: String,
    /// A PEM file with the cluster's CA, or `probe` for the system's trust store.
    ca: String,
}

impl Deployment {
    /// Reads `CLAIMS_KAFKA_*`; a missing CA file means the system's trust store.
    fn from_env() -> Self {
        let var = |name: &str| std::env::var(name).unwrap_or_default();
        let ca = std::env::var("CLAIMS_KAFKA_CA").unwrap_or_else(|_| "probe".to_owned());
        Self {
            servers: var("CLAIMS_KAFKA_SERVERS"),
            user: var("CLAIMS_KAFKA_USER"),
            password: var("CLAIMS_KAFKA_PASSWORD"),
            ca,
        }
    }
}

fn broker(deployment: Deployment) -> KafkaBroker {
    KafkaBroker::new([deployment.servers])
        .default_group("claims-intake")
        // Encrypted and authenticated: TLS checked against the CA, then a SCRAM login.
        .config("security.protocol", "SASL_SSL")
        .config("ssl.ca.location", deployment.ca)
        .config("sasl.mechanism", "SCRAM-SHA-512")
        .config("sasl.username", deployment.user)
        .config("sasl.password", deployment.password)
        // An acknowledgement survives a broker loss; a retried send is never written twice.
        .producer_config("acks", "all")
        .producer_config("enable.idempotence", "true")
        .connect_timeout(Duration::from_secs(15))
        .flush_timeout(Duration::from_secs(30))
}
// --8<-- [end:settings]

/// A claim filed by a policy holder.
#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "claims.guide_production")]
struct Claim {
    policy: String,
    cents: u64,
}

/// The intake's answer: the claim is on file, with a reference to quote.
#[derive(Serialize, Deserialize, Outgoing, Debug, PartialEq)]
#[outgoing(name = "claim-receipts.guide_production")]
struct ClaimReceipt {
    policy: String,
    reference: String,
}

// --8<-- [start:service]
#[subscriber(KafkaTopic::new("claims.guide_production").commit(Commit::Tracked), reply)]
async fn file_claim(claim: &Claim) -> ClaimReceipt {
    tracing::info!(claim.policy, claim.cents, "claim filed");
    ClaimReceipt {
        policy: claim.policy.clone(),
        reference: format!("CLM-{}", claim.policy),
    }
}

fn service(broker: KafkaBroker) -> impl App {
    RustStream::new(AppInfo::new("claims-intake", "0.1.0")).with_broker(broker, |b| {
        // A receipt that cannot be queued within 5 s fails the claim, which comes back.
        b.include(file_claim)
            .out_reply(Publish::default().queue_timeout(Duration::from_secs(5)));
    })
}

#[ruststream::app]
fn app() -> impl App {
    service(broker(Deployment::from_env()))
}
// --8<-- [end:service]

#[cfg(test)]
#[path = "../support/production_checks.rs"]
mod checks;

#[cfg(test)]
mod tests {
    use super::{Deployment, broker, service};

    /// A deployment as the orchestrator would describe it; nothing here is dialled.
    fn deployment() -> Deployment {
        Deployment {
            servers: "kafka-1.claims.internal:9096".to_owned(),
            user: "claims-intake".to_owned(),
            password: "n0t-a-real-secret".to_owned(),
            ca: "probe".to_owned(),
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_secured_configuration_files_a_claim_in_process()
    -> Result<(), Box<dyn std::error::Error>> {
        let app = service(broker(deployment()));
        super::checks::claim_filed_in_process(
            app,
            "claims.guide_production",
            "claim-receipts.guide_production",
        )
        .await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_misspelt_security_protocol_stops_the_start() {
        let misspelt = broker(deployment()).config("security.protocol", "SASL_TLS");
        super::checks::misspelt_protocol_refused(service(misspelt)).await;
    }
}
