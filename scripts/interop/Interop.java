// Interop helper built on the official Apache Kafka Java client, for cross-checking ruststream-kafka.
// Single-file program for the Java 11+ source launcher (no compile step):
//
//   java -cp "$(scripts/kafka java-classpath)" scripts/interop/Interop.java [options] <command> ...
//
// Commands:
//   create  <bootstrap> <topic> <partitions> <rf>
//       Create the topic with the Admin client (an existing topic is fine) and wait until every
//       partition has a leader. Prints "created <topic>" or "exists <topic>".
//   produce <bootstrap> <topic> <none|gzip|snappy|lz4|zstd> <count>
//       Record i (0-based): key "key-<i>" (null for i=0), value "value-<i>" (null for i=1),
//       headers h="<i>" and h="dup" (duplicate header keys are legal), timestamp 1700000000000+i,
//       partition i % <partition count>. acks=all, idempotent, then flush. Prints "produced <count>".
//   produce-txn <bootstrap> <topic> <none|gzip|snappy|lz4|zstd> <count> <commit|abort>
//       The same records, sent in ONE transaction (random transactional.id) that is then committed
//       or aborted. Prints "committed <count>" or "aborted <count>".
//   txn-loop <bootstrap> <topic> <transactions> <records-per-transaction> [gap_ms]
//       The transaction-rate baseline: one transactional producer (random transactional.id,
//       linger.ms=5) runs 20 warm-up transactions, then <transactions> more, each with
//       <records-per-transaction> records of 100 bytes (record i to partition i % <partition count>)
//       and a commit, sleeping gap_ms (default 0) after each commit. Prints
//       "txn-loop <transactions> <wall ms> <process CPU ms>" for the timed ones.
//   consume <bootstrap> <topic> <count> [timeout_ms]
//       Assign all partitions from the beginning (no group), isolation.level=read_committed, read
//       until <count> records (default timeout 30000 ms). One line per record:
//         partition \t offset \t timestamp \t key \t value \t headers
//       key/value in lower-case hex or "-" for null; headers "name=hexvalue" joined by "," ("name=-"
//       for a null value; empty field when there are none). Exits 1 on timeout (after printing what it got).
//
//   move-leader <bootstrap> <topic> <partition> <node>
//       Moves the partition's leadership to <node> (a replica of it) while every broker stays up:
//       the replica list is reordered with <node> first (alterPartitionReassignments), then a
//       preferred leader election runs (electLeaders). Waits until the topic's description names
//       <node> as leader. Prints "moved <topic>-<partition> to <node>".
//
// Options (anywhere on the line): client properties for SASL/SSL etc.; they override the settings
// above (e.g. --prop isolation.level=read_uncommitted).
//   --command-config <file>   Java properties file (e.g. $KAFKA_WORK/tls/client-ssl.properties)
//   --prop key=value          one client property (repeatable; wins over --command-config)
// Client logging is WARN unless -Dorg.slf4j.simpleLogger.defaultLogLevel=... is given.
//
// Exit status: 0 ok, 1 failure/timeout, 2 usage error.

