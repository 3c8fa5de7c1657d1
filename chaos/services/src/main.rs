//! The fault campaign's services, one binary with a subcommand each: `load`, `reply`, `member`,
//! `eos`, `verify`, `describe`, `watch` and `setup`.
//!
//! Every subcommand that takes `--history PATH` appends one JSON object per line to that file and
//! flushes each line as it is written, so a SIGKILL loses at most the line being written. The
//! offline checker (`scripts/chaos-check`) reads nothing else. Planted defects (`--defect`) live
//! here, in the services, never in the library.

mod args;
mod describe;
mod history;
mod load;
mod services;
mod verify;

use std::process::ExitCode;

use args::Args;

const USAGE: &str = "usage: chaos-services <load|reply|member|eos|verify|describe|watch|setup> [--flag value ...]
  load      --bootstrap B --topic T --history P --instance I [--keys 16] [--rate 200]
  reply     --bootstrap B --input T --output T --group G --history P --instance I [--defect ack-before-publish|commit-ahead]
  member    like reply, plus [--protocol classic|consumer] (both: [--static-id NAME])
  eos       --bootstrap B --input T --output T --group G --txn-id ID --history P --instance I [--style pipeline|replies] [--doom-every N] [--static-id NAME]
  verify    --bootstrap B --topics T1,T2 --history P [--idle-secs 10]
  describe  --bootstrap B --topics T1,T2 [--groups G1,G2] [--txn-ids ID1,ID2]   (one JSON line on stdout)
  watch     --bootstrap B --topics T1,T2 --groups G1,G2 --history P [--txn-ids ...] [--every-ms 1000]
  setup     --bootstrap B --topic NAME:PARTITIONS [--topic ...] [--replication 3]";

fn main() -> ExitCode {
    let mut words = std::env::args().skip(1);
    let Some(command) = words.next() else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let args = match Args::parse(words) {
        Ok(parsed) => parsed,
        Err(e) => {
            eprintln!("chaos-services: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("chaos-services: no runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match command.as_str() {
            "load" => load::run(&args).await,
            "reply" => services::run_reply(&args, false).await,
            "member" => services::run_reply(&args, true).await,
            "eos" => services::run_eos(&args).await,
            "verify" => verify::run(&args).await,
            "describe" => describe::describe(&args).await,
            "watch" => describe::watch(&args).await,
            "setup" => describe::setup(&args).await,
            "help" | "--help" | "-h" => {
                println!("{USAGE}");
                Ok(())
            }
            other => Err(format!("unknown subcommand {other}").into()),
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("chaos-services {command}: {e}");
            ExitCode::FAILURE
        }
    }
}
