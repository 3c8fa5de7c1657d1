//! The registry client against a registry double speaking the real HTTP API (reference 4.K):
//! caching per id and subject, the cache policies, request bounds and credentials, the
//! registry's error codes, compatibility, the custom client seam, and interop with an
//! independent Confluent implementation (`schema_registry_converter`) in both directions.

use crate::registry;

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use apache_avro::AvroSchema;
use apache_avro::types::Value;
use futures::future::BoxFuture;
use registry::RegistryDouble;
use ruststream::codec::Codec;
use ruststream_kafka::avro::AvroCodec;
use ruststream_kafka::schema_registry::{
    JsonSchema, SchemaFramed, encode_envelope, parse_envelope,
};
use ruststream_kafka::{
    KafkaError, RegisteredSchema, RegistryClient, SchemaCachePolicy, SchemaPrefetch,
    SchemaRegistry, SchemaType,
};
use schema_registry_converter::async_impl::avro::{AvroDecoder, AvroEncoder};
use schema_registry_converter::async_impl::schema_registry::SrSettings;
use schema_registry_converter::schema_registry_common::SubjectNameStrategy;
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, AvroSchema, JsonSchema, Debug, Clone, PartialEq)]
struct Booking {
    guest: String,
    nights: i32,
}

#[derive(Serialize, Deserialize, AvroSchema, Debug, Clone, PartialEq)]
#[serde(rename = "Booking")]
struct BookingV2 {
    guest: String,
    nights: i32,
    #[avro(default = "false")]
    breakfast: bool,
}

/// A successor under the same name that drops a field: not BACKWARD-compatible.
#[derive(Serialize, AvroSchema)]
#[serde(rename = "Booking")]
#[allow(dead_code)]
struct Renamed {
    visitor: String,
}

/// A successor adding a field with no default: not BACKWARD-compatible.
#[derive(Serialize, AvroSchema)]
#[serde(rename = "Booking")]
#[allow(dead_code)]
struct Needy {
    guest: String,
    nights: i32,
    breakfast: bool,
    room: String,
}

fn booking_schema() -> String {
    serde_json::to_string(&Booking::get_schema()).unwrap()
}

#[tokio::test]
async fn a_schema_is_fetched_once_per_id_and_shared_by_clones() {
    let double = RegistryDouble::start().await;
    let id = double.register("bookings-value", "AVRO", &booking_schema());
    let registry = SchemaRegistry::new(format!("{}/", double.url()));
    let clone = registry.clone();
    let first = registry.schema_by_id(id).await.unwrap();
    let again = clone.schema_by_id(id).await.unwrap();
    assert_eq!(first, again);
    assert_eq!(first.schema_type(), SchemaType::Avro);
    assert_eq!(double.count("GET", &format!("/schemas/ids/{id}")), 1);
    assert!(clone.cached_schema(id).is_some());
    assert!(
        clone.cached_subject("bookings-value").is_none(),
        "ids say nothing of subjects"
    );
}

#[tokio::test]
async fn ids_are_global_and_versions_count_per_subject() {
    let double = RegistryDouble::start().await;
    let registry = SchemaRegistry::new(double.url());
    let a = registry.register_avro::<Booking>("a-value").await.unwrap();
    let b = registry.register_avro::<Booking>("b-value").await.unwrap();
    assert_eq!(a, b, "the same schema has one id everywhere");
    let again = registry.register_avro::<Booking>("a-value").await.unwrap();
    assert_eq!(again, a, "registering again is idempotent");
    let v2 = registry
        .register_avro::<BookingV2>("a-value")
        .await
        .unwrap();
    assert_ne!(v2, a);
    assert_eq!(registry.cached_subject("a-value").unwrap().id(), v2);
    assert_eq!(double.count("GET", "/subjects/a-value/versions/latest"), 0);
    let latest = registry.warm("a-value").await.unwrap();
    assert_eq!(latest.id(), v2);
}

