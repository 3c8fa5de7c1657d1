//! The history file: one JSON object per line, each with `t` (milliseconds since the epoch) and
//! `ev`, written with a single `write` call and flushed before `log` returns, so a SIGKILL loses
//! at most the line being written and never interleaves two lines.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};

/// An append-only history shared by every task of a process.
#[derive(Clone, Debug)]
pub struct History {
    file: Arc<Mutex<File>>,
    instance: Arc<str>,
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

impl History {
    /// Opens (appending) the history at `path`; every line carries `instance` as `inst`.
    pub fn open(path: &str, instance: &str) -> std::io::Result<History> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(History {
            file: Arc::new(Mutex::new(file)),
            instance: instance.into(),
        })
    }

    /// Appends event `ev` with `fields` (a JSON object; anything else is stored as `data`).
    pub fn log(&self, ev: &str, fields: Value) {
        let mut line = match fields {
            Value::Object(map) => map,
            Value::Null => Map::new(),
            other => {
                let mut map = Map::new();
                map.insert("data".into(), other);
                map
            }
        };
        line.insert("t".into(), Value::from(now_ms()));
        line.insert("ev".into(), Value::from(ev));
        line.insert("inst".into(), Value::from(&*self.instance));
        let mut text = Value::Object(line).to_string();
        text.push('\n');
        let mut file = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        // A history that cannot be written makes the run unverifiable: say so loudly, but keep
        // the service running as a deployment would.
        if let Err(e) = file.write_all(text.as_bytes()).and_then(|()| file.flush()) {
            eprintln!("history write failed: {e}");
        }
    }
}
