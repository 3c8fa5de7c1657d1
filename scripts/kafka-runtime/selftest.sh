#!/usr/bin/env bash
# Smoke test of the cluster started by `scripts/kafka up`, with the official Java client
# (scripts/interop/Interop.java). For every listener: create a topic, produce 3 records, consume
# them and compare with the expected lines. Also: a wrong SCRAM password must fail, and a
# transaction that is aborted must stay invisible to a read_committed consumer.
#
#   scripts/kafka-runtime/selftest.sh          (needs a running cluster; prints one line per check)
#
# Against another broker (e.g. the docker-compose.yml one), set the variables `scripts/kafka env`
# would print yourself (KAFKA_NODES, KAFKA_VERSION, KAFKA_TEST_URL, KAFKA_SASL_URL, KAFKA_SSL_URL,
# KAFKA_SASL_SSL_URL, KAFKA_CA_PEM; the directory of KAFKA_CA_PEM must hold what `scripts/kafka tls`
# makes) and the script uses them instead.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
KAFKA="$HERE/../kafka"
INTEROP="$HERE/../interop/Interop.java"

if [[ -z ${KAFKA_NODES:-} ]]; then
  eval "$("$KAFKA" env | sed 's/^/export /')"
fi
[[ -n ${KAFKA_NODES:-} ]] || { echo "selftest: no cluster running" >&2; exit 1; }
CP=$("$KAFKA" java-classpath --version "$KAFKA_VERSION")
TLS=$(dirname "${KAFKA_CA_PEM:-/nonexistent/x}")

# compile Interop once (a source launch compiles it on every call: ~5 s instead of ~1.5 s)
CLS=$(mktemp -d /tmp/ruststream-kafka-selftest.XXXXXX)
trap 'rm -rf "$CLS"' EXIT
javac -nowarn -d "$CLS" -cp "$CP" "$INTEROP"
I() { java -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -cp "$CLS:$CP" Interop "$@"; }

fails=0
run_id=$(date +%s)
# the 3 lines `consume` must print for records produced by `produce <topic> <c> 3` to one partition
expected() {
  printf '0\t0\t1700000000000\t-\t76616c75652d30\th=30,h=647570\n'
  printf '0\t1\t1700000000001\t6b65792d31\t-\th=31,h=647570\n'
  printf '0\t2\t1700000000002\t6b65792d32\t76616c75652d32\th=32,h=647570\n'
}

check() { # name bootstrap compression rf [client options...]
  local name=$1 bs=$2 comp=$3 rf=$4 topic; shift 4
  topic="selftest-$name-$run_id"
  local t0=$SECONDS out
  if I "$@" create "$bs" "$topic" 1 "$rf" >/dev/null 2>"$CLS/err" &&
     I "$@" produce "$bs" "$topic" "$comp" 3 >/dev/null 2>>"$CLS/err" &&
     out=$(I "$@" consume "$bs" "$topic" 3 20000 2>>"$CLS/err") &&
     [[ $out == "$(expected)" ]]; then
    echo "ok   $name ($bs, $comp) $((SECONDS - t0)) s"
  else
    echo "FAIL $name ($bs, $comp)"; grep -v WARN "$CLS/err" | tail -5; fails=$((fails + 1))
  fi
}

jaas() { # module user password
  echo "sasl.jaas.config=org.apache.kafka.common.security.$1 required username=\"$2\" password=\"$3\";"
}
PLAIN=plain.PlainLoginModule
SCRAM=scram.ScramLoginModule

if [[ $KAFKA_NODES == 1 ]]; then
  TRUST=(--command-config "$TLS/client-ssl.properties")
  check plaintext "$KAFKA_TEST_URL" none 1
  check sasl-plain "$KAFKA_SASL_URL" gzip 1 --prop security.protocol=SASL_PLAINTEXT \
    --prop sasl.mechanism=PLAIN --prop "$(jaas $PLAIN alice alice-secret)"
  check sasl-scram-sha-256 "$KAFKA_SASL_URL" snappy 1 --prop security.protocol=SASL_PLAINTEXT \
    --prop sasl.mechanism=SCRAM-SHA-256 --prop "$(jaas $SCRAM alice alice-secret)"
  check sasl-scram-sha-512 "$KAFKA_SASL_URL" lz4 1 --prop security.protocol=SASL_PLAINTEXT \
    --prop sasl.mechanism=SCRAM-SHA-512 --prop "$(jaas $SCRAM alice alice-secret)"
  check ssl "$KAFKA_SSL_URL" zstd 1 "${TRUST[@]}"
  check ssl-client-cert "$KAFKA_SSL_URL" none 1 --command-config "$TLS/client-mtls.properties"
  check sasl-ssl-plain "$KAFKA_SASL_SSL_URL" gzip 1 "${TRUST[@]}" --prop security.protocol=SASL_SSL \
    --prop sasl.mechanism=PLAIN --prop "$(jaas $PLAIN admin admin-secret)"
  check sasl-ssl-scram-sha-512 "$KAFKA_SASL_SSL_URL" zstd 1 "${TRUST[@]}" --prop security.protocol=SASL_SSL \
    --prop sasl.mechanism=SCRAM-SHA-512 --prop "$(jaas $SCRAM alice alice-secret)"
  # negative: a wrong password must be rejected
  if I --prop security.protocol=SASL_PLAINTEXT --prop sasl.mechanism=SCRAM-SHA-512 \
       --prop "$(jaas $SCRAM alice wrong)" --prop max.block.ms=10000 \
       produce "$KAFKA_SASL_URL" "selftest-bad-$run_id" none 1 >/dev/null 2>"$CLS/err"; then
    echo "FAIL wrong SCRAM password was accepted"; fails=$((fails + 1))
  elif grep -q SaslAuthenticationException "$CLS/err"; then
    echo "ok   wrong SCRAM password rejected"
  else
    echo "FAIL wrong SCRAM password: unexpected error"; tail -3 "$CLS/err"; fails=$((fails + 1))
  fi
  RF=1
else
  check plaintext "$KAFKA_TEST_URL" zstd 3
  RF=3
fi

# transactions: abort 2 records, commit 2, a read_committed consumer sees only the committed ones
topic="selftest-txn-$run_id"
if I create "$KAFKA_TEST_URL" "$topic" 1 "$RF" >/dev/null 2>"$CLS/err" &&
   I produce-txn "$KAFKA_TEST_URL" "$topic" gzip 2 abort >/dev/null 2>>"$CLS/err" &&
   I produce-txn "$KAFKA_TEST_URL" "$topic" lz4 2 commit >/dev/null 2>>"$CLS/err" &&
   out=$(I consume "$KAFKA_TEST_URL" "$topic" 2 20000 2>>"$CLS/err") &&
   [[ $(cut -f2 <<<"$out" | tr '\n' ' ') == "3 4 " ]]; then
  echo "ok   transactions (aborted records hidden, committed at offsets 3 and 4)"
else
  echo "FAIL transactions"; echo "$out"; grep -v WARN "$CLS/err" | tail -5; fails=$((fails + 1))
fi

if (( fails )); then echo "selftest: $fails check(s) failed (Kafka $KAFKA_VERSION, $KAFKA_NODES node(s))"; exit 1; fi
echo "selftest: all checks passed (Kafka $KAFKA_VERSION, $KAFKA_NODES node(s))"
