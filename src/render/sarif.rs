use super::{slash_path, Chunk};
use gpulint_diagnostics::{FileReport, Severity};
use gpulint_linter::registry;
use serde_json::{json, Value};

fn level(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "note",
    }
}

/// URL of a rule's page under `lints/`.
pub fn help_uri(page: &str) -> String {
    format!("{}/blob/main/lints/{}", env!("CARGO_PKG_REPOSITORY"), page)
}

/// The first paragraph of a rule's "What it does" section, as plain text.
fn full_description(doc: &str) -> String {
    let mut lines = Vec::new();
    let mut inside = false;
    for line in doc.lines() {
        if line.starts_with("## ") {
            if inside {
                break;
            }
            inside = line.trim() == "## What it does";
            continue;
        }
        if inside {
            if line.trim().is_empty() && !lines.is_empty() {
                break;
            }
            if !line.trim().is_empty() {
                lines.push(line.trim());
            }
        }
    }
    lines.join(" ").replace('`', "")
}

/// The results of one file's findings, as elements of the run's `results`.
pub fn results(r: &FileReport) -> String {
    let metas = registry::all_metas();
    let results = r.diagnostics.iter().map(|d| {
            let index = metas.iter().position(|m| m.code == d.code).unwrap_or(0);
            let mut text = d.message.clone();
            if let Some(help) = &d.help {
                text.push_str("\nhelp: ");
                text.push_str(help);
            }
            let mut region = json!({
                "startLine": d.location.line,
                "startColumn": d.location.column,
                "endLine": d.location.end_line,
                "endColumn": d.location.end_column,
            });
            if d.location.end_line == d.location.line && d.location.end_column <= d.location.column {
                region["endColumn"] = json!(d.location.column + 1);
            }
            if !r.source.text.is_empty() {
                let line = r.source.line_index(d.span.start.min(r.source.text.len()));
                region["snippet"] = json!({ "text": r.source.line_text(line) });
            }
            if r.notebook.is_some() {
                // Regions point at the line of the .ipynb file holding the cell's source line.
                let l = r.file_line(d);
                region["startLine"] = json!(l);
                region["endLine"] = json!(l);
                region.as_object_mut().map(|o| {
                    o.remove("startColumn");
                    o.remove("endColumn")
                });
            }
            let related: Vec<Value> = d
                .labels
                .iter()
                .enumerate()
                .filter(|_| r.notebook.is_none())
                .map(|(i, l)| {
                    let (line, col) = r.source.position(l.span.start);
                    let (eline, ecol) = r.source.position(l.span.end);
                    json!({
                        "id": i,
                        "message": { "text": l.message },
                        "physicalLocation": {
                            "artifactLocation": artifact_location(&r.display_path),
                            "region": { "startLine": line, "startColumn": col, "endLine": eline, "endColumn": ecol.max(if eline == line { col + 1 } else { 1 }) }
                        }
                    })
                })
                .chain(d.related.iter().enumerate().map(|(i, rel)| {
                    json!({
                        "id": d.labels.len() + i,
                        "message": { "text": rel.message },
                        "physicalLocation": {
                            "artifactLocation": artifact_location(&rel.path),
                            "region": { "startLine": rel.line }
                        }
                    })
                }))
                .collect();
            let mut result = json!({
                "ruleId": d.code,
                "ruleIndex": index,
                "level": level(d.severity),
                "message": { "text": text },
                "locations": [{
                    "physicalLocation": {
                        "artifactLocation": artifact_location(&r.display_path),
                        "region": region
                    }
                }],
                "partialFingerprints": { "gpulint/v1": d.fingerprint },
            });
            if !related.is_empty() {
                result["relatedLocations"] = Value::Array(related);
            }
            result
        });
    super::pretty_items(results, 4)
}

/// The SARIF log of a run from the results of its files (see [`results`]).
pub fn document<'a>(parts: impl Iterator<Item = &'a Chunk>) -> String {
    let metas = registry::all_metas();
    let rules: Vec<Value> = metas
        .iter()
        .map(|m| {
            let doc = m.doc_markdown();
            json!({
                "id": m.code,
                "name": m.name,
                "shortDescription": { "text": m.summary },
                "fullDescription": { "text": full_description(&doc) },
                "helpUri": help_uri(&m.page_name()),
                "help": { "text": doc.clone(), "markdown": doc },
                "defaultConfiguration": { "level": level(m.severity) },
                "properties": { "tags": [m.lang.as_str(), m.severity.as_str()] }
            })
        })
        .collect();
    let doc = json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {
                "driver": {
                    "name": "gpulint",
                    "version": env!("CARGO_PKG_VERSION"),
                    "semanticVersion": env!("CARGO_PKG_VERSION"),
                    "informationUri": env!("CARGO_PKG_HOMEPAGE"),
                    "rules": rules,
                }
            },
            "columnKind": "unicodeCodePoints",
            "results": [],
        }]
    });
    let empty = serde_json::to_string_pretty(&doc).unwrap_or_default();
    // The only `"results": []` of the layout: inside strings quotes are escaped.
    let key = "\"results\": []";
    let Some(at) = empty.find(key) else {
        return empty + "\n";
    };
    let line_start = empty[..at].rfind('\n').map_or(0, |n| n + 1);
    let indent = &empty[line_start..at];
    let mut out = String::with_capacity(empty.len());
    out.push_str(&empty[..at]);
    out.push_str("\"results\": [");
    let mut any = false;
    for part in parts {
        out.push_str(if any { ",\n" } else { "\n" });
        out.push_str(&part.text);
        any = true;
    }
    if any {
        out.push('\n');
        out.push_str(indent);
    }
    out.push(']');
    out.push_str(&empty[at + key.len()..]);
    out.push('\n');
    out
}

/// A file's `artifactLocation`: a URI relative to `%SRCROOT%` (the working directory) for a
/// file below it, an absolute `file://` URI for one elsewhere (a relative URI with a base would
/// not name it, and code scanning rejects absolute paths given as relative URIs).
fn artifact_location(display: &str) -> Value {
    let path = slash_path(display);
    let drive = path.as_bytes().get(1) == Some(&b':') && path.as_bytes()[0].is_ascii_alphabetic();
    if path.starts_with('/') || drive {
        let abs = if drive { format!("/{path}") } else { path };
        json!({ "uri": format!("file://{}", uri_escape(&abs)) })
    } else {
        json!({ "uri": uri_escape(&path), "uriBaseId": "%SRCROOT%" })
    }
}

/// Percent-encodes what may not stand in a URI path (RFC 3986), keeping `/`.
fn uri_escape(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                out.push(b as char)
            }
            b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b';' | b'=' | b':'
            | b'@' => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}
