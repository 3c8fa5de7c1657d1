//! A Confluent Schema Registry double for tests and examples: a real HTTP server on a local
//! port, in the test process, implementing the endpoints clients use with the registry's
//! documented semantics.
//!
//! - Ids are global: the same schema (same type, same canonical text) has one id under every
//!   subject; versions count per subject from 1.
//! - Registering checks the schema parses (Avro always; Protobuf and JSON when this build can
//!   parse them) and, against the subject's compatibility level, the versions it must be
//!   compatible with (the latest one, or all of them for the `_TRANSITIVE` levels). Avro is
//!   judged by Avro schema resolution; JSON Schema by the registry's documented content-model
//!   rules (see [`json_can_read`]: types, enums, properties added or removed against open and
//!   closed models, newly required properties, nested objects and array items, local `$ref`s);
//!   Protobuf (when this build can parse it) by the registry's message and field-kind rules
//!   (see [`proto_can_read`]), otherwise always compatible.
//! - Errors carry the registry's codes: 40401 subject not found, 40402 version not found,
//!   40403 schema not found, 409 incompatible, 42201 invalid schema, 42203 invalid level.
//! - Answers are `application/vnd.schemaregistry.v1+json`.
//!
//! Every request is recorded (method, path with query, `Authorization` header) so tests can
//! count round trips and check credentials; `set_delay` slows every answer down.
#![allow(
    dead_code,
    unreachable_pub,
    clippy::missing_panics_doc,
    clippy::too_many_lines
)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

const MEDIA: &str = "application/vnd.schemaregistry.v1+json";

/// One request as the double saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub authorization: Option<String>,
}

#[derive(Debug, Clone)]
struct Stored {
    kind: String,
    text: String,
    identity: String,
}

#[derive(Debug, Default)]
struct Subject {
    /// Schema ids by version (index 0 is version 1); `None` once a version is deleted.
    versions: Vec<Option<u32>>,
    level: Option<String>,
}

#[derive(Debug, Default)]
struct Book {
    schemas: Vec<Stored>,
    subjects: BTreeMap<String, Subject>,
    level: Option<String>,
    seen: Vec<Seen>,
    delay: Duration,
    /// The level-wide compatibility check answered with a bare 404, as Karapace does.
    no_level_wide_check: bool,
}

/// The running double; dropping it leaves the server running until the runtime ends.
#[derive(Clone)]
pub struct RegistryDouble {
    addr: SocketAddr,
    book: Arc<Mutex<Book>>,
}

impl RegistryDouble {
    /// Starts the double on a free local port of the current runtime.
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the registry double");
        let addr = listener.local_addr().expect("its address");
        let book = Arc::new(Mutex::new(Book::default()));
        let app = Router::new().fallback(answer).with_state(Arc::clone(&book));
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { addr, book }
    }

    /// `http://127.0.0.1:port`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The requests seen so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.book.lock().unwrap().seen.clone()
    }

    /// How many requests had exactly this method and path (query included).
    pub fn count(&self, method: &str, path: &str) -> usize {
        self.seen()
            .iter()
            .filter(|s| s.method == method && s.path == path)
            .count()
    }

    /// Delays every answer by `delay`.
    pub fn set_delay(&self, delay: Duration) {
        self.book.lock().unwrap().delay = delay;
    }

    /// Answers `POST /compatibility/subjects/{s}/versions` with a bare 404 from now on, as a
    /// registry without that endpoint (Karapace) does; `.../versions/{v}` still answers.
    pub fn drop_level_wide_check(&self) {
        self.book.lock().unwrap().no_level_wide_check = true;
    }

    /// Registers directly (as another producer would), answering the id.
    pub fn register(&self, subject: &str, kind: &str, text: &str) -> u32 {
        let mut book = self.book.lock().unwrap();
        match register(&mut book, subject, kind, text) {
            Ok(id) => id,
            Err((status, body)) => panic!("registering under {subject}: {status} {body}"),
        }
    }

    /// Sets `subject`'s compatibility level (or the global one with `None`).
    pub fn set_level(&self, subject: Option<&str>, level: &str) {
        let mut book = self.book.lock().unwrap();
        match subject {
            Some(s) => book.subjects.entry(s.to_owned()).or_default().level = Some(level.into()),
            None => book.level = Some(level.into()),
        }
    }

    /// Deletes `subject` with all its versions (its schema ids stay readable by id).
    pub fn delete_subject(&self, subject: &str) {
        self.book.lock().unwrap().subjects.remove(subject);
    }
}

