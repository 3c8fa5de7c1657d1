//! The generated table against librdkafka's CONFIGURATION.md: the real file when it is on this
//! machine (in the cargo registry, through `rdkafka-sys`), the committed snapshot of its facts
//! columns otherwise.

use std::path::PathBuf;

use crate::properties::cnum::format_g;
use crate::properties::validate::resolve;
use crate::properties::{
    ACTED_ON, Clients, Kind, NOT_ACTED_ON, PROPERTIES, Property, REDACTED, Scope, find,
};

const SNAPSHOT: &str = include_str!("../configuration-2.12.1.tsv");

#[derive(Debug, PartialEq, Eq)]
struct Row {
    section: String,
    name: String,
    clients: String,
    range: String,
    default: String,
    kind: String,
    alias_of: String,
}

fn snapshot_rows() -> Vec<Row> {
    SNAPSHOT
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|line| {
            let c: Vec<&str> = line.split('\t').collect();
            assert_eq!(c.len(), 7, "{line}");
            Row {
                section: c[0].to_owned(),
                name: c[1].to_owned(),
                clients: c[2].to_owned(),
                range: c[3].to_owned(),
                default: c[4].to_owned(),
                kind: c[5].to_owned(),
                alias_of: c[6].to_owned(),
            }
        })
        .collect()
}

/// CONFIGURATION.md of the `rdkafka-sys` this crate's reference builds with, if present.
fn live_markdown() -> Option<String> {
    let homes = [
        std::env::var_os("CARGO_HOME").map(PathBuf::from),
        std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")),
    ];
    for home in homes.into_iter().flatten() {
        let Ok(registries) = std::fs::read_dir(home.join("registry/src")) else {
            continue;
        };
        for registry in registries.flatten() {
            let file = registry
                .path()
                .join("rdkafka-sys-4.10.0+2.12.1/librdkafka/CONFIGURATION.md");
            if let Ok(text) = std::fs::read_to_string(file) {
                return Some(text);
            }
        }
    }
    None
}

/// The facts columns of CONFIGURATION.md's tables, as `scripts/gen-properties.py` reads them.
fn markdown_rows(text: &str) -> Vec<Row> {
    let mut rows = Vec::new();
    let mut section = None;
    for line in text.lines() {
        if line.starts_with("## Global configuration properties") {
            section = Some("global");
        } else if line.starts_with("## Topic configuration properties") {
            section = Some("topic");
        }
        let Some(section) = section else { continue };
        if !line.contains('|') || line.starts_with("Property") || line.starts_with("----") {
            continue;
        }
        // Cells split at unescaped pipes; `\|` is a pipe inside a cell.
        let mut cells = Vec::new();
        let mut cell = String::new();
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '\\' && chars.peek() == Some(&'|') {
                cell.push('|');
                chars.next();
            } else if c == '|' && cells.len() < 5 {
                cells.push(std::mem::take(&mut cell).trim().to_owned());
            } else {
                cell.push(c);
            }
        }
        cells.push(cell.trim().to_owned());
        let description = &cells[5];
        let kind = description
            .rsplit_once("<br>*Type: ")
            .map_or("", |(_, t)| t.trim_end().trim_end_matches('*'));
        let alias_of = description
            .trim_start_matches("**DEPRECATED** ")
            .strip_prefix("Alias for `")
            .and_then(|rest| rest.split_once('`'))
            .map_or("", |(target, _)| target);
        rows.push(Row {
            section: section.to_owned(),
            name: cells[0].clone(),
            clients: cells[1].clone(),
            range: cells[2].clone(),
            default: cells[3].clone(),
            kind: kind.to_owned(),
            alias_of: alias_of.to_owned(),
        });
    }
    rows
}

fn rows() -> Vec<Row> {
    let snapshot = snapshot_rows();
    if let Some(text) = live_markdown() {
        let live = markdown_rows(&text);
        assert_eq!(
            live, snapshot,
            "the snapshot is stale: rerun scripts/gen-properties.py"
        );
    }
    snapshot
}

fn scope_of(section: &str) -> Scope {
    if section == "global" {
        Scope::Global
    } else {
        Scope::Topic
    }
}

fn by_rdkafka_name(scope: Scope, name: &str) -> Option<&'static Property> {
    PROPERTIES
        .iter()
        .find(|p| p.scope == scope && p.rdkafka_name == name)
}

fn range_text(p: &Property) -> String {
    match p.kind {
        Kind::Bool { .. } => "true, false".to_owned(),
        Kind::Int { min, max, .. } => format!("{min} .. {max}"),
        Kind::Float { min, max, .. } => format!("{} .. {}", format_g(min), format_g(max)),
        Kind::Enum { values, .. } => values.iter().map(|v| v.name).collect::<Vec<_>>().join(", "),
        Kind::Flags { values, .. } => values.iter().map(|v| v.name).collect::<Vec<_>>().join(", "),
        _ => String::new(),
    }
}

fn kind_text(p: &Property) -> &'static str {
    match p.kind {
        Kind::Bool { .. } => "boolean",
        Kind::Int { .. } => "integer",
        Kind::Float { .. } => "float",
        Kind::Str { .. } | Kind::KafkaStr { .. } => "string",
        Kind::Enum { .. } => "enum value",
        Kind::Flags { .. } => "CSV flags",
        Kind::Patterns => "pattern list",
        Kind::Pointer | Kind::Internal => "see dedicated API",
        Kind::Foreign => "",
    }
}

