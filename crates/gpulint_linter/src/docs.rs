//! The rule reference in `lints/`, generated from the rules' own documentation.
//! `tests/docs.rs` fails when a page is stale; `GPULINT_UPDATE_DOCS=1 cargo test --test docs`
//! rewrites them.

use crate::registry;
use gpulint_diagnostics::RuleMeta;
use std::fmt::Write;

/// The page of one rule.
pub fn rule_page(m: &RuleMeta) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# {} ({})\n", m.code, m.name);
    let _ = writeln!(s, "{}\n", m.summary);
    let _ = writeln!(
        s,
        "- **Severity:** {}\n- **Language:** {}\n- **Suppress with:** {}\n",
        m.severity,
        m.lang.as_str(),
        suppress_hint(m)
    );
    s.push_str(&m.doc_markdown());
    if !m.options.is_empty() {
        s.push_str("\n## Options\n\n");
        for o in m.options {
            let _ = writeln!(s, "- `{}` (default `{}`): {}", o.key, o.default, o.doc);
        }
        let _ = writeln!(
            s,
            "\nSet them in `gpulint.toml` under `[rules.{}]`, or in `pyproject.toml` under `[tool.gpulint.rules.{}]`.",
            m.code, m.code
        );
    }
    while s.ends_with("\n\n") {
        s.pop();
    }
    s
}

fn suppress_hint(m: &RuleMeta) -> String {
    match m.lang.as_str() {
        "python" => format!("`# noqa: {c}` or `# gpulint: ignore[{c}]`", c = m.code),
        "cuda" => format!("`// NOLINT({c})` or `// gpulint: ignore[{c}]`", c = m.code),
        "manifest" => format!(
            "`# noqa: {c}` or `# gpulint: ignore[{c}]` on the line (in a Dockerfile: on the line above the instruction)",
            c = m.code
        ),
        _ => format!("`gpulint: ignore-file[{c}]`, or `--ignore {c}`", c = m.code),
    }
}

/// `lints/README.md`: the index of all rules.
pub fn index() -> String {
    let mut s = String::from(
        "# gpulint rules\n\nEvery rule gpulint knows, with its code (what you write in `--select`, `--ignore`, \
         configuration and suppression comments), its name, default severity and language. \
         `gpulint rules` prints the same list; `gpulint explain CODE` prints a page.\n\n\
         Severity: `error` = likely hard crash, abort, illegal address or undefined behaviour; \
         `warning` = likely OOM, hang or silent corruption at realistic sizes; `info` = hygiene, or \
         advice that depends on how the program is deployed.\n\n\
         | Code | Name | Severity | Language | Summary |\n|---|---|---|---|---|\n",
    );
    for m in registry::all_metas() {
        let _ = writeln!(
            s,
            "| {} | [{}]({}) | {} | {} | {} |",
            m.code,
            m.name,
            m.page_name(),
            m.severity,
            m.lang.as_str(),
            m.summary.replace('|', "\\|")
        );
    }
    s
}

/// The first fenced code block of a section (`## Example`), with its language tag.
pub fn first_code_block<'d>(doc: &'d str, section: &str) -> Option<(&'d str, String)> {
    let start = doc.find(&format!("## {section}\n"))?;
    let rest = &doc[start..];
    let end = rest[3..].find("\n## ").map(|e| e + 3).unwrap_or(rest.len());
    let body = &rest[..end];
    let open = body.find("```")?;
    let after = &body[open + 3..];
    let nl = after.find('\n')?;
    let tag = after[..nl].trim();
    let code_start = &after[nl + 1..];
    let close = code_start.find("```")?;
    Some((tag, code_start[..close].to_string()))
}
