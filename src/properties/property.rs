//! What the property table records about one librdkafka property, and which of librdkafka's
//! build options this crate provides.
//!
//! The table itself ([`PROPERTIES`](super::PROPERTIES)) is generated from librdkafka's sources;
//! the decisions of this crate (which build options it has, and so which properties and values
//! it refuses as "not supported in this build") live here, in [`Gate::unsupported_reason`].

use super::cnum;

/// Where librdkafka keeps a property: in the client's (global) configuration or in the
/// configuration each topic gets a copy of.
///
/// A key is looked up among the global properties first; only a key that names none of them is
/// looked up among the topic properties, after dropping a leading `topic.`. That is how
/// `compression.type` reaches the global property although a topic property of that name
/// exists too, and how `topic.compression.type` reaches the topic one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// A client-wide property.
    Global,
    /// A per-topic property (the default topic configuration, when set through a client).
    Topic,
}

/// The clients a property means something to. librdkafka accepts every property on every
/// client; it warns about, and ignores, those of the other kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Clients {
    /// Consumers and producers.
    Both,
    /// Consumers only.
    Consumer,
    /// Producers only.
    Producer,
}

/// librdkafka's own ranking of how often a property matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Importance {
    /// Usually set.
    High,
    /// Sometimes set.
    Medium,
    /// Rarely set.
    Low,
}

/// A build option of librdkafka that a property, or one value of it, depends on.
///
/// librdkafka refuses such a property ("not supported in this build") or value ("Unsupported
/// value") when it was built without the option. This crate has its own answer for each option,
/// [`Gate::unsupported_reason`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Gate {
    /// TLS (OpenSSL in librdkafka); also SCRAM and OAUTHBEARER there.
    Ssl,
    /// TLS features that need OpenSSL 1.0.2 (curves, signature algorithms, host name checks).
    OpenSsl102,
    /// OpenSSL engines.
    SslEngine,
    /// OpenSSL 3 providers.
    OpenSsl3,
    /// gzip.
    Zlib,
    /// Snappy.
    Snappy,
    /// Zstandard.
    Zstd,
    /// An HTTP client (libcurl).
    Curl,
    /// HTTPS calls (libcurl and OpenSSL).
    Https,
    /// OAuth/OIDC token retrieval (libcurl and OpenSSL).
    Oidc,
    /// Kerberos through Cyrus SASL.
    CyrusSasl,
    /// Kerberos keytab handling, which librdkafka lacks on Windows.
    Win32Gssapi,
    /// Loading plugin libraries.
    Plugins,
    /// Windows certificate stores.
    WindowsOnly,
    /// librdkafka's built-in mock cluster.
    MockCluster,
}

impl Gate {
    /// Why this crate cannot honour what depends on this option, or `None` when it can.
    ///
    /// TLS is rustls and every codec is pure Rust, so those options are always present; OIDC
    /// settings are accepted in every build and need the `oidc` feature to be used (without
    /// it, `sasl.oauthbearer.method=oidc` fails the first connection, naming the feature). What
    /// only OpenSSL, libcurl, Cyrus SASL, plugins or librdkafka's mock cluster can provide is
    /// refused the way librdkafka refuses it in a build without them, so that a service does not
    /// start believing it has something it does not.
    #[must_use]
    pub fn unsupported_reason(self) -> Option<&'static str> {
        match self {
            Gate::Ssl
            | Gate::OpenSsl102
            | Gate::Zlib
            | Gate::Snappy
            | Gate::Zstd
            | Gate::Oidc
            | Gate::Win32Gssapi => None,
            Gate::SslEngine => {
                Some("OpenSSL engines do not exist in ruststream-kafka's TLS (rustls)")
            }
            Gate::OpenSsl3 => {
                Some("OpenSSL providers do not exist in ruststream-kafka's TLS (rustls)")
            }
            Gate::Curl | Gate::Https => Some(
                "ruststream-kafka has no general HTTP client (OIDC tokens come from the `oidc` \
                 feature's, which trusts the platform's certificates)",
            ),
            Gate::CyrusSasl => Some("ruststream-kafka has no Kerberos (GSSAPI) implementation"),
            Gate::Plugins => Some("ruststream-kafka does not load librdkafka plugins"),
            Gate::WindowsOnly => Some("ruststream-kafka does not read Windows certificate stores"),
            Gate::MockCluster => Some(
                "librdkafka's mock cluster is not part of ruststream-kafka (the `testing` \
                 feature has an embedded broker instead)",
            ),
        }
    }
}

/// One value of an enumeration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EnumValue {
    /// The spelling, matched case-insensitively.
    pub name: &'static str,
    /// The index of the first value that means the same (`earliest` means what `smallest`
    /// means); a value's own index when it is the first.
    pub meaning: u8,
    /// The build option the value needs, if any.
    pub gate: Option<Gate>,
}

/// The generated table's short form of an [`EnumValue`].
pub(super) const fn v(name: &'static str, meaning: u8, gate: Option<Gate>) -> EnumValue {
    EnumValue {
        name,
        meaning,
        gate,
    }
}

/// One flag of a set of flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Flag {
    /// The spelling, matched case-insensitively.
    pub name: &'static str,
    /// librdkafka's bits for it (`all` of `debug` is every context's bit).
    pub bits: u32,
    /// The build option the flag needs, if any.
    pub gate: Option<Gate>,
}

/// The generated table's short form of a [`Flag`].
pub(super) const fn f(name: &'static str, bits: u32, gate: Option<Gate>) -> Flag {
    Flag { name, bits, gate }
}