type Failure = (StatusCode, Value);

fn refuse(status: StatusCode, code: u32, message: impl Into<String>) -> Failure {
    (
        status,
        json!({ "error_code": code, "message": message.into() }),
    )
}

fn decode_segment(raw: &str) -> String {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Ok(b) = u8::from_str_radix(&raw[i + 1..i + 3], 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// What makes two schemas the same schema: canonical Avro, or the text without surrounding
/// whitespace.
fn identity(kind: &str, text: &str) -> Result<String, Failure> {
    let invalid = |e: String| {
        refuse(
            StatusCode::UNPROCESSABLE_ENTITY,
            42201,
            format!("Invalid schema: {e}"),
        )
    };
    match kind {
        "AVRO" => {
            #[cfg(feature = "avro")]
            {
                let parsed =
                    apache_avro::Schema::parse_str(text).map_err(|e| invalid(e.to_string()))?;
                Ok(parsed.canonical_form())
            }
            #[cfg(not(feature = "avro"))]
            {
                serde_json::from_str::<Value>(text).map_err(|e| invalid(e.to_string()))?;
                Ok(text.trim().to_owned())
            }
        }
        "JSON" => {
            let doc: Value = serde_json::from_str(text).map_err(|e| invalid(e.to_string()))?;
            Ok(doc.to_string())
        }
        "PROTOBUF" => {
            #[cfg(feature = "protobuf")]
            proto_pool(text).map_err(invalid)?;
            Ok(text.trim().to_owned())
        }
        other => Err(invalid(format!("unknown schema type {other}"))),
    }
}

/// The messages of one `.proto` text (imports of Google's well-known types allowed).
#[cfg(feature = "protobuf")]
fn proto_pool(text: &str) -> Result<prost_reflect::DescriptorPool, String> {
    let mut compiler = protox::Compiler::with_file_resolver({
        let mut chain = protox::file::ChainFileResolver::new();
        chain.add(OneFile(text.to_owned()));
        chain.add(protox::file::GoogleFileResolver::new());
        chain
    });
    compiler
        .open_file("double.proto")
        .map_err(|e| e.to_string())?;
    Ok(compiler.descriptor_pool())
}

/// Which scalar kinds read each other's bytes: the same wire encoding and meaning, as the
/// registry's Protobuf rules group them.
#[cfg(feature = "protobuf")]
fn wire_family(kind: &prost_reflect::Kind) -> &'static str {
    use prost_reflect::Kind;
    match kind {
        Kind::Int32 | Kind::Uint32 | Kind::Int64 | Kind::Uint64 | Kind::Bool => "varint",
        Kind::Sint32 | Kind::Sint64 => "zigzag",
        Kind::Fixed32 | Kind::Sfixed32 => "fixed32",
        Kind::Fixed64 | Kind::Sfixed64 => "fixed64",
        Kind::String | Kind::Bytes => "length-delimited",
        Kind::Float => "float",
        Kind::Double => "double",
        Kind::Message(_) => "message",
        Kind::Enum(_) => "enum",
    }
}

/// Whether data written with the `writer` `.proto` can be read with the `reader` one, by the
/// registry's Protobuf rules for the cases tests use: a message of the writer missing from the
/// reader is `MESSAGE_REMOVED`; a field number both use must keep its kind
/// (`FIELD_KIND_CHANGED` between scalar, message, enum, list and map;
/// `FIELD_SCALAR_KIND_CHANGED` across wire families; `FIELD_NAMED_TYPE_CHANGED` for another
/// message or enum type). Removing or adding a field is compatible.
#[cfg(feature = "protobuf")]
fn proto_can_read(writer: &str, reader: &str) -> Result<(), String> {
    use prost_reflect::Kind;
    let (written, read) = (proto_pool(writer)?, proto_pool(reader)?);
    let mut out = Vec::new();
    for message in written.all_messages() {
        let name = message.full_name();
        let Some(counterpart) = read.get_message_by_name(name) else {
            out.push(format!("MESSAGE_REMOVED {name}"));
            continue;
        };
        for field in message.fields() {
            let Some(other) = counterpart.get_field(field.number()) else {
                continue;
            };
            let at = format!("{name}.{} (field {})", field.name(), field.number());
            let (was, is) = (field.kind(), other.kind());
            let difference =
                if field.is_list() != other.is_list() || field.is_map() != other.is_map() {
                    Some("FIELD_KIND_CHANGED")
                } else {
                    match (&was, &is) {
                        (Kind::Message(a), Kind::Message(b)) => {
                            (a.full_name() != b.full_name()).then_some("FIELD_NAMED_TYPE_CHANGED")
                        }
                        (Kind::Enum(a), Kind::Enum(b)) => {
                            (a.full_name() != b.full_name()).then_some("FIELD_NAMED_TYPE_CHANGED")
                        }
                        _ if wire_family(&was) == wire_family(&is) => None,
                        (Kind::Message(_) | Kind::Enum(_), _)
                        | (_, Kind::Message(_) | Kind::Enum(_)) => Some("FIELD_KIND_CHANGED"),
                        _ => Some("FIELD_SCALAR_KIND_CHANGED"),
                    }
                };
            if let Some(difference) = difference {
                out.push(format!("{difference} at {at}"));
            }
        }
    }
    if out.is_empty() {
        Ok(())
    } else {
        Err(out.join(", "))
    }
}

#[cfg(feature = "protobuf")]
struct OneFile(String);

#[cfg(feature = "protobuf")]
impl protox::file::FileResolver for OneFile {
    fn open_file(&self, name: &str) -> Result<protox::file::File, protox::Error> {
        if name == "double.proto" {
            protox::file::File::from_source(name, &self.0)
        } else {
            Err(protox::Error::file_not_found(name))
        }
    }
}

/// Whether data written with `writer` can be read with `reader` (Avro schema resolution, or
/// the JSON Schema rules of [`json_can_read`]).
fn can_read(kind: &str, writer: &str, reader: &str) -> Result<(), String> {
    if kind == "JSON" {
        let w: Value = serde_json::from_str(writer).map_err(|e| e.to_string())?;
        let r: Value = serde_json::from_str(reader).map_err(|e| e.to_string())?;
        let mut reasons = Vec::new();
        json_can_read(&Side::new(&w), &Side::new(&r), "#", 0, &mut reasons);
        return if reasons.is_empty() {
            Ok(())
        } else {
            Err(reasons.join(", "))
        };
    }
    if kind == "PROTOBUF" {
        #[cfg(feature = "protobuf")]
        return proto_can_read(writer, reader);
    }
    if kind != "AVRO" {
        return Ok(());
    }
    #[cfg(feature = "avro")]
    {
        let w = apache_avro::Schema::parse_str(writer).map_err(|e| e.to_string())?;
        let r = apache_avro::Schema::parse_str(reader).map_err(|e| e.to_string())?;
        apache_avro::schema_compatibility::SchemaCompatibility::can_read(&w, &r)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
    #[cfg(not(feature = "avro"))]
    {
        let _ = (writer, reader);
        Ok(())
    }
}

/// One schema document and a node inside it: `$ref`s resolve against the document's root.
#[derive(Clone, Copy)]
struct Side<'a> {
    root: &'a Value,
    node: &'a Value,
}

impl<'a> Side<'a> {
    fn new(root: &'a Value) -> Self {
        Self { root, node: root }
    }

    fn at(self, node: &'a Value) -> Self {
        Self {
            root: self.root,
            node,
        }
    }

    /// The node with local `$ref`s (`#/...`) followed; a ref that leads nowhere stays as is.
    fn resolved(self) -> Self {
        let mut node = self.node;
        for _ in 0..16 {
            let Some(pointer) = node
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix('#'))
            else {
                break;
            };
            match self.root.pointer(pointer) {
                Some(target) => node = target,
                None => break,
            }
        }
        self.at(node)
    }

    /// The `type` keyword as a list; empty when any type goes.
    fn types(self) -> Vec<&'a str> {
        match self.node.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        }
    }

    fn properties(self) -> Option<&'a serde_json::Map<String, Value>> {
        self.node.get("properties").and_then(Value::as_object)
    }

    fn required(self, name: &str) -> bool {
        self.node
            .get("required")
            .and_then(Value::as_array)
            .is_some_and(|r| r.iter().any(|n| n.as_str() == Some(name)))
    }

    /// Open unless `additionalProperties` is `false`: undeclared properties are allowed.
    fn open(self) -> bool {
        self.node.get("additionalProperties") != Some(&Value::Bool(false))
    }
}