#[tokio::test]
async fn lookup_finds_an_existing_schema_and_names_a_missing_one() {
    let double = RegistryDouble::start().await;
    let registry = SchemaRegistry::new(double.url());
    let id = registry
        .register_json::<Booking>("stays-value")
        .await
        .unwrap();
    let definition = registry
        .cached_subject("stays-value")
        .unwrap()
        .definition()
        .to_owned();
    let looked = registry
        .lookup_id("stays-value", SchemaType::Json, definition.clone())
        .await
        .unwrap();
    assert_eq!(looked, id);
    let err = registry
        .lookup_id("stays-value", SchemaType::Json, "{\"type\":\"string\"}")
        .await
        .unwrap_err();
    assert!(matches!(err, KafkaError::InvalidOptions(_)), "{err}");
    let err = registry
        .lookup_id("nobody-value", SchemaType::Json, definition)
        .await
        .unwrap_err();
    assert!(matches!(err, KafkaError::InvalidOptions(_)), "{err}");
}

#[tokio::test]
async fn the_registry_error_codes_reach_the_caller() {
    let double = RegistryDouble::start().await;
    let registry = SchemaRegistry::new(double.url());
    let err = registry.schema_by_id(404).await.unwrap_err();
    assert!(matches!(err, KafkaError::SchemaRegistry(_)));
    assert!(err.to_string().contains("40403"), "{err}");
    let err = registry.warm("absent-value").await.unwrap_err();
    assert!(err.to_string().contains("absent-value"), "{err}");
    let err = registry
        .register("broken-value", SchemaType::Avro, "{\"type\":\"recrd\"}")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("42201"), "{err}");
    registry
        .register_avro::<Booking>("strict-value")
        .await
        .unwrap();
    let err = registry
        .register_avro::<Renamed>("strict-value")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("409"), "{err}");
}

#[tokio::test]
async fn compatibility_follows_the_subject_level() {
    let double = RegistryDouble::start().await;
    let registry = SchemaRegistry::new(double.url());
    let v2 = serde_json::to_string(&BookingV2::get_schema()).unwrap();
    assert_eq!(
        registry
            .is_compatible("new-value", SchemaType::Avro, v2.clone())
            .await
            .unwrap(),
        None,
        "a subject that does not exist has nothing to be compatible with"
    );
    registry
        .register_avro::<BookingV2>("rooms-value")
        .await
        .unwrap();
    // BACKWARD (the default): V1 readers lack nothing V2 data needs.
    assert_eq!(
        registry
            .is_compatible("rooms-value", SchemaType::Avro, booking_schema())
            .await
            .unwrap(),
        Some(true)
    );
    // FORWARD: V2 cannot read V1 data... it can (default). A field with no default cannot.
    let needy = serde_json::to_string(&Needy::get_schema()).unwrap();
    let err = registry
        .is_compatible("rooms-value", SchemaType::Avro, needy.clone())
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("room"),
        "the registry's reason: {err}"
    );
    double.set_level(Some("rooms-value"), "NONE");
    assert_eq!(
        registry
            .is_compatible("rooms-value", SchemaType::Avro, needy)
            .await
            .unwrap(),
        Some(true)
    );
}

/// A registry without the level-wide check (Karapace answers it with a bare 404) is asked at
/// `versions/latest`, once it is known from then on; that 404 is not "the subject is new",
/// which would let connect's compatibility check pass anything.
#[tokio::test]
async fn a_registry_without_the_level_wide_check_is_asked_at_latest() {
    let double = RegistryDouble::start().await;
    double.drop_level_wide_check();
    let registry = SchemaRegistry::new(double.url());
    let v2 = serde_json::to_string(&BookingV2::get_schema()).unwrap();
    let check = |text: String| registry.is_compatible("rooms-value", SchemaType::Avro, text);
    assert_eq!(check(v2).await.unwrap(), None, "no subject yet");
    registry
        .register_avro::<BookingV2>("rooms-value")
        .await
        .unwrap();
    assert_eq!(check(booking_schema()).await.unwrap(), Some(true));
    let needy = serde_json::to_string(&Needy::get_schema()).unwrap();
    check(needy).await.unwrap_err();
    let path = "/compatibility/subjects/rooms-value/versions";
    assert_eq!(double.count("POST", &format!("{path}?verbose=true")), 1);
    assert_eq!(
        double.count("POST", &format!("{path}/latest?verbose=true")),
        3
    );
}

