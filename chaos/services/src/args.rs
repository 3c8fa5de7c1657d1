//! Command-line flags as `--name value` pairs (a flag may repeat); nothing is validated beyond
//! presence and number syntax, and every malformed value is an error, never a panic.

use std::collections::HashMap;
use std::error::Error;
use std::str::FromStr;

/// What a subcommand's handlers return on failure.
pub type BoxError = Box<dyn Error + Send + Sync>;

/// The flags of one invocation.
#[derive(Debug, Default)]
pub struct Args {
    values: HashMap<String, Vec<String>>,
}

impl Args {
    /// Parses `--name value` pairs.
    pub fn parse(words: impl Iterator<Item = String>) -> Result<Args, String> {
        let mut parsed = Args::default();
        let mut words = words.peekable();
        while let Some(flag) = words.next() {
            let Some(name) = flag.strip_prefix("--") else {
                return Err(format!("expected a --flag, got {flag}"));
            };
            let Some(value) = words.next() else {
                return Err(format!("--{name} needs a value"));
            };
            parsed
                .values
                .entry(name.to_owned())
                .or_default()
                .push(value);
        }
        Ok(parsed)
    }

    /// The last value of `name`, if given.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.values
            .get(name)
            .and_then(|v| v.last())
            .map(String::as_str)
    }

    /// Every value of `name`, in order.
    pub fn all(&self, name: &str) -> &[String] {
        self.values.get(name).map_or(&[], Vec::as_slice)
    }

    /// The value of `name`, or an error naming the missing flag.
    pub fn need(&self, name: &str) -> Result<&str, BoxError> {
        self.get(name)
            .ok_or_else(|| format!("--{name} is required").into())
    }

    /// The value of `name` parsed, or `default` when absent.
    pub fn num<T: FromStr>(&self, name: &str, default: T) -> Result<T, BoxError> {
        match self.get(name) {
            None => Ok(default),
            Some(v) => v
                .parse()
                .map_err(|_| format!("--{name}: {v} is not a number").into()),
        }
    }

    /// A comma-separated list (empty when absent).
    pub fn list(&self, name: &str) -> Vec<String> {
        self.get(name)
            .map(|v| {
                v.split(',')
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    }
}
