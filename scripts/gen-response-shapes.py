#!/usr/bin/env python3
"""Generate src/client/net/shapes.rs: the wire shape of every Kafka response body.

`src/client/net/shape_check.rs` walks each response body against these shapes before
`kafka-protocol` decodes it, so that a hostile or corrupt length or array count is an error
instead of a multi-gigabyte `Vec::with_capacity`.

With `--kind request` it generates src/client/net/request_shapes.rs instead, the same for every
request body, from the `*Request.json` specs: the embedded test cluster
(`src/testing/cluster/server.rs`) walks each request body against it before decoding. The
request header is left out (its `ClientId` has field-level `flexibleVersions`, which the walker
does not model; `kafka-protocol` decodes the header without trusting any count).

Source of the shapes: Apache Kafka's own JSON message specs,
`clients/src/main/resources/common/message/*Response.json` and `ResponseHeader.json`, at the
Apache Kafka 4.1.0 release commit 13f70256db3c994c590e5d262a7cc50b9e973204 ("Bump version to
4.1.0", branch 4.1; read from the confluentinc/kafka mirror of apache/kafka, whose branch 4.1 has
the same message specs up to at least dc255832aa1feaa31e1c2593e17c887343f2c2f5). This is the
release `kafka-protocol` 0.18 is generated from. The specs themselves are not committed.

Rerun (from the repository root; needs only python3, git and rustfmt):

    git clone --branch 4.1 https://github.com/apache/kafka /tmp/kafka   # or any clone
    python3 scripts/gen-response-shapes.py --kafka-git /tmp/kafka \\
        --rev 13f70256db3c994c590e5d262a7cc50b9e973204

or, with the JSON files already copied into one directory,

    python3 scripts/gen-response-shapes.py --spec-dir DIR

and the same with `--kind request` for the request shapes.

`--check` compares instead of writing (exit 1 when the file is stale). The script also reads
`kafka-protocol`'s sources in the cargo registry (found from Cargo.lock, or `--kafka-protocol
DIR`) to learn which responses and structs have a Rust type there: those are listed, for the
tests only, in `for_each_response!` and `rust_size_of`.

The spec format: `//` comments (stripped here), version ranges "N", "N-M", "N+" or "none";
per field `type` (`bool`, `int8`, `int16`, `uint16`, `int32`, `int64`, `uint32`, `float64`,
`uuid`, `string`, `bytes`, `records`, a struct name, or `[]` before any of them), `versions`,
`nullableVersions`, `taggedVersions` and `tag`; struct types either carry their `fields` inline
or name one of the message's `commonStructs`.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

SPEC_DIR = "clients/src/main/resources/common/message"
OUTPUT = {
    "response": "src/client/net/shapes.rs",
    "request": "src/client/net/request_shapes.rs",
}
SOURCE = (
    "Apache Kafka 4.1.0, commit 13f70256db3c994c590e5d262a7cc50b9e973204, "
    "clients/src/main/resources/common/message"
)
MAX = 0x7FFF  # i16::MAX, written as X: "and every later version"

SCALARS = {
    "bool": "Bool",
    "int8": "Int8",
    "int16": "Int16",
    "uint16": "Uint16",
    "int32": "Int32",
    "int64": "Int64",
    "uint32": "Uint32",
    "float64": "Float64",
    "uuid": "Uuid",
    "string": "Str",
    "bytes": "Bytes",
    "records": "Records",
}


def strip_comments(text: str) -> str:
    """Removes `//` comments outside JSON strings."""
    out = []
    i, n = 0, len(text)
    in_string = False
    while i < n:
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_string = False
            i += 1
        elif c == '"':
            in_string = True
            out.append(c)
            i += 1
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def versions(spec: str | None) -> tuple[int, int]:
    """A version range as an inclusive (lo, hi); "none" (or absent) is (0, -1)."""
    if spec is None or spec == "none":
        return (0, -1)
    if spec.endswith("+"):
        return (int(spec[:-1]), MAX)
    if "-" in spec:
        lo, hi = spec.split("-")
        return (int(lo), int(hi))
    return (int(spec), int(spec))


def snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def read_specs(args) -> dict[str, str]:
    """File name -> text of every *Response.json and ResponseHeader.json (or, for requests,
    every *Request.json)."""
    if args.kind == "request":
        wanted = re.compile(r"^.*Request\.json$")
    else:
        wanted = re.compile(r"^(.*Response|ResponseHeader)\.json$")
    specs = {}
    if args.spec_dir:
        for path in sorted(glob.glob(os.path.join(args.spec_dir, "*.json"))):
            name = os.path.basename(path)
            if wanted.match(name):
                with open(path, encoding="utf-8") as f:
                    specs[name] = f.read()
    else:
        git = ["git", "--git-dir", args.kafka_git] if os.path.isdir(
            os.path.join(args.kafka_git, "objects")
        ) else ["git", "-C", args.kafka_git]
        listing = subprocess.run(
            git + ["ls-tree", "--name-only", args.rev, SPEC_DIR + "/"],
            check=True, capture_output=True, text=True,
        ).stdout.split()
        for path in listing:
            name = os.path.basename(path)
            if wanted.match(name):
                specs[name] = subprocess.run(
                    git + ["show", f"{args.rev}:{path}"],
                    check=True, capture_output=True, text=True,
                ).stdout
    if not specs:
        sys.exit(f"no {args.kind} specs found")
    return specs


def kafka_protocol_dir(explicit: str | None) -> str | None:
    if explicit:
        return explicit
    version = None
    lock = open("Cargo.lock", encoding="utf-8").read()
    m = re.search(r'name = "kafka-protocol"\nversion = "([^"]+)"', lock)
    if m:
        version = m.group(1)
    home = os.environ.get("CARGO_HOME", os.path.expanduser("~/.cargo"))
    hits = glob.glob(os.path.join(home, "registry/src/*", f"kafka-protocol-{version}"))
    return hits[0] if hits else None


class Generator:
    def __init__(self, kind: str = "response"):
        self.kind = kind
        self.structs: list[tuple[str, str, list[str]]] = []  # (message, struct name, field lines)
        self.messages = []  # (api_key, name, valid, flexible, struct id)
        self.header = None
        self.zero_size: list[str] = []
        self.common_ids: dict[tuple[str, str], int] = {}

    def struct(self, message: str, name: str, fields: list, common: dict) -> int:
        sid = len(self.structs)
        self.structs.append((message, name, []))
        lines = []
        for field in fields:
            lines.append(self.field(message, field, common))
        self.structs[sid] = (message, name, lines)
        return sid

    def field(self, message: str, field: dict, common: dict) -> str:
        ftype = field["type"]
        if "flexibleVersions" in field:
            sys.exit(f"{message}.{field['name']}: field-level flexibleVersions")
        array = ftype.startswith("[]")
        base = ftype[2:] if array else ftype
        if base in SCALARS:
            if "fields" in field:
                sys.exit(f"{message}.{field['name']}: scalar with fields")
            ty = "T::" + SCALARS[base]
        else:
            if "fields" in field:
                sid = self.struct(message, base, field["fields"], common)
            elif base in common:
                # One static per common struct, however many fields use it.
                key = (message, base)
                if key not in self.common_ids:
                    self.common_ids[key] = self.struct(message, base, common[base], common)
                sid = self.common_ids[key]
            else:
                sys.exit(f"{message}.{field['name']}: unknown type {ftype}")
            ty = f"T::Struct(&S{sid})"
        lo, hi = versions(field["versions"])
        text = f'{"a" if array else "f"}("{field["name"]}", {ty}, {lo}, {rng(hi)})'
        nullable = versions(field.get("nullableVersions"))
        if nullable[0] <= nullable[1]:
            text += f".n({nullable[0]}, {rng(nullable[1])})"
        if "tag" in field:
            tagged = versions(field.get("taggedVersions"))
            text += f".t({int(field['tag'])}, {tagged[0]}, {rng(tagged[1])})"
        elif "taggedVersions" in field:
            sys.exit(f"{message}.{field['name']}: taggedVersions without tag")
        return text

    def message(self, spec: dict):
        common = {s["name"]: s["fields"] for s in spec.get("commonStructs", [])}
        valid = versions(spec["validVersions"])
        flexible = versions(spec.get("flexibleVersions"))
        sid = self.struct(spec["name"], spec["name"], spec.get("fields", []), common)
        self.min_size_report(spec, valid, flexible, common)
        if spec["type"] == "header":
            self.header = (spec["name"], valid, flexible, sid)
        else:
            self.messages.append((int(spec["apiKey"]), spec["name"], valid, flexible, sid))

    def min_size_report(self, spec, valid, flexible, common):
        """Notes every array of structs whose element can encode to zero bytes."""

        def min_size(fields, v):
            flex = flexible[0] <= v <= flexible[1]
            total = 1 if flex else 0
            for fl in fields:
                lo, hi = versions(fl["versions"])
                tlo, thi = versions(fl.get("taggedVersions"))
                if not lo <= v <= hi or tlo <= v <= thi:
                    continue
                t = fl["type"]
                nlo, nhi = versions(fl.get("nullableVersions"))
                if t.startswith("[]"):
                    total += 1 if flex else 4
                elif t in SCALARS:
                    total += {
                        "bool": 1, "int8": 1, "int16": 2, "uint16": 2, "int32": 4,
                        "int64": 8, "uint32": 4, "float64": 8, "uuid": 16,
                        "string": 1 if flex else 2, "bytes": 1 if flex else 4,
                        "records": 1 if flex else 4,
                    }[t]
                elif nlo <= v <= nhi:
                    total += 1
                else:
                    total += min_size(fl.get("fields") or common[t], v)
            return total

        def walk(fields, path):
            for fl in fields:
                t = fl["type"]
                inner = None
                if t not in SCALARS and t[2:] not in SCALARS:
                    base = t[2:] if t.startswith("[]") else t
                    inner = fl.get("fields") or common[base]
                if inner is None:
                    continue
                if t.startswith("[]"):
                    lo, hi = versions(fl["versions"])
                    for v in range(max(lo, valid[0]), min(hi, valid[1]) + 1):
                        if min_size(inner, v) == 0:
                            self.zero_size.append(f"{path}.{fl['name']} v{v}")
                walk(inner, f"{path}.{fl['name']}")

        if valid[0] <= valid[1]:
            walk(spec.get("fields", []), spec["name"])

    def render(self, rust_types: dict[str, set[str]] | None) -> str:
        kind = self.kind
        rerun = "rerun it" if kind == "response" else "rerun it with --kind request"
        out = []
        out.append(
            f"// @generated by scripts/gen-response-shapes.py: do not edit by hand, {rerun}.\n"
            f"// Source: {SOURCE}.\n"
            "\n"
            f"//! The wire shape of every Kafka {kind} body, generated from Kafka's JSON message\n"
            "//! specs: each message's valid and flexible versions and its field tree, per field\n"
            "//! the type, `versions`, `nullableVersions`, and `taggedVersions` with the tag.\n"
            "//! `f` is a field, `a` an array field, `.n(..)` its nullable versions, `.t(tag, ..)`\n"
            "//! its tagged versions; `X` stands for \"and every later version\".\n"
            "\n"
            "use super::shape::{Message, Struct, Ty as T, X, a, f, m};\n"
            "\n"
            + (
                "/// The shape of the response to `api_key`, if Kafka defines one.\n"
                if kind == "response"
                else "/// The shape of the request of `api_key`, if Kafka defines one.\n"
            )
            + 
            "#[allow(clippy::too_many_lines)]\n"
            "pub(crate) fn message(api_key: i16) -> Option<&'static Message> {\n"
            "    match api_key {\n"
        )
        for key, name, *_ in sorted(self.messages):
            out.append(f"        {key} => Some(&{snake(name).upper()}),\n")
        out.append("        _ => None,\n    }\n}\n\n")
        for key, name, valid, flexible, sid in sorted(self.messages):
            out.append(
                f"static {snake(name).upper()}: Message = "
                f"m({key}, {valid[0]}, {valid[1]}, {flexible[0]}, {rng(flexible[1])}, &S{sid});\n"
            )
        if self.header:
            name, valid, flexible, sid = self.header
            out.append(
                "\n/// The response header, which `Connection` reads itself: kept for the tests.\n"
                "#[cfg(test)]\n"
                f"pub(crate) static {snake(name).upper()}: Message = "
                f"m(-1, {valid[0]}, {valid[1]}, {flexible[0]}, {rng(flexible[1])}, &S{sid});\n"
            )
        header_sid = self.header[3] if self.header else None
        for sid, (message, name, lines) in enumerate(self.structs):
            out.append("\n")
            if sid == header_sid:
                out.append("#[cfg(test)]\n")
            out.append(f'static S{sid}: Struct = Struct {{\n    name: "{name}",\n    fields: &[\n')
            for line in lines:
                out.append(f"        {line},\n")
            out.append("    ],\n};\n")
        if rust_types is not None:
            out.append(
                f"\n/// Calls `$m!(api_key, Type)` for every {kind} `kafka-protocol` has a type for.\n"
                "#[cfg(test)]\n"
                f"macro_rules! for_each_{kind} {{\n    ($m:ident) => {{\n"
            )
            for key, name, valid, *_ in sorted(self.messages):
                if name in rust_types and valid[0] <= valid[1]:
                    out.append(f"        $m!({key}, {name});\n")
            out.append(f"    }};\n}}\n#[cfg(test)]\npub(crate) use for_each_{kind};\n")
            out.append(
                "\n/// The size of `kafka-protocol`'s Rust type for struct `name` of `message`.\n"
                "#[cfg(test)]\n"
                "#[allow(clippy::too_many_lines)]\n"
                "pub(crate) fn rust_size_of(message: &str, name: &str) -> Option<usize> {\n"
                "    use kafka_protocol::messages as k;\n"
                "    Some(match (message, name) {\n"
            )
            seen = set()
            for message, name, _ in self.structs:
                if (message, name) in seen or name not in rust_types.get(message, set()):
                    continue
                seen.add((message, name))
                out.append(
                    f'        ("{message}", "{name}") => '
                    f"size_of::<k::{snake(message)}::{name}>(),\n"
                )
            out.append("        _ => return None,\n    })\n}\n")
        return "".join(out)


def rng(hi: int) -> str:
    return "X" if hi == MAX else str(hi)


def rust_types_of(kp_dir: str, names: list[str]) -> dict[str, set[str]]:
    found = {}
    for name in names:
        path = os.path.join(kp_dir, "src", "messages", snake(name) + ".rs")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                found[name] = set(re.findall(r"^pub struct (\w+)", f.read(), flags=re.M))
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--spec-dir", help="directory holding the JSON specs")
    src.add_argument("--kafka-git", help="a clone (or bare git directory) of apache/kafka")
    parser.add_argument("--rev", default="13f70256db3c994c590e5d262a7cc50b9e973204")
    parser.add_argument("--kafka-protocol", help="kafka-protocol's source directory")
    parser.add_argument("--kind", choices=["response", "request"], default="response")
    parser.add_argument("--output", help="default: shapes.rs, or request_shapes.rs")
    parser.add_argument("--check", action="store_true", help="fail if OUTPUT is stale")
    args = parser.parse_args()
    args.output = args.output or OUTPUT[args.kind]

    gen = Generator(args.kind)
    for file_name, text in sorted(read_specs(args).items()):
        spec = json.loads(strip_comments(text))
        if spec["type"] not in (args.kind, "header") or (
            args.kind == "request" and spec["type"] == "header"
        ):
            continue
        if versions(spec["validVersions"])[0] > versions(spec["validVersions"])[1]:
            continue  # removed from Kafka ("validVersions": "none")
        gen.message(spec)

    kp_dir = kafka_protocol_dir(args.kafka_protocol)
    rust_types = None
    if kp_dir:
        rust_types = rust_types_of(kp_dir, [name for _, name, *_ in gen.messages])
        missing = sorted(n for _, n, *_ in gen.messages if n not in rust_types)
        if missing:
            print(f"{args.kind}s kafka-protocol has no type for:", ", ".join(missing), file=sys.stderr)
    else:
        print("kafka-protocol sources not found: no test helpers generated", file=sys.stderr)
    for z in gen.zero_size:
        print(f"array of possibly empty structs: {z}", file=sys.stderr)

    with tempfile.NamedTemporaryFile("w", suffix=".rs", delete=False, encoding="utf-8") as tmp:
        tmp.write(gen.render(rust_types))
    try:
        subprocess.run(["rustfmt", "--edition", "2024", tmp.name], check=True)
        with open(tmp.name, encoding="utf-8") as f:
            text = f.read()
    finally:
        os.unlink(tmp.name)
    if args.check:
        with open(args.output, encoding="utf-8") as f:
            if f.read() != text:
                sys.exit(f"{args.output} is stale: rerun scripts/gen-response-shapes.py")
        return
    with open(args.output, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {args.output}: {len(gen.messages)} {args.kind}s, {len(gen.structs)} structs")


if __name__ == "__main__":
    main()
