//! Protocol Buffers in the Confluent format (feature `protobuf`).
//!
//! A Confluent Protobuf payload is the envelope, then a message-index path naming which message
//! of the registered `.proto` file follows (zigzag varints: a count, then one index per nesting
//! level; the common path `[0]` is the single byte `0`), then the encoded message.
//!
//! - [`decode_confluent`] reads such payloads (and bare messages) with generated `prost` types.
//! - [`ProtobufFrame`] is an app-wide publish layer framing Protobuf payloads whose topic has a
//!   Protobuf subject, leaving every other payload alone.
//! - [`KafkaFramedPublish`] is a mount-site policy that frames or refuses: a topic without a
//!   subject, or whose subject is another format, is an error.

use std::collections::HashMap;
use std::error::Error as StdError;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use prost::Message as _;
use prost_reflect::{DescriptorPool, DynamicMessage, MessageDescriptor};
#[cfg(feature = "asyncapi")]
use ruststream::asyncapi::Bindings;
use ruststream::runtime::{Outgoing, PublishLayer, PublishNext, PublishPipeline};
use ruststream::{OutgoingFor, OutgoingMessage, PairError, PublishPolicy, Publisher};

use crate::connection::ConnectedKafkaBroker;
use crate::error::KafkaError;
use crate::publisher::{KafkaPublish, KafkaPublisher};
use crate::schema_registry::{
    RegisteredSchema, SchemaRegistry, SchemaType, SubjectMap, SubjectStrategy, parse_envelope,
    push_header,
};

/// The name the registered `.proto` text is compiled under.
const SCHEMA_FILE: &str = "registry-schema.proto";

/// Reads a Protobuf message from a Confluent-framed payload (skipping the envelope and the
/// message-index path) or, when the payload is not framed, from the bare bytes. Suits
/// `#[wire(decode = ruststream_kafka::protobuf::decode_confluent)]`.
pub fn decode_confluent<T: prost::Message + Default>(payload: &[u8]) -> Result<T, KafkaError> {
    let message = match parse_envelope(payload) {
        Some((id, datum)) => {
            let (_, message) = read_path(datum).ok_or_else(|| {
                KafkaError::wire_text(format!(
                    "the message-index path after schema id {id} is malformed or cut short"
                ))
            })?;
            message
        }
        None => payload,
    };
    T::decode(message).map_err(KafkaError::wire)
}

/// Writes a message-index path.
pub(crate) fn write_path(path: &[i32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(1 + path.len());
    if path == [0] {
        out.push(0);
        return out;
    }
    write_zigzag(&mut out, path.len() as i64);
    for &index in path {
        write_zigzag(&mut out, i64::from(index));
    }
    out
}

/// Reads a message-index path, answering it and the bytes after it.
pub(crate) fn read_path(bytes: &[u8]) -> Option<(Vec<i32>, &[u8])> {
    let (count, mut rest) = zigzag_varint(bytes)?;
    if count == 0 {
        return Some((vec![0], rest));
    }
    let count = usize::try_from(count).ok()?;
    // Every index takes at least one byte: a count beyond what is left is a lie.
    if count > rest.len() {
        return None;
    }
    let mut path = Vec::with_capacity(count);
    for _ in 0..count {
        let (index, tail) = zigzag_varint(rest)?;
        path.push(i32::try_from(index).ok()?);
        rest = tail;
    }
    Some((path, rest))
}

fn write_zigzag(out: &mut Vec<u8>, value: i64) {
    let mut bits = ((value << 1) ^ (value >> 63)) as u64;
    while bits >= 0x80 {
        out.push((bits as u8) | 0x80);
        bits >>= 7;
    }
    out.push(bits as u8);
}

fn zigzag_varint(bytes: &[u8]) -> Option<(i64, &[u8])> {
    let mut bits = 0u64;
    for (i, &byte) in bytes.iter().enumerate().take(10) {
        bits |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            let value = ((bits >> 1) as i64) ^ -((bits & 1) as i64);
            return Some((value, &bytes[i + 1..]));
        }
    }
    None
}