import java.io.FileInputStream;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class Interop {
    static final long BASE_TS = 1700000000000L;
    static final Properties extra = new Properties();

    public static void main(String[] argv) throws Exception {
        if (System.getProperty("org.slf4j.simpleLogger.defaultLogLevel") == null) {
            System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        }
        List<String> args = new ArrayList<>();
        Properties props = new Properties();
        for (int i = 0; i < argv.length; i++) {
            String a = argv[i];
            if (a.equals("--command-config") && i + 1 < argv.length) {
                try (InputStream in = new FileInputStream(argv[++i])) {
                    Properties p = new Properties();
                    p.load(in);
                    extra.putAll(p);
                }
            } else if (a.equals("--prop") && i + 1 < argv.length) {
                String kv = argv[++i];
                int eq = kv.indexOf('=');
                if (eq <= 0) usage("bad --prop '" + kv + "' (expected key=value)");
                props.setProperty(kv.substring(0, eq), kv.substring(eq + 1));
            } else {
                args.add(a);
            }
        }
        extra.putAll(props);
        if (args.isEmpty()) usage(null);
        String cmd = args.get(0);
        int rc;
        try {
            switch (cmd) {
                case "create":
                    if (args.size() != 5) usage("create <bootstrap> <topic> <partitions> <rf>");
                    rc = create(args.get(1), args.get(2), Integer.parseInt(args.get(3)), Short.parseShort(args.get(4)));
                    break;
                case "produce":
                    if (args.size() != 5) usage("produce <bootstrap> <topic> <none|gzip|snappy|lz4|zstd> <count>");
                    rc = produce(args.get(1), args.get(2), args.get(3), Integer.parseInt(args.get(4)));
                    break;
                case "produce-txn":
                    if (args.size() != 6 || !(args.get(5).equals("commit") || args.get(5).equals("abort")))
                        usage("produce-txn <bootstrap> <topic> <none|gzip|snappy|lz4|zstd> <count> <commit|abort>");
                    rc = produceTxn(args.get(1), args.get(2), args.get(3), Integer.parseInt(args.get(4)), args.get(5).equals("commit"));
                    break;
                case "txn-loop":
                    if (args.size() != 5 && args.size() != 6) usage("txn-loop <bootstrap> <topic> <transactions> <records-per-transaction> [gap_ms]");
                    rc = txnLoop(args.get(1), args.get(2), Integer.parseInt(args.get(3)), Integer.parseInt(args.get(4)),
                            args.size() == 6 ? Long.parseLong(args.get(5)) : 0L);
                    break;
                case "consume":
                    if (args.size() != 4 && args.size() != 5) usage("consume <bootstrap> <topic> <count> [timeout_ms]");
                    rc = consume(args.get(1), args.get(2), Integer.parseInt(args.get(3)),
                            args.size() == 5 ? Long.parseLong(args.get(4)) : 30000L);
                    break;
                case "move-leader":
                    if (args.size() != 5) usage("move-leader <bootstrap> <topic> <partition> <node>");
                    rc = moveLeader(args.get(1), args.get(2), Integer.parseInt(args.get(3)), Integer.parseInt(args.get(4)));
                    break;
                default:
                    usage("unknown command '" + cmd + "'");
                    return;
            }
        } catch (ExecutionException e) {
            System.err.println("Interop: " + cmd + " failed: " + e.getCause());
            rc = 1;
        } catch (Exception e) {
            System.err.println("Interop: " + cmd + " failed: " + e);
            rc = 1;
        }
        System.out.flush();
        System.exit(rc);
    }

    static void usage(String msg) {
        if (msg != null) System.err.println("Interop: " + msg);
        System.err.println("usage: Interop [--command-config FILE] [--prop k=v]... create|produce|produce-txn|txn-loop|consume ...");
        System.err.println("  create  <bootstrap> <topic> <partitions> <rf>");
        System.err.println("  produce <bootstrap> <topic> <none|gzip|snappy|lz4|zstd> <count>");
        System.err.println("  produce-txn <bootstrap> <topic> <none|gzip|snappy|lz4|zstd> <count> <commit|abort>");
        System.err.println("  txn-loop <bootstrap> <topic> <transactions> <records-per-transaction> [gap_ms]");
        System.err.println("  consume <bootstrap> <topic> <count> [timeout_ms]");
        System.exit(2);
    }

    // the command's own settings, then --command-config / --prop (which may override them), then bootstrap
    static Properties finish(Properties p, String bootstrap) {
        p.putAll(extra);
        p.put("bootstrap.servers", bootstrap);
        return p;
    }

    static int create(String bootstrap, String topic, int partitions, short rf) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "30000");
        finish(p, bootstrap);
        try (Admin admin = Admin.create(p)) {
            String what = "created";
            try {
                admin.createTopics(Collections.singleton(new NewTopic(topic, partitions, rf))).all().get();
            } catch (ExecutionException e) {
                if (!(e.getCause() instanceof TopicExistsException)) throw e;
                what = "exists";
            }
            // wait until the topic is visible with a leader for every partition
            long deadline = System.currentTimeMillis() + 30000;
            while (true) {
                try {
                    Map<String, TopicDescription> d = admin.describeTopics(Collections.singleton(topic)).allTopicNames().get();
                    TopicDescription td = d.get(topic);
                    boolean ok = td != null && !td.partitions().isEmpty();
                    if (ok) for (TopicPartitionInfo tp : td.partitions()) if (tp.leader() == null || tp.leader().isEmpty()) ok = false;
                    if (ok) break;
                } catch (ExecutionException e) {
                    // UnknownTopicOrPartition until metadata propagates
                }
                if (System.currentTimeMillis() > deadline) {
                    System.err.println("Interop: topic " + topic + " has no leaders after 30 s");
                    return 1;
                }
                Thread.sleep(100);
            }
            System.out.println(what + " " + topic);
            return 0;
        }
    }

    static int moveLeader(String bootstrap, String topic, int partition, int node) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "30000");
        finish(p, bootstrap);
        TopicPartition tp = new TopicPartition(topic, partition);
        try (Admin admin = Admin.create(p)) {
            TopicPartitionInfo info = admin.describeTopics(Collections.singleton(topic)).allTopicNames().get()
                    .get(topic).partitions().get(partition);
            List<Integer> replicas = new ArrayList<>();
            replicas.add(node);
            for (org.apache.kafka.common.Node n : info.replicas()) if (n.id() != node) replicas.add(n.id());
            if (replicas.size() != info.replicas().size()) {
                System.err.println("Interop: node " + node + " is not a replica of " + tp);
                return 1;
            }
            admin.alterPartitionReassignments(Collections.singletonMap(tp,
                    java.util.Optional.of(new org.apache.kafka.clients.admin.NewPartitionReassignment(replicas)))).all().get();
            long deadline = System.currentTimeMillis() + 30000;
            while (!admin.listPartitionReassignments(Collections.singleton(tp)).reassignments().get().isEmpty()) {
                if (System.currentTimeMillis() > deadline) {
                    System.err.println("Interop: the reassignment of " + tp + " did not finish in 30 s");
                    return 1;
                }
                Thread.sleep(100);
            }
            while (true) {
                try {
                    admin.electLeaders(org.apache.kafka.common.ElectionType.PREFERRED, Collections.singleton(tp)).all().get();
                } catch (ExecutionException e) {
                    // ELECTION_NOT_NEEDED once it is the leader; other errors are retried until the deadline
                }
                TopicPartitionInfo now = admin.describeTopics(Collections.singleton(topic)).allTopicNames().get()
                        .get(topic).partitions().get(partition);
                if (now.leader() != null && now.leader().id() == node) break;
                if (System.currentTimeMillis() > deadline) {
                    System.err.println("Interop: " + tp + " has leader " + now.leader() + ", not " + node + ", after 30 s");
                    return 1;
                }
                Thread.sleep(100);
            }
            System.out.println("moved " + topic + "-" + partition + " to " + node);
            return 0;
        }
    }

    static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static Properties producerProps(String bootstrap, String compression) {
        switch (compression) {
            case "none": case "gzip": case "snappy": case "lz4": case "zstd": break;
            default: usage("compression must be none|gzip|snappy|lz4|zstd, not '" + compression + "'");
        }
        Properties p = new Properties();
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, compression);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        return finish(p, bootstrap);
    }

    // sends the standard test records and returns their futures (caller flushes / commits)
    static List<Future<RecordMetadata>> sendAll(KafkaProducer<byte[], byte[]> producer, String topic, int count) {
        List<PartitionInfo> parts = producer.partitionsFor(topic);
        int n = parts.size();
        List<Future<RecordMetadata>> futures = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            byte[] key = i == 0 ? null : utf8("key-" + i);
            byte[] value = i == 1 ? null : utf8("value-" + i);
            List<Header> headers = new ArrayList<>();
            headers.add(new RecordHeader("h", utf8(Integer.toString(i))));
            headers.add(new RecordHeader("h", utf8("dup")));
            futures.add(producer.send(new ProducerRecord<>(topic, i % n, BASE_TS + i, key, value, headers)));
        }
        return futures;
    }

    static int produce(String bootstrap, String topic, String compression, int count) throws Exception {
        Properties p = producerProps(bootstrap, compression);
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            List<Future<RecordMetadata>> futures = sendAll(producer, topic, count);
            producer.flush();
            for (Future<RecordMetadata> f : futures) f.get();
        }
        System.out.println("produced " + count);
        return 0;
    }

    static int produceTxn(String bootstrap, String topic, String compression, int count, boolean commit) throws Exception {
        Properties p = producerProps(bootstrap, compression);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "interop-" + java.util.UUID.randomUUID());
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            producer.initTransactions();
            producer.beginTransaction();
            List<Future<RecordMetadata>> futures = sendAll(producer, topic, count);
            producer.flush();
            for (Future<RecordMetadata> f : futures) f.get();
            if (commit) producer.commitTransaction(); else producer.abortTransaction();
        }
        System.out.println((commit ? "committed " : "aborted ") + count);
        return 0;
    }

    static int txnLoop(String bootstrap, String topic, int transactions, int perTransaction, long gapMs) throws Exception {
        Properties p = producerProps(bootstrap, "none");
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "interop-loop-" + java.util.UUID.randomUUID());
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            producer.initTransactions();
            int partitions = producer.partitionsFor(topic).size();
            byte[] value = new byte[100];
            java.util.Arrays.fill(value, (byte) 'x');
            // JIT warm-up, not timed
            runTransactions(producer, topic, partitions, value, 20, perTransaction, gapMs);
            com.sun.management.OperatingSystemMXBean os =
                (com.sun.management.OperatingSystemMXBean) java.lang.management.ManagementFactory.getOperatingSystemMXBean();
            long cpu0 = os.getProcessCpuTime();
            long t0 = System.nanoTime();
            runTransactions(producer, topic, partitions, value, transactions, perTransaction, gapMs);
            long wall = System.nanoTime() - t0;
            long cpu = os.getProcessCpuTime() - cpu0;
            System.out.println("txn-loop " + transactions + " " + wall / 1_000_000.0 + " " + cpu / 1_000_000.0);
        }
        return 0;
    }

    static void runTransactions(KafkaProducer<byte[], byte[]> producer, String topic, int partitions, byte[] value,
                                int transactions, int perTransaction, long gapMs) throws InterruptedException {
        for (int t = 0; t < transactions; t++) {
            producer.beginTransaction();
            for (int i = 0; i < perTransaction; i++) {
                producer.send(new ProducerRecord<>(topic, i % partitions, null, value));
            }
            producer.commitTransaction();
            if (gapMs > 0) Thread.sleep(gapMs);
        }
    }

    static final char[] HEX = "0123456789abcdef".toCharArray();

    static String hex(byte[] b) {
        if (b == null) return "-";
        StringBuilder sb = new StringBuilder(b.length * 2);
        for (byte x : b) {
            sb.append(HEX[(x >> 4) & 0xf]).append(HEX[x & 0xf]);
        }
        return sb.toString();
    }

    static int consume(String bootstrap, String topic, int count, long timeoutMs) throws Exception {
        Properties p = new Properties();
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        finish(p, bootstrap);
        int got = 0;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            List<PartitionInfo> parts = consumer.partitionsFor(topic, Duration.ofMillis(Math.max(1, timeoutMs)));
            if (parts == null || parts.isEmpty()) {
                System.err.println("Interop: topic " + topic + " not found");
                return 1;
            }
            List<TopicPartition> tps = new ArrayList<>();
            for (PartitionInfo pi : parts) tps.add(new TopicPartition(topic, pi.partition()));
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            // the timeout covers reading, not the metadata lookup above (which has its own)
            long deadline = System.currentTimeMillis() + timeoutMs;
            StringBuilder out = new StringBuilder();
            while (got < count) {
                long left = deadline - System.currentTimeMillis();
                if (left <= 0) break;
                ConsumerRecords<byte[], byte[]> recs = consumer.poll(Duration.ofMillis(Math.min(left, 500)));
                for (ConsumerRecord<byte[], byte[]> r : recs) {
                    if (got >= count) break;
                    out.setLength(0);
                    out.append(r.partition()).append('\t').append(r.offset()).append('\t').append(r.timestamp())
                       .append('\t').append(hex(r.key())).append('\t').append(hex(r.value())).append('\t');
                    boolean first = true;
                    for (Header h : r.headers()) {
                        if (!first) out.append(',');
                        first = false;
                        out.append(h.key()).append('=').append(hex(h.value()));
                    }
                    System.out.println(out);
                    got++;
                }
            }
        }
        if (got < count) {
            System.err.println("Interop: timeout after " + timeoutMs + " ms: got " + got + " of " + count + " records");
            return 1;
        }
        return 0;
    }
}
