#!/usr/bin/env python3
"""Generate src/properties/table.rs and src/properties/configuration-2.12.1.tsv.

`table.rs` is librdkafka 2.12.1's configuration property table as Rust data: every global and
topic property with its aliases, scope, the clients it applies to, its type (range, enum values,
CSV flags), its default, its status flags and the build option it depends on.
`configuration-2.12.1.tsv` is a snapshot of the facts columns of librdkafka's CONFIGURATION.md
(name, clients, range, default, type, alias target; no descriptions), which the unit tests
compare the table with when the real file is not on the machine.

Source: the `rd_kafka_properties[]` array of `src/rdkafka_conf.c` and `CONFIGURATION.md` of
librdkafka 2.12.1 as bundled in the `rdkafka-sys` 4.10.0+2.12.1 crate. The C array is the
authority (CONFIGURATION.md leaves out hidden and internal properties); the Markdown is used to
check the parse. librdkafka's descriptions are not copied: the one-line descriptions in
`DESCRIPTIONS` below are this project's own words.

Rerun (from the repository root; needs python3 and rustfmt):

    python3 scripts/gen-properties.py [--librdkafka DIR]

DIR defaults to `~/.cargo/registry/src/*/rdkafka-sys-4.10.0+2.12.1/librdkafka` (`$CARGO_HOME`
is honoured), which `cargo fetch` of any project depending on rdkafka 0.39 puts there. `--check`
compares instead of writing (exit 1 when a file is stale).

How the C array is read: a small tokenizer (strings, numbers, identifiers, comments,
preprocessor lines), a preprocessor that evaluates the few `#if`s of the array for a Linux
build without plugins, and a parser of brace initializers with C's positional and designated
fields. `_UNSUPPORTED_*` macros become the build option (`Gate`) the property or value needs;
whether this crate provides it is decided in Rust (`property.rs`), not here. The bits of the
`debug` flags come from `src/rdkafka_int.h`.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import subprocess
import sys

TABLE_OUT = "src/properties/table.rs"
MD_OUT = "src/properties/configuration-2.12.1.tsv"
VERSION = "2.12.1"
SOURCE = "librdkafka 2.12.1 (rdkafka-sys 4.10.0+2.12.1): src/rdkafka_conf.c, CONFIGURATION.md"

# The few preprocessor symbols the property array tests: a Linux build without plugins.
DEFINES = {
    "WITH_PLUGINS": False,
    "SO_KEEPALIVE": True,
    "TCP_NODELAY": True,
    "__linux__": True,
    "_WIN32": False,
}

# `_UNSUPPORTED_<X>` macro -> Gate variant.
GATES = {
    "SSL": "Ssl",
    "OPENSSL_1_0_2": "OpenSsl102",
    "OPENSSL_1_1_0": "OpenSsl110",
    "SSL_ENGINE": "SslEngine",
    "SSL_3": "OpenSsl3",
    "ZLIB": "Zlib",
    "SNAPPY": "Snappy",
    "ZSTD": "Zstd",
    "HTTP": "Curl",
    "OIDC": "Oidc",
    "HTTPS": "Https",
    "WIN32_GSSAPI": "Win32Gssapi",
    "GSSAPI": "CyrusSasl",
    "OAUTHBEARER": "Ssl",
}
# Literal `.unsupported = "..."` texts under the DEFINES above -> Gate variant.
LITERAL_GATES = {
    "libdl/dlopen(3) not available at build time": "Plugins",
    "configuration only valid on Windows": "WindowsOnly",
}

CONSTANTS = {
    "INT_MAX": 2147483647,
    "INT32_MAX": 2147483647,
    "RD_KAFKA_COMPLEVEL_MIN": -1,
    "RD_KAFKA_COMPLEVEL_MAX": 12,
    "RD_KAFKA_COMPLEVEL_DEFAULT": -1,
    # queuing.strategy's numeric `.vdef = 0`
    "RD_KAFKA_QUEUE_FIFO": 0,
    "RD_KAFKA_QUEUE_LIFO": 1,
}

# The spelling this crate treats as a property's name where librdkafka's own name is the
# legacy one and the Java client's (which librdkafka also accepts, as an alias) is what users
# and `src/client`'s configuration docs write. librdkafka's name stays an alias and is what its
# error messages say, so `rdkafka_name` keeps it.
CANONICAL = {
    "metadata.broker.list": "bootstrap.servers",
    "sasl.mechanisms": "sasl.mechanism",
    "fetch.message.max.bytes": "max.partition.fetch.bytes",
    "queue.buffering.max.ms": "linger.ms",
    "message.send.max.retries": "retries",
    "compression.codec": "compression.type",
    "request.required.acks": "acks",
}

# Properties librdkafka has that this crate refuses although librdkafka's table has no build
# option for them: it has nothing behind them.
EXTRA_GATES = {
    "test.mock.num.brokers": "MockCluster",
    "test.mock.broker.rtt": "MockCluster",
}

# Our own one-line descriptions (not librdkafka's text).
DESCRIPTIONS = {
    # global
    "builtin.features": "Features this build provides; setting it checks that the listed ones are present.",
    "client.id": "Client identifier sent with every request.",
    "client.software.name": "Client software name reported to brokers (KIP-511).",
    "client.software.version": "Client software version reported to brokers (KIP-511).",
    "metadata.broker.list": "Bootstrap brokers, `host[:port]` separated by commas.",
    "message.max.bytes": "Largest request the client builds; also the largest record a producer accepts.",
    "message.copy.max.bytes": "Records up to this size are copied into the request buffer instead of referenced.",
    "receive.message.max.bytes": "Largest response frame accepted; raised to `fetch.max.bytes` + 512 unless set.",
    "max.in.flight.requests.per.connection": "Requests in flight per broker connection.",
    "metadata.recovery.strategy": "What to do when no known broker is reachable: bootstrap again or not.",
    "metadata.recovery.rebootstrap.trigger.ms": "How long without metadata before bootstrapping again.",
    "metadata.request.timeout.ms": "Unused.",
    "topic.metadata.refresh.interval.ms": "Period of the background metadata refresh; -1 turns it off.",
    "metadata.max.age.ms": "How long cached metadata stays valid; three refresh intervals unless set.",
    "topic.metadata.refresh.fast.interval.ms": "First retry interval of a metadata refresh after a leader loss.",
    "topic.metadata.refresh.fast.cnt": "Unused.",
    "topic.metadata.refresh.sparse": "Ask for the metadata of the topics in use only.",
    "topic.metadata.propagation.max.ms": "How long a topic missing from metadata is assumed to be still propagating.",
    "topic.blacklist": "Regular expressions of topic names to hide from metadata.",
    "debug": "Debug log contexts to enable.",
    "socket.timeout.ms": "Default timeout of a network request.",
    "socket.blocking.max.ms": "Unused.",
    "socket.send.buffer.bytes": "Socket send buffer size; 0 keeps the system's.",
    "socket.receive.buffer.bytes": "Socket receive buffer size; 0 keeps the system's.",
    "socket.keepalive.enable": "Turn on TCP keep-alive for broker connections.",
    "socket.nagle.disable": "Turn off Nagle's algorithm (TCP_NODELAY) for broker connections.",
    "socket.max.fails": "Send failures after which a broker connection is closed; 0 never.",
    "broker.address.ttl": "How long resolved broker addresses are cached.",
    "broker.address.family": "IP address family used for brokers.",
    "socket.connection.setup.timeout.ms": "Time allowed to connect, including TLS and SASL handshakes.",
    "connections.max.idle.ms": "Close a connection idle this long; 0 never.",
    "enable.sparse.connections": "Connect to brokers only when needed.",
    "reconnect.backoff.jitter.ms": "Unused; see `reconnect.backoff.ms`.",
    "reconnect.backoff.ms": "First wait before reconnecting to a broker; grows up to `reconnect.backoff.max.ms`.",
    "reconnect.backoff.max.ms": "Longest wait before reconnecting to a broker.",
    "statistics.interval.ms": "Period of statistics reports; 0 turns them off.",
    "enabled_events": "Event types delivered on the event API.",
    "error_cb": "Error callback.",
    "throttle_cb": "Throttle callback.",
    "stats_cb": "Statistics callback.",
    "log_cb": "Log callback.",
    "log_level": "Log level, syslog numbering.",
    "log.queue": "Deliver logs through a queue the application polls.",
    "log.thread.name": "Put the internal thread's name in log lines.",
    "enable.random.seed": "Seed the C library's random generator at start.",
    "log.connection.close": "Log broker disconnects.",
    "background_event_cb": "Background event callback.",
    "socket_cb": "Socket creation callback.",
    "connect_cb": "Socket connect callback.",
    "closesocket_cb": "Socket close callback.",
    "open_cb": "File open callback.",
    "resolve_cb": "Address resolution callback.",
    "opaque": "Application pointer handed to callbacks.",
    "default_topic_conf": "Default topic configuration object.",
    "internal.termination.signal": "Signal used to wake internal threads at shutdown.",
    "api.version.request": "Ask brokers which API versions they support.",
    "api.version.request.timeout.ms": "Timeout of the API version request.",
    "api.version.fallback.ms": "How long to keep using the fallback versions after a failed version request.",
    "broker.version.fallback": "Broker version assumed when the version request is off or fails.",
    "allow.auto.create.topics": "Let metadata requests create missing topics; defaults to true for producers, false for consumers.",
    "security.protocol": "Protocol spoken with brokers: plaintext, ssl, sasl_plaintext or sasl_ssl.",
    "ssl.cipher.suites": "TLS cipher suites (OpenSSL syntax).",
    "ssl.curves.list": "Supported TLS curves (OpenSSL syntax).",
    "ssl.sigalgs.list": "TLS signature algorithms (OpenSSL syntax).",
    "ssl.key.location": "Path of the client's private key (PEM).",
    "ssl.key.password": "Passphrase of the client's private key.",
    "ssl.key.pem": "Client private key as a PEM string.",
    "ssl_key": "Client private key set through the certificate API.",
    "ssl.certificate.location": "Path of the client's certificate.",
    "ssl.certificate.pem": "Client certificate as a PEM string.",
    "ssl_certificate": "Client certificate set through the certificate API.",
    "ssl.ca.location": "CA certificate file or directory; `probe` looks in the usual system places.",
    "https.ca.location": "CA certificates for HTTPS calls (OAuth/OIDC).",
    "https.ca.pem": "CA certificate for HTTPS calls, as a PEM string.",
    "ssl.ca.pem": "CA certificate as a PEM string.",
    "ssl_ca": "CA certificate set through the certificate API.",
    "ssl.ca.certificate.stores": "Windows certificate stores to read CA certificates from.",
    "ssl.crl.location": "Path of a certificate revocation list.",
    "ssl.keystore.location": "Path of a PKCS#12 keystore holding the client key and certificate.",
    "ssl.keystore.password": "Password of the PKCS#12 keystore.",
    "ssl.providers": "OpenSSL 3 providers to load.",
    "ssl.engine.location": "Path of an OpenSSL engine library.",
    "ssl.engine.id": "OpenSSL engine id.",
    "ssl_engine_callback_data": "Application data for the OpenSSL engine.",
    "enable.ssl.certificate.verification": "Verify the broker's certificate.",
    "ssl.endpoint.identification.algorithm": "Check the broker's host name against its certificate (`https`) or not (`none`).",
    "ssl.certificate.verify_cb": "Certificate verification callback.",
    "ssl.truststore.location": "Java truststore; not a librdkafka property (use `ssl.ca.location`).",
    "sasl.jaas.config": "Java JAAS configuration; not a librdkafka property (use the `sasl.*` properties).",
    "sasl.mechanisms": "SASL mechanism: GSSAPI, PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER.",
    "sasl.kerberos.service.name": "Kerberos principal name the brokers run as.",
    "sasl.kerberos.principal": "The client's Kerberos principal.",
    "sasl.kerberos.kinit.cmd": "Command that refreshes the Kerberos ticket.",
    "sasl.kerberos.keytab": "Path of the Kerberos keytab.",
    "sasl.kerberos.min.time.before.relogin": "Minimum time between Kerberos ticket refreshes; 0 turns them off.",
    "sasl.username": "SASL user name (PLAIN and SCRAM).",
    "sasl.password": "SASL password (PLAIN and SCRAM).",
    "sasl.oauthbearer.config": "OAUTHBEARER settings (`key=value` pairs) for the token source.",
    "enable.sasl.oauthbearer.unsecure.jwt": "Make unsigned JWT tokens locally from `sasl.oauthbearer.config` (testing only).",
    "oauthbearer_token_refresh_cb": "OAUTHBEARER token refresh callback.",
    "enable_sasl_queue": "Serve SASL callbacks on their own queue.",
    "sasl.oauthbearer.method": "OAUTHBEARER token source: `default` (callback or unsecured JWT) or `oidc`.",
    "sasl.oauthbearer.client.id": "OIDC client id.",
    "sasl.oauthbearer.client.secret": "OIDC client secret.",
    "sasl.oauthbearer.scope": "OIDC scope of the token request.",
    "sasl.oauthbearer.extensions": "SASL extensions sent with the token, `key=value` pairs.",
    "sasl.oauthbearer.token.endpoint.url": "OIDC token endpoint URL.",
    "sasl.oauthbearer.grant.type": "OIDC grant type: client credentials or JWT bearer.",
    "sasl.oauthbearer.assertion.algorithm": "Signing algorithm of the JWT bearer assertion.",
    "sasl.oauthbearer.assertion.private.key.file": "Private key file (PEM) that signs the JWT bearer assertion.",
    "sasl.oauthbearer.assertion.private.key.passphrase": "Passphrase of the assertion's private key.",
    "sasl.oauthbearer.assertion.private.key.pem": "Private key (PEM string) that signs the JWT bearer assertion.",
    "sasl.oauthbearer.assertion.file": "File holding a ready-made JWT bearer assertion.",
    "sasl.oauthbearer.assertion.claim.aud": "Audience claim of the assertion.",
    "sasl.oauthbearer.assertion.claim.exp.seconds": "Lifetime of the assertion in seconds.",
    "sasl.oauthbearer.assertion.claim.iss": "Issuer claim of the assertion.",
    "sasl.oauthbearer.assertion.claim.jti.include": "Put a random JWT id claim in the assertion.",
    "sasl.oauthbearer.assertion.claim.nbf.seconds": "Not-before offset of the assertion in seconds.",
    "sasl.oauthbearer.assertion.claim.sub": "Subject claim of the assertion.",
    "sasl.oauthbearer.assertion.jwt.template.file": "JWT template file for the assertion.",
    "sasl.oauthbearer.metadata.authentication.type": "Metadata-based token source (`azure_imds`) or none.",
    "plugin.library.paths": "Plugin libraries to load, separated by `;`.",
    "interceptors": "Interceptors added through the interceptor API.",
    "test.mock.num.brokers": "Brokers of librdkafka's built-in mock cluster.",
    "test.mock.broker.rtt": "Latency of librdkafka's mock brokers.",
    "ut_handle_ProduceResponse": "Unit-test hook of librdkafka.",
    "group.id": "Consumer group id.",
    "group.instance.id": "Static group membership id.",
    "partition.assignment.strategy": "Assignors in order of preference: range, roundrobin, cooperative-sticky (classic protocol).",
    "session.timeout.ms": "How long a silent member stays in the group (classic protocol).",
    "heartbeat.interval.ms": "Interval between group heartbeats (classic protocol).",
    "group.protocol.type": "Protocol type of the classic group protocol.",
    "group.protocol": "Group protocol: `classic` or `consumer` (KIP-848).",
    "group.remote.assignor": "Server-side assignor for the `consumer` group protocol.",
    "coordinator.query.interval.ms": "How often the group coordinator is looked up again.",
    "max.poll.interval.ms": "Longest time between polls before the member leaves the group.",
    "enable.auto.commit": "Commit stored offsets periodically in the background.",
    "auto.commit.interval.ms": "Period of background offset commits; 0 turns them off.",
    "enable.auto.offset.store": "Store the offset of every record handed to the application.",
    "queued.min.messages": "Records per partition to keep prefetched.",
    "queued.max.messages.kbytes": "Prefetched data kept at most, in KiB.",
    "fetch.wait.max.ms": "How long a broker may hold a fetch to gather `fetch.min.bytes`.",
    "fetch.queue.backoff.ms": "Pause of a partition's fetches while the prefetch queue is full.",
    "fetch.message.max.bytes": "Bytes per partition asked for in a fetch.",
    "fetch.max.bytes": "Bytes asked for in a whole fetch.",
    "fetch.min.bytes": "Bytes a broker waits for before answering a fetch.",
    "fetch.error.backoff.ms": "Pause of a partition's fetches after a fetch error.",
    "offset.store.method": "Where offsets are stored: `broker` (or the legacy `file`).",
    "isolation.level": "Read committed records only (`read_committed`) or everything (`read_uncommitted`).",
    "consume_cb": "Message consume callback.",
    "rebalance_cb": "Rebalance callback.",
    "offset_commit_cb": "Offset commit result callback.",
    "enable.partition.eof": "Report reaching the end of a partition as an event.",
    "check.crcs": "Verify the CRC of consumed record batches.",
    "client.rack": "Rack of this client, for rack-aware assignment and fetching.",
    "transactional.id": "Transactional producer id; implies idempotence.",
    "transaction.timeout.ms": "Time the transaction coordinator allows a transaction before aborting it.",
    "enable.idempotence": "Produce every record exactly once and in order per partition.",
    "enable.gapless.guarantee": "Fail the producer instead of leaving a gap in the produced sequence.",
    "queue.buffering.max.messages": "Records waiting in the producer at most; 0 for no limit.",
    "queue.buffering.max.kbytes": "Bytes waiting in the producer at most, in KiB.",
    "queue.buffering.max.ms": "How long a batch waits for more records before it is sent, in milliseconds.",
    "message.send.max.retries": "Times a failed produce is retried.",
    "retry.backoff.ms": "First wait before retrying a request; grows up to `retry.backoff.max.ms`.",
    "retry.backoff.max.ms": "Longest wait before retrying a request.",
    "queue.buffering.backpressure.threshold": "Unsent requests per broker that hold back building more batches.",
    "compression.codec": "Compression of produced batches.",
    "batch.num.messages": "Records in one batch at most.",
    "batch.size": "Bytes in one batch at most.",
    "delivery.report.only.error": "Report failed deliveries only.",
    "dr_cb": "Delivery report callback.",
    "dr_msg_cb": "Delivery report callback with the message.",
    "sticky.partitioning.linger.ms": "How long keyless records stick to one partition; twice `linger.ms` unless set.",
    "client.dns.lookup": "Use every address a broker name resolves to, or canonicalize bootstrap names (Kerberos).",
    "enable.metrics.push": "Push client metrics to the cluster when it asks for them (KIP-714).",
    # topic
    "request.required.acks": "Replica acknowledgements a produce waits for: 0, 1, or all (-1).",
    "request.timeout.ms": "Time a broker has to acknowledge a produce.",
    "message.timeout.ms": "Time a record has to be delivered, retries included; 0 for no limit.",
    "queuing.strategy": "Order of the producer queue: fifo or lifo.",
    "produce.offset.report": "Unused.",
    "partitioner": "Built-in partitioner for records without a partition.",
    "partitioner_cb": "Custom partitioner callback.",
    "msg_order_cmp": "Producer queue ordering callback.",
    "compression.level": "Compression level; -1 for the codec's default.",
    "auto.commit.enable": "Legacy consumer's automatic commit (the group consumer uses the global `enable.auto.commit`).",
    "auto.offset.reset": "Where to start without a valid committed offset: earliest, latest, or report an error.",
    "offset.store.path": "Legacy file offset store path.",
    "offset.store.sync.interval.ms": "Legacy file offset store fsync interval.",
    "consume.callback.max.messages": "Records per consume-callback call at most; 0 for no limit.",
}
TOPIC_DESCRIPTIONS = {
    "auto.commit.interval.ms": "Legacy consumer's commit period (the group consumer uses the global property).",
    "offset.store.method": "Legacy consumer's offset store: `broker` or `file`.",
    "compression.codec": "Compression of this topic's batches; `inherit` takes the global setting.",
    "opaque": "Application pointer handed to topic callbacks.",
}


def find_librdkafka(arg: str | None) -> str:
    if arg:
        return arg
    homes = [os.environ.get("CARGO_HOME"), os.path.expanduser("~/.cargo")]
    for home in filter(None, homes):
        hits = sorted(glob.glob(f"{home}/registry/src/*/rdkafka-sys-4.10.0+{VERSION}/librdkafka"))
        if hits:
            return hits[0]
    sys.exit("librdkafka sources not found: pass --librdkafka DIR")


# ---------------------------------------------------------------------------------------------
# C tokenizer and preprocessor

TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<comment>/\*.*?\*/|//[^\n]*)
  | (?P<pp>^[ \t]*\#(?:[^\n\\]|\\.)*)
  | (?P<str>"(?:[^"\\]|\\.)*")
  | (?P<num>0[xX][0-9a-fA-F]+|\d+\.\d*(?:[eE][-+]?\d+)?|\d+)
  | (?P<ident>[A-Za-z_]\w*)
  | (?P<punct>.)
    """,
    re.VERBOSE | re.DOTALL | re.MULTILINE,
)


