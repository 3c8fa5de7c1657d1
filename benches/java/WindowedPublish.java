// benches/java/WindowedPublish.java: Apache Kafka's own Java producer doing what the
// comparison's `publish` child does (benches/compare/src/main.rs), so `scripts/java-compare`
// can put the protocol's reference client beside both Rust crates on the same broker.
//
// The settings are librdkafka's defaults where the two clients' defaults differ, so the three
// clients batch alike: linger.ms 5, batch.size 1 000 000, idempotence off; acks=all as in the
// comparison. Records are keyless 512-byte JSON bodies; WINDOW of them are in flight, a new one
// sent as each is acknowledged.
//
// Usage: java -cp CLASSPATH WindowedPublish URL TOPIC RECORDS WINDOW WARMUPS
// It publishes RECORDS WARMUPS times to let the JIT compile the path, then once more, and prints
// `RESULT rate=R request_latency_ms=L records_per_request=N` for that last round: records/s, and
// the client's own metrics of a Produce request's round trip and size (averages over its recent
// samples). A failed send fails the program.

import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class WindowedPublish {
    private static final int BODY_SIZE = 512;

    public static void main(String[] args) throws Exception {
        if (args.length != 5) {
            System.err.println("usage: WindowedPublish URL TOPIC RECORDS WINDOW WARMUPS");
            System.exit(2);
        }
        String url = args[0];
        String topic = args[1];
        int records = Integer.parseInt(args[2]);
        int window = Integer.parseInt(args[3]);
        int warmups = Integer.parseInt(args[4]);

        StringBuilder json = new StringBuilder("{\"id\":4242,\"kind\":\"order\",\"pad\":\"");
        while (json.length() < BODY_SIZE - 2) {
            json.append('x');
        }
        json.append("\"}");
        byte[] body = json.toString().getBytes(StandardCharsets.US_ASCII);

        Properties config = new Properties();
        config.put("bootstrap.servers", url);
        config.put("acks", "all");
        config.put("linger.ms", "5");
        config.put("batch.size", "1000000");
        config.put("enable.idempotence", "false");
        config.put("key.serializer", ByteArraySerializer.class.getName());
        config.put("value.serializer", ByteArraySerializer.class.getName());

        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(config)) {
            producer.partitionsFor(topic);
            double rate = 0;
            for (int round = 0; round <= warmups; round++) {
                rate = publish(producer, topic, body, records, window);
            }
            System.out.printf(
                    "RESULT rate=%.0f request_latency_ms=%.3f records_per_request=%.0f%n",
                    rate, metric(producer, "request-latency-avg"), metric(producer, "records-per-request-avg"));
        }
    }

    /** A producer-wide metric: the client's own account of each request's round trip. */
    private static double metric(KafkaProducer<byte[], byte[]> producer, String name) {
        for (Map.Entry<MetricName, ? extends Metric> entry : producer.metrics().entrySet()) {
            MetricName key = entry.getKey();
            if (key.name().equals(name) && key.group().equals("producer-metrics")) {
                return ((Number) entry.getValue().metricValue()).doubleValue();
            }
        }
        return Double.NaN;
    }

    /** Publishes `records` bodies with `window` in flight; records/s from first send to last ack. */
    private static double publish(
            KafkaProducer<byte[], byte[]> producer, String topic, byte[] body, int records, int window)
            throws Exception {
        Semaphore permits = new Semaphore(window);
        AtomicReference<Exception> failure = new AtomicReference<>();
        long start = System.nanoTime();
        for (int i = 0; i < records; i++) {
            permits.acquire();
            producer.send(new ProducerRecord<>(topic, body), (metadata, error) -> {
                if (error != null) {
                    failure.compareAndSet(null, error);
                }
                permits.release();
            });
        }
        permits.acquire(window);
        double seconds = (System.nanoTime() - start) / 1e9;
        if (failure.get() != null) {
            throw failure.get();
        }
        return records / seconds;
    }
}
