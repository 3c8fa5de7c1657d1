//! The `chaos-proxy` binary: parses the command line, binds everything, prints `ready`, serves.
//!
//! Exit status 2 on a bad command line, 1 when an address cannot be bound; otherwise it runs
//! until killed.

use std::io::Write;
use std::process::ExitCode;

use chaos_proxy::cli::{self, USAGE};
use chaos_proxy::{Proxy, log};

fn main() -> ExitCode {
    let config = match cli::parse(std::env::args().skip(1)) {
        Ok(Some(config)) => config,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(why) => {
            log!("{why}");
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            log!("cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    runtime.block_on(async {
        let proxy = match Proxy::bind(&config).await {
            Ok(proxy) => proxy,
            Err(e) => {
                log!("cannot bind: {e}");
                return ExitCode::from(1);
            }
        };
        let mut out = std::io::stdout().lock();
        if writeln!(out, "ready").and_then(|()| out.flush()).is_err() {
            // nobody reads stdout: keep serving, the listeners are what matters
            log!("cannot write 'ready' to stdout");
        }
        drop(out);
        proxy.run().await;
        ExitCode::SUCCESS
    })
}