#[tokio::test]
async fn a_slow_registry_times_out_naming_the_request() {
    let double = RegistryDouble::start().await;
    double.set_delay(Duration::from_millis(500));
    let registry = SchemaRegistry::new(double.url()).request_timeout(Duration::from_millis(50));
    let err = registry.schema_by_id(7).await.unwrap_err();
    match err {
        KafkaError::SchemaRegistryTimeout { request, timeout } => {
            assert_eq!(request, "/schemas/ids/7");
            assert_eq!(timeout, Duration::from_millis(50));
        }
        other => panic!("expected a timeout, got {other}"),
    }
}

#[tokio::test]
async fn credentials_ride_every_request_and_stay_out_of_debug() {
    let double = RegistryDouble::start().await;
    let id = double.register("c-value", "AVRO", &booking_schema());
    let basic = SchemaRegistry::new(double.url()).basic_auth("svc", "s3cret");
    assert!(!format!("{basic:?}").contains("s3cret"));
    basic.schema_by_id(id).await.unwrap();
    basic.warm("c-value").await.unwrap();
    let bearer = SchemaRegistry::new(double.url()).bearer_token("tok-1");
    bearer.warm("c-value").await.unwrap();
    let seen = double.seen();
    assert_eq!(seen.len(), 3);
    // "svc:s3cret" in base64.
    assert_eq!(
        seen[0].authorization.as_deref(),
        Some("Basic c3ZjOnMzY3JldA==")
    );
    assert_eq!(seen[1].authorization, seen[0].authorization);
    assert_eq!(seen[2].authorization.as_deref(), Some("Bearer tok-1"));
}

#[tokio::test]
async fn cache_policies_bound_what_is_kept() {
    let double = RegistryDouble::start().await;
    let ids: Vec<u32> = (0..3)
        .map(|i| {
            double.register(
                &format!("s{i}-value"),
                "JSON",
                &format!("{{\"title\":\"t{i}\"}}"),
            )
        })
        .collect();
    let disabled = SchemaRegistry::new(double.url()).cache_policy(SchemaCachePolicy::Disabled);
    disabled.schema_by_id(ids[0]).await.unwrap();
    disabled.schema_by_id(ids[0]).await.unwrap();
    assert_eq!(double.count("GET", &format!("/schemas/ids/{}", ids[0])), 2);

    let bounded = SchemaRegistry::new(double.url()).cache_policy(SchemaCachePolicy::Cached {
        capacity: NonZeroUsize::new(2).unwrap(),
        subject_ttl: Some(Duration::from_millis(100)),
    });
    for id in &ids {
        bounded.schema_by_id(*id).await.unwrap();
    }
    assert!(
        bounded.cached_schema(ids[0]).is_none(),
        "the oldest id went first"
    );
    assert!(bounded.cached_schema(ids[2]).is_some());
    bounded.warm("s2-value").await.unwrap();
    assert!(bounded.cached_subject("s2-value").is_some());
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(
        bounded.cached_subject("s2-value").is_none(),
        "subjects expire"
    );
}

#[test]
#[should_panic(expected = "with_client")]
fn settings_of_the_shipped_client_refuse_a_custom_one() {
    let _ = SchemaRegistry::with_client(Arc::new(Catalog::default())).basic_auth("a", "b");
}

/// A registry that is a fixed table, answering without HTTP.
#[derive(Default)]
struct Catalog {
    asked: AtomicUsize,
}

impl RegistryClient for Catalog {
    fn schema_by_id(&self, id: u32) -> BoxFuture<'_, Result<Arc<RegisteredSchema>, KafkaError>> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            Ok(Arc::new(RegisteredSchema::new(
                id,
                SchemaType::Avro,
                booking_schema(),
            )))
        })
    }

    fn latest(
        &self,
        subject: &str,
    ) -> BoxFuture<'_, Result<Option<Arc<RegisteredSchema>>, KafkaError>> {
        let known = subject == "bookings-value";
        Box::pin(async move {
            Ok(known.then(|| {
                Arc::new(RegisteredSchema::new(
                    31,
                    SchemaType::Avro,
                    booking_schema(),
                ))
            }))
        })
    }

    fn register(
        &self,
        _: &str,
        _: SchemaType,
        _: String,
    ) -> BoxFuture<'_, Result<u32, KafkaError>> {
        Box::pin(async { Ok(31) })
    }

    fn lookup_id(
        &self,
        _: &str,
        _: SchemaType,
        _: String,
    ) -> BoxFuture<'_, Result<u32, KafkaError>> {
        Box::pin(async { Ok(31) })
    }
}