/// Compiles registered `.proto` text; imports of Google's well-known types are resolved.
fn compile(source: &str) -> Result<DescriptorPool, String> {
    use protox::file::{ChainFileResolver, File, FileResolver, GoogleFileResolver};

    struct Registered(String);
    impl FileResolver for Registered {
        fn open_file(&self, name: &str) -> Result<File, protox::Error> {
            if name == SCHEMA_FILE {
                File::from_source(name, &self.0)
            } else {
                Err(protox::Error::file_not_found(name))
            }
        }
    }

    let mut resolver = ChainFileResolver::new();
    resolver.add(Registered(source.to_owned()));
    resolver.add(GoogleFileResolver::new());
    let mut compiler = protox::Compiler::with_file_resolver(resolver);
    compiler.include_imports(true);
    compiler.open_file(SCHEMA_FILE).map_err(|e| e.to_string())?;
    Ok(compiler.descriptor_pool())
}

/// The compiled form of a registered Protobuf schema, compiled once per id.
fn pool_of(
    registry: &SchemaRegistry,
    schema: &RegisteredSchema,
) -> Result<Arc<DescriptorPool>, KafkaError> {
    if let Some(found) = registry.derived().proto.get(&schema.id()) {
        return Ok(Arc::clone(found));
    }
    let pool = Arc::new(compile(schema.definition()).map_err(|e| {
        KafkaError::registry_text(format!(
            "schema id {} does not compile as Protobuf: {e}",
            schema.id()
        ))
    })?);
    registry
        .derived()
        .proto
        .insert(schema.id(), Arc::clone(&pool));
    Ok(pool)
}

/// The message `name` (fully qualified) of the registered file, or its first message.
fn pick_message(
    pool: &DescriptorPool,
    schema: &RegisteredSchema,
    name: Option<&str>,
) -> Result<MessageDescriptor, KafkaError> {
    let file = pool.get_file_by_name(SCHEMA_FILE);
    match name {
        Some(name) => pool
            .get_message_by_name(name)
            .filter(|m| m.parent_file().name() == SCHEMA_FILE)
            .ok_or_else(|| {
                KafkaError::InvalidOptions(format!(
                    "schema id {} declares no message {name:?} (give the fully qualified name, \
                     package included)",
                    schema.id()
                ))
            }),
        None => file.and_then(|f| f.messages().next()).ok_or_else(|| {
            KafkaError::InvalidOptions(format!(
                "schema id {} declares no message to write",
                schema.id()
            ))
        }),
    }
}

/// Where `message` sits in its file: its index among the top-level messages, then among each
/// enclosing message's nested ones.
fn path_of(message: &MessageDescriptor) -> Option<Vec<i32>> {
    let mut path = Vec::new();
    let mut here = message.clone();
    loop {
        let siblings: Vec<MessageDescriptor> = match here.parent_message() {
            Some(parent) => parent.child_messages().collect(),
            None => here.parent_file().messages().collect(),
        };
        let index = siblings.iter().position(|m| *m == here)?;
        path.push(i32::try_from(index).ok()?);
        match here.parent_message() {
            Some(parent) => here = parent,
            None => break,
        }
    }
    path.reverse();
    Some(path)
}

/// The message a path names in the registered file.
fn message_at(pool: &DescriptorPool, path: &[i32]) -> Option<MessageDescriptor> {
    let file = pool.get_file_by_name(SCHEMA_FILE)?;
    let (first, nested) = path.split_first()?;
    let mut message = file.messages().nth(usize::try_from(*first).ok()?)?;
    for &index in nested {
        let child = message.child_messages().nth(usize::try_from(index).ok()?)?;
        message = child;
    }
    Some(message)
}

/// A Protobuf datum (path and message) as a JSON document with proto field names.
pub(crate) fn datum_to_json(
    registry: &SchemaRegistry,
    schema: &RegisteredSchema,
    datum: &[u8],
) -> Result<Vec<u8>, KafkaError> {
    let pool = pool_of(registry, schema)?;
    let (path, body) = read_path(datum)
        .ok_or_else(|| KafkaError::wire_text("the message-index path is malformed"))?;
    let descriptor = message_at(&pool, &path).ok_or_else(|| {
        KafkaError::wire_text(format!(
            "message-index path {path:?} names no message of schema id {}",
            schema.id()
        ))
    })?;
    let message = DynamicMessage::decode(descriptor, body).map_err(KafkaError::wire)?;
    let options = prost_reflect::SerializeOptions::new()
        .use_proto_field_name(true)
        .stringify_64_bit_integers(false)
        .skip_default_fields(false);
    let mut out = serde_json::Serializer::new(Vec::new());
    message
        .serialize_with_options(&mut out, &options)
        .map_err(KafkaError::wire)?;
    Ok(out.into_inner())
}

