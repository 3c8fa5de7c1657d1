//! What the registry examples and their manual twins check, written once: each check takes
//! the app factory and the topic suffix its example uses, and runs live against the broker of
//! `support/live.rs` and a registry double started in the test process.
#![allow(dead_code)]

use std::error::Error;
use std::time::Duration;

#[cfg(feature = "avro")]
use ruststream::codec::Codec;
use ruststream::testing::TestApp;
use ruststream_kafka::SchemaRegistry;
use ruststream_kafka::client::{IsolationLevel, Record};
use ruststream_kafka::prelude::*;
use ruststream_kafka::schema_registry::{encode_envelope, parse_envelope};

use super::live;

#[path = "readback.rs"]
mod readback;
#[path = "../../tests/support/registry.rs"]
mod registry;

use registry::RegistryDouble;

type Outcome<T = ()> = Result<T, Box<dyn Error>>;

/// The tests of one example share its app, so its topics and its consumer group: they take
/// turns, or two members of the group would split the topic between them. Each example is its
/// own test binary, so one lock per process is one lock per example.
async fn one_at_a_time() -> tokio::sync::MutexGuard<'static, ()> {
    static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    TURN.lock().await
}

/// Bytes published exactly as given, to whatever topic `to` names.
#[derive(Serialized, Outgoing)]
struct Raw(Vec<u8>);

/// The topics of one run: requests in, answers out, and where the answer log ended before.
struct Lanes {
    requests: String,
    answers: String,
    before: i64,
}

/// The run's topics (`{requests}.{suffix}`, `{answers}.{suffix}`), created if missing, and a
/// fresh registry double.
async fn lanes(requests: &str, answers: &str, suffix: &str) -> Outcome<(Lanes, RegistryDouble)> {
    let requests = format!("{requests}.{suffix}");
    let answers = format!("{answers}.{suffix}");
    live::ensure_topic(&requests, 1).await?;
    live::ensure_topic(&answers, 1).await?;
    let before = readback::log_ends(&answers, 1).await?[0];
    let lanes = Lanes {
        requests,
        answers,
        before,
    };
    Ok((lanes, RegistryDouble::start().await))
}

/// Starts `app`, publishes `payloads` to the request topic, waits until the handler ran once
/// per payload, shuts down, and answers the records that reached the answer topic.
async fn exchange<A: App>(app: A, lanes: &Lanes, payloads: Vec<Vec<u8>>) -> Outcome<Vec<Record>> {
    let tb = TestApp::start_live_within(app, Duration::from_secs(30)).await?;
    let kafka = tb.broker::<KafkaBroker>();
    let count = payloads.len();
    for payload in payloads {
        kafka
            .message(&Raw(payload))
            .to(&lanes.requests)
            .publish()
            .await?;
    }
    kafka.subscriber(&lanes.requests).assert_called(count);
    tb.shutdown().await?;
    let records = readback::records_since(
        &lanes.answers,
        0,
        lanes.before,
        IsolationLevel::ReadCommitted,
    )
    .await?;
    Ok(records)
}

fn value(record: &Record) -> Outcome<Vec<u8>> {
    Ok(record
        .value
        .clone()
        .ok_or("a record without a value")?
        .to_vec())
}

/// `kafka_schema_registry`: a JSON-framed hold is answered by a confirmation the layer frames
/// under its JSON Schema subject.
pub async fn framed_hold_confirmed<A: App>(
    app: impl FnOnce(SchemaRegistry) -> A,
    suffix: &str,
) -> Outcome {
    let (lanes, double) = lanes("holds", "hold-confirmations", suffix).await?;
    let holds = double.register(
        &format!("{}-value", lanes.requests),
        "JSON",
        r#"{"type":"object","properties":{"room":{"type":"integer"}}}"#,
    );
    let registry = SchemaRegistry::new(double.url());
    let hold = encode_envelope(holds, br#"{"room":12,"guest":"Mira"}"#);
    let landed = exchange(app(registry.clone()), &lanes, vec![hold]).await?;
    let framed = value(&landed[0])?;
    let (id, datum) = parse_envelope(&framed).ok_or("the confirmation is not framed")?;
    let subject = registry.warm(&format!("{}-value", lanes.answers)).await?;
    assert_eq!(subject.schema_type(), ruststream_kafka::SchemaType::Json);
    assert_eq!(id, subject.id());
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(datum)?,
        serde_json::json!({"room": 12, "guest": "Mira", "nights_left": 3})
    );
    Ok(())
}

/// `kafka_avro_codec`: an Avro pickup framed by another producer is answered by an Avro
/// receipt framed under the receipt subject.
#[cfg(feature = "avro")]
pub async fn avro_pickup_answered<In, Out, A>(
    app: impl FnOnce(SchemaRegistry) -> A,
    suffix: &str,
) -> Outcome
where
    A: App,
    In: serde::Serialize + serde::de::DeserializeOwned + ruststream_kafka::avro::AvroSchema,
    Out: serde::de::DeserializeOwned
        + ruststream_kafka::avro::AvroSchema
        + PartialEq
        + std::fmt::Debug,
{
    use ruststream_kafka::SchemaPrefetch;
    use ruststream_kafka::avro::AvroCodec;

    let pickup: In = serde_json::from_value(serde_json::json!({"parcel": 77, "counter": "north"}))?;
    let receipt: Out = serde_json::from_value(serde_json::json!({"parcel": 77, "signed": true}))?;

    let (lanes, double) = lanes("pickups", "pickup-receipts", suffix).await?;
    let registry = SchemaRegistry::new(double.url());
    let pickups = format!("{}-value", lanes.requests);
    registry.register_avro::<In>(&pickups).await?;
    let receipts = registry
        .register_avro::<Out>(&format!("{}-value", lanes.answers))
        .await?;
    // Another producer frames the pickup with its own registry codec.
    let producer = SchemaPrefetch::new(registry.clone());
    let framed = AvroCodec::registry(&producer)
        .register::<In>(pickups)
        .encode(&pickup)?;
    let landed = exchange(app(registry.clone()), &lanes, vec![framed.to_vec()]).await?;
    let bytes = value(&landed[0])?;
    let (id, _) = parse_envelope(&bytes).ok_or("the receipt is not framed")?;
    assert_eq!(id, receipts);
    registry.schema_by_id(id).await?;
    let reader = AvroCodec::registry(&SchemaPrefetch::new(registry));
    assert_eq!(reader.decode::<Out>(&bytes)?, receipt);
    Ok(())
}

/// `kafka_avro_local`: a bare Avro reading (no envelope) is answered by a bare Avro board
/// line, each written with its type's own schema.
#[cfg(feature = "avro")]
pub async fn bare_avro_answered<In, Out, A>(app: A, suffix: &str) -> Outcome
where
    A: App,
    In: serde::de::DeserializeOwned + ruststream_kafka::avro::AvroSchema + Send + Sync + 'static,
    Out: serde::de::DeserializeOwned
        + ruststream_kafka::avro::AvroSchema
        + PartialEq
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
    In: serde::Serialize,
{
    let reading: In =
        serde_json::from_value(serde_json::json!({"station": "ridge", "tenths_celsius": -15}))?;
    let line: Out = serde_json::from_value(serde_json::json!({"station": "ridge", "frost": true}))?;
    let (lanes, _double) = lanes("readings", "board", suffix).await?;
    let mut datum = ruststream::BytesMut::new();
    ruststream_kafka::avro::encode(&reading, &mut datum)?;
    let landed = exchange(app, &lanes, vec![datum.to_vec()]).await?;
    let bytes = value(&landed[0])?;
    assert_eq!(ruststream_kafka::avro::decode::<Out>(&bytes)?, line);
    Ok(())
}

