//! The OTLP metrics encoding a KIP-714 push carries: `opentelemetry.proto.metrics.v1.MetricsData`
//! in protobuf, written by hand for the few messages a push needs.
//!
//! Invariant: the bytes are valid protobuf of the OTLP schema (field numbers and wire types as
//! `metrics.proto`, `common.proto` and `resource.proto` of opentelemetry-proto 1.x define them),
//! so any OTLP decoder reads them; the broker's receiver plugin in the live tests decodes them
//! with the OTLP classes Kafka ships.

/// One metric: a name and its points.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Metric {
    pub(super) name: String,
    pub(super) data: Data,
}

/// A metric's kind.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Data {
    /// The value now.
    Gauge(Vec<Point>),
    /// A count, since the previous push (`delta`) or since the client started.
    Sum { points: Vec<Point>, delta: bool },
}

impl Data {
    pub(super) fn points(&self) -> &[Point] {
        match self {
            Data::Gauge(p) | Data::Sum { points: p, .. } => p,
        }
    }
}

/// One data point.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Point {
    pub(super) attributes: Vec<(&'static str, Attribute)>,
    /// Where a sum's count starts (unused for gauges).
    pub(super) start_nanos: u64,
    pub(super) time_nanos: u64,
    pub(super) value: Value,
}

/// An attribute's value.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Attribute {
    Str(String),
    Int(i64),
}

/// A point's value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Value {
    Int(i64),
    Double(f64),
}

// Wire types.
const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;

// OTLP's AggregationTemporality.
const DELTA: u64 = 1;
const CUMULATIVE: u64 = 2;