fn clients_text(p: &Property) -> &'static str {
    match p.clients {
        Clients::Both => "*",
        Clients::Consumer => "C",
        Clients::Producer => "P",
    }
}

#[test]
fn every_documented_property_is_in_the_table_with_its_facts() {
    let rows = rows();
    assert_eq!(rows.len(), 196, "CONFIGURATION.md rows");
    for row in rows.iter().filter(|r| r.alias_of.is_empty()) {
        let scope = scope_of(&row.section);
        let p = by_rdkafka_name(scope, &row.name)
            .unwrap_or_else(|| panic!("{} {} is not in the table", row.section, row.name));
        assert_eq!(clients_text(p), row.clients, "{}: clients", row.name);
        assert_eq!(kind_text(p), row.kind, "{}: type", row.name);
        // librdkafka's documentation leaves builtin.features' range out, as it equals the default.
        if p.name != "builtin.features" {
            assert_eq!(range_text(p), row.range, "{}: range", row.name);
        }
        assert_eq!(p.default_text(), row.default, "{}: default", row.name);
    }
}

#[test]
fn every_documented_alias_names_its_property() {
    for row in rows().iter().filter(|r| !r.alias_of.is_empty()) {
        let scope = scope_of(&row.section);
        let target = by_rdkafka_name(scope, &row.alias_of)
            .unwrap_or_else(|| panic!("{} aliases {}, not in the table", row.name, row.alias_of));
        assert!(
            target.is_spelled(&row.name),
            "{} is not a spelling of {}",
            row.name,
            target.name
        );
        // Reached the way librdkafka reaches it: a topic alias through `topic.` when a global
        // property has the same name.
        let key = if scope == Scope::Topic
            && resolve(&row.name).is_ok_and(|i| PROPERTIES[i].scope == Scope::Global)
        {
            format!("topic.{}", row.name)
        } else {
            row.name.clone()
        };
        assert_eq!(find(&key), Some(target), "{key}");
    }
}

#[test]
fn the_table_has_every_property_and_alias_of_the_c_table() {
    // 193 properties and 13 aliases in `rd_kafka_properties[]`: CONFIGURATION.md's 196 rows
    // less its 13 alias rows, plus the ten hidden or Java-only entries it leaves out.
    assert_eq!(PROPERTIES.len(), 193);
    let aliases: usize = PROPERTIES.iter().map(|p| p.aliases.len()).sum();
    assert_eq!(aliases, 13);
    let documented: Vec<(Scope, String)> = rows()
        .into_iter()
        .filter(|r| r.alias_of.is_empty())
        .map(|r| (scope_of(&r.section), r.name))
        .collect();
    let mut undocumented: Vec<&str> = PROPERTIES
        .iter()
        .filter(|p| !documented.contains(&(p.scope, p.rdkafka_name.to_owned())))
        .map(|p| p.rdkafka_name)
        .collect();
    undocumented.sort_unstable();
    assert_eq!(
        undocumented,
        [
            "client.software.name",
            "client.software.version",
            "enable.sparse.connections",
            "enable_sasl_queue",
            "metadata.request.timeout.ms",
            "sasl.jaas.config",
            "ssl.truststore.location",
            "test.mock.broker.rtt",
            "test.mock.num.brokers",
            "ut_handle_ProduceResponse",
        ]
    );
    for p in PROPERTIES.iter().filter(|p| p.hidden) {
        assert!(undocumented.contains(&p.rdkafka_name), "{}", p.name);
    }
}

#[test]
fn every_spelling_leads_to_its_property() {
    for (index, p) in PROPERTIES.iter().enumerate() {
        assert!(!p.description.is_empty(), "{}", p.name);
        for spelling in std::iter::once(p.name).chain(p.aliases.iter().copied()) {
            let key = match (p.scope, resolve(spelling)) {
                (Scope::Topic, Ok(i)) if PROPERTIES[i].scope == Scope::Global => {
                    format!("topic.{spelling}")
                }
                _ => spelling.to_owned(),
            };
            assert_eq!(resolve(&key), Ok(index), "{key}");
        }
    }
}

#[test]
fn acted_on_and_not_acted_on_split_the_settable_properties() {
    let index_of = |name: &str| resolve(name).unwrap_or_else(|_| panic!("{name} is unknown"));
    let acted: Vec<usize> = ACTED_ON.iter().map(|n| index_of(n)).collect();
    let not_acted: Vec<usize> = NOT_ACTED_ON.iter().map(|n| index_of(n)).collect();
    for (index, p) in PROPERTIES.iter().enumerate() {
        let accepted = p.settable() && p.unsupported_reason().is_none();
        let listed = usize::from(acted.contains(&index)) + usize::from(not_acted.contains(&index));
        assert_eq!(listed, usize::from(accepted), "{} ({:?})", p.name, p.scope);
    }
    assert_eq!(acted.len() + not_acted.len(), 52 + 82 + 20);
}

#[test]
fn redacted_keys_are_the_sensitive_spellings_and_the_java_truststore_password() {
    let mut sensitive: Vec<&str> = PROPERTIES
        .iter()
        .filter(|p| p.sensitive)
        .flat_map(|p| std::iter::once(p.name).chain(p.aliases.iter().copied()))
        .chain(["ssl.truststore.password"])
        .collect();
    sensitive.sort_unstable();
    let mut redacted = REDACTED.to_vec();
    redacted.sort_unstable();
    assert_eq!(sensitive, redacted);
}
