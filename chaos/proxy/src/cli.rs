//! The command line: `--control ADDR` and one or more routes.
//!
//! Parsing never panics on user input; every mistake comes back as a message. A valid
//! configuration has a control address, at least one route, unique route names made of
//! `[A-Za-z0-9_.-]` (not `all`, which commands use for every route), and unique listen addresses.

use std::net::SocketAddr;

/// The usage text printed by `--help` and after a mistake.
pub const USAGE: &str = "\
usage: chaos-proxy --control ADDR --route NAME=LISTEN_ADDR,TARGET_ADDR [--route ...]
       chaos-proxy --control ADDR --routes 'NAME=LISTEN,TARGET;NAME=LISTEN,TARGET;...'

Forwards each route's LISTEN_ADDR to its TARGET_ADDR (ip:port) with the fault the control port
sets. Prints `ready` on stdout once every listener is bound. Control: connect to ADDR, one
command per line, answer `ok` or `err <why>`:
  pass NAME|all                     forward normally
  drop NAME|all                     reset all connections, reset new ones at once
  blackhole NAME|all                accept, forward nothing; silent connections reset on heal
  reset NAME|all                    reset each connection inside its next broker->client chunk
  latency NAME|all MS [JITTER_MS]   delay each chunk MS +- JITTER_MS, order kept
  bandwidth NAME|all BYTES_PER_SEC  token bucket per direction per connection
  status [NAME]                     one line per route: NAME MODE conns=N bytes_up=N bytes_down=N";

/// One route as given on the command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteSpec {
    /// The route's name (`b1`).
    pub name: String,
    /// Where the proxy listens (what the broker advertises).
    pub listen: SocketAddr,
    /// Where it forwards to (the broker's own listener).
    pub target: SocketAddr,
}

/// A parsed command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The control port's address.
    pub control: SocketAddr,
    /// The routes, in command-line order (`status` keeps it).
    pub routes: Vec<RouteSpec>,
}

/// Parses one `NAME=LISTEN_ADDR,TARGET_ADDR`.
pub fn parse_route(spec: &str) -> Result<RouteSpec, String> {
    let bad = || format!("bad route '{spec}' (expected NAME=LISTEN_ADDR,TARGET_ADDR)");
    let (name, addrs) = spec.split_once('=').ok_or_else(bad)?;
    let (listen, target) = addrs.split_once(',').ok_or_else(bad)?;
    let name = name.trim();
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
    {
        return Err(format!(
            "bad route name '{name}' (letters, digits, '_', '.', '-')"
        ));
    }
    if name == "all" {
        return Err("a route cannot be called 'all' (commands use it for every route)".to_string());
    }
    let addr = |what: &str, a: &str| {
        a.trim()
            .parse::<SocketAddr>()
            .map_err(|e| format!("route {name}: bad {what} address '{a}' ({e}; expected ip:port)"))
    };
    Ok(RouteSpec {
        name: name.to_string(),
        listen: addr("listen", listen)?,
        target: addr("target", target)?,
    })
}

/// Parses the arguments (without the program name). `Ok(None)` means `--help`.
pub fn parse<I: IntoIterator<Item = String>>(args: I) -> Result<Option<Config>, String> {
    let mut control = None;
    let mut routes: Vec<RouteSpec> = Vec::new();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| args.next())
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        match flag.as_str() {
            "-h" | "--help" => return Ok(None),
            "--control" => {
                let v = value()?;
                control = Some(
                    v.parse::<SocketAddr>()
                        .map_err(|e| format!("bad --control address '{v}' ({e})"))?,
                );
            }
            "--route" => routes.push(parse_route(&value()?)?),
            "--routes" => {
                for spec in value()?.split(';').filter(|s| !s.trim().is_empty()) {
                    routes.push(parse_route(spec)?);
                }
            }
            other => return Err(format!("unknown argument '{other}'")),
        }
    }
    let control = control.ok_or("--control ADDR is required")?;
    if routes.is_empty() {
        return Err("at least one --route is required".to_string());
    }
    for (i, r) in routes.iter().enumerate() {
        for other in &routes[..i] {
            if other.name == r.name {
                return Err(format!("route {} given twice", r.name));
            }
            if other.listen == r.listen && r.listen.port() != 0 {
                return Err(format!(
                    "routes {} and {} listen on the same address {}",
                    other.name, r.name, r.listen
                ));
            }
        }
    }
    Ok(Some(Config { control, routes }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn parses_routes_and_control() {
        let c = parse(args("--control 127.0.0.1:9999 --route b1=127.0.0.1:9195,127.0.0.1:9194 --route=b2=127.0.0.1:9295,127.0.0.1:9294"))
            .unwrap()
            .unwrap();
        assert_eq!(c.control, "127.0.0.1:9999".parse().unwrap());
        assert_eq!(c.routes.len(), 2);
        assert_eq!(c.routes[1].name, "b2");
        assert_eq!(c.routes[1].listen, "127.0.0.1:9295".parse().unwrap());
        assert_eq!(c.routes[1].target, "127.0.0.1:9294".parse().unwrap());
    }

    #[test]
    fn parses_the_scripts_route_list() {
        let list = "b1=127.0.0.1:9195,127.0.0.1:9194;b2=127.0.0.1:9295,127.0.0.1:9294;b3=127.0.0.1:9395,127.0.0.1:9394";
        let c = parse([
            "--control".to_string(),
            "127.0.0.1:1".to_string(),
            "--routes".to_string(),
            list.to_string(),
        ])
        .unwrap()
        .unwrap();
        let names: Vec<_> = c.routes.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["b1", "b2", "b3"]);
    }

    #[test]
    fn refuses_mistakes() {
        for bad in [
            "",
            "--route b1=127.0.0.1:1,127.0.0.1:2",
            "--control 127.0.0.1:1",
            "--control nowhere --route b1=127.0.0.1:1,127.0.0.1:2",
            "--control 127.0.0.1:1 --route b1=127.0.0.1:1",
            "--control 127.0.0.1:1 --route all=127.0.0.1:1,127.0.0.1:2",
            "--control 127.0.0.1:1 --route b1=127.0.0.1:1,127.0.0.1:2 --route b1=127.0.0.1:3,127.0.0.1:2",
            "--control 127.0.0.1:1 --route b1=127.0.0.1:1,127.0.0.1:2 --route b2=127.0.0.1:1,127.0.0.1:2",
            "--control 127.0.0.1:1 --route b/1=127.0.0.1:1,127.0.0.1:2",
            "--control 127.0.0.1:1 --frobnicate",
            "--control",
        ] {
            assert!(parse(args(bad)).is_err(), "{bad:?}");
        }
        assert_eq!(parse(args("--help")), Ok(None));
    }
}