/// A JSON document as a Protobuf datum (path and message) of `message` or the first message.
pub(crate) fn json_to_datum(
    registry: &SchemaRegistry,
    schema: &RegisteredSchema,
    message: Option<&str>,
    json: &[u8],
) -> Result<Vec<u8>, KafkaError> {
    let pool = pool_of(registry, schema)?;
    let descriptor = pick_message(&pool, schema, message)?;
    let path = path_of(&descriptor)
        .ok_or_else(|| KafkaError::wire_text("the message has no place in its file"))?;
    let mut reader = serde_json::Deserializer::from_slice(json);
    let value = DynamicMessage::deserialize(descriptor, &mut reader).map_err(KafkaError::wire)?;
    let mut datum = write_path(&path);
    value.encode(&mut datum).map_err(KafkaError::wire)?;
    Ok(datum)
}

/// What framing made of one payload.
enum FrameStep {
    /// The payload wrapped in the envelope, ready to send.
    Wrapped(Vec<u8>),
    /// The payload already carried an envelope and goes out as it is.
    Untouched,
    /// No schema is registered under the topic's subject.
    Unregistered,
    /// The subject holds a schema of another kind than Protobuf.
    WrongKind(SchemaType),
}

/// A topic's encoded message-index path and the schema id it was worked out for.
type TopicPath = (u32, Arc<[u8]>);

/// The framing both the layer and the policy do, with each topic's path kept per schema id.
#[derive(Clone)]
struct ProtobufWrapper {
    subjects: SubjectMap,
    record_names: HashMap<String, String>,
    paths: Arc<Mutex<HashMap<String, TopicPath>>>,
}

impl fmt::Debug for ProtobufWrapper {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProtobufWrapper")
            .field("registry", self.subjects.source())
            .field("strategy", &self.subjects.naming())
            .field("subjects", self.subjects.pinned())
            .field("record_names", &self.record_names)
            .finish_non_exhaustive()
    }
}

impl ProtobufWrapper {
    fn new(registry: SchemaRegistry) -> Self {
        Self {
            subjects: SubjectMap::over(registry),
            record_names: HashMap::new(),
            paths: Arc::default(),
        }
    }

    fn message(&self, topic: &str) -> Option<&str> {
        self.record_names.get(topic).map(String::as_str)
    }

    fn subject_for(&self, topic: &str) -> String {
        self.subjects.subject_for(topic, self.message(topic))
    }

    async fn wrap(&self, topic: &str, payload: &[u8]) -> Result<FrameStep, KafkaError> {
        if parse_envelope(payload).is_some() {
            return Ok(FrameStep::Untouched);
        }
        let Some(schema) = self.subjects.schema_for(topic, self.message(topic)).await? else {
            return Ok(FrameStep::Unregistered);
        };
        if schema.schema_type() != SchemaType::Protobuf {
            return Ok(FrameStep::WrongKind(schema.schema_type()));
        }
        let path = self.path_for(topic, &schema)?;
        let mut framed = Vec::with_capacity(5 + path.len() + payload.len());
        push_header(&mut framed, schema.id());
        framed.extend_from_slice(&path);
        framed.extend_from_slice(payload);
        Ok(FrameStep::Wrapped(framed))
    }

    fn path_for(&self, topic: &str, schema: &RegisteredSchema) -> Result<Arc<[u8]>, KafkaError> {
        let mut paths = self.paths.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((id, path)) = paths.get(topic)
            && *id == schema.id()
        {
            return Ok(Arc::clone(path));
        }
        drop(paths);
        let pool = pool_of(self.subjects.source(), schema)?;
        let descriptor = pick_message(&pool, schema, self.message(topic))?;
        let path = path_of(&descriptor)
            .ok_or_else(|| KafkaError::wire_text("the message has no place in its file"))?;
        let path: Arc<[u8]> = write_path(&path).into();
        paths = self.paths.lock().unwrap_or_else(PoisonError::into_inner);
        paths.insert(topic.to_owned(), (schema.id(), Arc::clone(&path)));
        Ok(path)
    }
}