/// Whether every document valid under `writer` is read by `reader`, by the rules the
/// registry documents for JSON Schema; each failure is recorded as the registry's difference
/// name and the place it was found.
///
/// - A type the reader no longer accepts is `TYPE_CHANGED` (`TYPE_NARROWED` if some remain);
///   `integer` read as `number` is an extension, the other way round a narrowing. Enum values dropped: `ENUM_ARRAY_NARROWED`.
/// - Objects: closing an open model is `ADDITIONAL_PROPERTIES_REMOVED`; a property added to
///   an open model is `PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL` (old data may hold anything under
///   that name); added to a closed model it is fine unless required without a default
///   (`REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL`); a property removed from a closed
///   model is `PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL`; an existing property becoming
///   required is `REQUIRED_ATTRIBUTE_ADDED`. Shared properties and array items are compared
///   the same way, recursively.
fn json_can_read(
    writer: &Side<'_>,
    reader: &Side<'_>,
    path: &str,
    depth: usize,
    out: &mut Vec<String>,
) {
    if depth > 32 {
        return;
    }
    let (writer, reader) = (writer.resolved(), reader.resolved());
    let (wt, rt) = (writer.types(), reader.types());
    if !rt.is_empty() {
        // Whether the reader takes each written type: wholly, only in part (a `number` read
        // as `integer`), or not at all.
        let wholly = |t: &str| rt.contains(&t) || (t == "integer" && rt.contains(&"number"));
        let partly = |t: &str| t == "number" && rt.contains(&"integer");
        if !wt.is_empty() && wt.iter().all(|t| !wholly(t) && !partly(t)) {
            out.push(format!("TYPE_CHANGED at {path}"));
            return;
        }
        if wt.is_empty() || wt.iter().any(|t| !wholly(t)) {
            out.push(format!("TYPE_NARROWED at {path}"));
        }
    }
    if let Some(allowed) = reader.node.get("enum").and_then(Value::as_array) {
        let narrowed = match writer.node.get("enum").and_then(Value::as_array) {
            Some(written) => written.iter().any(|v| !allowed.contains(v)),
            None => true,
        };
        if narrowed {
            out.push(format!("ENUM_ARRAY_NARROWED at {path}"));
        }
    }
    if let (Some(wi), Some(ri)) = (writer.node.get("items"), reader.node.get("items"))
        && wi.is_object()
        && ri.is_object()
    {
        json_can_read(
            &writer.at(wi),
            &reader.at(ri),
            &format!("{path}/items"),
            depth + 1,
            out,
        );
    }
    let (wp, rp) = (writer.properties(), reader.properties());
    if wp.is_none() && rp.is_none() {
        return;
    }
    let empty = serde_json::Map::new();
    let (wp, rp) = (wp.unwrap_or(&empty), rp.unwrap_or(&empty));
    if writer.open() && !reader.open() {
        out.push(format!("ADDITIONAL_PROPERTIES_REMOVED at {path}"));
    }
    for (name, schema) in rp {
        let at = format!("{path}/properties/{name}");
        match wp.get(name) {
            None if writer.open() => {
                out.push(format!("PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL at {at}"));
            }
            None if reader.required(name) && schema.get("default").is_none() => {
                out.push(format!(
                    "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL at {at}"
                ));
            }
            None => {}
            Some(written) => {
                if reader.required(name) && !writer.required(name) {
                    out.push(format!("REQUIRED_ATTRIBUTE_ADDED at {at}"));
                }
                json_can_read(&writer.at(written), &reader.at(schema), &at, depth + 1, out);
            }
        }
    }
    if !reader.open() {
        for name in wp.keys().filter(|n| !rp.contains_key(*n)) {
            out.push(format!(
                "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL at {path}/properties/{name}"
            ));
        }
    }
}

