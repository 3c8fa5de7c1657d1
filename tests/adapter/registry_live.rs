//! Framed records through real Kafka (reference 4.K): Avro from the registry codec, Protobuf
//! from the framing policy, JSON from `SchemaFramed`, read back by registry-aware
//! subscriptions (the prefetch edge for codecs, the transcoding edge for JSON) and by an
//! independent Confluent decoder; connect-time subject resolution and its policies.

use crate::live;
use crate::registry;

use apache_avro::AvroSchema;
use registry::RegistryDouble;
use ruststream::codec::{Codec, JsonCodec};
use ruststream::{IncomingMessage, OutgoingMessage, PublishPolicy, Publisher, Subscriber};
use ruststream_kafka::avro::AvroCodec;
use ruststream_kafka::protobuf::decode_confluent;
use ruststream_kafka::schema_registry::{JsonSchema, SchemaFramed, parse_envelope};
use ruststream_kafka::{
    KafkaError, KafkaPublish, MissingSubject, SchemaPrefetch, SchemaRegistry, SchemaType,
};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, AvroSchema, JsonSchema, Debug, Clone, PartialEq)]
struct Shipment {
    parcel: String,
    grams: i64,
}

#[derive(Clone, PartialEq, prost::Message)]
struct Label {
    #[prost(string, tag = "1")]
    address: String,
    #[prost(int32, tag = "2")]
    zone: i32,
}

const LABEL_PROTO: &str = r#"
syntax = "proto3";
package post;
message Sticker { string text = 1; }
message Label { string address = 1; int32 zone = 2; }
"#;

/// An earlier shape with a field `Shipment` dropped: under FORWARD, readers of it cannot
/// read `Shipment` data.
#[derive(Serialize, AvroSchema)]
#[serde(rename = "Shipment")]
#[allow(dead_code)]
struct Older {
    parcel: String,
    grams: i64,
    insured: bool,
}

fn shipment() -> Shipment {
    Shipment {
        parcel: "p-81".into(),
        grams: 1250,
    }
}