/// The `.proto` file both Protobuf subjects hold.
pub const GARAGE_PROTO: &str = r#"
syntax = "proto3";
package garage;
message Booking { string plate = 1; uint32 mileage = 2; }
message WorkTicket { string plate = 1; bool major_service = 2; }
"#;

/// The messages of [`GARAGE_PROTO`], compiled at run time so the checks need no generated
/// types.
#[cfg(feature = "protobuf")]
fn garage() -> Outcome<prost_reflect::DescriptorPool> {
    struct Garage;
    impl protox::file::FileResolver for Garage {
        fn open_file(&self, name: &str) -> Result<protox::file::File, protox::Error> {
            protox::file::File::from_source(name, GARAGE_PROTO)
        }
    }
    let mut compiler = protox::Compiler::with_file_resolver(Garage);
    compiler.open_file("garage.proto")?;
    Ok(compiler.descriptor_pool())
}

/// A `garage.Booking` as protobuf bytes.
#[cfg(feature = "protobuf")]
fn booking(pool: &prost_reflect::DescriptorPool, plate: &str, mileage: u32) -> Outcome<Vec<u8>> {
    use prost::Message as _;
    use prost_reflect::{DynamicMessage, Value};
    let descriptor = pool
        .get_message_by_name("garage.Booking")
        .ok_or("no Booking")?;
    let mut message = DynamicMessage::new(descriptor);
    message.set_field_by_name("plate", Value::String(plate.into()));
    message.set_field_by_name("mileage", Value::U32(mileage));
    Ok(message.encode_to_vec())
}

/// A `garage.WorkTicket` (after envelope and path) as (plate, major service).
#[cfg(feature = "protobuf")]
fn ticket(pool: &prost_reflect::DescriptorPool, bytes: &[u8]) -> Outcome<(String, bool)> {
    use prost_reflect::DynamicMessage;
    let descriptor = pool
        .get_message_by_name("garage.WorkTicket")
        .ok_or("no WorkTicket")?;
    let message = DynamicMessage::decode(descriptor, bytes)?;
    let plate = message.get_field_by_name("plate").ok_or("no plate")?;
    let major = message
        .get_field_by_name("major_service")
        .ok_or("no flag")?;
    Ok((
        plate.as_str().unwrap_or_default().to_owned(),
        major.as_bool().unwrap_or_default(),
    ))
}

/// `kafka_protobuf_framed`: a framed and a bare booking are both answered by tickets the
/// policy frames as `garage.WorkTicket` (index path `[1]`).
#[cfg(feature = "protobuf")]
pub async fn bookings_get_framed_tickets<A: App>(
    app: impl FnOnce(SchemaRegistry) -> A,
    suffix: &str,
) -> Outcome {
    let pool = garage()?;
    let bookings = [
        booking(&pool, "KX-1", 61_000)?,
        booking(&pool, "KX-2", 900)?,
    ];
    let (lanes, double) = lanes("bookings", "work-tickets", suffix).await?;
    let booking_id = double.register(
        &format!("{}-value", lanes.requests),
        "PROTOBUF",
        GARAGE_PROTO,
    );
    let tickets = double.register(
        &format!("{}-value", lanes.answers),
        "PROTOBUF",
        GARAGE_PROTO,
    );
    assert_eq!(booking_id, tickets, "one schema, one id");
    let [framed, bare] = bookings;
    // Booking is the file's first message: its index path is the single byte 0.
    let mut datum = vec![0];
    datum.extend(framed);
    let payloads = vec![encode_envelope(booking_id, &datum), bare];
    let landed = exchange(app(SchemaRegistry::new(double.url())), &lanes, payloads).await?;
    let mut plates = Vec::new();
    for record in &landed {
        let bytes = value(record)?;
        let (id, datum) = parse_envelope(&bytes).ok_or("a ticket is not framed")?;
        assert_eq!(id, tickets);
        assert_eq!(&datum[..2], &[2, 2], "WorkTicket is message [1]");
        plates.push(ticket(&pool, &datum[2..])?);
    }
    plates.sort();
    assert_eq!(
        plates,
        [("KX-1".to_owned(), true), ("KX-2".to_owned(), false)]
    );
    Ok(())
}

// --- batch A ---

/// A JSON Schema document with the given required integer property, registered by "another
/// producer" at the double (the text only has to be a schema; the double does not judge JSON
/// compatibility).
fn json_schema_with(property: &str) -> String {
    serde_json::json!({
        "type": "object",
        "properties": { property: { "type": "integer" } },
        "required": [property],
    })
    .to_string()
}

/// The answer's JSON, or the reason it is not what was published.
fn json_of(bytes: &[u8]) -> Outcome<serde_json::Value> {
    Ok(serde_json::from_slice(bytes)?)
}

