//! Each fault mode against an echo server behind the proxy (in process, ephemeral ports).
//!
//! Timing checks are lower bounds only (a loaded machine makes things slower, never faster), and
//! "nothing arrives" is checked over a short window; every wait for something that must happen
//! has a generous timeout.

use std::io::ErrorKind;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use chaos_proxy::Proxy;
use chaos_proxy::cli::{Config, RouteSpec};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

const PATIENCE: Duration = Duration::from_secs(30);
const SILENCE: Duration = Duration::from_millis(1500);

/// An echo server: writes back whatever each connection sends, until it closes.
async fn echo_server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let (mut r, mut w) = s.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    addr
}

/// A proxy with one route `e` in front of an echo server: (route address, control address).
async fn proxy() -> (SocketAddr, SocketAddr) {
    let target = echo_server().await;
    let config = Config {
        control: "127.0.0.1:0".parse().unwrap(),
        routes: vec![RouteSpec {
            name: "e".into(),
            listen: "127.0.0.1:0".parse().unwrap(),
            target,
        }],
    };
    let proxy = Proxy::bind(&config).await.unwrap();
    let listen = proxy.routes()[0].listen();
    let control = proxy.control_addr().unwrap();
    tokio::spawn(proxy.run());
    (listen, control)
}

/// Sends one command on a fresh control connection and returns the first answer line.
async fn ctl(control: SocketAddr, command: &str) -> String {
    let s = TcpStream::connect(control).await.unwrap();
    let (r, mut w) = s.into_split();
    w.write_all(format!("{command}\n").as_bytes())
        .await
        .unwrap();
    let mut line = String::new();
    tokio::time::timeout(PATIENCE, BufReader::new(r).read_line(&mut line))
        .await
        .unwrap()
        .unwrap();
    line.trim_end().to_string()
}

async fn ok(control: SocketAddr, command: &str) {
    assert_eq!(ctl(control, command).await, "ok", "{command}");
}

/// Writes `msg` and reads the echo back.
async fn round_trip(s: &mut TcpStream, msg: &[u8]) {
    s.write_all(msg).await.unwrap();
    let mut back = vec![0u8; msg.len()];
    tokio::time::timeout(PATIENCE, s.read_exact(&mut back))
        .await
        .expect("echo timed out")
        .unwrap();
    assert_eq!(back, msg);
}

/// Reads until the connection ends; returns the bytes read and how it ended.
async fn read_to_end(s: &mut TcpStream) -> (usize, std::io::Result<()>) {
    let mut n = 0;
    let mut buf = vec![0u8; 64 * 1024];
    let end = tokio::time::timeout(PATIENCE, async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) => return Ok(()),
                Ok(k) => n += k,
                Err(e) => return Err(e),
            }
        }
    })
    .await
    .expect("the connection did not end");
    (n, end)
}

fn assert_reset(end: &std::io::Result<()>) {
    match end {
        Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
        other => panic!("expected a reset, got {other:?}"),
    }
}

