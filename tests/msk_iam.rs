//! `sasl.mechanism=AWS_MSK_IAM` through the adapter, with credentials the way a service gets
//! them: from the process environment and from a profile file. The chain reads the process's
//! variables, which a test cannot change safely in a threaded test process; so this binary runs
//! without the test harness and starts itself once per case with the variables the case needs
//! (`RUSTSTREAM_MSK_IAM_CASE` names it in the child). Each child serves the embedded cluster on
//! loopback TCP with an `MskIamAuthority` that recomputes every signature.
//!
//! `cargo test --features testing --test msk_iam [-- FILTER...]`: names, `--skip` and
//! `--exact` select cases as libtest's do.

use std::process::{Command, ExitCode};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use ruststream::{
    Broker as _, ConnectedBroker, IncomingMessage as _, OutgoingMessage, Publisher, Subscriber,
    SubscriptionSource,
};
use ruststream_kafka::testing::{ClusterOptions, EmbeddedCluster, MskIamAuthority};
use ruststream_kafka::{Commit, KafkaBroker, KafkaPublish, KafkaTopic, StartOffset};

const CASE: &str = "RUSTSTREAM_MSK_IAM_CASE";
const KEY: &str = "AKIDMSKIAMTEST";
const SECRET: &str = "msk/iam+secret";
const TOKEN: &str = "session-token/for+test==";
const REGION: &str = "eu-west-3";

/// The cases: a name and the variables its child runs with (on top of a scrubbed environment).
fn cases(home: &str, credentials_file: &str) -> Vec<(&'static str, Vec<(&'static str, String)>)> {
    let common = |mut v: Vec<(&'static str, String)>| {
        v.push(("HOME", home.to_owned()));
        v.push(("AWS_REGION", REGION.to_owned()));
        v.push(("AWS_EC2_METADATA_DISABLED", "true".to_owned()));
        v
    };
    vec![
        (
            "msk_iam_round_trip_with_credentials_from_the_environment",
            common(vec![
                ("AWS_ACCESS_KEY_ID", KEY.to_owned()),
                ("AWS_SECRET_ACCESS_KEY", SECRET.to_owned()),
                ("AWS_SESSION_TOKEN", TOKEN.to_owned()),
            ]),
        ),
        (
            "msk_iam_round_trip_with_credentials_from_a_profile_file",
            common(vec![
                ("AWS_SHARED_CREDENTIALS_FILE", credentials_file.to_owned()),
                ("AWS_PROFILE", "kafka".to_owned()),
            ]),
        ),
        (
            "msk_iam_a_wrong_secret_stops_startup_with_a_clear_error",
            common(vec![
                ("AWS_ACCESS_KEY_ID", KEY.to_owned()),
                ("AWS_SECRET_ACCESS_KEY", "not-the-secret".to_owned()),
                ("AWS_SESSION_TOKEN", TOKEN.to_owned()),
            ]),
        ),
    ]
}