/// `MetricsData` with one resource (its attributes) and one scope (this crate, its version).
pub(super) fn metrics_data(resource: &[(&'static str, Attribute)], metrics: &[Metric]) -> Vec<u8> {
    let mut resource_metrics = Vec::new();
    let mut res = Vec::new();
    for (key, value) in resource {
        message(&mut res, 1, &key_value(key, value));
    }
    message(&mut resource_metrics, 1, &res);
    let mut scope_metrics = Vec::new();
    let mut scope = Vec::new();
    string(&mut scope, 1, env!("CARGO_PKG_NAME"));
    string(&mut scope, 2, env!("CARGO_PKG_VERSION"));
    message(&mut scope_metrics, 1, &scope);
    for metric in metrics {
        message(&mut scope_metrics, 2, &encode_metric(metric));
    }
    message(&mut resource_metrics, 2, &scope_metrics);
    let mut out = Vec::with_capacity(resource_metrics.len() + 8);
    message(&mut out, 1, &resource_metrics);
    out
}

/// One `Metric`, encoded alone: the push keeps whole metrics under the broker's size limit.
pub(super) fn encode_metric(metric: &Metric) -> Vec<u8> {
    let mut out = Vec::new();
    string(&mut out, 1, &metric.name);
    let mut data = Vec::new();
    for point in metric.data.points() {
        message(&mut data, 1, &encode_point(point));
    }
    match &metric.data {
        Data::Gauge(_) => message(&mut out, 5, &data),
        Data::Sum { delta, .. } => {
            varint_field(&mut data, 2, if *delta { DELTA } else { CUMULATIVE });
            varint_field(&mut data, 3, 1); // is_monotonic: counts only grow
            message(&mut out, 7, &data);
        }
    }
    out
}

fn encode_point(point: &Point) -> Vec<u8> {
    let mut out = Vec::new();
    if point.start_nanos != 0 {
        fixed64(&mut out, 2, point.start_nanos);
    }
    fixed64(&mut out, 3, point.time_nanos);
    match point.value {
        Value::Double(v) => fixed64(&mut out, 4, v.to_bits()),
        Value::Int(v) => fixed64(&mut out, 6, u64::from_ne_bytes(v.to_ne_bytes())),
    }
    for (key, value) in &point.attributes {
        message(&mut out, 7, &key_value(key, value));
    }
    out
}

fn key_value(key: &str, value: &Attribute) -> Vec<u8> {
    let mut out = Vec::new();
    string(&mut out, 1, key);
    let mut any = Vec::new();
    match value {
        Attribute::Str(s) => string(&mut any, 1, s),
        Attribute::Int(i) => varint_field(&mut any, 3, u64::from_ne_bytes(i.to_ne_bytes())),
    }
    message(&mut out, 2, &any);
    out
}

fn tag(out: &mut Vec<u8>, field: u32, wire: u8) {
    varint(out, (u64::from(field) << 3) | u64::from(wire));
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn varint_field(out: &mut Vec<u8>, field: u32, v: u64) {
    tag(out, field, VARINT);
    varint(out, v);
}

fn fixed64(out: &mut Vec<u8>, field: u32, v: u64) {
    tag(out, field, FIXED64);
    out.extend_from_slice(&v.to_le_bytes());
}

fn message(out: &mut Vec<u8>, field: u32, body: &[u8]) {
    tag(out, field, LEN);
    varint(out, body.len() as u64);
    out.extend_from_slice(body);
}

fn string(out: &mut Vec<u8>, field: u32, s: &str) {
    message(out, field, s.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_are_little_endian_groups_of_seven_bits() {
        let mut out = Vec::new();
        varint(&mut out, 300);
        assert_eq!(out, [0xac, 0x02]);
        out.clear();
        varint(&mut out, u64::MAX);
        assert_eq!(out.len(), 10);
        assert_eq!(out[9], 0x01);
    }

    #[test]
    fn a_gauge_point_is_encoded_as_otlp_defines_it() {
        let metric = Metric {
            name: "m".into(),
            data: Data::Gauge(vec![Point {
                attributes: vec![("node.id", Attribute::Int(1))],
                start_nanos: 0,
                time_nanos: 2,
                value: Value::Double(1.5),
            }]),
        };
        let mut point = vec![0x19]; // field 3, fixed64: time_unix_nano
        point.extend_from_slice(&2u64.to_le_bytes());
        point.push(0x21); // field 4, fixed64: as_double
        point.extend_from_slice(&1.5f64.to_bits().to_le_bytes());
        // field 7 (attributes): KeyValue { key "node.id", value AnyValue { int_value 1 } }
        point.extend_from_slice(&[0x3a, 0x0d, 0x0a, 0x07]);
        point.extend_from_slice(b"node.id");
        point.extend_from_slice(&[0x12, 0x02, 0x18, 0x01]);
        let mut gauge = vec![0x0a, u8::try_from(point.len()).unwrap_or(0)];
        gauge.extend_from_slice(&point);
        let mut expected = vec![
            0x0a,
            0x01,
            b'm',
            0x2a,
            u8::try_from(gauge.len()).unwrap_or(0),
        ];
        expected.extend_from_slice(&gauge);
        assert_eq!(encode_metric(&metric), expected);
    }

    #[test]
    fn a_sum_says_its_temporality_and_that_it_is_monotonic() {
        let metric = Metric {
            name: "c".into(),
            data: Data::Sum {
                points: vec![Point {
                    attributes: Vec::new(),
                    start_nanos: 1,
                    time_nanos: 2,
                    value: Value::Int(-1),
                }],
                delta: true,
            },
        };
        let bytes = encode_metric(&metric);
        // name, then field 7 (sum) whose body ends with temporality 1 and is_monotonic 1
        assert_eq!(&bytes[..4], &[0x0a, 0x01, b'c', 0x3a]);
        assert_eq!(&bytes[bytes.len() - 4..], &[0x10, 0x01, 0x18, 0x01]);
        // the int value is sfixed64 (field 6) in two's complement
        let at = bytes
            .windows(9)
            .position(|w| w[0] == 0x31)
            .unwrap_or(usize::MAX);
        assert_eq!(bytes.get(at + 1..at + 9), Some(&[0xff; 8][..]));
    }

    #[test]
    fn metrics_data_nests_resource_scope_and_metrics() {
        let bytes = metrics_data(&[("client_id", Attribute::Str("svc".into()))], &[]);
        // MetricsData.resource_metrics (1) > ResourceMetrics.resource (1) > Resource.attributes (1)
        assert_eq!(bytes[0], 0x0a);
        assert_eq!(bytes[2], 0x0a);
        assert_eq!(bytes[4], 0x0a);
        let text = String::from_utf8_lossy(&bytes);
        assert!(text.contains("client_id") && text.contains("svc"));
        assert!(text.contains(env!("CARGO_PKG_NAME")));
    }
}
