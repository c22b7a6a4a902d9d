//! A minimal LSP client for tests and the latency example: it starts `gpulint server`, writes
//! `Content-Length`-framed JSON-RPC to its standard input and reads its standard output on a
//! thread. Every wait has a deadline, and the server is killed when the client is dropped.
#![allow(dead_code)]

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

pub struct Client {
    child: Child,
    stdin: Option<ChildStdin>,
    rx: Receiver<Value>,
    next_id: i64,
    /// Messages read but not yet asked for.
    backlog: Vec<Value>,
    /// How long any one wait may take.
    pub timeout: Duration,
}

impl Client {
    /// Starts `bin server` in `cwd`.
    pub fn spawn(bin: &Path, cwd: &Path, timeout: Duration) -> Client {
        let mut child = Command::new(bin)
            .arg("server")
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("gpulint server starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let stdin = child.stdin.take();
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            loop {
                let mut length = None;
                loop {
                    let mut line = String::new();
                    match r.read_line(&mut line) {
                        Ok(0) | Err(_) => return,
                        Ok(_) => {}
                    }
                    let line = line.trim_end();
                    if line.is_empty() {
                        break;
                    }
                    if let Some(v) = line.strip_prefix("Content-Length:") {
                        length = v.trim().parse::<usize>().ok();
                    }
                }
                let Some(n) = length else { return };
                let mut body = vec![0; n];
                if r.read_exact(&mut body).is_err() {
                    return;
                }
                let Ok(v) = serde_json::from_slice::<Value>(&body) else {
                    return;
                };
                if tx.send(v).is_err() {
                    return;
                }
            }
        });
        Client {
            child,
            stdin,
            rx,
            next_id: 0,
            backlog: Vec::new(),
            timeout,
        }
    }

    pub fn send(&mut self, v: &Value) {
        let body = v.to_string();
        let stdin = self.stdin.as_mut().expect("stdin open");
        write!(stdin, "Content-Length: {}\r\n\r\n{body}", body.len()).expect("server reads");
        stdin.flush().expect("server reads");
    }

    pub fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Sends a request and waits for its response (the whole response object).
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.wait_for(&format!("the response to {method}"), |m| {
            m["id"] == id && m.get("method").is_none()
        })
    }

    /// The first message (read before or now) that `wanted` accepts; panics after the timeout.
    pub fn wait_for(&mut self, what: &str, wanted: impl Fn(&Value) -> bool) -> Value {
        if let Some(i) = self.backlog.iter().position(&wanted) {
            return self.backlog.remove(i);
        }
        let deadline = Instant::now() + self.timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(m) if wanted(&m) => return m,
                Ok(m) => self.backlog.push(m),
                Err(RecvTimeoutError::Timeout) => {
                    panic!(
                        "no {what} within {:?}; other messages: {:#?}",
                        self.timeout, self.backlog
                    )
                }
                Err(RecvTimeoutError::Disconnected) => {
                    panic!("the server closed its output while waiting for {what}")
                }
            }
        }
    }

    /// The `publishDiagnostics` params for `uri` (at `version`, when given).
    pub fn diagnostics(&mut self, uri: &str, version: Option<i64>) -> Value {
        let what = format!("diagnostics for {uri} (version {version:?})");
        let m = self.wait_for(&what, |m| {
            m["method"] == "textDocument/publishDiagnostics"
                && m["params"]["uri"] == uri
                && version.is_none_or(|v| m["params"]["version"] == v)
        });
        m["params"].clone()
    }

    /// `initialize` with `root` as the workspace folder, then `initialized`; the result.
    pub fn initialize(&mut self, root: &Path) -> Value {
        let uri = file_uri(root);
        let r = self.request(
            "initialize",
            json!({
                "processId": null,
                "rootUri": uri,
                "workspaceFolders": [{"uri": uri, "name": "test"}],
                "capabilities": {},
            }),
        );
        self.notify("initialized", json!({}));
        r
    }

    /// `shutdown`, then `exit`; the server's exit code.
    pub fn shutdown(mut self) -> Option<i32> {
        let r = self.request("shutdown", Value::Null);
        assert!(r.get("error").is_none(), "{r}");
        self.notify("exit", Value::Null);
        drop(self.stdin.take());
        let deadline = Instant::now() + self.timeout;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.code();
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("the server did not exit within {:?}", self.timeout);
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `file:///…` for a path.
pub fn file_uri(path: &Path) -> String {
    let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let mut s = String::from("file://");
    for c in path.to_string_lossy().replace('\\', "/").chars() {
        match c {
            'A'..='Z' | 'a'..='z' | '0'..='9' | '/' | '-' | '_' | '.' | '~' => s.push(c),
            _ => {
                let mut buf = [0; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    s.push_str(&format!("%{b:02X}"));
                }
            }
        }
    }
    if !s.starts_with("file:///") {
        s = s.replacen("file://", "file:///", 1);
    }
    s
}