def unescape(lit: str) -> str:
    body = lit[1:-1]
    out, i = [], 0
    while i < len(body):
        c = body[i]
        if c == "\\":
            n = body[i + 1]
            out.append({"n": "\n", "t": "\t", '"': '"', "\\": "\\", "'": "'"}[n])
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def pp_condition(line: str) -> bool:
    line = line.strip()
    m = re.fullmatch(r"#\s*(ifdef|ifndef)\s+(\w+)", line)
    if m:
        value = DEFINES[m.group(2)]
        return value if m.group(1) == "ifdef" else not value
    m = re.fullmatch(r"#\s*if\s+(!?)\s*(?:defined\((\w+)\)|(\w+))", line)
    if m:
        value = DEFINES[m.group(2) or m.group(3)]
        return not value if m.group(1) else value
    raise SystemExit(f"preprocessor line not understood: {line}")


def tokenize(text: str) -> list[tuple[str, object]]:
    tokens: list[tuple[str, object]] = []
    stack: list[tuple[bool, bool]] = []  # (enclosing region active, this condition)
    active = True
    for m in TOKEN.finditer(text):
        kind = m.lastgroup
        value = m.group(kind)
        if kind in ("ws", "comment"):
            continue
        if kind == "pp":
            directive = value.strip()
            if re.match(r"#\s*(if|ifdef|ifndef)\b", directive):
                condition = pp_condition(directive)
                stack.append((active, condition))
                active = active and condition
            elif re.match(r"#\s*else\b", directive):
                parent, condition = stack[-1]
                active = parent and not condition
            elif re.match(r"#\s*endif\b", directive):
                active = stack.pop()[0]
            else:
                raise SystemExit(f"preprocessor line not understood: {directive}")
            continue
        if not active:
            continue
        if kind == "str":
            text_value = unescape(value)
            if tokens and tokens[-1][0] == "str":
                tokens[-1] = ("str", tokens[-1][1] + text_value)
            else:
                tokens.append(("str", text_value))
        elif kind == "ident" and value == "RD_KAFKA_IDEMP_MAX_INFLIGHT_STR":
            tokens[-1] = ("str", tokens[-1][1] + "5")
        elif kind == "ident" and value.startswith("_UNSUPPORTED_"):
            tokens += [("punct", "."), ("ident", "unsupported"), ("punct", "="),
                       ("gate", GATES[value[len("_UNSUPPORTED_"):]])]
        else:
            tokens.append((kind, value))
    return tokens


