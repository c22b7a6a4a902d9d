//! Writing to the terminal: standard output that tolerates a closed pipe, and usage errors.

use std::io::Write;
use std::process::ExitCode;

pub fn print_out(s: &str) {
    let mut out = std::io::stdout().lock();
    // A closed pipe (`| head`) is not an error worth reporting.
    let _ = out.write_all(s.as_bytes());
    let _ = out.flush();
}

/// Prints `gpulint: error: MESSAGE` and returns exit code 2.
pub fn fail(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("gpulint: error: {message}");
    ExitCode::from(2)
}
