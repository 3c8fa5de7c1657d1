//! The binary: its command line, the `ready` line, the control port, the exit codes.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::process::Command;

const PATIENCE: Duration = Duration::from_mins(1);

/// `N` distinct ports that were free a moment ago (all held until all are chosen).
async fn free_ports<const N: usize>() -> [u16; N] {
    let mut held = Vec::new();
    for _ in 0..N {
        held.push(TcpListener::bind("127.0.0.1:0").await.unwrap());
    }
    std::array::from_fn(|i| held[i].local_addr().unwrap().port())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prints_ready_and_answers_status() {
    let [control, l1, l2, target] = free_ports().await;
    let mut child = Command::new(env!("CARGO_BIN_EXE_chaos-proxy"))
        .args(["--control", &format!("127.0.0.1:{control}")])
        .args(["--route", &format!("b1=127.0.0.1:{l1},127.0.0.1:{target}")])
        .args(["--routes", &format!("b2=127.0.0.1:{l2},127.0.0.1:{target}")])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
    let ready = tokio::time::timeout(PATIENCE, stdout.next_line())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(ready.as_deref(), Some("ready"));

    let s = TcpStream::connect(("127.0.0.1", control)).await.unwrap();
    let (r, mut w) = s.into_split();
    let mut answers = BufReader::new(r).lines();
    w.write_all(b"status\ndrop b1\npass all\n").await.unwrap();
    let mut got = Vec::new();
    for _ in 0..4 {
        got.push(
            tokio::time::timeout(PATIENCE, answers.next_line())
                .await
                .unwrap()
                .unwrap()
                .unwrap(),
        );
    }
    assert_eq!(
        got,
        [
            "b1 pass conns=0 bytes_up=0 bytes_down=0",
            "b2 pass conns=0 bytes_up=0 bytes_down=0",
            "ok",
            "ok"
        ]
    );
    // a connection while nothing listens at the target: accepted, then reset, and logged
    let _ = TcpStream::connect(("127.0.0.1", l1)).await;
    let mut log = Vec::new();
    while !log.iter().any(|l: &String| l.contains("b1: conn 1 ")) {
        let line = tokio::time::timeout(PATIENCE, stderr.next_line())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        log.push(line);
    }
    assert!(
        log.iter()
            .any(|l| l == "chaos-proxy: b1: fault drop (was pass)"),
        "{log:#?}"
    );
    child.kill().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refuses_a_bad_command_line() {
    for args in [
        &["--route", "b1=127.0.0.1:1,127.0.0.1:2"][..],
        &["--control", "127.0.0.1:1", "--route", "b1"][..],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_chaos-proxy"))
            .args(args)
            .output()
            .await
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("usage: chaos-proxy"));
        assert!(out.stdout.is_empty());
    }
    let out = Command::new(env!("CARGO_BIN_EXE_chaos-proxy"))
        .arg("--help")
        .output()
        .await
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("blackhole NAME|all"));
}