# ---------------------------------------------------------------------------------------------
# Brace initializers

FIELDS = ["scope", "name", "type", "offset", "desc", "vmin", "vmax", "vdef", "sdef", "pdef",
          "ddef", "dmin", "dmax", "s2i", "unsupported", "validate", "ctor", "dtor", "copy", "set"]


class Parser:
    def __init__(self, tokens):
        self.t = tokens
        self.i = 0

    def peek(self, k=0):
        return self.t[self.i + k] if self.i + k < len(self.t) else (None, None)

    def take(self, value=None):
        tok = self.t[self.i]
        if value is not None and tok[1] != value:
            raise SystemExit(f"expected {value!r}, found {tok!r} at token {self.i}")
        self.i += 1
        return tok

    def init_list(self):
        """`{ item, item, ... }` -> list of (designator or None, value)."""
        self.take("{")
        items = []
        while self.peek()[1] != "}":
            designator = None
            if self.peek()[1] == "." and self.peek(1)[0] == "ident" and self.peek(2)[1] == "=":
                self.take(".")
                designator = self.take()[1]
                self.take("=")
            if self.peek()[1] == "{":
                value = self.init_list()
            else:
                value = self.expression()
            items.append((designator, value))
            if self.peek()[1] == ",":
                self.take(",")
        self.take("}")
        return items

    def expression(self):
        toks, depth = [], 0
        while True:
            kind, value = self.peek()
            if depth == 0 and value in (",", "}"):
                break
            if value == "(":
                depth += 1
            elif value == ")":
                depth -= 1
            toks.append(self.take())
        return toks