/// Asserts nothing arrives for a while (and the connection stays open).
async fn assert_silent(s: &mut TcpStream) {
    let mut buf = [0u8; 16];
    if let Ok(r) = tokio::time::timeout(SILENCE, s.read(&mut buf)).await {
        panic!("expected silence, got {r:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pass_forwards_both_ways_and_counts() {
    let (listen, control) = proxy().await;
    let mut s = TcpStream::connect(listen).await.unwrap();
    let msg: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
    let (mut r, mut w) = s.split();
    let ((), back) = tokio::join!(async { w.write_all(&msg).await.unwrap() }, async {
        let mut back = vec![0u8; msg.len()];
        tokio::time::timeout(PATIENCE, r.read_exact(&mut back))
            .await
            .unwrap()
            .unwrap();
        back
    });
    assert!(back == msg, "the echo differs");
    assert_eq!(
        ctl(control, "status").await,
        "e pass conns=1 bytes_up=1000000 bytes_down=1000000"
    );
    drop(s);
    // the connection's close is logged and counted once both sides are gone
    let deadline = Instant::now() + PATIENCE;
    while ctl(control, "status e").await != "e pass conns=0 bytes_up=1000000 bytes_down=1000000" {
        assert!(Instant::now() < deadline, "the connection stayed counted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_resets_connections_and_refuses_new_ones() {
    let (listen, control) = proxy().await;
    let mut old = TcpStream::connect(listen).await.unwrap();
    round_trip(&mut old, b"before").await;
    ok(control, "drop e").await;
    // the existing connection is reset without being written to
    let (n, end) = read_to_end(&mut old).await;
    assert_eq!(n, 0);
    assert_reset(&end);
    // a new one is accepted, then reset at once (so quickly that connect itself may see the RST)
    for _ in 0..3 {
        let mut new = match TcpStream::connect(listen).await {
            Ok(s) => s,
            Err(e) if e.kind() == ErrorKind::ConnectionReset => continue,
            Err(e) => panic!("connect: {e}"),
        };
        // The RST is reported once: to the write when it arrived before it, else to the read.
        if let Err(e) = new.write_all(b"hello").await {
            assert!(
                matches!(e.kind(), ErrorKind::ConnectionReset | ErrorKind::BrokenPipe),
                "expected a reset, got {e:?}"
            );
            continue;
        }
        let (n, end) = read_to_end(&mut new).await;
        assert_eq!(n, 0);
        assert_reset(&end);
    }
    assert!(
        ctl(control, "status e")
            .await
            .starts_with("e drop conns=0 ")
    );
    ok(control, "pass e").await;
    let mut healed = TcpStream::connect(listen).await.unwrap();
    round_trip(&mut healed, b"after").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blackhole_accepts_stays_silent_and_resets_on_heal() {
    let (listen, control) = proxy().await;
    let mut old = TcpStream::connect(listen).await.unwrap();
    round_trip(&mut old, b"before").await;
    ok(control, "blackhole e").await;
    // existing connection: stays open, answers nothing
    old.write_all(b"anyone?").await.unwrap();
    assert_silent(&mut old).await;
    // new connections: accepted, fed, silent
    let mut new = tokio::time::timeout(PATIENCE, TcpStream::connect(listen))
        .await
        .unwrap()
        .unwrap();
    new.write_all(&vec![7u8; 100_000]).await.unwrap();
    assert_silent(&mut new).await;
    assert!(
        ctl(control, "status e")
            .await
            .starts_with("e blackhole conns=2 ")
    );
    ok(control, "pass e").await;
    // both silent connections are reset, none of the held-back bytes arrive
    for s in [&mut old, &mut new] {
        let (n, end) = read_to_end(s).await;
        assert_eq!(n, 0);
        assert_reset(&end);
    }
    let mut healed = TcpStream::connect(listen).await.unwrap();
    round_trip(&mut healed, b"after").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_cuts_a_response_part_way() {
    let (listen, control) = proxy().await;
    let mut old = TcpStream::connect(listen).await.unwrap();
    round_trip(&mut old, b"before").await;
    ok(control, "reset e").await;
    // an existing connection: its next response is cut inside the first chunk
    let total = 256 * 1024;
    let (mut r, mut w) = old.split();
    let ((), (n, end)) = tokio::join!(
        async {
            // the reset may hit while writing: that is fine
            let _ = w.write_all(&vec![1u8; total]).await;
        },
        async {
            let mut n = 0;
            let mut buf = vec![0u8; 64 * 1024];
            let end = tokio::time::timeout(PATIENCE, async {
                loop {
                    match r.read(&mut buf).await {
                        Ok(0) => return Ok(()),
                        Ok(k) => n += k,
                        Err(e) => return Err(e),
                    }
                }
            })
            .await
            .expect("the connection did not end");
            (n, end)
        }
    );
    assert!(n < total, "the whole response arrived ({n} bytes)");
    assert!(
        n <= 64 * 1024,
        "more than one chunk's prefix arrived ({n} bytes)"
    );
    assert_reset(&end);
    // a new connection: its first response is cut
    for _ in 0..5 {
        let mut new = TcpStream::connect(listen).await.unwrap();
        new.write_all(b"0123456789").await.unwrap();
        let (n, end) = read_to_end(&mut new).await;
        assert!(n < 10, "the whole response arrived");
        assert_reset(&end);
    }
    ok(control, "pass e").await;
    let mut healed = TcpStream::connect(listen).await.unwrap();
    round_trip(&mut healed, b"after").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latency_delays_each_direction_and_keeps_order() {
    let (listen, control) = proxy().await;
    let mut s = TcpStream::connect(listen).await.unwrap();
    round_trip(&mut s, b"warm").await;
    ok(control, "latency e 300 50").await;
    // request and response are each delayed by at least 250 ms
    for _ in 0..3 {
        let t = Instant::now();
        round_trip(&mut s, b"ping").await;
        let rtt = t.elapsed();
        assert!(rtt >= Duration::from_millis(500), "round trip {rtt:?}");
    }
    // large jitter on many small writes: the bytes still come back in order
    ok(control, "latency e 20 20").await;
    let (mut r, mut w) = s.split();
    let count = 200u32;
    let ((), back) = tokio::join!(
        async {
            for i in 0..count {
                w.write_all(&i.to_be_bytes()).await.unwrap();
                if i % 10 == 0 {
                    tokio::time::sleep(Duration::from_millis(3)).await;
                }
            }
        },
        async {
            let mut back = vec![0u8; count as usize * 4];
            tokio::time::timeout(PATIENCE, r.read_exact(&mut back))
                .await
                .unwrap()
                .unwrap();
            back
        }
    );
    let expected: Vec<u8> = (0..count).flat_map(u32::to_be_bytes).collect();
    assert!(back == expected, "reordered");
    ok(control, "pass e").await;
    let t = Instant::now();
    round_trip(&mut s, b"fast again").await;
    // no assert on how fast: only that it still works
    let _ = t.elapsed();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bandwidth_caps_each_direction() {
    let (listen, control) = proxy().await;
    let mut s = TcpStream::connect(listen).await.unwrap();
    ok(control, "bandwidth e 100000").await;
    let total = 300_000usize;
    let t = Instant::now();
    let (mut r, mut w) = s.split();
    tokio::join!(
        async { w.write_all(&vec![3u8; total]).await.unwrap() },
        async {
            let mut back = vec![0u8; total];
            tokio::time::timeout(Duration::from_mins(1), r.read_exact(&mut back))
                .await
                .unwrap()
                .unwrap();
        }
    );
    let secs = t.elapsed().as_secs_f64();
    // 300 kB at 100 kB/s, less one 10 kB burst per direction: 2.9 s at least (the two directions
    // pipeline); 2.5 s leaves room for rounding, nothing else can make it faster
    assert!(
        secs >= 2.5,
        "{total} bytes through a 100 kB/s cap in {secs:.2} s"
    );
    assert!(secs <= 45.0, "far too slow: {secs:.2} s");
    ok(control, "pass e").await;
    round_trip(&mut s, b"after").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_answers_errors() {
    let (_, control) = proxy().await;
    assert!(
        ctl(control, "frobnicate e")
            .await
            .starts_with("err unknown command")
    );
    assert_eq!(ctl(control, "drop nosuch").await, "err no route 'nosuch'");
    assert!(ctl(control, "latency e ten").await.starts_with("err "));
    assert!(ctl(control, "bandwidth e 0").await.starts_with("err "));
    assert!(ctl(control, "").await.starts_with("err empty"));
    assert_eq!(
        ctl(control, "status e").await,
        "e pass conns=0 bytes_up=0 bytes_down=0"
    );
    ok(control, "latency all 5 1").await;
    assert!(
        ctl(control, "status")
            .await
            .starts_with("e latency:5:1 conns=0 ")
    );
    ok(control, "bandwidth e 4096").await;
    assert!(
        ctl(control, "status")
            .await
            .starts_with("e bandwidth:4096 conns=0 ")
    );
    // several commands on one connection, answered in order
    let s = TcpStream::connect(control).await.unwrap();
    let (r, mut w) = s.into_split();
    w.write_all(b"pass all\nnope\nstatus\n").await.unwrap();
    let mut lines = BufReader::new(r).lines();
    let mut next = async || {
        tokio::time::timeout(PATIENCE, lines.next_line())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
    };
    assert_eq!(next().await, "ok");
    assert!(next().await.starts_with("err "));
    assert!(next().await.starts_with("e pass conns=0 "));
}

/// A broker that accepts and then says nothing and never closes, like a stopped (`SIGSTOP`) one.
async fn frozen_server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = listener.accept().await {
            held.push(s);
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_closing_on_a_frozen_broker_is_counted_while_the_connection_stays_open() {
    let config = Config {
        control: "127.0.0.1:0".parse().unwrap(),
        routes: vec![RouteSpec {
            name: "f".into(),
            listen: "127.0.0.1:0".parse().unwrap(),
            target: frozen_server().await,
        }],
    };
    let proxy = Proxy::bind(&config).await.unwrap();
    let route = std::sync::Arc::clone(&proxy.routes()[0]);
    let control = proxy.control_addr().unwrap();
    tokio::spawn(proxy.run());
    let mut forwarded = TcpStream::connect(route.listen()).await.unwrap();
    forwarded.write_all(b"request").await.unwrap();
    ok(control, "blackhole f").await;
    let mut silent = TcpStream::connect(route.listen()).await.unwrap();
    silent.write_all(b"request").await.unwrap();
    let deadline = Instant::now() + PATIENCE;
    while !ctl(control, "status f")
        .await
        .starts_with("f blackhole conns=2 ")
    {
        assert!(Instant::now() < deadline, "both connections open");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(route.client_closed(), 0);
    drop(forwarded);
    drop(silent);
    while route.client_closed() < 2 {
        assert!(Instant::now() < deadline, "both client closes counted");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // the forwarded one waits for the frozen broker's side; the silent one had none
    assert!(
        ctl(control, "status f")
            .await
            .starts_with("f blackhole conns=1 ")
    );
}