fn main() -> ExitCode {
    if let Ok(case) = std::env::var(CASE) {
        return child(&case);
    }
    let selection = Selection::from_args(std::env::args().skip(1));
    if selection.list {
        for (name, _) in cases("", "") {
            println!("{name}: test");
        }
        return ExitCode::SUCCESS;
    }
    let scratch = std::env::temp_dir().join(format!("ruststream-msk-iam-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).expect("a scratch directory");
    let credentials_file = scratch.join("credentials");
    std::fs::write(
        &credentials_file,
        format!(
            "[default]\naws_access_key_id = WRONGPROFILE\naws_secret_access_key = x\n\n\
             [kafka]\naws_access_key_id = {KEY}\naws_secret_access_key = {SECRET}\n\
             aws_session_token = {TOKEN}\n"
        ),
    )
    .expect("writes the credentials file");
    let me = std::env::current_exe().expect("this test's path");
    let (mut passed, mut failed) = (0, 0);
    let home = scratch.display().to_string();
    for (name, variables) in cases(&home, &credentials_file.display().to_string()) {
        if !selection.runs(name) {
            continue;
        }
        let mut command = Command::new(&me);
        for (key, _) in std::env::vars() {
            if key.starts_with("AWS_") {
                command.env_remove(key);
            }
        }
        command.env(CASE, name).envs(variables);
        let status = command.status().expect("runs the case");
        if status.success() {
            println!("test {name} ... ok");
            passed += 1;
        } else {
            println!("test {name} ... FAILED ({status})");
            failed += 1;
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
    println!(
        "\ntest result: {}. {passed} passed; {failed} failed",
        if failed == 0 { "ok" } else { "FAILED" }
    );
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Which cases to run, read as libtest reads its arguments: names (a case runs when it
/// contains one, or when none is given; with `--exact`, equals one), `--skip NAME` (repeatable),
/// `--list`; other options (`--test-threads=N`, `--nocapture`) do not apply here.
struct Selection {
    filters: Vec<String>,
    skips: Vec<String>,
    exact: bool,
    list: bool,
}

impl Selection {
    fn from_args(mut args: impl Iterator<Item = String>) -> Self {
        let mut selection = Selection {
            filters: Vec::new(),
            skips: Vec::new(),
            exact: false,
            list: false,
        };
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--skip" => selection.skips.extend(args.next()),
                "--exact" => selection.exact = true,
                "--list" => selection.list = true,
                // Options whose value is the next argument.
                "--test-threads" | "--format" | "--color" | "--logfile" | "-Z" => {
                    args.next();
                }
                other if other.starts_with('-') => {}
                name => selection.filters.push(name.to_owned()),
            }
        }
        selection
    }

    fn runs(&self, name: &str) -> bool {
        let matches = |pattern: &String| {
            if self.exact {
                name == pattern
            } else {
                name.contains(pattern.as_str())
            }
        };
        (self.filters.is_empty() || self.filters.iter().any(matches))
            && !self.skips.iter().any(matches)
    }
}

fn child(case: &str) -> ExitCode {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let outcome = runtime.block_on(async {
        let cluster = EmbeddedCluster::new(ClusterOptions::default());
        let authority = Arc::new(MskIamAuthority::new(REGION));
        authority.add_key(KEY, SECRET, Some(TOKEN.to_owned()), None);
        cluster.require_msk_iam(authority.clone());
        cluster.listen().await.expect("listens");
        let bootstrap = cluster.loopback_bootstrap().expect("listening");
        let broker = KafkaBroker::new([bootstrap])
            .config("security.protocol", "SASL_PLAINTEXT")
            .config("sasl.mechanism", "AWS_MSK_IAM")
            .default_group("msk-iam")
            .connect_timeout(Duration::from_secs(10));
        if case.contains("wrong_secret") {
            return wrong_secret(broker, &authority).await;
        }
        round_trip(broker, &authority).await
    });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(why) => {
            eprintln!("{case}: {why}");
            ExitCode::FAILURE
        }
    }
}

async fn round_trip(broker: KafkaBroker, authority: &MskIamAuthority) -> Result<(), String> {
    let broker = broker
        .connect()
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let topic = "msk-iam-orders";
    let publisher = broker.publisher(KafkaPublish::default());
    publisher
        .publish(OutgoingMessage::new(topic, b"signed".as_slice()), None)
        .await
        .map_err(|e| format!("publish: {e}"))?;
    let mut subscriber = KafkaTopic::new(topic)
        .start(StartOffset::Earliest)
        .commit(Commit::Tracked)
        .subscribe(&broker)
        .await
        .map_err(|e| format!("subscribe: {e}"))?;
    let mut stream = subscriber.stream();
    let message = tokio::time::timeout(Duration::from_secs(30), stream.next())
        .await
        .map_err(|_| "no delivery within 30 s".to_owned())?
        .ok_or("the stream ended")?
        .map_err(|e| format!("delivery: {e}"))?;
    if message.payload() != b"signed" {
        return Err(format!("delivered {:?}", message.payload()));
    }
    drop(stream);
    drop(subscriber);
    broker
        .shutdown()
        .await
        .map_err(|e| format!("shutdown: {e}"))?;
    if authority.accepted() == 0 || authority.refused() != 0 {
        return Err(format!(
            "accepted {}, refused {}",
            authority.accepted(),
            authority.refused()
        ));
    }
    Ok(())
}

async fn wrong_secret(broker: KafkaBroker, authority: &MskIamAuthority) -> Result<(), String> {
    let error = match broker.connect().await {
        Ok(_) => return Err("a wrong secret connected".to_owned()),
        Err(e) => e.to_string(),
    };
    for part in [
        "AWS_MSK_IAM",
        KEY,
        REGION,
        "Access denied",
        "signature does not match",
    ] {
        if !error.contains(part) {
            return Err(format!("the error does not say `{part}`: {error}"));
        }
    }
    if authority.refused() == 0 {
        return Err("the authority refused nothing".to_owned());
    }
    println!("refused at startup: {error}");
    Ok(())
}