fn independent_client_tls() {
    let _ = rustls_graviola::default_provider().install_default();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn avro_framed_by_the_codec_is_read_back_through_the_prefetch_edge() {
    live::logs();
    let double = RegistryDouble::start().await;
    let topic = live::topic("sr-avro", 1).await;
    let subject = format!("{topic}-value");
    let registry = SchemaRegistry::new(double.url());
    let prefetch =
        SchemaPrefetch::new(registry.clone()).on_missing_subject(MissingSubject::AutoRegister);
    let codec = AvroCodec::registry(&prefetch).register::<Shipment>(subject.clone());
    // Connect registers the missing subject, so the codec can frame right away.
    let connected = live::connect(live::broker().schema_prefetch(prefetch.clone())).await;
    let id = registry
        .cached_subject(&subject)
        .expect("resolved at connect")
        .id();
    assert_eq!(
        double.count("POST", &format!("/subjects/{subject}/versions")),
        1
    );

    let bytes = codec.encode(&shipment()).expect("encode");
    assert_eq!(parse_envelope(&bytes).map(|(i, _)| i), Some(id));
    live::send(&live::plain_publisher(&connected), &topic, &bytes).await;

    // A second app that never published: its subscription resolves the writer schema.
    let reader_registry = SchemaRegistry::new(double.url());
    let reader_prefetch = SchemaPrefetch::new(reader_registry.clone());
    let reader_codec = AvroCodec::registry(&reader_prefetch);
    let reader = live::connect(live::broker().schema_prefetch(reader_prefetch)).await;
    let mut sub = live::open(&reader, live::tracked(&topic, &live::unique("g"))).await;
    let mut stream = sub.stream();
    let message = live::next(&mut stream).await;
    assert_eq!(
        message.payload(),
        &bytes[..],
        "the prefetch edge leaves the frame"
    );
    assert!(reader_registry.cached_schema(id).is_some());
    assert_eq!(
        reader_codec.decode::<Shipment>(message.payload()).unwrap(),
        shipment()
    );
    message.ack().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn framed_avro_and_json_become_json_at_the_transcoding_edge() {
    use apache_avro::types::Value;
    use schema_registry_converter::async_impl::avro::AvroEncoder;
    use schema_registry_converter::async_impl::schema_registry::SrSettings;
    use schema_registry_converter::schema_registry_common::SubjectNameStrategy;

    live::logs();
    independent_client_tls();
    let double = RegistryDouble::start().await;
    let topic = live::topic("sr-transcode", 1).await;
    double.register(
        &format!("{topic}-value"),
        "AVRO",
        &serde_json::to_string(&Shipment::get_schema()).unwrap(),
    );
    // An independent producer frames Avro.
    let independent = AvroEncoder::new(SrSettings::new(double.url()))
        .encode(
            vec![
                ("parcel", Value::String("p-9".into())),
                ("grams", Value::Long(70)),
            ],
            SubjectNameStrategy::TopicNameStrategy(topic.clone(), false),
        )
        .await
        .unwrap();
    // This crate frames JSON under a JSON Schema subject.
    let registry = SchemaRegistry::new(double.url());
    let prefetch = SchemaPrefetch::new(registry.clone());
    let json_codec = SchemaFramed::new(&prefetch, JsonCodec).register::<Shipment>("shipments-json");
    registry
        .register_json::<Shipment>("shipments-json")
        .await
        .unwrap();
    let framed_json = json_codec.encode(&shipment()).unwrap();

    let connected = live::connect(live::broker().schema_registry(registry.clone())).await;
    let publisher = live::plain_publisher(&connected);
    live::send(&publisher, &topic, &independent).await;
    live::send(&publisher, &topic, &framed_json).await;
    live::send(&publisher, &topic, b"{\"parcel\":\"bare\",\"grams\":1}").await;
    live::send(
        &publisher,
        &topic,
        &ruststream_kafka::schema_registry::encode_envelope(4040, b"?"),
    )
    .await;

    let mut sub = live::open(&connected, live::tracked(&topic, &live::unique("g"))).await;
    let mut stream = sub.stream();
    let got: Vec<serde_json::Value> = live::payloads(&mut stream, 3, true)
        .await
        .iter()
        .map(|p| serde_json::from_slice(p).expect("JSON"))
        .collect();
    assert_eq!(got[0], serde_json::json!({"parcel": "p-9", "grams": 70}));
    assert_eq!(got[1], serde_json::to_value(shipment()).unwrap());
    assert_eq!(got[2], serde_json::json!({"parcel": "bare", "grams": 1}));
    // An id the registry does not know passes through untouched.
    let unknown = live::next(&mut stream).await;
    assert_eq!(
        parse_envelope(unknown.payload()).map(|(id, _)| id),
        Some(4040)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protobuf_framed_by_the_policy_reads_back_everywhere() {
    use schema_registry_converter::async_impl::proto_decoder::ProtoDecoder;
    use schema_registry_converter::async_impl::schema_registry::SrSettings;

    live::logs();
    independent_client_tls();
    let double = RegistryDouble::start().await;
    let topic = live::topic("sr-proto", 1).await;
    let id = double.register(&format!("{topic}-value"), "PROTOBUF", LABEL_PROTO);
    let registry = SchemaRegistry::new(double.url());
    let connected = live::connect(live::broker().schema_registry(registry.clone())).await;
    let framed = KafkaPublish::framed(&registry)
        .message(topic.clone(), "post.Label")
        .pair(&connected)
        .await
        .expect("pair");
    let label = Label {
        address: "1 Quay St".into(),
        zone: 4,
    };
    framed
        .publish(
            OutgoingMessage::new(&topic, &prost::Message::encode_to_vec(&label)),
            None,
        )
        .await
        .expect("framed publish");

    // On the wire: envelope, path [1] (Label is the second message), the message.
    let records = live::read_partition(
        &topic,
        0,
        ruststream_kafka::client::IsolationLevel::ReadCommitted,
    )
    .await;
    let wire = records[0].value.clone().unwrap();
    let (wire_id, datum) = parse_envelope(&wire).unwrap();
    assert_eq!(wire_id, id);
    assert_eq!(&datum[..2], &[2, 2]);
    assert_eq!(decode_confluent::<Label>(&wire).unwrap(), label);
    assert_eq!(
        decode_confluent::<Label>(&prost::Message::encode_to_vec(&label)).unwrap(),
        label,
        "a bare message reads too"
    );
    let independent = ProtoDecoder::new(SrSettings::new(double.url()))
        .decode(Some(&wire))
        .await
        .expect("independent decode");
    let text = format!("{independent:?}");
    assert!(text.contains("1 Quay St"), "{text}");

    // The transcoding edge turns it into JSON with proto field names.
    let mut sub = live::open(&connected, live::tracked(&topic, &live::unique("g"))).await;
    let mut stream = sub.stream();
    let message = live::next(&mut stream).await;
    let json: serde_json::Value = serde_json::from_slice(message.payload()).unwrap();
    assert_eq!(json, serde_json::json!({"address": "1 Quay St", "zone": 4}));

    drop(stream);
    let err = framed
        .publish(
            OutgoingMessage::new("sr-no-subject-topic", b"\x08\x01"),
            None,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, KafkaError::SchemaRegistry(_)), "{err}");
    registry
        .register("json-only-value", SchemaType::Json, "{\"type\":\"object\"}")
        .await
        .unwrap();
    let err = framed
        .publish(OutgoingMessage::new("json-only", b"\x08\x01"), None)
        .await
        .unwrap_err();
    assert!(matches!(err, KafkaError::InvalidOptions(_)), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_refuses_missing_subjects_and_incompatible_models() {
    live::logs();
    let double = RegistryDouble::start().await;
    let registry = SchemaRegistry::new(double.url());
    let refusing = SchemaPrefetch::new(registry.clone());
    let _codec = AvroCodec::registry(&refusing).register::<Shipment>("gone-value");
    let err = live::broker()
        .schema_prefetch(refusing)
        .connect_for_test()
        .await
        .unwrap_err();
    assert!(err.to_string().contains("gone-value"), "{err}");

    // The registry holds a shape this app's model cannot be a successor of.
    double.set_level(Some("strict-value"), "FORWARD");
    double.register(
        "strict-value",
        "AVRO",
        &serde_json::to_string(&Older::get_schema()).unwrap(),
    );
    let checking = SchemaPrefetch::new(registry.clone());
    let _codec = AvroCodec::registry(&checking).register::<Shipment>("strict-value");
    let err = live::broker()
        .schema_prefetch(checking)
        .connect_for_test()
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("insured"),
        "the registry's reason: {err}"
    );

    let unchecked = SchemaPrefetch::new(registry.clone()).check_compatibility(false);
    let _codec = AvroCodec::registry(&unchecked).register::<Shipment>("strict-value");
    live::broker()
        .schema_prefetch(unchecked)
        .connect_for_test()
        .await
        .expect("no check, no refusal");

    let unframed =
        SchemaPrefetch::new(registry).on_missing_subject(MissingSubject::PublishUnframed);
    let codec = AvroCodec::registry(&unframed).register::<Shipment>("never-value");
    live::broker()
        .schema_prefetch(unframed)
        .connect_for_test()
        .await
        .expect("publishing unframed is allowed");
    let bytes = codec.encode(&shipment()).unwrap();
    assert!(parse_envelope(&bytes).is_none() || bytes[0] != 0);
    assert_eq!(
        ruststream_kafka::avro::decode::<Shipment>(&bytes).unwrap(),
        shipment()
    );
}

/// `connect` without the test helper's panic.
trait ConnectForTest {
    async fn connect_for_test(self) -> Result<ruststream_kafka::ConnectedKafkaBroker, KafkaError>;
}

impl ConnectForTest for ruststream_kafka::KafkaBroker {
    async fn connect_for_test(self) -> Result<ruststream_kafka::ConnectedKafkaBroker, KafkaError> {
        ruststream::Broker::connect(self).await
    }
}
