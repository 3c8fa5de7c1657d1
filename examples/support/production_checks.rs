//! What the production guide and its manual twin check, written once: each check takes the
//! service (or its broker, to spoil one setting) and the topics its twin uses, and runs on the
//! embedded cluster in this process, so the secured configuration needs no secured cluster.
#![allow(dead_code)]

use std::error::Error;

use ruststream::testing::TestApp;
use ruststream_kafka::prelude::*;
use serde_json::json;

type Outcome = Result<(), Box<dyn Error>>;

/// A JSON claim published exactly as given, to whatever topic `to` names.
#[derive(Serialized, Outgoing)]
struct Raw(Vec<u8>);

/// The service started with the production settings files a claim and answers with its
/// receipt.
pub async fn claim_filed_in_process<A: App>(app: A, claims: &str, receipts: &str) -> Outcome {
    let tb = TestApp::start(app).await?;
    let kafka = tb.broker::<KafkaBroker>();
    let claim = json!({"policy": "HOME-5521", "cents": 84_000});
    kafka
        .message(&Raw(serde_json::to_vec(&claim)?))
        .to(claims)
        .publish()
        .await?;

    kafka
        .subscriber(claims)
        .assert_called_once()
        .settled(HandlerOutcome::ack());
    let published = kafka.published::<()>(receipts).assert_called_once();
    let receipt: serde_json::Value = serde_json::from_slice(published.messages()[0].payload())?;
    assert_eq!(
        receipt,
        json!({"policy": "HOME-5521", "reference": "CLM-HOME-5521"})
    );
    tb.shutdown().await?;
    Ok(())
}

/// A security protocol the client does not know stops the start, and the error names the
/// property to fix.
pub async fn misspelt_protocol_refused<A: App>(app: A) {
    let refused = TestApp::start(app).await.err().map(|e| e.to_string());
    assert!(
        matches!(&refused, Some(text) if text.contains("security.protocol")),
        "{refused:?}"
    );
}
