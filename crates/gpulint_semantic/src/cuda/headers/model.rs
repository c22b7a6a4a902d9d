//! What a file's model asks of the project headers it includes: aliases, struct members and
//! the helpers that check for CUDA errors, read when a rule first asks (see [`super`]).

use super::{project_headers, Headers, ERROR_QUERIES};
use crate::cuda::{kernel, last_name, CudaModel};
use gpulint_syntax::NodeExt;

impl<'t> CudaModel<'t> {
    /// The type a `using`/`typedef` alias names (one step); none for `int`, `std::size_t`.
    pub fn type_alias(&self, name: &str) -> Option<&str> {
        match self.aliases.get(name) {
            Some(ty) => Some(ty),
            None if kernel::may_name_alias(name) => self.headers().alias(name),
            None => None,
        }
    }

    /// The types declared for struct members called `name`, in this file, else in the
    /// project headers it includes.
    pub fn field_types(&self, name: &str) -> Vec<&str> {
        match self.fields.get(name) {
            Some(v) => v.clone(),
            None => self.headers().field_types(name),
        }
    }

    /// Is the struct member `name` known only from the include context a header borrows from
    /// the files that include it (not declared in this file or in a header it includes)?
    pub fn borrowed_member(&self, name: &str) -> bool {
        !self.fields.contains_key(name) && self.headers().borrowed_field(name)
    }

    /// Reads the project headers `path` includes (see [`project_headers`]) when a rule first
    /// asks about them: a file whose rules ask nothing of its headers does not depend on them.
    pub fn read_headers(&mut self, path: &std::path::Path) {
        self.headers = std::cell::OnceCell::new();
        self.header_path = Some(path.to_path_buf());
    }

    /// The project headers this file includes.
    pub fn headers(&self) -> &Headers {
        self.headers.get_or_init(|| match &self.header_path {
            Some(path) => project_headers(path, self.source),
            None => Headers::default(),
        })
    }

    /// Names of macros and functions, here or in a project header, that query the CUDA error
    /// state (`#define CHECK_LAUNCH() … cudaGetLastError() …`, `void finish() {…}`).
    pub fn check_helpers(&self) -> crate::hash::HashSet<&str> {
        let mut out: crate::hash::HashSet<&str> = self.headers().check_helpers().collect();
        let top = gpulint_syntax::named_children(self.root).flat_map(|n| {
            let nested = matches!(n.kind_name(), "preproc_if" | "preproc_ifdef")
                .then(|| gpulint_syntax::named_children(n))
                .into_iter()
                .flatten();
            std::iter::once(n).chain(nested)
        });
        for m in top.filter(|n| matches!(n.kind_name(), "preproc_def" | "preproc_function_def")) {
            let body = m.field("value").map(|v| self.text(v)).unwrap_or("");
            if ERROR_QUERIES.iter().any(|q| body.contains(q)) {
                if let Some(n) = m.field("name") {
                    out.insert(self.text(n));
                }
            }
        }
        for f in &self.functions {
            let body = f.node.field("body").map(|b| self.text(b)).unwrap_or("");
            if !f.space.global && ERROR_QUERIES.iter().any(|q| body.contains(q)) {
                out.insert(last_name(&f.name));
            }
        }
        out
    }

    /// Is `name` a function-like macro of this file (`#define NAME(…)`, anywhere in the text)
    /// whose body calls `cudaGetLastError` or `cudaPeekAtLastError`? The macros are read once
    /// per file.
    pub fn macro_retrieves_error(&self, name: &str) -> bool {
        self.error_macros
            .get_or_init(|| error_retrieving_macros(self.source))
            .contains(name)
    }
}

/// The function-like macros `#define NAME(…) body` of `source` (found in the text, wherever
/// they are: in a branch of `#if`, in a namespace) whose body, up to the first line without a
/// continuation, calls `cudaGetLastError` or `cudaPeekAtLastError`.
fn error_retrieving_macros(source: &str) -> crate::hash::HashSet<String> {
    let mut out = crate::hash::HashSet::default();
    let mut rest = source;
    while let Some(pos) = rest.find("#define") {
        rest = &rest[pos + "#define".len()..];
        let after = rest.trim_start_matches([' ', '\t']);
        let name_len = after
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        if name_len == 0 || !after[name_len..].starts_with('(') {
            continue;
        }
        let mut end = 0;
        for line in after.split_inclusive('\n') {
            end += line.len();
            if !line.trim_end().ends_with('\\') {
                break;
            }
        }
        let body = &after[..end];
        if body.contains("cudaGetLastError") || body.contains("cudaPeekAtLastError") {
            out.insert(after[..name_len].to_string());
        }
    }
    out
}