fn level_of(book: &Book, subject: &str) -> String {
    book.subjects
        .get(subject)
        .and_then(|s| s.level.clone())
        .or_else(|| book.level.clone())
        .unwrap_or_else(|| "BACKWARD".to_owned())
}

/// The reasons `text` may not join `subject`, per its level; empty when it may.
fn incompatibilities(book: &Book, subject: &str, kind: &str, text: &str) -> Vec<String> {
    let Some(entry) = book.subjects.get(subject) else {
        return Vec::new();
    };
    let level = level_of(book, subject);
    let live: Vec<(usize, u32)> = entry
        .versions
        .iter()
        .enumerate()
        .filter_map(|(i, id)| id.map(|id| (i + 1, id)))
        .collect();
    let against: Vec<(usize, u32)> = if level.ends_with("_TRANSITIVE") {
        live
    } else {
        live.last().copied().into_iter().collect()
    };
    let (backward, forward) = match level.trim_end_matches("_TRANSITIVE") {
        "NONE" => (false, false),
        "BACKWARD" => (true, false),
        "FORWARD" => (false, true),
        _ => (true, true),
    };
    let mut reasons = Vec::new();
    for (version, id) in against {
        let old = &book.schemas[id as usize - 1];
        if old.kind != kind {
            reasons.push(format!("version {version} is {}, not {kind}", old.kind));
            continue;
        }
        if backward && let Err(e) = can_read(kind, &old.text, text) {
            reasons.push(format!(
                "{level}: the new schema cannot read data written with version {version}: {e}"
            ));
        }
        if forward && let Err(e) = can_read(kind, text, &old.text) {
            reasons.push(format!(
                "{level}: version {version} cannot read data written with the new schema: {e}"
            ));
        }
    }
    reasons
}