def fields_of(items):
    """C struct initialization: positional items continue after the last designated one."""
    out, pos = {}, 0
    for designator, value in items:
        if designator is not None:
            pos = FIELDS.index(designator)
        out[FIELDS[pos]] = value
        pos += 1
    return out


def evaluate(toks):
    """A constant expression of the table: numbers, INT_MAX and friends, * / + - ( )."""
    if len(toks) == 1 and toks[0][0] == "str":
        return toks[0][1]
    if len(toks) == 1 and toks[0][0] == "gate":
        return ("gate", toks[0][1])
    if len(toks) == 1 and toks[0] == ("ident", "NULL"):
        return None
    if len(toks) == 1 and toks[0][0] == "ident" and toks[0][1] not in CONSTANTS:
        return ("ident", toks[0][1])
    pos = 0

    def atom():
        nonlocal pos
        kind, value = toks[pos]
        pos += 1
        if value == "(":
            v = add()
            pos += 1
            return v
        if value == "-":
            return -atom()
        if kind == "num":
            return float(value) if "." in value else int(value, 0)
        if kind == "ident":
            return CONSTANTS[value]
        raise SystemExit(f"bad expression {toks}")

    def mul():
        nonlocal pos
        v = atom()
        while pos < len(toks) and toks[pos][1] in ("*", "/"):
            op = toks[pos][1]
            pos += 1
            r = atom()
            if op == "*":
                v = v * r
            elif isinstance(v, int) and isinstance(r, int):
                v = int(v / r)
            else:
                v = v / r
        return v

    def add():
        nonlocal pos
        v = mul()
        while pos < len(toks) and toks[pos][1] in ("+", "-"):
            op = toks[pos][1]
            pos += 1
            r = mul()
            v = v + r if op == "+" else v - r
        return v

    v = add()
    if pos != len(toks):
        raise SystemExit(f"trailing tokens in {toks}")
    return v


