#!/usr/bin/env python3
"""Regenerate src/client/producer/partitioner_vectors.tsv from librdkafka itself.

Oracle: the real librdkafka bundled in the `confluent-kafka` wheel, end to end.

* A librdkafka mock cluster (3 brokers, on loopback) is started through ctypes with the
  bundled library's exported `rd_kafka_mock_cluster_new`, and one topic per partition count
  is created in it with `rd_kafka_mock_topic_create`. (The mock broker does not implement the
  CreateTopics admin API, and a `test.mock.num.brokers` producer's mock cluster auto-creates
  every topic with 4 partitions, so ctypes is the only way to get topics of 1, 3, 6, 12 and
  100 partitions.)
* An ordinary `confluent_kafka.Producer` per partitioner connects to that cluster and
  produces every key; the partition in each delivery report is recorded. This runs
  librdkafka's whole produce path: `rd_kafka_msg_partitioner()`, its sticky/random dispatch
  for null and empty keys, and the configured `rd_kafka_msg_partitioner_*` function.
* Each key is produced several times with `sticky.partitioning.linger.ms=0` (so a random
  choice is drawn per message) and once with the default configuration (sticky partitioning
  on). A (partitioner, key) whose placement varies between repeats is written with the
  partition `*` ("librdkafka picks at random") for every partition count; every other row
  must be the same in all repeats and in the default-configuration run.
* Cross-check: every deterministic row is recomputed by calling the exported
  `rd_kafka_msg_partitioner_*` function directly through ctypes; the two must agree.

The script exits non-zero when any of these checks fails, and writes nothing then.

Regenerate (from the repository root; needs only PyPI):

    python3 -m venv /tmp/pv && /tmp/pv/bin/pip install confluent-kafka
    /tmp/pv/bin/python scripts/partitioner-vectors.py [OUTPUT.tsv]

Output: TSV, `#` comment lines first, then one row per (partitioner, partition count, key):
`partitioner<TAB>partition_count<TAB>key<TAB>partition`, where key is lowercase hex (an empty
field for the empty key, `-` for a null key) and partition is a number or `*`.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
import random
import sys
import time

import confluent_kafka

OUT = os.path.join(
    os.path.dirname(os.path.abspath(__file__)),
    "..",
    "src",
    "client",
    "producer",
    "partitioner_vectors.tsv",
)

PARTITIONERS = [
    "consistent_random",
    "consistent",
    "murmur2_random",
    "murmur2",
    "fnv1a_random",
    "fnv1a",
]
PARTITION_COUNTS = [1, 3, 6, 12, 100]
SEED = 20240917
# Repeats with sticky partitioning off: enough to see a random pick vary (for null and empty
# keys, where librdkafka may pick at random), fewer for ordinary keys.
REPEATS_SPECIAL = 24
REPEATS_ORDINARY = 2
NULL = None  # the null key


def fnv1a_state(data: bytes, h: int = 0x811C9DC5) -> int:
    for b in data:
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


def fnv1a_int_min_key() -> bytes:
    """A key whose 32-bit FNV-1a is 0x80000000 (i32::MIN, whose absolute value overflows).

    FNV-1a's step h -> (h ^ b) * prime is invertible, so meet in the middle over two free
    bytes forward from a prefix and two free bytes backward from the target.
    """
    prime_inv = pow(0x01000193, -1, 1 << 32)
    target = 0x80000000
    backward = {}
    for d in range(256):
        h3 = ((target * prime_inv) & 0xFFFFFFFF) ^ d
        for c in range(256):
            h2 = ((h3 * prime_inv) & 0xFFFFFFFF) ^ c
            backward[h2] = bytes([c, d])
    for n in range(100000):
        prefix = b"fnv-int-min-%d-" % n
        hp = fnv1a_state(prefix)
        for a in range(256):
            h1 = ((hp ^ a) * 0x01000193) & 0xFFFFFFFF
            for b in range(256):
                h2 = ((h1 ^ b) * 0x01000193) & 0xFFFFFFFF
                tail = backward.get(h2)
                if tail is not None:
                    key = prefix + bytes([a, b]) + tail
                    assert fnv1a_state(key) == target
                    return key
    raise SystemExit("no FNV-1a i32::MIN key found")


def make_keys() -> list:
    """1000 non-null keys (the empty key among them), then the null key."""
    rng = random.Random(SEED)
    keys = [b""]
    keys += [b"key-%d" % i for i in range(400)]
    # Keys of Kafka's and librdkafka's own murmur2/FNV unit tests.
    keys += [
        b"21",
        b"foobar",
        b"a-little-bit-long-string",
        b"a-little-bit-longer-string",
        b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
        b"abc",
        b"kafka",
        b"giberish123456789",
        b"1234",
        b"234",
        b"34",
        b"4",
        b"PreAmbleWillBeRemoved,ThePrePartThatIs",
        b"hello",
    ]
    keys.append(fnv1a_int_min_key())
    # A few long keys.
    for n in (100, 255, 256, 257, 1000, 1027):
        keys.append(bytes(rng.randrange(256) for _ in range(n)))
    # Short keys of every byte value (high bytes exercise sign handling).
    keys += [bytes([b]) for b in (0x00, 0x7F, 0x80, 0xFF)]
    # Random binary keys of 1..40 bytes fill up to 1000 keys.
    while len(keys) < 1000:
        k = bytes(rng.randrange(256) for _ in range(rng.randint(1, 40)))
        if k not in keys:
            keys.append(k)
    assert len(keys) == 1000 and len(set(keys)) == 1000
    keys.append(NULL)
    return keys


def load_librdkafka() -> ctypes.CDLL:
    """The librdkafka that confluent_kafka's extension module is linked against."""
    pkg = os.path.dirname(os.path.abspath(confluent_kafka.__file__))
    candidates = []
    for pattern in (
        "confluent_kafka.libs/librdkafka*.so*",
        ".dylibs/librdkafka*.dylib",
    ):
        candidates += glob.glob(os.path.join(pkg, "..", pattern))
        candidates += glob.glob(os.path.join(pkg, pattern))
    if not candidates:
        found = ctypes.util.find_library("rdkafka")
        if found:
            candidates.append(found)
    if len(candidates) != 1:
        raise SystemExit(f"cannot pick the bundled librdkafka among {candidates!r}")
    lib = ctypes.CDLL(candidates[0])
    lib.rd_kafka_version_str.restype = ctypes.c_char_p
    lib.rd_kafka_conf_new.restype = ctypes.c_void_p
    lib.rd_kafka_conf_set.restype = ctypes.c_int
    lib.rd_kafka_conf_set.argtypes = [
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_size_t,
    ]
    lib.rd_kafka_new.restype = ctypes.c_void_p
    lib.rd_kafka_new.argtypes = [
        ctypes.c_int,
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.c_size_t,
    ]
    lib.rd_kafka_destroy.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_mock_cluster_new.restype = ctypes.c_void_p
    lib.rd_kafka_mock_cluster_new.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.rd_kafka_mock_cluster_destroy.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_mock_cluster_bootstraps.restype = ctypes.c_char_p
    lib.rd_kafka_mock_cluster_bootstraps.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_mock_topic_create.restype = ctypes.c_int
    lib.rd_kafka_mock_topic_create.argtypes = [
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.c_int,
    ]
    for name in PARTITIONERS:
        fn = getattr(lib, "rd_kafka_msg_partitioner_" + name)
        fn.restype = ctypes.c_int32
        fn.argtypes = [
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_size_t,
            ctypes.c_int32,
            ctypes.c_void_p,
            ctypes.c_void_p,
        ]
    return lib