/// `kafka_registry_cache`: after two framed loans went through, the registry clone the test
/// kept holds the loan schema by id (fetched once by the consume edge) and the slip subject
/// (resolved once by the publish layer).
pub async fn resolved_schemas_stay_cached<A: App>(
    app: impl FnOnce(SchemaRegistry) -> A,
    suffix: &str,
) -> Outcome {
    let (lanes, double) = lanes("loans", "loan-slips", suffix).await?;
    let loans = double.register(
        &format!("{}-value", lanes.requests),
        "JSON",
        &json_schema_with("book"),
    );
    let slips_subject = format!("{}-value", lanes.answers);
    let slips = double.register(&slips_subject, "JSON", &json_schema_with("due_in_days"));
    let registry = SchemaRegistry::new(double.url());
    assert!(registry.cached_schema(loans).is_none());
    assert!(registry.cached_subject(&slips_subject).is_none());

    let payloads = vec![
        encode_envelope(loans, br#"{"book":4411,"member":"Ines"}"#),
        encode_envelope(loans, br#"{"book":9001,"member":"Tomas"}"#),
    ];
    let landed = exchange(app(registry.clone()), &lanes, payloads).await?;
    assert_eq!(landed.len(), 2);
    for record in &landed {
        let bytes = value(record)?;
        let (id, _) = parse_envelope(&bytes).ok_or("a slip is not framed")?;
        assert_eq!(id, slips);
    }

    let by_id = registry
        .cached_schema(loans)
        .ok_or("the loan schema is not cached")?;
    assert_eq!(by_id.schema_type(), ruststream_kafka::SchemaType::Json);
    let by_subject = registry
        .cached_subject(&slips_subject)
        .ok_or("the slip subject is not cached")?;
    assert_eq!(by_subject.id(), slips);
    // Two records, one question each: the second record found both answers cached.
    assert_eq!(double.count("GET", &format!("/schemas/ids/{loans}")), 1);
    assert_eq!(
        double.count("GET", &format!("/subjects/{slips_subject}/versions/latest")),
        1
    );
    Ok(())
}

/// `kafka_registry_client`: the app asks nothing at startup; two readings framed under one
/// schema cost one request, and the test's own clone of the registry then finds the schema
/// the handler's clone fetched.
pub async fn clones_share_one_lookup<A: App>(
    app: impl FnOnce(SchemaRegistry) -> A,
    suffix: &str,
) -> Outcome {
    let _turn = one_at_a_time().await;
    let (lanes, double) = lanes("meter-readings", "meter-audit", suffix).await?;
    let readings = double.register(
        &format!("{}-value", lanes.requests),
        "JSON",
        &json_schema_with("kwh"),
    );
    let registry = SchemaRegistry::new(double.url());

    let tb = TestApp::start_live_within(app(registry.clone()), Duration::from_secs(30)).await?;
    assert_eq!(double.seen(), Vec::new(), "startup asked the registry");
    let kafka = tb.broker::<KafkaBroker>();
    for kwh in [12, 15] {
        let datum = format!(r#"{{"kwh":{kwh}}}"#);
        kafka
            .message(&Raw(encode_envelope(readings, datum.as_bytes())))
            .to(&lanes.requests)
            .publish()
            .await?;
    }
    kafka.subscriber(&lanes.requests).assert_called(2);
    tb.shutdown().await?;

    let landed = readback::records_since(
        &lanes.answers,
        0,
        lanes.before,
        IsolationLevel::ReadCommitted,
    )
    .await?;
    assert_eq!(landed.len(), 2);
    for record in &landed {
        assert_eq!(
            json_of(&value(record)?)?,
            serde_json::json!({"schema_id": readings, "format": "Json"})
        );
    }
    assert_eq!(double.count("GET", &format!("/schemas/ids/{readings}")), 1);
    assert_eq!(double.seen().len(), 1, "{:?}", double.seen());
    let cached = registry
        .cached_schema(readings)
        .ok_or("the test's clone does not see the handler's lookup")?;
    assert_eq!(cached.id(), readings);
    Ok(())
}

/// `kafka_registry_client`: with the registry's port closed the app still starts, and an
/// unframed reading, which needs no schema, is audited.
pub async fn starts_without_a_registry<A: App>(
    app: impl FnOnce(SchemaRegistry) -> A,
    suffix: &str,
) -> Outcome {
    let _turn = one_at_a_time().await;
    let (lanes, _double) = lanes("meter-readings", "meter-audit", suffix).await?;
    // A port that was free a moment ago: nothing answers there.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await?
        .local_addr()?;
    let registry = SchemaRegistry::new(format!("http://{closed}"));
    let landed = exchange(app(registry), &lanes, vec![br#"{"kwh":7}"#.to_vec()]).await?;
    assert_eq!(landed.len(), 1);
    assert_eq!(
        json_of(&value(&landed[0])?)?,
        serde_json::json!({"schema_id": null, "format": "unframed"})
    );
    Ok(())
}

/// `kafka_registry_custom_client`: a packet framed under `packet_id`, an id only the app's
/// own catalog knows (the double holds nothing), is transcoded and answered with a label.
#[cfg(feature = "avro")]
pub async fn catalog_answers_the_transcode<In, A>(app: A, suffix: &str, packet_id: u32) -> Outcome
where
    A: App,
    In: serde::Serialize
        + serde::de::DeserializeOwned
        + ruststream_kafka::avro::AvroSchema
        + Send
        + Sync
        + 'static,
{
    let packet: In =
        serde_json::from_value(serde_json::json!({"variety": "Cherokee Purple", "grams": 12}))?;
    let (lanes, _double) = lanes("seed-packets", "shelf-labels", suffix).await?;
    let mut datum = ruststream::BytesMut::new();
    ruststream_kafka::avro::encode(&packet, &mut datum)?;
    let framed = encode_envelope(packet_id, &datum);
    let landed = exchange(app, &lanes, vec![framed]).await?;
    assert_eq!(landed.len(), 1);
    assert_eq!(
        json_of(&value(&landed[0])?)?,
        serde_json::json!({"shelf": "C", "label": "Cherokee Purple (12 g)"})
    );
    Ok(())
}

/// `kafka_registry_envelope`: an entry framed under old id 31 leaves under new id 931 with
/// its datum byte for byte.
pub async fn relay_moves_the_schema_id<A: App>(app: impl FnOnce() -> A, suffix: &str) -> Outcome {
    let _turn = one_at_a_time().await;
    let (lanes, _double) = lanes("ledger-entries", "migrated-entries", suffix).await?;
    let datum = br#"{"account":"4-221","cents":-1250}"#;
    let landed = exchange(app(), &lanes, vec![encode_envelope(31, datum)]).await?;
    assert_eq!(landed.len(), 1);
    assert_eq!(value(&landed[0])?, encode_envelope(931, datum));
    Ok(())
}

/// `kafka_registry_envelope`: an entry without the envelope reaches the handler once and is
/// dropped: nothing is relayed and it does not come back.
pub async fn unframed_entry_is_dropped<A: App>(app: impl FnOnce() -> A, suffix: &str) -> Outcome {
    let _turn = one_at_a_time().await;
    let (lanes, _double) = lanes("ledger-entries", "migrated-entries", suffix).await?;
    let landed = exchange(
        app(),
        &lanes,
        vec![br#"{"account":"4-221","cents":80}"#.to_vec()],
    )
    .await?;
    assert!(landed.is_empty(), "{} records relayed", landed.len());
    Ok(())
}

/// `kafka_registry_framed`: a framed soil reading is answered by a watering plan the
/// `SchemaFramed` codec frames under the plan subject, which the prefetch resolved at connect.
pub async fn framed_codec_round_trip<Out, A>(
    app: impl FnOnce(SchemaRegistry) -> A,
    suffix: &str,
) -> Outcome
where
    A: App,
    Out: ruststream_kafka::schema_registry::JsonSchema,
{
    let (lanes, double) = lanes("soil-readings", "watering-plans", suffix).await?;
    let readings = double.register(
        &format!("{}-value", lanes.requests),
        "JSON",
        &json_schema_with("moisture_pct"),
    );
    let registry = SchemaRegistry::new(double.url());
    // The plan's own schema, registered ahead as a deploy step would; connect refuses to
    // start an app whose codec subject is missing.
    let plans = registry
        .register_json::<Out>(&format!("{}-value", lanes.answers))
        .await?;
    let reading = encode_envelope(readings, br#"{"bed":3,"moisture_pct":22}"#);
    let landed = exchange(
        app(SchemaRegistry::new(double.url())),
        &lanes,
        vec![reading],
    )
    .await?;
    assert_eq!(landed.len(), 1);
    let bytes = value(&landed[0])?;
    let (id, datum) = parse_envelope(&bytes).ok_or("the plan is not framed")?;
    assert_eq!(id, plans);
    assert_eq!(json_of(datum)?, serde_json::json!({"bed": 3, "litres": 4}));
    Ok(())
}

/// `kafka_registry_subject`: a prescription is framed under its record's own subject
/// (`record`), and the topic's `-value` subject is never asked for.
pub async fn framed_under_the_record_subject<A: App>(
    app: impl FnOnce(SchemaRegistry) -> A,
    suffix: &str,
    record: &str,
) -> Outcome {
    let (lanes, double) = lanes("checkups", "prescriptions", suffix).await?;
    let prescriptions = double.register(record, "JSON", &json_schema_with("rest_days"));
    let checkup = br#"{"patient":"P-118","temperature_tenths":389}"#.to_vec();
    let landed = exchange(
        app(SchemaRegistry::new(double.url())),
        &lanes,
        vec![checkup],
    )
    .await?;
    assert_eq!(landed.len(), 1);
    let bytes = value(&landed[0])?;
    let (id, datum) = parse_envelope(&bytes).ok_or("the prescription is not framed")?;
    assert_eq!(id, prescriptions);
    assert_eq!(
        json_of(datum)?,
        serde_json::json!({"patient": "P-118", "rest_days": 3})
    );
    assert_eq!(
        double.count("GET", &format!("/subjects/{record}/versions/latest")),
        1
    );
    let topic_subject = format!("/subjects/{}-value/versions/latest", lanes.answers);
    assert_eq!(double.count("GET", &topic_subject), 0);
    Ok(())
}

// --- end batch A ---

// --- batch C ---

/// Registers `proto` under the value subject of `topic`, as that topic's producer would.
fn register_proto(double: &RegistryDouble, topic: &str, proto: &str) -> u32 {
    double.register(&format!("{topic}-value"), "PROTOBUF", proto)
}

/// `message` framed under schema `id` as its file's first message (index path `[0]`, the
/// single byte 0).
#[cfg(feature = "protobuf")]
fn framed_first(id: u32, message: &impl prost::Message) -> Vec<u8> {
    let mut datum = vec![0];
    datum.extend(message.encode_to_vec());
    encode_envelope(id, &datum)
}

/// A tool loan as the lending desk's clients encode it (`tools.LoanRequest`).
#[cfg(feature = "protobuf")]
#[derive(Clone, PartialEq, prost::Message)]
struct LoanRequestWire {
    #[prost(string, tag = "1")]
    tool: String,
    #[prost(uint32, tag = "2")]
    days: u32,
}

/// The slip the desk hands back (`tools.LoanSlip`).
#[cfg(feature = "protobuf")]
#[derive(Clone, PartialEq, prost::Message)]
struct LoanSlipWire {
    #[prost(string, tag = "1")]
    tool: String,
    #[prost(bool, tag = "2")]
    deposit: bool,
}

/// Sends one loan request (`payload`) and reads back the bare slip it got.
#[cfg(feature = "protobuf")]
async fn loan_slip_for<A: App>(app: A, suffix: &str, payload: Vec<u8>) -> Outcome<LoanSlipWire> {
    use prost::Message as _;
    let _turn = one_at_a_time().await;
    let (lanes, _double) = lanes("loans", "loan-slips", suffix).await?;
    let landed = exchange(app, &lanes, vec![payload]).await?;
    assert_eq!(landed.len(), 1, "one slip per loan");
    let bytes = value(&landed[0])?;
    assert!(parse_envelope(&bytes).is_none(), "the slip goes out bare");
    Ok(LoanSlipWire::decode(bytes.as_slice())?)
}

/// `kafka_protobuf_plain`: a loan request in the Confluent envelope is read past it.
#[cfg(feature = "protobuf")]
pub async fn framed_loan_read<A: App>(app: A, suffix: &str) -> Outcome {
    let request = LoanRequestWire {
        tool: "tile saw".into(),
        days: 10,
    };
    // Any schema id will do: nothing here asks the registry.
    let slip = loan_slip_for(app, suffix, framed_first(4_242, &request)).await?;
    assert_eq!(
        slip,
        LoanSlipWire {
            tool: "tile saw".into(),
            deposit: true,
        }
    );
    Ok(())
}

/// `kafka_protobuf_plain`: a bare loan request (no envelope) is read as it is.
#[cfg(feature = "protobuf")]
pub async fn bare_loan_read<A: App>(app: A, suffix: &str) -> Outcome {
    use prost::Message as _;
    let request = LoanRequestWire {
        tool: "hedge trimmer".into(),
        days: 2,
    };
    let slip = loan_slip_for(app, suffix, request.encode_to_vec()).await?;
    assert_eq!(
        slip,
        LoanSlipWire {
            tool: "hedge trimmer".into(),
            deposit: false,
        }
    );
    Ok(())
}

/// What the stock-move subject holds: `StockMove` is its first message.
pub const STOCK_PROTO: &str = r#"
syntax = "proto3";
package dock;
message StockMove { string sku = 1; int32 units = 2; string bay = 3; }
"#;

/// A pallet scan as the dock's hand scanners encode it (`dock.PalletScan`).
#[cfg(feature = "protobuf")]
#[derive(Clone, PartialEq, prost::Message)]
struct PalletScanWire {
    #[prost(string, tag = "1")]
    sku: String,
    #[prost(uint32, tag = "2")]
    cases: u32,
    #[prost(string, tag = "3")]
    bay: String,
}

/// A stock movement as the inventory readers decode it.
#[cfg(feature = "protobuf")]
#[derive(Clone, PartialEq, prost::Message)]
struct StockMoveWire {
    #[prost(string, tag = "1")]
    sku: String,
    #[prost(int32, tag = "2")]
    units: i32,
    #[prost(string, tag = "3")]
    bay: String,
}

/// `kafka_protobuf_frame`: the stock move a handler publishes through its slot leaves framed
/// by the `ProtobufFrame` layer under its subject's id.
#[cfg(feature = "protobuf")]
pub async fn slot_publish_framed<A: App>(
    app: impl FnOnce(SchemaRegistry) -> A,
    suffix: &str,
) -> Outcome {
    use prost::Message as _;
    let (lanes, double) = lanes("pallet-scans", "stock-moves", suffix).await?;
    let moves = register_proto(&double, &lanes.answers, STOCK_PROTO);
    let scan = PalletScanWire {
        sku: "BOLT-M8".into(),
        cases: 3,
        bay: "B7".into(),
    };
    let landed = exchange(
        app(SchemaRegistry::new(double.url())),
        &lanes,
        vec![scan.encode_to_vec()],
    )
    .await?;
    assert_eq!(landed.len(), 1);
    let bytes = value(&landed[0])?;
    let (id, datum) = parse_envelope(&bytes).ok_or("the stock move is not framed")?;
    assert_eq!(id, moves, "framed with the subject's schema id");
    assert_eq!(datum[0], 0, "StockMove is the file's first message");
    assert_eq!(
        StockMoveWire::decode(&datum[1..])?,
        StockMoveWire {
            sku: "BOLT-M8".into(),
            units: 3 * 24,
            bay: "B7".into(),
        }
    );
    Ok(())
}

/// What the box office's clients register for seat requests.
pub const SEAT_REQUEST_PROTO: &str = r#"
syntax = "proto3";
package cinema;
message SeatRequest { string screening = 1; uint32 seats = 2; }
"#;

/// A seat request as a client encodes it.
#[cfg(feature = "protobuf")]
#[derive(Clone, PartialEq, prost::Message)]
struct SeatRequestWire {
    #[prost(string, tag = "1")]
    screening: String,
    #[prost(uint32, tag = "2")]
    seats: u32,
}

/// A ticket as the ticket printers decode it (`cinema.Ticket`, the example's `TICKET_PROTO`).
#[cfg(feature = "protobuf")]
#[derive(Clone, PartialEq, prost::Message)]
struct TicketWire {
    #[prost(string, tag = "1")]
    screening: String,
    #[prost(uint32, tag = "2")]
    seats: u32,
    #[prost(bool, tag = "3")]
    group_rate: bool,
}

/// `kafka_protobuf_transcode`: a framed Protobuf seat request reaches a JSON handler through
/// the broker's registry edge, and its ticket leaves as framed Protobuf under the ticket
/// subject the service registered at startup.
#[cfg(feature = "protobuf")]
pub async fn protobuf_seat_request_transcoded<A: App>(
    app: impl FnOnce(SchemaRegistry) -> A,
    suffix: &str,
) -> Outcome {
    use prost::Message as _;
    let (lanes, double) = lanes("seat-requests", "tickets", suffix).await?;
    let requests = register_proto(&double, &lanes.requests, SEAT_REQUEST_PROTO);
    let request = SeatRequestWire {
        screening: "late-show-4".into(),
        seats: 6,
    };
    let registry = SchemaRegistry::new(double.url());
    let landed = exchange(
        app(registry.clone()),
        &lanes,
        vec![framed_first(requests, &request)],
    )
    .await?;
    assert_eq!(landed.len(), 1);
    let bytes = value(&landed[0])?;
    let (id, datum) = parse_envelope(&bytes).ok_or("the ticket is not framed")?;
    let subject = registry.warm(&format!("{}-value", lanes.answers)).await?;
    assert_eq!(
        subject.schema_type(),
        ruststream_kafka::SchemaType::Protobuf
    );
    assert_eq!(id, subject.id());
    assert_eq!(datum[0], 0, "Ticket is the file's first message");
    assert_eq!(
        TicketWire::decode(&datum[1..])?,
        TicketWire {
            screening: "late-show-4".into(),
            seats: 6,
            group_rate: true,
        }
    );
    Ok(())
}

/// What the parcel and label subjects of the Protobuf guide hold.
pub const COURIER_PROTO: &str = r#"
syntax = "proto3";
package courier;
message Parcel { string tracking = 1; string address = 2; uint32 grams = 3; }
message Label { string tracking = 1; string address = 2; string service = 3; }
"#;

/// A parcel as the depot's sorters encode it.
#[cfg(feature = "protobuf")]
#[derive(Clone, PartialEq, prost::Message)]
struct ParcelWire {
    #[prost(string, tag = "1")]
    tracking: String,
    #[prost(string, tag = "2")]
    address: String,
    #[prost(uint32, tag = "3")]
    grams: u32,
}

/// A label as the printers decode it.
#[cfg(feature = "protobuf")]
#[derive(Clone, PartialEq, prost::Message)]
struct LabelWire {
    #[prost(string, tag = "1")]
    tracking: String,
    #[prost(string, tag = "2")]
    address: String,
    #[prost(string, tag = "3")]
    service: String,
}

#[cfg(feature = "protobuf")]
fn parcel(tracking: &str, address: &str, grams: u32) -> ParcelWire {
    ParcelWire {
        tracking: tracking.into(),
        address: address.into(),
        grams,
    }
}

/// Registers the parcel subject, frames `parcel` under it, runs the labelling service over it
/// and answers the subscriber's settlement check and what reached the label topic.
#[cfg(feature = "protobuf")]
async fn label_run<A: App>(
    app: impl FnOnce(SchemaRegistry) -> A,
    suffix: &str,
    parcel: ParcelWire,
    label_subject: bool,
    settled: HandlerOutcome,
) -> Outcome<(Vec<Record>, u32)> {
    let _turn = one_at_a_time().await;
    let (lanes, double) = lanes("parcels", "labels", suffix).await?;
    let parcels = register_proto(&double, &lanes.requests, COURIER_PROTO);
    let labels = if label_subject {
        register_proto(&double, &lanes.answers, COURIER_PROTO)
    } else {
        0
    };
    let tb = TestApp::start_live_within(
        app(SchemaRegistry::new(double.url())),
        Duration::from_secs(30),
    )
    .await?;
    let kafka = tb.broker::<KafkaBroker>();
    kafka
        .message(&Raw(framed_first(parcels, &parcel)))
        .to(&lanes.requests)
        .publish()
        .await?;
    kafka
        .subscriber(&lanes.requests)
        .assert_called_once()
        .settled(settled);
    tb.shutdown().await?;
    let records = readback::records_since(
        &lanes.answers,
        0,
        lanes.before,
        IsolationLevel::ReadCommitted,
    )
    .await?;
    Ok((records, labels))
}

/// `guide/protobuf`: a parcel with no address is dropped and prints no label.
#[cfg(feature = "protobuf")]
pub async fn parcel_without_address_dropped<A: App>(
    app: impl FnOnce(SchemaRegistry) -> A,
    suffix: &str,
) -> Outcome {
    let parcel = parcel("CR-1001", "", 800);
    let (landed, _) = label_run(app, suffix, parcel, true, HandlerOutcome::drop()).await?;
    assert!(landed.is_empty(), "no label for a parcel going nowhere");
    Ok(())
}

/// `guide/protobuf`: a parcel's label leaves framed as `courier.Label` under the label
/// subject's id.
#[cfg(feature = "protobuf")]
pub async fn label_framed_under_subject<A: App>(
    app: impl FnOnce(SchemaRegistry) -> A,
    suffix: &str,
) -> Outcome {
    use prost::Message as _;
    let parcel = parcel("CR-1002", "4 Quay Street", 2_500);
    let (landed, labels) = label_run(app, suffix, parcel, true, HandlerOutcome::ack()).await?;
    assert_eq!(landed.len(), 1);
    let bytes = value(&landed[0])?;
    let (id, datum) = parse_envelope(&bytes).ok_or("the label is not framed")?;
    assert_eq!(id, labels);
    assert_eq!(&datum[..2], &[2, 2], "Label is message [1] of the file");
    assert_eq!(
        LabelWire::decode(&datum[2..])?,
        LabelWire {
            tracking: "CR-1002".into(),
            address: "4 Quay Street".into(),
            service: "heavy".into(),
        }
    );
    Ok(())
}

/// `guide/protobuf`: with no schema under the label subject the policy refuses the label, the
/// handler's parcel settles as a retry, and nothing reaches the label topic.
#[cfg(feature = "protobuf")]
pub async fn label_without_subject_unpublished<A: App>(
    app: impl FnOnce(SchemaRegistry) -> A,
    suffix: &str,
) -> Outcome {
    let parcel = parcel("CR-1003", "9 Mill Lane", 300);
    let (landed, _) = label_run(app, suffix, parcel, false, HandlerOutcome::retry()).await?;
    assert!(landed.is_empty(), "an unframed label must not go out");
    Ok(())
}

// --- batch B ---

/// How long a live test waits for the service to react.
const WITHIN: Duration = Duration::from_secs(30);

/// A value built from JSON, for the checks that only know their example's types generically.
fn shaped<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> Outcome<T> {
    Ok(serde_json::from_value(value)?)
}

/// Frames `value` the way a producer with its own registry codec would: the subject's latest
/// schema, its id in the envelope.
#[cfg(feature = "avro")]
async fn framed_avro<T>(registry: &SchemaRegistry, subject: &str, value: &T) -> Outcome<Vec<u8>>
where
    T: serde::Serialize + ruststream_kafka::avro::AvroSchema,
{
    use ruststream_kafka::SchemaPrefetch;
    use ruststream_kafka::avro::AvroCodec;

    registry.warm(subject).await?;
    let producer = SchemaPrefetch::new(registry.clone());
    let codec = AvroCodec::registry(&producer).register::<T>(subject.to_owned());
    Ok(codec.encode(value)?.to_vec())
}

/// Reads a framed Avro answer with the registry's schema for its id, checking that id.
#[cfg(feature = "avro")]
async fn read_framed_avro<T>(
    registry: &SchemaRegistry,
    bytes: &[u8],
    expected_id: u32,
) -> Outcome<T>
where
    T: serde::de::DeserializeOwned + ruststream_kafka::avro::AvroSchema,
{
    use ruststream_kafka::SchemaPrefetch;
    use ruststream_kafka::avro::AvroCodec;

    let (id, _) = parse_envelope(bytes).ok_or("the answer is not framed")?;
    assert_eq!(
        id, expected_id,
        "the answer is framed under its subject's schema"
    );
    registry.schema_by_id(id).await?;
    let reader = AvroCodec::registry(&SchemaPrefetch::new(registry.clone()));
    Ok(reader.decode::<T>(bytes)?)
}

/// `kafka_registry_missing`: the oven-slot subject was deleted before startup; connect puts
/// the app's schema back (`MissingSubject::AutoRegister`) and the first slot is framed under it.
#[cfg(feature = "avro")]
pub async fn deleted_subject_registered_again<In, Out, A>(
    app: impl FnOnce(SchemaRegistry) -> A,
    suffix: &str,
) -> Outcome
where
    A: App,
    In: serde::Serialize + serde::de::DeserializeOwned + ruststream_kafka::avro::AvroSchema,
    Out: serde::de::DeserializeOwned
        + ruststream_kafka::avro::AvroSchema
        + PartialEq
        + std::fmt::Debug,
{
    let order: In = shaped(serde_json::json!({"loaves": 40, "bakery": "canal"}))?;
    let slot: Out = shaped(serde_json::json!({"loaves": 40, "oven": 2}))?;
    let (lanes, double) = lanes("bake-orders", "oven-slots", suffix).await?;
    let registry = SchemaRegistry::new(double.url());
    let orders = format!("{}-value", lanes.requests);
    let slots = format!("{}-value", lanes.answers);
    registry.register_avro::<In>(&orders).await?;
    registry.register_avro::<Out>(&slots).await?;
    // An operator's cleanup removed the subject while the service was down.
    double.delete_subject(&slots);
    assert!(
        SchemaRegistry::new(double.url())
            .warm(&slots)
            .await
            .is_err()
    );

    let framed = framed_avro(&registry, &orders, &order).await?;
    let landed = exchange(app(registry.clone()), &lanes, vec![framed]).await?;
    let restored = SchemaRegistry::new(double.url()).warm(&slots).await?;
    assert_eq!(restored.schema_type(), ruststream_kafka::SchemaType::Avro);
    let answer: Out = read_framed_avro(&registry, &value(&landed[0])?, restored.id()).await?;
    assert_eq!(answer, slot);
    Ok(())
}

/// `kafka_registry_prefetch`: the due-notice subject its owner registered is in the app's
/// cache as soon as the service runs, before anything is published.
#[cfg(feature = "avro")]
pub async fn connect_resolves_the_subject<Out, A>(
    app: impl FnOnce(SchemaRegistry) -> A,
    suffix: &str,
) -> Outcome
where
    A: App,
    Out: ruststream_kafka::avro::AvroSchema,
{
    let (lanes, double) = lanes("loans", "due-notices", suffix).await?;
    let notices = format!("{}-value", lanes.answers);
    let owner = SchemaRegistry::new(double.url());
    let id = owner.register_avro::<Out>(&notices).await?;
    let registry = SchemaRegistry::new(double.url());
    assert!(registry.cached_subject(&notices).is_none());
    let tb = TestApp::start_live_within(app(registry.clone()), WITHIN).await?;
    let resolved = registry
        .cached_subject(&notices)
        .ok_or("connect did not resolve the due-notice subject")?;
    assert_eq!(resolved.id(), id);
    tb.shutdown().await?;
    Ok(())
}

/// `kafka_registry_register`: startup registers the watering-plan subject the service owns
/// and warms the soil-sample subject its producer owns, registering nothing there.
pub async fn startup_registers_and_warms<A: App>(
    app: impl FnOnce(SchemaRegistry) -> A,
    suffix: &str,
) -> Outcome {
    let (lanes, double) = lanes("soil-samples", "watering-plans", suffix).await?;
    let samples = format!("{}-value", lanes.requests);
    let plans = format!("{}-value", lanes.answers);
    let produced = double.register(
        &samples,
        "JSON",
        r#"{"type":"object","properties":{"bed":{"type":"integer"},"moisture":{"type":"integer"}}}"#,
    );
    let registry = SchemaRegistry::new(double.url());
    let tb = TestApp::start_live_within(app(registry.clone()), WITHIN).await?;
    let registered = registry
        .cached_subject(&plans)
        .ok_or("startup did not register the watering-plan subject")?;
    assert_eq!(registered.schema_type(), ruststream_kafka::SchemaType::Json);
    assert!(registered.definition().contains("litres"));
    let warmed = registry
        .cached_subject(&samples)
        .ok_or("startup did not warm the soil-sample subject")?;
    assert_eq!(warmed.id(), produced);
    assert_eq!(
        double.count("POST", &format!("/subjects/{samples}/versions")),
        0,
        "warming registers nothing"
    );
    tb.shutdown().await?;
    Ok(())
}

/// `kafka_third_party_registry`: a boarding pass framed in Avro is read and answered by
/// `schema_registry_converter` inside the handler; the byte lanes only carry its buffers.
#[cfg(feature = "avro")]
pub async fn converter_bytes_carried<In, Out, A>(
    app: impl FnOnce(String) -> A,
    suffix: &str,
) -> Outcome
where
    A: App,
    In: serde::Serialize
        + serde::de::DeserializeOwned
        + ruststream_kafka::avro::AvroSchema
        + Send
        + Sync
        + 'static,
    Out: serde::de::DeserializeOwned
        + ruststream_kafka::avro::AvroSchema
        + PartialEq
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let boarding: In = shaped(serde_json::json!({"pass": 5150, "deck": "car"}))?;
    let check: Out = shaped(serde_json::json!({"pass": 5150, "cleared": true}))?;
    let (lanes, double) = lanes("boardings", "boarding-checks", suffix).await?;
    let registry = SchemaRegistry::new(double.url());
    let boardings = registry
        .register_avro::<In>(&format!("{}-value", lanes.requests))
        .await?;
    let checks = registry
        .register_avro::<Out>(&format!("{}-value", lanes.answers))
        .await?;
    // The producer frames a bare datum by hand: envelope, id, Avro body.
    let mut datum = ruststream::BytesMut::new();
    ruststream_kafka::avro::encode(&boarding, &mut datum)?;
    let framed = encode_envelope(boardings, &datum);
    let landed = exchange(app(double.url()), &lanes, vec![framed]).await?;
    let bytes = value(&landed[0])?;
    let (id, datum) = parse_envelope(&bytes).ok_or("the check is not framed")?;
    assert_eq!(id, checks);
    assert_eq!(ruststream_kafka::avro::decode::<Out>(datum)?, check);
    Ok(())
}

/// A tour booking as the booking office writes it: its own model of the `tour-bookings`
/// subject, which it owns.
#[cfg(feature = "avro")]
#[derive(serde::Serialize, apache_avro::AvroSchema)]
#[serde(rename = "TourBooking")]
struct BookedTour {
    tour: i64,
    visitors: i32,
}

/// `kafka_avro`: an Avro tour booking reaches a JSON handler through the transcoding edge, and
/// the `SchemaFrame` layer writes its pass as Avro under the pass subject.
#[cfg(feature = "avro")]
pub async fn avro_through_the_middleware<Out, A>(
    app: impl FnOnce(SchemaRegistry) -> A,
    suffix: &str,
) -> Outcome
where
    A: App,
    Out: serde::de::DeserializeOwned
        + ruststream_kafka::avro::AvroSchema
        + PartialEq
        + std::fmt::Debug,
{
    let booking = BookedTour {
        tour: 31,
        visitors: 6,
    };
    let pass: Out = shaped(serde_json::json!({"tour": 31, "visitors": 6, "gate": "east"}))?;
    let (lanes, double) = lanes("tour-bookings", "tour-passes", suffix).await?;
    let registry = SchemaRegistry::new(double.url());
    let bookings = format!("{}-value", lanes.requests);
    registry.register_avro::<BookedTour>(&bookings).await?;
    let framed = framed_avro(&registry, &bookings, &booking).await?;
    let landed = exchange(app(registry.clone()), &lanes, vec![framed]).await?;
    let passes = registry.warm(&format!("{}-value", lanes.answers)).await?;
    assert_eq!(passes.schema_type(), ruststream_kafka::SchemaType::Avro);
    let answer: Out = read_framed_avro(&registry, &value(&landed[0])?, passes.id()).await?;
    assert_eq!(answer, pass);
    Ok(())
}

/// A meter reading as the meters still write it, before the tariff field existed.
#[cfg(feature = "avro")]
#[derive(serde::Serialize, apache_avro::AvroSchema)]
#[serde(rename = "MeterReading")]
struct FirstMeterReading {
    meter: String,
    kwh: f64,
}

/// `kafka_avro_resolve`: a meter reading written before the tariff field existed is read onto
/// the service's model, the tariff taken from the model's default; the bill shows it.
#[cfg(feature = "avro")]
pub async fn reader_default_fills_the_gap<Out, A>(app: A, suffix: &str) -> Outcome
where
    A: App,
    Out: serde::de::DeserializeOwned
        + ruststream_kafka::avro::AvroSchema
        + PartialEq
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let bill: Out = shaped(serde_json::json!({"meter": "M-88", "tariff": "standard"}))?;
    let (lanes, _double) = lanes("meter-readings", "meter-bills", suffix).await?;
    let reading = FirstMeterReading {
        meter: "M-88".to_owned(),
        kwh: 412.5,
    };
    let mut datum = ruststream::BytesMut::new();
    ruststream_kafka::avro::encode(&reading, &mut datum)?;
    let landed = exchange(app, &lanes, vec![datum.to_vec()]).await?;
    assert_eq!(
        ruststream_kafka::avro::decode::<Out>(&value(&landed[0])?)?,
        bill
    );
    Ok(())
}

/// A visit as the front desk writes it today.
#[cfg(feature = "avro")]
#[derive(serde::Serialize, apache_avro::AvroSchema)]
#[serde(rename = "Visit")]
struct DeskVisit {
    chart: i64,
    fee_cents: i64,
    species: String,
}

/// A visit as a desk still on the first version of the schema writes it: no species.
#[cfg(feature = "avro")]
#[derive(serde::Serialize, apache_avro::AvroSchema)]
#[serde(rename = "Visit")]
struct FirstDeskVisit {
    chart: i64,
    fee_cents: i64,
}

/// A receipt model whose fee became text without the registry being asked.
#[cfg(feature = "avro")]
#[derive(serde::Serialize, apache_avro::AvroSchema)]
#[serde(rename = "VisitReceipt")]
struct TextFeeReceipt {
    chart: i64,
    fee_cents: String,
    species: String,
}

/// A complaint as the owners' portal files it; the model is closed (no other properties).
#[derive(serde::Serialize, ruststream_kafka::schema_registry::JsonSchema)]
#[serde(rename = "Complaint", deny_unknown_fields)]
struct FiledComplaint {
    chart: i64,
    reason: String,
}

/// The portal's next idea: every complaint must carry a severity.
#[derive(serde::Serialize, ruststream_kafka::schema_registry::JsonSchema)]
#[serde(rename = "Complaint", deny_unknown_fields)]
struct SeverityComplaint {
    chart: i64,
    reason: String,
    severity: u8,
}

/// What the portal settles on instead: the vet's name, when the owner knows it.
#[derive(serde::Serialize, ruststream_kafka::schema_registry::JsonSchema)]
#[serde(rename = "Complaint", deny_unknown_fields)]
struct NamedVetComplaint {
    chart: i64,
    reason: String,
    vet: Option<String>,
}

/// The clinic's registry subjects and topics for one run of a guide test.
#[cfg(feature = "avro")]
struct Clinic {
    lanes: Lanes,
    double: RegistryDouble,
    registry: SchemaRegistry,
    visits: String,
    receipts: String,
}

#[cfg(feature = "avro")]
async fn clinic(suffix: &str) -> Outcome<Clinic> {
    let (lanes, double) = lanes("visits", "visit-receipts", suffix).await?;
    let registry = SchemaRegistry::new(double.url());
    let visits = format!("{}-value", lanes.requests);
    let receipts = format!("{}-value", lanes.answers);
    Ok(Clinic {
        lanes,
        double,
        registry,
        visits,
        receipts,
    })
}

/// Publishes one framed visit (written as `W`) and answers the receipt it got.
#[cfg(feature = "avro")]
async fn receipt_for<W, R, A>(clinic: &Clinic, app: A, visit: &W) -> Outcome<R>
where
    A: App,
    W: serde::Serialize + ruststream_kafka::avro::AvroSchema,
    R: serde::de::DeserializeOwned + ruststream_kafka::avro::AvroSchema,
{
    let receipts = clinic.registry.register_avro::<R>(&clinic.receipts).await?;
    clinic.registry.register_avro::<W>(&clinic.visits).await?;
    let framed = framed_avro(&clinic.registry, &clinic.visits, visit).await?;
    let landed = exchange(app, &clinic.lanes, vec![framed]).await?;
    read_framed_avro(&clinic.registry, &value(&landed[0])?, receipts).await
}

/// `guide/schema_registry`: a visit framed by today's desk gets a receipt framed under the
/// receipt subject.
#[cfg(feature = "avro")]
pub async fn guide_receipt_under_its_subject<R, A>(
    service: impl FnOnce(SchemaRegistry) -> A,
    suffix: &str,
) -> Outcome
where
    A: App,
    R: serde::de::DeserializeOwned
        + ruststream_kafka::avro::AvroSchema
        + PartialEq
        + std::fmt::Debug,
{
    let _turn = one_at_a_time().await;
    let clinic = clinic(suffix).await?;
    let visit = DeskVisit {
        chart: 7,
        fee_cents: 4500,
        species: "dog".to_owned(),
    };
    let app = service(clinic.registry.clone());
    let receipt: R = receipt_for(&clinic, app, &visit).await?;
    let expected = shaped(serde_json::json!({"chart": 7, "fee_cents": 4500, "species": "dog"}))?;
    assert_eq!(receipt, expected);
    Ok(())
}

/// `guide/schema_registry`: a visit from a desk on the first schema version has no species;
/// the service's model fills in its default, and the receipt shows it.
#[cfg(feature = "avro")]
pub async fn guide_older_producer_read_with_default<R, A>(
    service: impl FnOnce(SchemaRegistry) -> A,
    suffix: &str,
) -> Outcome
where
    A: App,
    R: serde::de::DeserializeOwned
        + ruststream_kafka::avro::AvroSchema
        + PartialEq
        + std::fmt::Debug,
{
    let _turn = one_at_a_time().await;
    let clinic = clinic(suffix).await?;
    let visit = FirstDeskVisit {
        chart: 8,
        fee_cents: 1900,
    };
    let app = service(clinic.registry.clone());
    let receipt: R = receipt_for(&clinic, app, &visit).await?;
    let expected =
        shaped(serde_json::json!({"chart": 8, "fee_cents": 1900, "species": "unknown"}))?;
    assert_eq!(receipt, expected);
    Ok(())
}

/// `guide/schema_registry`: with no receipt subject in the registry the service does not
/// start, and the error names the subject.
#[cfg(feature = "avro")]
pub async fn guide_missing_subject_stops_the_service<A: App>(
    service: impl FnOnce(SchemaRegistry) -> A,
    suffix: &str,
) -> Outcome {
    let _turn = one_at_a_time().await;
    let clinic = clinic(suffix).await?;
    let Err(refused) = TestApp::start_live_within(service(clinic.registry.clone()), WITHIN).await
    else {
        return Err("the service started without its receipt subject".into());
    };
    let text = refused.to_string();
    assert!(text.contains(&clinic.receipts), "names the subject: {text}");
    Ok(())
}

/// `guide/schema_registry`: a receipt subject holding a shape the service's model is not
/// compatible with stops the service, with the registry's reason in the error.
#[cfg(feature = "avro")]
pub async fn guide_incompatible_model_stops_the_service<A: App>(
    service: impl FnOnce(SchemaRegistry) -> A,
    suffix: &str,
) -> Outcome {
    let _turn = one_at_a_time().await;
    let clinic = clinic(suffix).await?;
    clinic
        .registry
        .register_avro::<TextFeeReceipt>(&clinic.receipts)
        .await?;
    let Err(refused) = TestApp::start_live_within(service(clinic.registry.clone()), WITHIN).await
    else {
        return Err("the service started with a receipt model its subject refuses".into());
    };
    let text = refused.to_string();
    assert!(text.contains("fee_cents"), "the registry's reason: {text}");
    Ok(())
}

/// `guide/schema_registry`: a complaint framed under its JSON Schema subject is read by the
/// service; then the portal's change that makes a new property required is refused by the
/// registry (closed model, no default), while an optional addition is accepted.
#[cfg(feature = "avro")]
pub async fn guide_json_schema_dispute<R, A>(
    service: impl FnOnce(SchemaRegistry) -> A,
    suffix: &str,
) -> Outcome
where
    A: App,
    R: ruststream_kafka::avro::AvroSchema,
{
    let _turn = one_at_a_time().await;
    let clinic = clinic(suffix).await?;
    let complaints = format!("complaints.{suffix}");
    live::ensure_topic(&complaints, 1).await?;
    let subject = format!("{complaints}-value");
    clinic.registry.register_avro::<R>(&clinic.receipts).await?;
    let filed = clinic
        .registry
        .register_json::<FiledComplaint>(&subject)
        .await?;
    let complaint = FiledComplaint {
        chart: 7,
        reason: "waited two hours".to_owned(),
    };
    let framed = encode_envelope(filed, &serde_json::to_vec(&complaint)?);

    let tb = TestApp::start_live_within(service(clinic.registry.clone()), WITHIN).await?;
    let kafka = tb.broker::<KafkaBroker>();
    kafka
        .message(&Raw(framed))
        .to(&complaints)
        .publish()
        .await?;
    kafka
        .subscriber(&complaints)
        .assert_called_once()
        .settled(HandlerOutcome::ack());
    tb.shutdown().await?;

    let refused = clinic
        .registry
        .register_json::<SeverityComplaint>(&subject)
        .await
        .err()
        .ok_or("the registry took a required property the filed complaints lack")?
        .to_string();
    assert!(
        refused.contains("REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL")
            && refused.contains("severity"),
        "the registry's reason: {refused}"
    );
    let named = clinic
        .registry
        .register_json::<NamedVetComplaint>(&subject)
        .await?;
    assert_ne!(named, filed, "an optional property is a new version");
    Ok(())
}

/// `guide/schema_registry`: the archive reads a bare visit with the schema it pins, no
/// registry involved.
#[cfg(feature = "avro")]
pub async fn guide_archive_reads_with_the_pinned_schema<V, A>(archive: A, suffix: &str) -> Outcome
where
    A: App,
    V: serde::de::DeserializeOwned
        + ruststream_kafka::avro::AvroSchema
        + PartialEq
        + std::fmt::Debug,
{
    use ruststream_kafka::avro::AvroCodec;

    let _turn = one_at_a_time().await;
    let topic = format!("visits-archive.{suffix}");
    live::ensure_topic(&topic, 1).await?;
    let visit = DeskVisit {
        chart: 3,
        fee_cents: 800,
        species: "rabbit".to_owned(),
    };
    let mut datum = ruststream::BytesMut::new();
    ruststream_kafka::avro::encode(&visit, &mut datum)?;

    let tb = TestApp::start_live_within(archive, WITHIN).await?;
    let kafka = tb.broker::<KafkaBroker>();
    kafka
        .message(&Raw(datum.to_vec()))
        .to(&topic)
        .publish()
        .await?;
    let pinned = AvroCodec::local(V::get_schema())?;
    let expected: V =
        shaped(serde_json::json!({"chart": 3, "fee_cents": 800, "species": "rabbit"}))?;
    kafka
        .subscriber(&topic)
        .assert_called_once()
        .with_codec(&pinned, &expected)
        .settled(HandlerOutcome::ack());
    tb.shutdown().await?;
    Ok(())
}

// --- end of batch B ---
