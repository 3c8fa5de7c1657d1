//! The control port: one command per line, answered before the next one is read.
//!
//! Every command gets exactly one answer line, `ok` or `err <why>`, except `status`, whose answer
//! is one line per route it names (`NAME MODE conns=N bytes_up=N bytes_down=N`, in the order of
//! the command line's routes) or one `err` line. A command applies to the routes before its
//! answer is written, so a client that has read `ok` knows every later connection sees the new
//! fault. Lines are at most [`MAX_LINE`] bytes; a longer one gets an `err` and the control
//! connection is closed.

use std::sync::Arc;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

use crate::fault::Mode;
use crate::log;
use crate::route::Route;

/// Longest command line accepted, in bytes (newline included).
pub const MAX_LINE: usize = 1024;
/// Longest latency or jitter accepted, in milliseconds (an hour).
pub const MAX_MS: u64 = 3_600_000;

/// The routes a command names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// Every route.
    All,
    /// The route of this name.
    One(String),
}

/// A parsed control command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// Set the mode of the target routes.
    Set(Target, Mode),
    /// Report the target routes.
    Status(Target),
}

/// Parses one command line (surrounding white space ignored).
pub fn parse(line: &str) -> Result<Command, String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let target = |w: &str| {
        if w == "all" {
            Target::All
        } else {
            Target::One(w.to_string())
        }
    };
    let number = |what: &str, w: &str, max: u64| -> Result<u64, String> {
        match w.parse::<u64>() {
            Ok(v) if v <= max => Ok(v),
            _ => Err(format!(
                "{what} must be a whole number 0..={max}, got '{w}'"
            )),
        }
    };
    match words.as_slice() {
        [] => Err("empty command".to_string()),
        ["status"] => Ok(Command::Status(Target::All)),
        ["status", name] => Ok(Command::Status(target(name))),
        ["pass", name] => Ok(Command::Set(target(name), Mode::Pass)),
        ["drop", name] => Ok(Command::Set(target(name), Mode::Drop)),
        ["blackhole", name] => Ok(Command::Set(target(name), Mode::Blackhole)),
        ["reset", name] => Ok(Command::Set(target(name), Mode::Reset)),
        ["latency", name, ms] => Ok(Command::Set(
            target(name),
            Mode::Latency {
                ms: number("MS", ms, MAX_MS)?,
                jitter_ms: 0,
            },
        )),
        ["latency", name, ms, jitter] => Ok(Command::Set(
            target(name),
            Mode::Latency {
                ms: number("MS", ms, MAX_MS)?,
                jitter_ms: number("JITTER_MS", jitter, MAX_MS)?,
            },
        )),
        ["bandwidth", name, rate] => {
            let bytes_per_sec = number("BYTES_PER_SEC", rate, u64::MAX)?;
            if bytes_per_sec == 0 {
                return Err(
                    "BYTES_PER_SEC must be at least 1 (use drop or blackhole to stop traffic)"
                        .to_string(),
                );
            }
            Ok(Command::Set(
                target(name),
                Mode::Bandwidth { bytes_per_sec },
            ))
        }
        [
            cmd @ ("status" | "pass" | "drop" | "blackhole" | "reset" | "latency" | "bandwidth"),
            ..,
        ] => Err(format!(
            "wrong arguments for {cmd} (pass|drop|blackhole|reset NAME, latency NAME MS [JITTER_MS], bandwidth NAME \
             BYTES_PER_SEC, status [NAME]; NAME may be all)"
        )),
        [cmd, ..] => Err(format!("unknown command '{}'", cmd.escape_debug())),
    }
}

/// Runs a command against `routes` and returns its answer lines.
pub fn execute(routes: &[Arc<Route>], command: &Command) -> Vec<String> {
    let (target, mode) = match command {
        Command::Set(target, mode) => (target, Some(*mode)),
        Command::Status(target) => (target, None),
    };
    let chosen: Vec<&Arc<Route>> = match target {
        Target::All => routes.iter().collect(),
        Target::One(name) => match routes.iter().find(|r| r.name() == name) {
            Some(r) => vec![r],
            None => return vec![format!("err no route '{}'", name.escape_debug())],
        },
    };
    match mode {
        Some(mode) => {
            for r in chosen {
                r.set_mode(mode);
            }
            vec!["ok".to_string()]
        }
        None => chosen.iter().map(|r| r.status()).collect(),
    }
}

/// Serves control connections forever.
pub async fn serve(listener: TcpListener, routes: Arc<Vec<Arc<Route>>>) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                tokio::spawn(session(stream, Arc::clone(&routes)));
            }
            Err(e) => {
                log!("control: accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }
}

async fn session(stream: TcpStream, routes: Arc<Vec<Arc<Route>>>) {
    let (r, mut w) = stream.into_split();
    let mut reader = BufReader::new(r);
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = (&mut reader)
            .take(MAX_LINE as u64)
            .read_until(b'\n', &mut line)
            .await;
        let answer = match read {
            Ok(0) | Err(_) => return,
            Ok(_) if !line.ends_with(b"\n") && line.len() >= MAX_LINE => {
                let _ = w
                    .write_all(format!("err line longer than {MAX_LINE} bytes\n").as_bytes())
                    .await;
                return;
            }
            Ok(_) => match std::str::from_utf8(&line) {
                Err(_) => vec!["err not UTF-8".to_string()],
                Ok(text) => match parse(text) {
                    Ok(command) => execute(&routes, &command),
                    Err(why) => vec![format!("err {why}")],
                },
            },
        };
        let mut out = answer.join("\n");
        out.push('\n');
        if w.write_all(out.as_bytes()).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_commands() {
        assert_eq!(
            parse("pass b1\n"),
            Ok(Command::Set(Target::One("b1".into()), Mode::Pass))
        );
        assert_eq!(
            parse(" pass  all \r\n"),
            Ok(Command::Set(Target::All, Mode::Pass))
        );
        assert_eq!(
            parse("drop b2"),
            Ok(Command::Set(Target::One("b2".into()), Mode::Drop))
        );
        assert_eq!(
            parse("blackhole b3"),
            Ok(Command::Set(Target::One("b3".into()), Mode::Blackhole))
        );
        assert_eq!(
            parse("reset b1"),
            Ok(Command::Set(Target::One("b1".into()), Mode::Reset))
        );
        assert_eq!(
            parse("latency b1 100 20"),
            Ok(Command::Set(
                Target::One("b1".into()),
                Mode::Latency {
                    ms: 100,
                    jitter_ms: 20
                }
            ))
        );
        assert_eq!(
            parse("latency b1 100"),
            Ok(Command::Set(
                Target::One("b1".into()),
                Mode::Latency {
                    ms: 100,
                    jitter_ms: 0
                }
            ))
        );
        assert_eq!(
            parse("bandwidth all 65536"),
            Ok(Command::Set(
                Target::All,
                Mode::Bandwidth {
                    bytes_per_sec: 65536
                }
            ))
        );
        assert_eq!(parse("status"), Ok(Command::Status(Target::All)));
        assert_eq!(
            parse("status b1"),
            Ok(Command::Status(Target::One("b1".into())))
        );
    }

    #[test]
    fn refuses_bad_commands() {
        for bad in [
            "",
            "   ",
            "frobnicate b1",
            "pass",
            "drop b1 b2",
            "latency b1 -5 0",
            "latency b1 x",
            "bandwidth b1 0",
            "bandwidth b1",
            "latency b1 99999999 0",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }
}