fn id_for(book: &mut Book, kind: &str, text: &str, identity: String) -> u32 {
    if let Some(i) = book
        .schemas
        .iter()
        .position(|s| s.kind == kind && s.identity == identity)
    {
        return i as u32 + 1;
    }
    book.schemas.push(Stored {
        kind: kind.to_owned(),
        text: text.to_owned(),
        identity,
    });
    book.schemas.len() as u32
}

fn register(book: &mut Book, subject: &str, kind: &str, text: &str) -> Result<u32, Failure> {
    let identity = identity(kind, text)?;
    if let Some(entry) = book.subjects.get(subject) {
        for id in entry.versions.iter().flatten() {
            let s = &book.schemas[*id as usize - 1];
            if s.kind == kind && s.identity == identity {
                return Ok(*id);
            }
        }
    }
    let reasons = incompatibilities(book, subject, kind, text);
    if !reasons.is_empty() {
        return Err(refuse(
            StatusCode::CONFLICT,
            409,
            format!(
                "Schema being registered is incompatible with an earlier schema for subject \
                 \"{subject}\", details: {}",
                reasons.join("; ")
            ),
        ));
    }
    let id = id_for(book, kind, text, identity);
    book.subjects
        .entry(subject.to_owned())
        .or_default()
        .versions
        .push(Some(id));
    Ok(id)
}

