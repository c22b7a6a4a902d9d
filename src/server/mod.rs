//! stub
use std::process::ExitCode;
pub fn run() -> ExitCode { ExitCode::SUCCESS }
