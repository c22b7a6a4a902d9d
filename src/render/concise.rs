use super::{each, position, visible};
use gpulint_diagnostics::FileReport;
use std::fmt::Write;

pub fn render(reports: &[&FileReport]) -> String {
    let mut out = String::new();
    for (r, d) in each(reports) {
        let _ = writeln!(
            out,
            "{}: {} [{}] {}",
            visible(&position(r, d)),
            d.code,
            d.severity,
            visible(&d.message)
        );
    }
    out
}