def topic_name(count: int) -> str:
    return f"partitioner-vectors-{count}"


def produce_all(
    bootstraps: str, partitioner: str, keys: list, sticky_off: bool
) -> dict:
    """Produce every key to every topic; returns {(count, key_index): [partitions...]}."""
    conf = {
        "bootstrap.servers": bootstraps,
        "partitioner": partitioner,
        "linger.ms": 5,
        "queue.buffering.max.messages": 2000000,
        "queue.buffering.max.kbytes": 2097151,
        "message.timeout.ms": 60000,
        "allow.auto.create.topics": False,
    }
    if sticky_off:
        conf["sticky.partitioning.linger.ms"] = 0
    producer = confluent_kafka.Producer(conf)
    for count in PARTITION_COUNTS:
        md = producer.list_topics(topic_name(count), timeout=10)
        got = len(md.topics[topic_name(count)].partitions)
        if got != count:
            raise SystemExit(
                f"topic {topic_name(count)} has {got} partitions, not {count}"
            )
    results: dict = {}
    errors: list = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(err)
            return
        count_s, index_s, _ = msg.value().split(b":")
        results.setdefault((int(count_s), int(index_s)), []).append(msg.partition())

    expected = 0
    for count in PARTITION_COUNTS:
        for index, key in enumerate(keys):
            special = key is NULL or key == b""
            repeats = (
                (REPEATS_SPECIAL if special else REPEATS_ORDINARY) if sticky_off else 1
            )
            for rep in range(repeats):
                value = b"%d:%d:%d" % (count, index, rep)
                while True:
                    try:
                        producer.produce(
                            topic_name(count),
                            key=key,
                            value=value,
                            on_delivery=on_delivery,
                        )
                        break
                    except BufferError:
                        producer.poll(0.1)
                expected += 1
            producer.poll(0)
    remaining = producer.flush(120)
    if remaining or errors:
        raise SystemExit(
            f"{partitioner}: {remaining} undelivered, errors: {errors[:5]}"
        )
    delivered = sum(len(v) for v in results.values())
    if delivered != expected:
        raise SystemExit(
            f"{partitioner}: {delivered} delivery reports, {expected} produced"
        )
    return results


