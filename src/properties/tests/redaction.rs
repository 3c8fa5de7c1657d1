//! Secrets never reach `Debug`.

use super::props;
use crate::properties::{Properties, REDACTED};

#[test]
fn debug_prints_every_key_and_hides_exactly_the_redacted_values() {
    let mut p = Properties::new();
    p.set("client.id", "svc");
    for (i, key) in REDACTED.iter().enumerate() {
        p.set(*key, format!("secret-{i}"));
    }
    let printed = format!("{p:?}");
    assert!(printed.contains("(\"client.id\", \"svc\")"), "{printed}");
    for (i, key) in REDACTED.iter().enumerate() {
        assert!(
            printed.contains(&format!("(\"{key}\", [redacted])")),
            "{printed}"
        );
        assert!(!printed.contains(&format!("secret-{i}")), "{printed}");
    }
    assert_eq!(
        format!(
            "{:?}",
            props(&[
                ("client.id", "a"),
                ("sasl.password", "pw"),
                ("client.id", "b")
            ])
        ),
        "[(\"client.id\", \"a\"), (\"sasl.password\", [redacted]), (\"client.id\", \"b\")]"
    );
}

#[test]
fn redaction_matches_keys_exactly() {
    // Not a redacted key (and not a property librdkafka knows): printed as given.
    let printed = format!(
        "{:?}",
        props(&[("SASL.PASSWORD", "shown"), ("sasl.password ", "shown too")])
    );
    assert!(
        printed.contains("shown") && printed.contains("shown too"),
        "{printed}"
    );
}

#[test]
fn views_and_errors_hide_secrets_too() {
    let pairs = [
        ("security.protocol", "sasl_plaintext"),
        ("sasl.mechanism", "PLAIN"),
        ("sasl.username", "user-secret"),
        ("sasl.password", "password-secret"),
        ("client.id", "svc"),
    ];
    let consumer = props(&pairs).consumer().expect("accepted");
    let printed = format!("{consumer:?}");
    assert!(printed.contains("sasl.password: [redacted]"), "{printed}");
    assert!(printed.contains("client.id: \"svc\""), "{printed}");
    assert!(!printed.contains("secret"), "{printed}");
    let producer = props(&pairs).producer().expect("accepted");
    assert!(!format!("{producer:?}").contains("secret"));

    let error = props(&[("sasl.password", "pw-secret"), ("nope", "x")])
        .check()
        .unwrap_err();
    assert!(format!("{error:?}").contains("\"x\""));
    let error =
        crate::properties::PropertyError::invalid("ssl.key.password", "kp-secret", "m".into());
    assert!(!format!("{error:?}").contains("kp-secret"));
}
