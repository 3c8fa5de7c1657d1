// A KIP-714 client-telemetry receiver for the brokers of scripts/kafka: it writes every
// PushTelemetry payload a broker accepts as one JSON line to
// $ruststream.telemetry.dir/node-<node.id>.jsonl, which the live tests of the client's KIP-714
// push read (scripts/kafka sets metric.reporters=TelemetryReceiver and the directory,
// $KAFKA_WORK/telemetry, printed by `scripts/kafka env` as KAFKA_TELEMETRY_DIR).
//
// A broker lists GetTelemetrySubscriptions and PushTelemetry in its ApiVersions only when one of
// its metric.reporters implements ClientTelemetry. It hands over every push whose metrics are not
// empty, already decompressed. One line per push:
//
//   {"client_instance_id":"<uuid>","client_id":"...","terminating":false,
//    "content_type":"...","bytes":123,"resource":{"k":"v"},
//    "metrics":[{"name":"org.apache.kafka.producer...","kind":"gauge",
//                "points":[{"attributes":{"node.id":"1"},"value":1.5}]},
//               {"name":"...","kind":"sum","monotonic":true,"temporality":"cumulative",
//                "points":[...]},
//               {"name":"...","kind":"histogram","temporality":"delta",
//                "points":[{"attributes":{},"value":<sum>,"count":3}]}]}
//
// A payload that is not OTLP MetricsData gives {"client_instance_id":"...","error":"..."} and
// an exception, which the broker answers with INVALID_RECORD.
//
// Compiled by scripts/kafka against the broker's own kafka-clients jar (3.9.x, 4.1.x, 4.4.0): it
// uses only what that jar has, the OTLP classes and protobuf runtime shaded inside it.
// ClientTelemetry is deprecated for removal since 4.2 (ClientTelemetryExporterProvider), but it is
// the one interface all three versions have and still honour.
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Base64;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.metrics.MetricsReporter;
import org.apache.kafka.server.authorizer.AuthorizableRequestContext;
import org.apache.kafka.server.telemetry.ClientTelemetry;
import org.apache.kafka.server.telemetry.ClientTelemetryPayload;
import org.apache.kafka.server.telemetry.ClientTelemetryReceiver;
import org.apache.kafka.shaded.io.opentelemetry.proto.common.v1.AnyValue;
import org.apache.kafka.shaded.io.opentelemetry.proto.common.v1.KeyValue;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.AggregationTemporality;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.HistogramDataPoint;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.Metric;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.MetricsData;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.NumberDataPoint;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.ResourceMetrics;
import org.apache.kafka.shaded.io.opentelemetry.proto.metrics.v1.ScopeMetrics;

@SuppressWarnings({"deprecation", "removal"})
public class TelemetryReceiver implements MetricsReporter, ClientTelemetry, ClientTelemetryReceiver {
    public static final String DIR_CONFIG = "ruststream.telemetry.dir";

    // A combined broker+controller may make more than one instance; all append to the same file,
    // and each line must reach it whole (a test reads the file while pushes arrive).
    private static final Object LOCK = new Object();

    private Path file;

    @Override
    public void configure(Map<String, ?> configs) {
        Object dir = configs.get(DIR_CONFIG);
        if (dir == null || dir.toString().isEmpty()) {
            throw new ConfigException(DIR_CONFIG + " is not set (TelemetryReceiver needs a directory)");
        }
        Object nodeId = configs.get("node.id");
        try {
            Path d = Paths.get(dir.toString());
            Files.createDirectories(d);
            file = d.resolve("node-" + (nodeId == null ? "unknown" : nodeId.toString()) + ".jsonl");
        } catch (IOException e) {
            throw new ConfigException(DIR_CONFIG + "=" + dir + ": " + e);
        }
    }

    @Override public void init(List<KafkaMetric> metrics) {}
    @Override public void metricChange(KafkaMetric metric) {}
    @Override public void metricRemoval(KafkaMetric metric) {}
    @Override public void close() {}

    @Override
    public ClientTelemetryReceiver clientReceiver() {
        return this;
    }

    @Override
    public void exportMetrics(AuthorizableRequestContext context, ClientTelemetryPayload payload) {
        // duplicate(): the buffer may be shared with other receivers; do not move its position
        ByteBuffer data = payload.data().duplicate();
        StringBuilder line = new StringBuilder(1024);
        line.append("{\"client_instance_id\":");
        str(line, String.valueOf(payload.clientInstanceId()));
        MetricsData md;
        try {
            md = MetricsData.parseFrom(data.duplicate());
        } catch (Exception e) {
            line.append(",\"error\":");
            str(line, "cannot parse " + data.remaining() + " bytes as OTLP MetricsData: " + e.getMessage());
            append(line.append('}'));
            throw new IllegalArgumentException("TelemetryReceiver: not OTLP MetricsData: " + e.getMessage(), e);
        }
        line.append(",\"client_id\":");
        str(line, context.clientId());
        line.append(",\"terminating\":").append(payload.isTerminating());
        line.append(",\"content_type\":");
        str(line, payload.contentType());
        line.append(",\"bytes\":").append(data.remaining());
        // Kafka's clients send one ResourceMetrics; the attributes of several are merged
        line.append(",\"resource\":{");
        boolean first = true;
        for (ResourceMetrics rm : md.getResourceMetricsList()) {
            for (KeyValue kv : rm.getResource().getAttributesList()) {
                if (!first) line.append(',');
                first = false;
                str(line, kv.getKey());
                line.append(':');
                any(line, kv.getValue());
            }
        }
        line.append("},\"metrics\":[");
        first = true;
        for (ResourceMetrics rm : md.getResourceMetricsList()) {
            for (ScopeMetrics sm : rm.getScopeMetricsList()) {
                for (Metric m : sm.getMetricsList()) {
                    if (!first) line.append(',');
                    first = false;
                    metric(line, m);
                }
            }
        }
        line.append("]}");
        append(line);
    }