def parse_c_table(source: str) -> list[dict]:
    start = source.index("rd_kafka_properties[] = {") + len("rd_kafka_properties[] = ")
    end = source.index("};", source.index("/* End */", start)) + 1
    tokens = tokenize(source[start:end])
    parser = Parser(tokens)
    entries = []
    for _, item in parser.init_list():
        f = fields_of(item)
        if "name" not in f:
            continue  # the end marker
        scope = {tok[1] for tok in f["scope"] if tok[0] == "ident"}
        e = {
            "name": evaluate(f["name"]),
            "scope": sorted(scope),
            "type": f["type"][0][1],
        }
        for key in ("vmin", "vmax", "vdef", "sdef", "ddef", "dmin", "dmax"):
            if key in f:
                e[key] = evaluate(f[key])
        for key in ("validate", "set"):
            if key in f:
                e[key] = f[key][0][1]
        if "unsupported" in f:
            u = evaluate(f["unsupported"])
            e["gate"] = u[1] if isinstance(u, tuple) else LITERAL_GATES[u]
        if "s2i" in f:
            values = []
            for _, entry in f["s2i"]:
                sf = {}
                pos = 0
                for designator, value in entry:
                    key = designator or ["val", "str", "unsupported"][pos]
                    sf[key] = value
                    pos = ["val", "str", "unsupported"].index(key) + 1
                if "str" not in sf or evaluate(sf["str"]) is None:
                    continue
                v = {"str": evaluate(sf["str"]), "val": evaluate(sf["val"])}
                if "unsupported" in sf:
                    u = evaluate(sf["unsupported"])
                    v["gate"] = u[1] if isinstance(u, tuple) else LITERAL_GATES[u]
                values.append(v)
            e["s2i"] = values
        if e["name"] in EXTRA_GATES:
            e["gate"] = EXTRA_GATES[e["name"]]
        entries.append(e)
    return entries