fn schema_body(body: &Bytes) -> Result<(String, String), Failure> {
    let doc: Value = serde_json::from_slice(body)
        .map_err(|e| refuse(StatusCode::UNPROCESSABLE_ENTITY, 42201, e.to_string()))?;
    let text = doc
        .get("schema")
        .and_then(Value::as_str)
        .ok_or_else(|| refuse(StatusCode::UNPROCESSABLE_ENTITY, 42201, "no schema field"))?;
    let kind = doc
        .get("schemaType")
        .and_then(Value::as_str)
        .unwrap_or("AVRO");
    Ok((kind.to_owned(), text.to_owned()))
}

fn version_body(book: &Book, subject: &str, version: usize, id: u32) -> Value {
    let s = &book.schemas[id as usize - 1];
    let mut body = json!({
        "subject": subject,
        "version": version,
        "id": id,
        "schema": s.text,
    });
    if s.kind != "AVRO" {
        body["schemaType"] = json!(s.kind);
    }
    body
}

fn subject_missing(subject: &str) -> Failure {
    refuse(
        StatusCode::NOT_FOUND,
        40401,
        format!("Subject '{subject}' not found."),
    )
}

fn route(
    book: &mut Book,
    method: &Method,
    segments: &[String],
    body: &Bytes,
) -> Result<Value, Failure> {
    let parts: Vec<&str> = segments.iter().map(String::as_str).collect();
    match (method.as_str(), parts.as_slice()) {
        ("GET", ["schemas", "ids", id, ..]) => {
            let id: usize = id.parse().unwrap_or(0);
            let s = id
                .checked_sub(1)
                .and_then(|i| book.schemas.get(i))
                .ok_or_else(|| refuse(StatusCode::NOT_FOUND, 40403, "Schema not found"))?;
            if parts.len() == 4 && parts[3] == "versions" {
                let uses: Vec<Value> = book
                    .subjects
                    .iter()
                    .flat_map(|(name, sub)| {
                        sub.versions
                            .iter()
                            .enumerate()
                            .filter(move |(_, i)| **i == Some(id as u32))
                            .map(move |(v, _)| json!({"subject": name, "version": v + 1}))
                    })
                    .collect();
                return Ok(Value::Array(uses));
            }
            let mut out = json!({ "schema": s.text });
            if s.kind != "AVRO" {
                out["schemaType"] = json!(s.kind);
            }
            Ok(out)
        }
        ("GET", ["subjects"]) => Ok(json!(book.subjects.keys().collect::<Vec<_>>())),
        ("GET", ["subjects", subject, "versions"]) => {
            let entry = book
                .subjects
                .get(*subject)
                .ok_or_else(|| subject_missing(subject))?;
            let versions: Vec<usize> = entry
                .versions
                .iter()
                .enumerate()
                .filter_map(|(i, id)| id.map(|_| i + 1))
                .collect();
            Ok(json!(versions))
        }
        ("GET", ["subjects", subject, "versions", version]) => {
            let entry = book
                .subjects
                .get(*subject)
                .ok_or_else(|| subject_missing(subject))?;
            let (number, id) = if *version == "latest" || *version == "-1" {
                entry
                    .versions
                    .iter()
                    .enumerate()
                    .rev()
                    .find_map(|(i, id)| id.map(|id| (i + 1, id)))
                    .ok_or_else(|| subject_missing(subject))?
            } else {
                let n: usize = version.parse().unwrap_or(0);
                let id = n
                    .checked_sub(1)
                    .and_then(|i| entry.versions.get(i).copied().flatten())
                    .ok_or_else(|| refuse(StatusCode::NOT_FOUND, 40402, "Version not found."))?;
                (n, id)
            };
            Ok(version_body(book, subject, number, id))
        }
        ("POST", ["subjects", subject, "versions"]) => {
            let (kind, text) = schema_body(body)?;
            let id = register(book, subject, &kind, &text)?;
            Ok(json!({ "id": id }))
        }
        ("POST", ["subjects", subject]) => {
            let (kind, text) = schema_body(body)?;
            let identity = identity(&kind, &text)?;
            let entry = book
                .subjects
                .get(*subject)
                .ok_or_else(|| subject_missing(subject))?;
            let found = entry.versions.iter().enumerate().find_map(|(i, id)| {
                let id = (*id)?;
                let s = &book.schemas[id as usize - 1];
                (s.kind == kind && s.identity == identity).then_some((i + 1, id))
            });
            let (version, id) =
                found.ok_or_else(|| refuse(StatusCode::NOT_FOUND, 40403, "Schema not found"))?;
            Ok(version_body(book, subject, version, id))
        }
        ("POST", ["compatibility", "subjects", _, "versions"]) if book.no_level_wide_check => {
            Err((StatusCode::NOT_FOUND, json!("Not Found")))
        }
        ("POST", ["compatibility", "subjects", subject, "versions", ..]) => {
            let (kind, text) = schema_body(body)?;
            identity(&kind, &text)?;
            if !book.subjects.contains_key(*subject) {
                return Err(subject_missing(subject));
            }
            let reasons = incompatibilities(book, subject, &kind, &text);
            Ok(json!({ "is_compatible": reasons.is_empty(), "messages": reasons }))
        }
        ("GET", ["config"]) => Ok(json!({
            "compatibilityLevel": book.level.clone().unwrap_or_else(|| "BACKWARD".into())
        })),
        ("GET", ["config", subject]) => {
            Ok(json!({ "compatibilityLevel": level_of(book, subject) }))
        }
        ("PUT", ["config", rest @ ..]) => {
            let doc: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
            let level = doc
                .get("compatibility")
                .and_then(Value::as_str)
                .filter(|l| {
                    matches!(
                        *l,
                        "NONE"
                            | "BACKWARD"
                            | "FORWARD"
                            | "FULL"
                            | "BACKWARD_TRANSITIVE"
                            | "FORWARD_TRANSITIVE"
                            | "FULL_TRANSITIVE"
                    )
                })
                .ok_or_else(|| {
                    refuse(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        42203,
                        "Invalid compatibility level",
                    )
                })?
                .to_owned();
            match rest {
                [] => book.level = Some(level.clone()),
                [subject] => {
                    book.subjects
                        .entry((*subject).to_owned())
                        .or_default()
                        .level = Some(level.clone());
                }
                _ => return Err(refuse(StatusCode::NOT_FOUND, 404, "no such endpoint")),
            }
            Ok(json!({ "compatibility": level }))
        }
        ("DELETE", ["subjects", subject]) => {
            let entry = book
                .subjects
                .remove(*subject)
                .ok_or_else(|| subject_missing(subject))?;
            let versions: Vec<usize> = entry
                .versions
                .iter()
                .enumerate()
                .filter_map(|(i, id)| id.map(|_| i + 1))
                .collect();
            Ok(json!(versions))
        }
        _ => Err(refuse(StatusCode::NOT_FOUND, 404, "HTTP 404 Not Found")),
    }
}

async fn answer(
    State(book): State<Arc<Mutex<Book>>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path();
    let segments: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(decode_segment)
        .collect();
    let (delay, outcome) = {
        let mut book = book.lock().unwrap();
        book.seen.push(Seen {
            method: method.to_string(),
            path: uri
                .path_and_query()
                .map_or_else(|| path.to_owned(), |p| p.as_str().to_owned()),
            authorization: headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
        });
        (book.delay, route(&mut book, &method, &segments, &body))
    };
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let (status, body) = match outcome {
        Ok(body) => (StatusCode::OK, body),
        Err(failure) => failure,
    };
    (status, [(header::CONTENT_TYPE, MEDIA)], body.to_string()).into_response()
}
