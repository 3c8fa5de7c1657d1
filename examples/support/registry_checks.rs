//! What the registry examples and their manual twins check, written once: each check takes
//! the app factory and the topic suffix its example uses, and runs live against the broker of
//! `support/live.rs` and a registry double started in the test process.
#![allow(dead_code)]

use std::error::Error;
use std::time::Duration;

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

/// The guide's tests share its topics and consumer group: they take turns.
static GUIDE_TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

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
    let _turn = GUIDE_TURN.lock().await;
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
    let _turn = GUIDE_TURN.lock().await;
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
    let _turn = GUIDE_TURN.lock().await;
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
    let _turn = GUIDE_TURN.lock().await;
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
    let _turn = GUIDE_TURN.lock().await;
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

    let _turn = GUIDE_TURN.lock().await;
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