# ---------------------------------------------------------------------------------------------
# CONFIGURATION.md


def parse_markdown(text: str) -> list[dict]:
    """The facts columns of CONFIGURATION.md's two tables."""
    rows, section = [], None
    for line in text.splitlines():
        if line.startswith("## Global configuration properties"):
            section = "global"
        elif line.startswith("## Topic configuration properties"):
            section = "topic"
        if section is None or "|" not in line or line.startswith(("Property", "----")):
            continue
        # `\|` is a pipe inside a cell (the `||` of a default shell command).
        cells = [c.replace("\\|", "|").strip() for c in re.split(r"(?<!\\)\|", line, maxsplit=5)]
        name, cp, rng, default, _importance, desc = cells
        m = re.search(r"<br>\*Type: ([^*]+)\*\s*$", desc)
        alias = re.match(r"(?:\*\*DEPRECATED\*\* )?Alias for `([^`]+)`", desc)
        rows.append({
            "section": section,
            "name": name,
            "clients": cp,
            "range": rng,
            "default": default,
            "type": m.group(1) if m else "",
            "alias_of": alias.group(1) if alias else "",
        })
    return rows


def markdown_tsv(rows: list[dict]) -> str:
    out = [
        "# @generated by scripts/gen-properties.py: do not edit by hand, rerun it.",
        f"# The facts columns of librdkafka {VERSION}'s CONFIGURATION.md (no descriptions):",
        "# section, name, C/P, range, default, type, and the property an alias row names.",
    ]
    for r in rows:
        out.append("\t".join(r[k] for k in
                              ("section", "name", "clients", "range", "default", "type", "alias_of")))
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------
# Rust output


def rust_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def rust_int(v: int) -> str:
    return f"{v:_}"


def rust_f64(v) -> str:
    v = float(v)
    if v.is_integer():
        return f"{int(v):_}.0"
    return repr(v)