/// App-wide publish layer framing Protobuf payloads in the Confluent format.
///
/// A payload is framed when its topic's subject holds a Protobuf schema: the envelope, then
/// the index path of the pinned [`message`](Self::message) (or the file's first message).
/// Topics without a subject, subjects of other formats and payloads already framed pass
/// through untouched; registry failures fail the publish.
#[derive(Clone, Debug)]
pub struct ProtobufFrame {
    wrapper: ProtobufWrapper,
}

impl ProtobufFrame {
    /// A layer resolving subjects through `registry` by [`SubjectStrategy::TopicName`].
    #[must_use]
    pub fn new(registry: SchemaRegistry) -> Self {
        Self {
            wrapper: ProtobufWrapper::new(registry),
        }
    }

    /// Names subjects by `strategy` for topics without a pinned subject.
    #[must_use]
    pub fn subject_strategy(mut self, strategy: SubjectStrategy) -> Self {
        self.wrapper.subjects.choose_strategy(strategy);
        self
    }

    /// Publishes `topic` under `subject`.
    #[must_use]
    pub fn subject(mut self, topic: impl Into<String>, subject: impl Into<String>) -> Self {
        self.wrapper
            .subjects
            .fix_subject(topic.into(), subject.into());
        self
    }

    /// Frames `topic`'s records as message `message` (fully qualified).
    #[must_use]
    pub fn message(mut self, topic: impl Into<String>, message: impl Into<String>) -> Self {
        self.wrapper
            .record_names
            .insert(topic.into(), message.into());
        self
    }
}

impl PublishLayer for ProtobufFrame {
    async fn on_publish<'a, N: PublishPipeline, P: Publisher>(
        &'a self,
        out: &'a mut Outgoing<'a>,
        next: PublishNext<'a, N, P>,
    ) -> Result<(), Box<dyn StdError + Send + Sync>> {
        if let FrameStep::Wrapped(framed) = self.wrapper.wrap(out.name(), out.payload()).await? {
            out.set_payload(framed.as_slice());
        }
        next.run(out).await
    }
}

/// Mount-site publish policy framing Protobuf payloads in the Confluent format: like
/// [`ProtobufFrame`], except that a topic without a subject is a
/// [`KafkaError::SchemaRegistry`] and a subject of another format is
/// [`KafkaError::InvalidOptions`]. Payloads already framed go out as they are.
/// `KafkaPublish::framed` builds one.
#[derive(Clone, Debug)]
#[must_use]
pub struct KafkaFramedPublish {
    publish: KafkaPublish,
    wrapper: ProtobufWrapper,
}

impl KafkaFramedPublish {
    /// Frames what `publish` sends, with subjects resolved through `registry`.
    pub fn over(publish: KafkaPublish, registry: &SchemaRegistry) -> Self {
        Self {
            publish,
            wrapper: ProtobufWrapper::new(registry.clone()),
        }
    }

    /// Names subjects by `strategy` for topics without a pinned subject.
    pub fn subject_strategy(mut self, strategy: SubjectStrategy) -> Self {
        self.wrapper.subjects.choose_strategy(strategy);
        self
    }

    /// Publishes `topic` under `subject`.
    pub fn subject(mut self, topic: impl Into<String>, subject: impl Into<String>) -> Self {
        self.wrapper
            .subjects
            .fix_subject(topic.into(), subject.into());
        self
    }

    /// Frames `topic`'s records as message `message` (fully qualified).
    pub fn message(mut self, topic: impl Into<String>, message: impl Into<String>) -> Self {
        self.wrapper
            .record_names
            .insert(topic.into(), message.into());
        self
    }
}

impl PublishPolicy<ConnectedKafkaBroker> for KafkaFramedPublish {
    type Live = KafkaFramedPublisher<KafkaPublisher>;

    async fn pair(self, connected: &ConnectedKafkaBroker) -> Result<Self::Live, PairError> {
        let inner = self.publish.pair(connected).await?;
        Ok(KafkaFramedPublisher {
            inner,
            wrapper: self.wrapper,
        })
    }

    #[cfg(feature = "asyncapi")]
    fn channel_bindings(&self, channel: &str) -> Bindings {
        crate::bindings::channel(channel)
    }

    #[cfg(feature = "asyncapi")]
    fn message_bindings(&self, _channel: &str) -> Bindings {
        crate::bindings::framed_message(self.wrapper.subjects.naming())
    }
}