#[tokio::test]
async fn a_custom_client_answers_behind_the_same_cache() {
    let catalog = Arc::new(Catalog::default());
    let registry = SchemaRegistry::with_client(catalog.clone());
    registry.schema_by_id(31).await.unwrap();
    registry.schema_by_id(31).await.unwrap();
    assert_eq!(catalog.asked.load(Ordering::SeqCst), 1);
    assert_eq!(
        registry
            .is_compatible("bookings-value", SchemaType::Avro, "{}")
            .await
            .unwrap(),
        None,
        "a client that cannot tell says so"
    );
    assert_eq!(registry.warm("bookings-value").await.unwrap().id(), 31);
    assert!(registry.warm("other").await.is_err());
}

#[tokio::test]
async fn schema_framed_wraps_its_inner_codec() {
    let double = RegistryDouble::start().await;
    let registry = SchemaRegistry::new(double.url());
    let prefetch = SchemaPrefetch::new(registry.clone());
    let codec = SchemaFramed::new(&prefetch, ruststream::codec::JsonCodec)
        .register::<Booking>("framed-value");
    let booking = Booking {
        guest: "Ada".into(),
        nights: 2,
    };
    let err = codec.encode(&booking).unwrap_err();
    assert!(err.to_string().contains("schema_prefetch"), "{err}");
    let id = registry
        .register_json::<Booking>("framed-value")
        .await
        .unwrap();
    let bytes = codec.encode(&booking).unwrap();
    let (framed_id, datum) = parse_envelope(&bytes).unwrap();
    assert_eq!(framed_id, id);
    assert_eq!(serde_json::from_slice::<Booking>(datum).unwrap(), booking);
    assert_eq!(codec.decode::<Booking>(&bytes).unwrap(), booking);
    assert!(
        codec
            .decode::<Booking>(br#"{"guest":"x","nights":1}"#)
            .is_err()
    );
    assert!(
        codec.encode(&3_u8).is_err(),
        "unnamed values have no subject"
    );
}

/// The independent implementation builds reqwest clients of its own, which (with this crate's
/// pure-Rust reqwest build) need a process-wide rustls provider.
fn independent_client_tls() {
    let _ = rustls_graviola::default_provider().install_default();
}

#[tokio::test]
async fn our_avro_frames_decode_with_an_independent_implementation() {
    independent_client_tls();

    let double = RegistryDouble::start().await;
    let registry = SchemaRegistry::new(double.url());
    let prefetch = SchemaPrefetch::new(registry.clone());
    let codec = AvroCodec::registry(&prefetch).register::<Booking>("interop-value");
    registry
        .register_avro::<Booking>("interop-value")
        .await
        .unwrap();
    let bytes = codec
        .encode(&Booking {
            guest: "Grace".into(),
            nights: 5,
        })
        .unwrap();
    let independent = AvroDecoder::new(SrSettings::new(double.url()));
    let decoded = independent.decode(Some(&bytes)).await.unwrap();
    let value: Booking = apache_avro::from_value(&decoded.value).unwrap();
    assert_eq!(
        value,
        Booking {
            guest: "Grace".into(),
            nights: 5
        }
    );
}

#[tokio::test]
async fn independent_avro_frames_decode_with_ours_resolved_onto_a_reader() {
    independent_client_tls();

    let double = RegistryDouble::start().await;
    double.register("visits-value", "AVRO", &booking_schema());
    let encoder = AvroEncoder::new(SrSettings::new(double.url()));
    let bytes = encoder
        .encode(
            vec![
                ("guest", Value::String("Linus".into())),
                ("nights", Value::Int(3)),
            ],
            SubjectNameStrategy::TopicNameStrategy("visits".into(), false),
        )
        .await
        .unwrap();
    let (id, _) = parse_envelope(&bytes).unwrap();
    let registry = SchemaRegistry::new(double.url());
    // What the broker's prefetch does for each framed delivery.
    registry.schema_by_id(id).await.unwrap();
    let prefetch = SchemaPrefetch::new(registry);
    let codec = AvroCodec::registry(&prefetch)
        .resolve_onto(BookingV2::get_schema())
        .unwrap();
    assert_eq!(
        codec.decode::<BookingV2>(&bytes).unwrap(),
        BookingV2 {
            guest: "Linus".into(),
            nights: 3,
            breakfast: false
        }
    );
    assert!(
        codec
            .decode::<BookingV2>(&encode_envelope(999, b"x"))
            .is_err()
    );
}

/// JSON Schema subjects are judged by the registry's content-model rules: the double refuses
/// what a Confluent registry refuses, naming the difference and where it is.
mod json_schema_compatibility {
    use super::*;

    const OPEN: &str = r#"{"type":"object","properties":{
        "ward":{"type":"string"},"beds":{"type":"integer"}},"required":["ward"]}"#;
    const CLOSED: &str = r#"{"type":"object","additionalProperties":false,"properties":{
        "ward":{"type":"string"},"beds":{"type":"integer"}},"required":["ward"]}"#;

    /// Registers `first`, then tries `next` under the same subject (BACKWARD, the default).
    async fn evolve(first: &str, next: &str) -> Result<u32, KafkaError> {
        let double = RegistryDouble::start().await;
        double.register("wards-value", "JSON", first);
        SchemaRegistry::new(double.url())
            .register("wards-value", SchemaType::Json, next.to_owned())
            .await
    }

    async fn refused(first: &str, next: &str, difference: &str) {
        let err = evolve(first, next).await.unwrap_err();
        let text = err.to_string();
        assert!(text.contains("409"), "{text}");
        assert!(text.contains(difference), "expected {difference}: {text}");
    }

    async fn accepted(first: &str, next: &str) {
        evolve(first, next).await.unwrap();
    }

    #[tokio::test]
    async fn an_open_model_takes_removals_but_not_additions() {
        refused(
            OPEN,
            r#"{"type":"object","properties":{"ward":{"type":"string"},
                "beds":{"type":"integer"},"floor":{"type":"integer"}},"required":["ward"]}"#,
            "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL at #/properties/floor",
        )
        .await;
        accepted(
            OPEN,
            r#"{"type":"object","properties":{"ward":{"type":"string"}},"required":["ward"]}"#,
        )
        .await;
    }

    #[tokio::test]
    async fn a_closed_model_takes_optional_additions_but_not_required_ones_or_removals() {
        accepted(
            CLOSED,
            r#"{"type":"object","additionalProperties":false,"properties":{
                "ward":{"type":"string"},"beds":{"type":"integer"},
                "floor":{"type":["integer","null"]}},"required":["ward"]}"#,
        )
        .await;
        refused(
            CLOSED,
            r#"{"type":"object","additionalProperties":false,"properties":{
                "ward":{"type":"string"},"beds":{"type":"integer"},
                "floor":{"type":"integer"}},"required":["ward","floor"]}"#,
            "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL at #/properties/floor",
        )
        .await;
        accepted(
            CLOSED,
            r#"{"type":"object","additionalProperties":false,"properties":{
                "ward":{"type":"string"},"beds":{"type":"integer"},
                "floor":{"type":"integer","default":0}},"required":["ward","floor"]}"#,
        )
        .await;
        refused(
            CLOSED,
            r#"{"type":"object","additionalProperties":false,"properties":{
                "ward":{"type":"string"}},"required":["ward"]}"#,
            "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL at #/properties/beds",
        )
        .await;
        refused(OPEN, CLOSED, "ADDITIONAL_PROPERTIES_REMOVED at #").await;
        accepted(CLOSED, OPEN).await;
    }

    #[tokio::test]
    async fn types_may_widen_but_not_change_or_narrow() {
        refused(
            OPEN,
            r#"{"type":"object","properties":{"ward":{"type":"integer"},
                "beds":{"type":"integer"}},"required":["ward"]}"#,
            "TYPE_CHANGED at #/properties/ward",
        )
        .await;
        let widened = r#"{"type":"object","properties":{"ward":{"type":"string"},
                "beds":{"type":"number"}},"required":["ward"]}"#;
        accepted(OPEN, widened).await;
        refused(widened, OPEN, "TYPE_NARROWED at #/properties/beds").await;
        refused(
            OPEN,
            r#"{"type":"object","properties":{"ward":{"type":"string"},
                "beds":{"type":"integer"}},"required":["ward","beds"]}"#,
            "REQUIRED_ATTRIBUTE_ADDED at #/properties/beds",
        )
        .await;
        refused(
            r#"{"type":"string","enum":["north","south"]}"#,
            r#"{"type":"string","enum":["north"]}"#,
            "ENUM_ARRAY_NARROWED at #",
        )
        .await;
    }

    #[tokio::test]
    async fn nested_objects_and_items_are_compared_through_their_refs() {
        let first = r##"{"type":"object","properties":{
            "rounds":{"type":"array","items":{"$ref":"#/$defs/Round"}}},
            "$defs":{"Round":{"type":"object","properties":{"hour":{"type":"integer"}}}}}"##;
        let changed = r##"{"type":"object","properties":{
            "rounds":{"type":"array","items":{"$ref":"#/$defs/Round"}}},
            "$defs":{"Round":{"type":"object","properties":{"hour":{"type":"string"}}}}}"##;
        refused(
            first,
            changed,
            "TYPE_CHANGED at #/properties/rounds/items/properties/hour",
        )
        .await;
    }

    #[tokio::test]
    async fn the_level_decides_which_direction_counts() {
        let added = r#"{"type":"object","properties":{"ward":{"type":"string"},
            "beds":{"type":"integer"},"floor":{"type":"integer"}},"required":["ward"]}"#;
        let double = RegistryDouble::start().await;
        let registry = SchemaRegistry::new(double.url());
        double.register("wards-value", "JSON", OPEN);
        // FORWARD: the old schema reads the new data; an open model ignores the extra property.
        double.set_level(Some("wards-value"), "FORWARD");
        assert_eq!(
            registry
                .is_compatible("wards-value", SchemaType::Json, added.to_owned())
                .await
                .unwrap(),
            Some(true)
        );
        double.set_level(Some("wards-value"), "FULL");
        let err = registry
            .is_compatible("wards-value", SchemaType::Json, added.to_owned())
            .await
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"),
            "{err}"
        );
        double.set_level(Some("wards-value"), "NONE");
        registry
            .register("wards-value", SchemaType::Json, added.to_owned())
            .await
            .unwrap();
    }
}