def value_key(v):
    return tuple(v) if isinstance(v, list) else v


def enum_values(e: dict) -> str:
    keys = [value_key(v["val"]) for v in e["s2i"]]
    items = []
    for i, v in enumerate(e["s2i"]):
        meaning = keys.index(keys[i])
        gate = f"Some(Gate::{v['gate']})" if "gate" in v else "None"
        items.append(f"v({rust_str(v['str'])}, {meaning}, {gate})")
    return "&[" + ", ".join(items) + "]"


def default_index(e: dict) -> int:
    keys = [value_key(v["val"]) for v in e["s2i"]]
    vdef = value_key(e.get("vdef", 0))
    if isinstance(vdef, int) and vdef not in keys:
        # A numeric default against named constants (queuing.strategy's `.vdef = 0`).
        keys = [CONSTANTS.get(k[1], k) if isinstance(k, tuple) else k for k in keys]
    return keys.index(vdef)


def kind_of(e: dict) -> str:
    t = e["type"]
    if t == "_RK_C_BOOL":
        return f"Kind::Bool {{ default: {'true' if e.get('vdef', 0) else 'false'} }}"
    if t == "_RK_C_INT":
        names = ", ".join(f"({rust_str(v['str'])}, {rust_int(v['val'])})"
                          for v in e.get("s2i", []))
        return (f"Kind::Int {{ min: {rust_int(e['vmin'])}, max: {rust_int(e['vmax'])}, "
                f"default: {rust_int(e.get('vdef', 0))}, names: &[{names}] }}")
    if t == "_RK_C_DBL":
        return (f"Kind::Float {{ min: {rust_f64(e.get('dmin', 0))}, max: {rust_f64(e['dmax'])}, "
                f"default: {rust_f64(e.get('ddef', 0))} }}")
    if t in ("_RK_C_STR", "_RK_C_KSTR"):
        default = f"Some({rust_str(e['sdef'])})" if e.get("sdef") is not None else "None"
        if t == "_RK_C_KSTR":
            return f"Kind::KafkaStr {{ default: {default} }}"
        check = {
            None: "StrCheck::Any",
            "rd_kafka_conf_validate_partitioner": "StrCheck::Partitioner",
            "rd_kafka_conf_validate_single": "StrCheck::SingleToken",
            "rd_kafka_conf_validate_broker_version": "StrCheck::BrokerVersion",
        }[e.get("validate")]
        return f"Kind::Str {{ default: {default}, check: {check} }}"
    if t == "_RK_C_S2I":
        return f"Kind::Enum {{ values: {enum_values(e)}, default: {default_index(e)} }}"
    if t == "_RK_C_S2F":
        items = []
        for v in e["s2i"]:
            bits = v["val"] if isinstance(v["val"], int) else CONSTANTS[v["val"][1]]
            gate = f"Some(Gate::{v['gate']})" if "gate" in v else "None"
            items.append(f"f({rust_str(v['str'])}, {bits:#x}, {gate})")
        return f"Kind::Flags {{ values: &[{', '.join(items)}], default: {e.get('vdef', 0):#x} }}"
    if t == "_RK_C_PATLIST":
        return "Kind::Patterns"
    if t == "_RK_C_PTR":
        return "Kind::Pointer"
    if t == "_RK_C_INTERNAL":
        return "Kind::Internal"
    if t == "_RK_C_INVALID":
        return "Kind::Foreign"
    raise SystemExit(f"unknown type {t}")


def clients_of(scope: list[str]) -> str:
    consumer = "_RK_CONSUMER" in scope or "_RK_CGRP" in scope
    producer = "_RK_PRODUCER" in scope
    if consumer and not producer:
        return "Clients::Consumer"
    if producer and not consumer:
        return "Clients::Producer"
    return "Clients::Both"


def importance_of(scope: list[str]) -> str:
    if "_RK_HIGH" in scope:
        return "Importance::High"
    if "_RK_MED" in scope:
        return "Importance::Medium"
    return "Importance::Low"


def build(entries: list[dict]) -> tuple[list[dict], list[tuple[str, str, int]]]:
    """Properties (aliases folded in) and the lookup keys: (scope, spelling, index)."""
    props, keys = [], []
    for e in entries:
        if e["type"] == "_RK_C_ALIAS":
            continue
        scope = "Topic" if "_RK_TOPIC" in e["scope"] else "Global"
        props.append({**e, "scope_name": scope, "aliases": []})
    for e in entries:
        if e["type"] != "_RK_C_ALIAS":
            continue
        scope = "Topic" if "_RK_TOPIC" in e["scope"] else "Global"
        target = next(p for p in props if p["name"] == e["sdef"] and p["scope_name"] == scope)
        target["aliases"].append(e["name"])
    for i, p in enumerate(props):
        canonical = CANONICAL.get(p["name"], p["name"])
        spellings = [p["name"]] + p["aliases"]
        if canonical not in spellings:
            raise SystemExit(f"{canonical} is not a spelling of {p['name']}")
        p["rdkafka_name"] = p["name"]
        p["aliases"] = [s for s in spellings if s != canonical]
        p["name"] = canonical
        for s in spellings:
            keys.append((p["scope_name"], s, i))
    return props, keys