def direct_call(lib, partitioner: str, key, count: int) -> int:
    """librdkafka's exported partitioner function, called directly (deterministic rows only:
    with a NULL topic handle, the random branch would crash)."""
    fn = getattr(lib, "rd_kafka_msg_partitioner_" + partitioner)
    if key is NULL:
        return fn(None, None, 0, count, None, None)
    buf = ctypes.create_string_buffer(key, len(key) + 1)  # non-NULL even when empty
    return fn(None, ctypes.cast(buf, ctypes.c_void_p), len(key), count, None, None)


def main() -> int:
    libversion = confluent_kafka.libversion()[0]
    binding_version = confluent_kafka.version()
    if isinstance(binding_version, tuple):
        binding_version = binding_version[0]
    lib = load_librdkafka()
    ctypes_version = lib.rd_kafka_version_str().decode()
    if ctypes_version != libversion:
        raise SystemExit(
            f"ctypes loaded librdkafka {ctypes_version}, the binding uses {libversion}"
        )

    keys = make_keys()

    errstr = ctypes.create_string_buffer(512)
    mock_conf = lib.rd_kafka_conf_new()
    # Quiet: this handle only owns the mock cluster and connects nowhere.
    if lib.rd_kafka_conf_set(mock_conf, b"log_level", b"3", errstr, len(errstr)) != 0:
        raise SystemExit(f"rd_kafka_conf_set: {errstr.value.decode()}")
    rk = lib.rd_kafka_new(0, mock_conf, errstr, len(errstr))  # 0: producer
    if not rk:
        raise SystemExit(f"rd_kafka_new: {errstr.value.decode()}")
    mcluster = lib.rd_kafka_mock_cluster_new(rk, 3)
    if not mcluster:
        raise SystemExit("rd_kafka_mock_cluster_new failed")
    bootstraps = lib.rd_kafka_mock_cluster_bootstraps(mcluster).decode()
    for count in PARTITION_COUNTS:
        err = lib.rd_kafka_mock_topic_create(
            mcluster, topic_name(count).encode(), count, 1
        )
        if err:
            raise SystemExit(f"rd_kafka_mock_topic_create({count}): error {err}")

    rows = []
    random_pairs = []
    started = time.time()
    for partitioner in PARTITIONERS:
        repeated = produce_all(bootstraps, partitioner, keys, sticky_off=True)
        default = produce_all(bootstraps, partitioner, keys, sticky_off=False)
        for index, key in enumerate(keys):
            varies = any(
                len(set(repeated[(count, index)])) > 1 for count in PARTITION_COUNTS
            )
            if varies:
                random_pairs.append((partitioner, "-" if key is NULL else key.hex()))
                # A random pick must vary at every count where it can.
                for count in PARTITION_COUNTS:
                    if count > 1 and len(set(repeated[(count, index)])) == 1:
                        raise SystemExit(
                            f"{partitioner} {key!r} {count}: random only sometimes"
                        )
            for count in PARTITION_COUNTS:
                key_field = "-" if key is NULL else key.hex()
                if varies:
                    rows.append((partitioner, count, key_field, "*"))
                    continue
                (partition,) = set(repeated[(count, index)])
                (sticky,) = default[(count, index)]
                if sticky != partition:
                    raise SystemExit(
                        f"{partitioner} {key!r} {count}: {partition} without sticky "
                        f"partitioning, {sticky} with it"
                    )
                direct = direct_call(lib, partitioner, key, count)
                if direct != partition:
                    raise SystemExit(
                        f"{partitioner} {key!r} {count}: produced to {partition}, "
                        f"rd_kafka_msg_partitioner_{partitioner} says {direct}"
                    )
                rows.append((partitioner, count, key_field, str(partition)))
        print(f"{partitioner}: done ({time.time() - started:.1f}s)", file=sys.stderr)

    lib.rd_kafka_mock_cluster_destroy(mcluster)
    lib.rd_kafka_destroy(rk)

    out_path = sys.argv[1] if len(sys.argv) > 1 else OUT
    with open(out_path, "w", encoding="ascii", newline="\n") as out:
        out.write(
            "# Partitioner test vectors, generated by scripts/partitioner-vectors.py; do not edit.\n"
            f"# Oracle: librdkafka {libversion} (bundled in confluent-kafka "
            f"{binding_version}): a mock cluster (rd_kafka_mock_cluster_new,\n"
            "# rd_kafka_mock_topic_create via ctypes) and a confluent_kafka.Producer per partitioner;\n"
            "# each partition is the one in the delivery report, the same with and without sticky\n"
            "# partitioning and equal to a direct ctypes call of rd_kafka_msg_partitioner_<name>.\n"
            f"# '*': librdkafka picked at random (placement varied over {REPEATS_SPECIAL} repeats).\n"
            "# Columns: partitioner, partition_count, key (hex; empty = empty key; '-' = null key), partition.\n"
        )
        out.writelines("\t".join(str(field) for field in row) + "\n" for row in rows)
    print(f"wrote {len(rows)} rows to {os.path.normpath(out_path)}", file=sys.stderr)
    print(f"random rows: {random_pairs}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