/// Protobuf subjects are judged by the registry's message and field rules.
#[cfg(feature = "protobuf")]
mod protobuf_compatibility {
    use super::*;

    const KENNEL: &str = r#"syntax = "proto3";
package kennel;
message Stay { string pet = 1; uint32 nights = 2; Owner owner = 3; }
message Owner { string name = 1; }
"#;

    async fn evolve(next: &str) -> Result<u32, KafkaError> {
        let double = RegistryDouble::start().await;
        double.register("stays-value", "PROTOBUF", KENNEL);
        SchemaRegistry::new(double.url())
            .register("stays-value", SchemaType::Protobuf, next.to_owned())
            .await
    }

    async fn refused(next: &str, difference: &str) {
        let text = evolve(next).await.unwrap_err().to_string();
        assert!(text.contains("409"), "{text}");
        assert!(text.contains(difference), "expected {difference}: {text}");
    }

    /// The kennel file with `stay` as the fields of `Stay`, `Owner` unchanged.
    fn kennel_with(stay: &str) -> String {
        format!(
            "syntax = \"proto3\";\npackage kennel;\nmessage Stay {{ {stay} }}\n\
             message Owner {{ string name = 1; }}\n"
        )
    }

    #[tokio::test]
    async fn fields_may_come_and_go_but_numbers_keep_their_kind() {
        // A field removed and another added under a fresh number; uint32 read as uint64.
        evolve(&kennel_with(
            "string pet = 1; uint64 nights = 2; bool vaccinated = 4;",
        ))
        .await
        .unwrap();
        refused(
            &kennel_with("string pet = 1; string nights = 2; Owner owner = 3;"),
            "FIELD_SCALAR_KIND_CHANGED at kennel.Stay.nights (field 2)",
        )
        .await;
        refused(
            &kennel_with("string pet = 1; uint32 nights = 2; string owner = 3;"),
            "FIELD_KIND_CHANGED at kennel.Stay.owner (field 3)",
        )
        .await;
    }

    #[tokio::test]
    async fn a_removed_message_is_refused() {
        refused(
            r#"syntax = "proto3";
package kennel;
message Stay { string pet = 1; uint32 nights = 2; }
"#,
            "MESSAGE_REMOVED kennel.Owner",
        )
        .await;
    }
}