def description_of(p: dict) -> str:
    name = p["rdkafka_name"]
    if p["scope_name"] == "Topic" and name in TOPIC_DESCRIPTIONS:
        return TOPIC_DESCRIPTIONS[name]
    if name not in DESCRIPTIONS:
        raise SystemExit(f"no description for {name}: add one (in our own words) to DESCRIPTIONS")
    return DESCRIPTIONS[name]


def render(entries: list[dict]) -> str:
    props, keys = build(entries)
    out = [
        "// @generated by scripts/gen-properties.py: do not edit by hand, rerun it.",
        f"// Source: {SOURCE}.",
        "",
        "//! librdkafka 2.12.1's configuration properties, one entry per property (aliases folded",
        "//! in), in librdkafka's own order: global properties first, then topic properties.",
        "//! Descriptions are this project's.",
        "",
        "use super::property::{Clients, Gate, Importance, Kind, Property, Scope, StrCheck, f, v};",
        "",
        "/// Every property of librdkafka 2.12.1, global and topic, with its aliases.",
        "#[rustfmt::skip]",
        f"pub static PROPERTIES: [Property; {len(props)}] = [",
    ]
    for p in props:
        gate = f"Some(Gate::{p['gate']})" if "gate" in p else "None"
        aliases = ", ".join(rust_str(a) for a in p["aliases"])
        flags = ", ".join(f"{flag}: {'true' if f'_RK_{flag.upper()}' in p['scope'] else 'false'}"
                          for flag in ("deprecated", "experimental", "hidden", "sensitive"))
        out += [
            "    Property {",
            f"        name: {rust_str(p['name'])}, rdkafka_name: {rust_str(p['rdkafka_name'])},",
            f"        aliases: &[{aliases}],",
            f"        scope: Scope::{p['scope_name']}, clients: {clients_of(p['scope'])}, "
            f"importance: {importance_of(p['scope'])}, gate: {gate},",
            f"        {flags},",
            f"        kind: {kind_of(p)},",
            f"        description: {rust_str(description_of(p))},",
            "    },",
        ]
    out += ["];", ""]
    for scope in ("Global", "Topic"):
        fn = scope.lower()
        out += [
            f"/// The index in [`PROPERTIES`] of the {fn} property that `name` spells (its name or an",
            "/// alias, exactly: librdkafka compares property names case-sensitively).",
            "#[allow(clippy::too_many_lines)]",
            f"pub(super) fn {fn}_index(name: &str) -> Option<usize> {{",
            "    Some(match name {",
        ]
        arms: dict[int, list[str]] = {}
        for s, spelling, i in keys:
            if s == scope:
                arms.setdefault(i, []).append(rust_str(spelling))
        for i, spellings in arms.items():
            out.append(f"        {' | '.join(spellings)} => {i},")
        out += ["        _ => return None,", "    })", "}", ""]
    out += [
        "/// Each property's index in [`PROPERTIES`], named after the property (a topic property",
        "/// whose name a global one has too gets a `TOPIC_` prefix).",
        "// Generated for every property so that code naming one is checked by the compiler;",
        "// most are not used.",
        "#[allow(dead_code)]",
        "pub(super) mod id {",
    ]
    global_names = {p["name"] for p in props if p["scope_name"] == "Global"}
    for i, p in enumerate(props):
        ident = re.sub(r"[^A-Za-z0-9]", "_", p["name"]).upper()
        if p["scope_name"] == "Topic" and p["name"] in global_names:
            ident = "TOPIC_" + ident
        out.append(f"    pub(in super::super) const {ident}: usize = {i};")
    out += ["}", ""]
    return "\n".join(out)


def rustfmt(code: str) -> str:
    return subprocess.run(["rustfmt", "--edition", "2024", "--emit", "stdout"], input=code,
                          capture_output=True, text=True, check=True).stdout


def write_or_check(path: str, content: str, check: bool) -> bool:
    current = open(path).read() if os.path.exists(path) else None
    if current == content:
        return True
    if check:
        print(f"{path} is stale: rerun scripts/gen-properties.py", file=sys.stderr)
        return False
    with open(path, "w") as f:
        f.write(content)
    print(f"wrote {path}")
    return True


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--librdkafka", help="librdkafka source directory (with src/ and CONFIGURATION.md)")
    ap.add_argument("--check", action="store_true", help="compare instead of writing")
    args = ap.parse_args()
    root = find_librdkafka(args.librdkafka)
    # The debug contexts' bits (`all` is every one of them).
    header = open(os.path.join(root, "src", "rdkafka_int.h")).read()
    for name, value in re.findall(r"#define (RD_KAFKA_DBG_\w+)\s+(0x[0-9a-fA-F]+)", header):
        CONSTANTS[name] = int(value, 16)
    entries = parse_c_table(open(os.path.join(root, "src", "rdkafka_conf.c")).read())
    rows = parse_markdown(open(os.path.join(root, "CONFIGURATION.md")).read())

    c_names = {e["name"] for e in entries}
    missing = [r["name"] for r in rows if r["name"] not in c_names]
    if missing:
        raise SystemExit(f"CONFIGURATION.md names properties the C table lacks: {missing}")

    ok = write_or_check(TABLE_OUT, rustfmt(render(entries)), args.check)
    ok &= write_or_check(MD_OUT, markdown_tsv(rows), args.check)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