/// The live publisher of a [`KafkaFramedPublish`]: frames, then hands the record to `P`.
#[derive(Clone, Debug)]
pub struct KafkaFramedPublisher<P = KafkaPublisher> {
    inner: P,
    wrapper: ProtobufWrapper,
}

impl<P: Publisher<Error = KafkaError> + Send + Sync> Publisher for KafkaFramedPublisher<P> {
    type Payload = P::Payload;
    type Error = KafkaError;
    type Options = P::Options;

    async fn publish(
        &self,
        msg: OutgoingFor<'_, Self::Payload>,
        options: Option<&Self::Options>,
    ) -> Result<(), KafkaError> {
        let framed = match self.wrapper.wrap(msg.name(), msg.payload()).await? {
            FrameStep::Wrapped(framed) => framed,
            FrameStep::Untouched => return self.inner.publish(msg, options).await,
            FrameStep::Unregistered => {
                return Err(KafkaError::registry_text(format!(
                    "topic {:?} is published through a framing policy but its subject {:?} is \
                     not in the registry; register the schema, pin the subject that holds it \
                     with .subject(..), or publish this topic with a plain KafkaPublish",
                    msg.name(),
                    self.wrapper.subject_for(msg.name())
                )));
            }
            FrameStep::WrongKind(kind) => {
                return Err(KafkaError::InvalidOptions(format!(
                    "subject {:?} of topic {:?} holds a {kind:?} schema and this policy frames \
                     Protobuf; use that format's codec or the SchemaFrame layer",
                    self.wrapper.subject_for(msg.name()),
                    msg.name()
                )));
            }
        };
        // The headers move over; only the payload is new.
        let (name, _, headers) = msg.into_parts();
        let framed_msg = OutgoingMessage::new(name, &framed).with_headers(headers);
        self.inner.publish(framed_msg, options).await
    }
}

#[cfg(test)]
mod tests {
    use super::{compile, message_at, path_of, read_path, write_path};

    const CATALOG: &str = r#"
        syntax = "proto3";
        package shop;
        import "google/protobuf/timestamp.proto";
        message Banner { string text = 1; }
        message Order {
            int64 id = 1;
            google.protobuf.Timestamp at = 2;
            message Line {
                string sku = 1;
                message Discount { int32 percent = 1; }
            }
            message Note { string text = 1; }
        }
    "#;

    #[test]
    fn paths_round_trip_and_the_first_message_is_one_zero_byte() {
        assert_eq!(write_path(&[0]), vec![0]);
        assert_eq!(write_path(&[1]), vec![2, 2]);
        assert_eq!(write_path(&[1, 0, 0]), vec![6, 2, 0, 0]);
        for path in [vec![0], vec![1], vec![1, 1], vec![3, 70, 2]] {
            let mut bytes = write_path(&path);
            bytes.extend_from_slice(b"rest");
            assert_eq!(read_path(&bytes), Some((path, &b"rest"[..])));
        }
    }

    #[test]
    fn the_policy_describes_itself_without_the_registry_password() {
        let registry = crate::SchemaRegistry::new("https://svc:hunter2@registry.example:8081");
        let text = format!("{:?}", crate::KafkaPublish::framed(&registry));
        assert!(!text.contains("hunter2"), "{text}");
        assert!(text.contains("registry.example:8081"), "{text}");
    }

    #[test]
    fn lying_or_cut_paths_are_refused() {
        assert_eq!(read_path(&[]), None);
        assert_eq!(read_path(&[200]), None, "a varint with no end");
        assert_eq!(
            read_path(&[40, 2]),
            None,
            "twenty indexes promised, one present"
        );
        assert_eq!(read_path(&[0xff; 12]), None);
    }

    #[test]
    fn nested_messages_are_addressed_by_their_place() {
        let pool = compile(CATALOG).unwrap();
        let discount = pool
            .get_message_by_name("shop.Order.Line.Discount")
            .unwrap();
        assert_eq!(path_of(&discount), Some(vec![1, 0, 0]));
        let note = pool.get_message_by_name("shop.Order.Note").unwrap();
        assert_eq!(path_of(&note), Some(vec![1, 1]));
        assert_eq!(
            message_at(&pool, &[1, 1]).unwrap().full_name(),
            "shop.Order.Note"
        );
        assert_eq!(message_at(&pool, &[0]).unwrap().full_name(), "shop.Banner");
        assert!(message_at(&pool, &[5]).is_none());
    }
}