    private static void metric(StringBuilder b, Metric m) {
        b.append("{\"name\":");
        str(b, m.getName());
        b.append(",\"kind\":");
        switch (m.getDataCase()) {
            case GAUGE:
                b.append("\"gauge\",\"points\":[");
                numberPoints(b, m.getGauge().getDataPointsList());
                break;
            case SUM:
                b.append("\"sum\",\"monotonic\":").append(m.getSum().getIsMonotonic());
                temporality(b, m.getSum().getAggregationTemporality());
                b.append(",\"points\":[");
                numberPoints(b, m.getSum().getDataPointsList());
                break;
            case HISTOGRAM:
                b.append("\"histogram\"");
                temporality(b, m.getHistogram().getAggregationTemporality());
                b.append(",\"points\":[");
                String sep = "";
                for (HistogramDataPoint p : m.getHistogram().getDataPointsList()) {
                    b.append(sep).append("{\"attributes\":");
                    attributes(b, p.getAttributesList());
                    b.append(",\"value\":");
                    num(b, p.getSum());
                    b.append(",\"count\":").append(p.getCount()).append('}');
                    sep = ",";
                }
                break;
            default:
                // Kafka's clients send gauges and sums only; name anything else, without points
                str(b, m.getDataCase().name().toLowerCase(java.util.Locale.ROOT));
                b.append(",\"points\":[");
        }
        b.append("]}");
    }

    private static void temporality(StringBuilder b, AggregationTemporality t) {
        b.append(",\"temporality\":");
        switch (t) {
            case AGGREGATION_TEMPORALITY_DELTA: b.append("\"delta\""); break;
            case AGGREGATION_TEMPORALITY_CUMULATIVE: b.append("\"cumulative\""); break;
            default: b.append("\"unspecified\"");
        }
    }

    private static void numberPoints(StringBuilder b, List<NumberDataPoint> points) {
        String sep = "";
        for (NumberDataPoint p : points) {
            b.append(sep).append("{\"attributes\":");
            attributes(b, p.getAttributesList());
            b.append(",\"value\":");
            if (p.getValueCase() == NumberDataPoint.ValueCase.AS_INT) b.append(p.getAsInt());
            else num(b, p.getAsDouble());
            b.append('}');
            sep = ",";
        }
    }

    private static void attributes(StringBuilder b, List<KeyValue> kvs) {
        b.append('{');
        String sep = "";
        for (KeyValue kv : kvs) {
            b.append(sep);
            str(b, kv.getKey());
            b.append(':');
            any(b, kv.getValue());
            sep = ",";
        }
        b.append('}');
    }

    private static void any(StringBuilder b, AnyValue v) {
        switch (v.getValueCase()) {
            case STRING_VALUE: str(b, v.getStringValue()); break;
            case BOOL_VALUE: b.append(v.getBoolValue()); break;
            case INT_VALUE: b.append(v.getIntValue()); break;
            case DOUBLE_VALUE: num(b, v.getDoubleValue()); break;
            case BYTES_VALUE: str(b, Base64.getEncoder().encodeToString(v.getBytesValue().toByteArray())); break;
            case ARRAY_VALUE: {
                b.append('[');
                String sep = "";
                for (AnyValue e : v.getArrayValue().getValuesList()) { b.append(sep); any(b, e); sep = ","; }
                b.append(']');
                break;
            }
            case KVLIST_VALUE: attributes(b, v.getKvlistValue().getValuesList()); break;
            default: b.append("null");
        }
    }

    // JSON has no NaN or infinities: those become strings ("NaN", "Infinity", "-Infinity")
    private static void num(StringBuilder b, double d) {
        if (Double.isFinite(d)) b.append(d);
        else str(b, Double.toString(d));
    }

    private static void str(StringBuilder b, String s) {
        if (s == null) { b.append("null"); return; }
        b.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': b.append("\\\""); break;
                case '\\': b.append("\\\\"); break;
                case '\n': b.append("\\n"); break;
                case '\r': b.append("\\r"); break;
                case '\t': b.append("\\t"); break;
                default:
                    // (a lone surrogate, which no Kafka string has, becomes '?' in getBytes)
                    if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
                    else b.append(c);
            }
        }
        b.append('"');
    }

    // One write(2) per line with O_APPEND, under the lock: a reader sees whole lines only.
    private void append(StringBuilder line) {
        byte[] bytes = line.append('\n').toString().getBytes(StandardCharsets.UTF_8);
        synchronized (LOCK) {
            try (FileOutputStream out = new FileOutputStream(file.toFile(), true)) {
                out.write(bytes);
                out.flush();
            } catch (IOException e) {
                throw new UncheckedIOException("TelemetryReceiver: cannot append to " + file, e);
            }
        }
    }
}
