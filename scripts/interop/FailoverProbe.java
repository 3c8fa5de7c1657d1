// The Java client's side of scripts/failover-compare: the time from a partition leader's kill to
// the first acknowledged produce and the first fetched record written after the kill. The same
// arguments and output as ours (benches/failover_probe.rs):
//
//   java -cp "$(scripts/kafka java-classpath)" scripts/interop/FailoverProbe.java \
//       probe <bootstrap> <topic> <interval_ms> <kill command>
//
// One record every interval_ms from a KafkaProducer with the client's defaults (acks=all,
// idempotence on, linger.ms 5 in Kafka 4), partition 0; a KafkaConsumer with its defaults,
// assigned partition 0 at its end (no group), polling every 100 ms at most. After two seconds
// of both working it asks the cluster (Admin describeTopics) for the leader, runs
// `sh -c "<kill command> N"` and counts from the moment that returns. Records carry their
// sequence number, so "written after the kill" means sent after it. Prints
// "leader=N produce_ms=X fetch_ms=Y"; exits 1 when either has not happened in 120 s.

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Collections;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class FailoverProbe {
    static final long WARM_UP_MS = 2_000;
    static final long LIMIT_MS = 120_000;

    // Nanosecond instants; 0 while unset.
    static final AtomicLong killedAt = new AtomicLong();
    static final AtomicLong firstAfter = new AtomicLong(Long.MAX_VALUE);
    static final AtomicLong produced = new AtomicLong();
    static final AtomicLong fetched = new AtomicLong();
    static final AtomicBoolean acked = new AtomicBoolean();

    public static void main(String[] argv) throws Exception {
        if (argv.length != 5 || !argv[0].equals("probe")) {
            System.err.println("usage: FailoverProbe probe <bootstrap> <topic> <interval_ms> <kill command>");
            System.exit(2);
        }
        // The client's INFO lines (every disconnect) unless asked for: before the first logger.
        if (System.getProperty("org.slf4j.simpleLogger.defaultLogLevel") == null)
            System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        String bootstrap = argv[1], topic = argv[2], kill = argv[4];
        long interval = Long.parseLong(argv[3]);
        TopicPartition tp = new TopicPartition(topic, 0);

        Properties pp = new Properties();
        pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        Properties cp = new Properties();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);

        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pp);
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(cp);
        Admin admin = Admin.create(ap);
        consumer.assign(List.of(tp));
        consumer.seekToEnd(List.of(tp));
        consumer.position(tp);

        AtomicLong next = new AtomicLong();
        Thread writer = new Thread(() -> {
            long due = System.nanoTime();
            while (!Thread.currentThread().isInterrupted()) {
                long seq = next.getAndIncrement();
                byte[] value = Long.toString(seq).getBytes(StandardCharsets.UTF_8);
                try {
                    producer.send(new ProducerRecord<>(topic, 0, null, value), (md, e) -> {
                        if (e != null) return;
                        acked.set(true);
                        long at = killedAt.get();
                        if (at != 0 && seq >= firstAfter.get()) produced.compareAndSet(0, System.nanoTime() - at);
                    });
                } catch (Exception e) {
                    return;
                }
                due += interval * 1_000_000L;
                long wait = due - System.nanoTime();
                if (wait > 0) {
                    try {
                        Thread.sleep(wait / 1_000_000L, (int) (wait % 1_000_000L));
                    } catch (InterruptedException e) {
                        return;
                    }
                } else {
                    due = System.nanoTime();
                }
            }
        }, "writer");
        writer.setDaemon(true);
        writer.start();

        long started = System.nanoTime();
        long fetchedCount = 0;
        int leader = -1;
        while (true) {
            long elapsedMs = (System.nanoTime() - started) / 1_000_000L;
            if (elapsedMs > WARM_UP_MS + LIMIT_MS) {
                System.err.println("FailoverProbe: leader=" + leader + ": no recovery within " + LIMIT_MS + " ms");
                Runtime.getRuntime().halt(1);
            }
            if (killedAt.get() == 0 && elapsedMs >= WARM_UP_MS && fetchedCount > 0 && acked.get()) {
                TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
                leader = d.partitions().get(0).leader().id();
                Process p = new ProcessBuilder("sh", "-c", kill + " " + leader)
                        .redirectOutput(ProcessBuilder.Redirect.DISCARD)
                        .redirectError(ProcessBuilder.Redirect.INHERIT)
                        .start();
                int status = p.waitFor();
                long at = System.nanoTime();
                if (status != 0) {
                    System.err.println("FailoverProbe: `" + kill + " " + leader + "` failed: " + status);
                    Runtime.getRuntime().halt(1);
                }
                firstAfter.set(next.get());
                killedAt.set(at);
            }
            long p = produced.get(), f = fetched.get();
            if (p != 0 && f != 0) {
                System.out.println("leader=" + leader + " produce_ms=" + p / 1_000_000L + " fetch_ms=" + f / 1_000_000L);
                System.out.flush();
                // Closing would wait for records queued for the dead node.
                Runtime.getRuntime().halt(0);
            }
            ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(100));
            fetchedCount += records.count();
            long at = killedAt.get();
            if (at != 0 && fetched.get() == 0) {
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    long seq = Long.parseLong(new String(r.value(), StandardCharsets.UTF_8));
                    if (seq >= firstAfter.get()) {
                        fetched.compareAndSet(0, System.nanoTime() - at);
                        break;
                    }
                }
            }
        }
    }
}
