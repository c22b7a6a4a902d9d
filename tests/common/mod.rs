//! Helpers shared by the tests that run the `gpulint` binary.
// Each test crate compiles this module and uses only some of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `gpulint ARGS` run in `dir`, not yet started.
pub fn command(dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gpulint"));
    c.args(args).current_dir(dir);
    c
}

/// Runs `gpulint ARGS` in `dir` and waits for it.
pub fn gpulint(dir: &Path, args: &[&str]) -> Output {
    command(dir, args).output().expect("gpulint runs")
}

pub fn code(o: &Output) -> i32 {
    o.status.code().expect("exited normally, not by a signal")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Writes `text` to `rel` under `dir`, creating its folders; the file's path.
pub fn write(dir: &Path, rel: &str, text: impl AsRef<[u8]>) -> PathBuf {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, text).unwrap();
    p
}
