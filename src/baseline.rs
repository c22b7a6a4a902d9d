//! Baselines, for adopting gpulint in a codebase that already has findings:
//! `--write-baseline FILE` records today's findings by fingerprint (rule + path + enclosing
//! function + normalised source line, as in SARIF `partialFingerprints`), and `--baseline FILE`
//! reports only findings that are not in it. Moving code up or down keeps a baselined finding
//! silent; a new finding of the same rule in the same file is reported.

use gpulint_diagnostics::FileReport;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::path::Path;

#[derive(Serialize, Deserialize)]
struct BaselineFile {
    /// Always `gpulint-baseline`.
    format: String,
    version: u32,
    findings: Vec<Entry>,
}

#[derive(Serialize, Deserialize)]
struct Entry {
    fingerprint: String,
    code: String,
    path: String,
    /// For people reading the file; not used for matching.
    message: String,
}

const FORMAT: &str = "gpulint-baseline";

/// Writes the findings of `reports` to `path`.
pub fn write(path: &Path, reports: &[&FileReport]) -> Result<usize, String> {
    let mut findings: Vec<Entry> = reports
        .iter()
        .flat_map(|r| {
            r.diagnostics.iter().map(move |d| Entry {
                fingerprint: d.fingerprint.clone(),
                code: d.code.to_string(),
                path: r.display_path.clone(),
                message: d.message.clone(),
            })
        })
        .collect();
    findings.sort_by(|a, b| {
        (&a.path, &a.code, &a.fingerprint).cmp(&(&b.path, &b.code, &b.fingerprint))
    });
    let n = findings.len();
    let file = BaselineFile {
        format: FORMAT.into(),
        version: 1,
        findings,
    };
    let text = serde_json::to_string_pretty(&file).map_err(|e| e.to_string())? + "\n";
    std::fs::write(path, text)
        .map_err(|e| format!("cannot write baseline {}: {e}", path.display()))?;
    Ok(n)
}

/// The fingerprints recorded in a baseline file.
pub fn read(path: &Path) -> Result<HashSet<String>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read baseline {}: {e}", path.display()))?;
    let file: BaselineFile = serde_json::from_str(&text)
        .map_err(|e| format!("{} is not a gpulint baseline: {e}", path.display()))?;
    if file.format != FORMAT || file.version != 1 {
        return Err(format!(
            "{} is not a version-1 gpulint baseline",
            path.display()
        ));
    }
    Ok(file.findings.into_iter().map(|e| e.fingerprint).collect())
}