impl Flag {
    /// Whether `set` holds all of this flag's bits.
    #[must_use]
    pub fn is_in(&self, set: u32) -> bool {
        set & self.bits == self.bits
    }
}

/// The extra check librdkafka makes on some string properties.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StrCheck {
    /// Any string.
    Any,
    /// One of librdkafka's partitioner names, spelled exactly.
    Partitioner,
    /// One item: no comma and no space (`sasl.mechanism`).
    SingleToken,
    /// A broker version librdkafka still talks to (not `0.6.` or `0.7.` ones).
    BrokerVersion,
}

/// A property's type, with its range, values and default.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    /// `true`/`false` (also `t`/`f`, any case, and `1`/`0`).
    Bool {
        /// The default.
        default: bool,
    },
    /// A 32-bit integer within `min..=max`, read the way C's `strtol` reads (any base prefix,
    /// trailing text ignored).
    Int {
        /// Smallest value allowed.
        min: i32,
        /// Largest value allowed.
        max: i32,
        /// The default.
        default: i32,
        /// Words that stand for a number (`all` for `acks`), matched case-insensitively.
        names: &'static [(&'static str, i32)],
    },
    /// A floating-point number within `min..=max`, read the way C's `strtod` reads.
    Float {
        /// Smallest value allowed.
        min: f64,
        /// Largest value allowed.
        max: f64,
        /// The default.
        default: f64,
    },
    /// A string, leading white space removed; an empty value restores the default.
    Str {
        /// The default (`None`: unset).
        default: Option<&'static str>,
        /// The extra check of the value.
        check: StrCheck,
    },
    /// A string sent to Kafka as it is (no trimming); an empty value restores the default.
    KafkaStr {
        /// The default (`None`: unset).
        default: Option<&'static str>,
    },
    /// One of a fixed set of words, matched case-insensitively.
    Enum {
        /// The words.
        values: &'static [EnumValue],
        /// The index of the default in `values`.
        default: usize,
    },
    /// A comma-separated set of flags, each added to the default set (or removed, `-flag`).
    Flags {
        /// The flags.
        values: &'static [Flag],
        /// The default set, librdkafka's bits.
        default: u32,
    },
    /// A comma-separated list of regular expressions (`,,` for a comma inside one).
    Patterns,
    /// A pointer or callback, set through a dedicated C function, never from a string.
    Pointer,
    /// Internal state that is not settable at all.
    Internal,
    /// A Java client property that librdkafka names only to refuse it with a hint.
    Foreign,
}

/// One librdkafka property, as the generated [`PROPERTIES`](super::PROPERTIES) table records it.
// The four flags are librdkafka's, independent of each other; they are not a state.
#[allow(clippy::struct_excessive_bools)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Property {
    /// The spelling this crate uses: librdkafka's name, or the Java client's where librdkafka
    /// has that as an alias (`acks`, `linger.ms`, `bootstrap.servers`, ...).
    pub name: &'static str,
    /// librdkafka's own name, the one its messages quote (`request.required.acks`).
    pub rdkafka_name: &'static str,
    /// Every other spelling librdkafka accepts for the property, in the same scope.
    pub aliases: &'static [&'static str],
    /// Global or topic configuration.
    pub scope: Scope,
    /// The clients it applies to.
    pub clients: Clients,
    /// Its type, range, values and default.
    pub kind: Kind,
    /// librdkafka's ranking.
    pub importance: Importance,
    /// No longer used or about to go (librdkafka warns when it is set).
    pub deprecated: bool,
    /// Subject to change (librdkafka warns when it is set).
    pub experimental: bool,
    /// Left out of librdkafka's documentation, but settable.
    pub hidden: bool,
    /// Holds a secret: librdkafka wipes it from memory and redacts it in its dumps.
    pub sensitive: bool,
    /// The build option it depends on.
    pub gate: Option<Gate>,
    /// What it controls, in one line.
    pub description: &'static str,
}

impl Property {
    /// Why this crate refuses the property whatever its value, or `None` when it accepts it.
    #[must_use]
    pub fn unsupported_reason(&self) -> Option<&'static str> {
        self.gate.and_then(Gate::unsupported_reason)
    }

    /// Whether a string configuration can set the property at all (pointers, callbacks,
    /// internal state and Java-only names cannot be set).
    #[must_use]
    pub fn settable(&self) -> bool {
        !matches!(self.kind, Kind::Pointer | Kind::Internal | Kind::Foreign)
    }

    /// Whether `key` is one of the property's spellings (`topic.` not included).
    #[must_use]
    pub fn is_spelled(&self, key: &str) -> bool {
        self.name == key || self.aliases.contains(&key)
    }

    /// The default as librdkafka's documentation prints it (`""` when there is none).
    #[must_use]
    pub fn default_text(&self) -> String {
        match self.kind {
            Kind::Bool { default } => default.to_string(),
            Kind::Int { default, .. } => default.to_string(),
            Kind::Float { default, .. } => cnum::format_g(default),
            Kind::Str { default, .. } | Kind::KafkaStr { default } => {
                default.unwrap_or("").to_owned()
            }
            Kind::Enum { values, default } => values[default].name.to_owned(),
            Kind::Flags { values, default } => values
                .iter()
                .filter(|flag| default != 0 && flag.is_in(default))
                .map(|flag| flag.name)
                .collect::<Vec<_>>()
                .join(", "),
            Kind::Patterns | Kind::Pointer | Kind::Internal | Kind::Foreign => String::new(),
        }
    }
}
