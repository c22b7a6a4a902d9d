//! One build call turned into an [`ExtensionBuild`]: its name, and its sources, folded from the
//! call's arguments and checked against the file system (or read inline, or found next to an
//! op library).

use super::locate::{folder_has_entries, in_ancestor};
use super::{
    argument, has_dict_splat, push_source, unresolved, BuildKind, ExtensionBuild, Folder, Source,
    Unresolved,
};
use gpulint_source::Span;
use std::path::Path;
use tree_sitter::Node;

impl Folder<'_, '_> {
    pub(super) fn build(&self, call: Node<'_>, kind: BuildKind) -> ExtensionBuild {
        let src = self.m.source;
        let mut b = ExtensionBuild {
            kind,
            call: Span::of(&call),
            name: None,
            sources: Vec::new(),
            inline: Vec::new(),
            unresolved: Vec::new(),
            via: None,
        };
        let name_arg = match kind {
            BuildKind::LoadOpLibrary => argument(call, 0, "library_filename", src),
            _ => argument(call, 0, "name", src),
        };
        let name = name_arg.and_then(|n| self.string(n, &[], 0));
        b.name = name.map(|s| match kind {
            BuildKind::LoadOpLibrary => Path::new(&s.value)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or(s.value),
            _ => s.value,
        });
        match kind {
            BuildKind::LoadInline => {
                for (pos, kw) in [(1, "cpp_sources"), (2, "cuda_sources")] {
                    if let Some(arg) = argument(call, pos, kw, src) {
                        self.inline_sources(arg, &mut b);
                    }
                }
                if b.inline.is_empty() && b.unresolved.is_empty() && has_dict_splat(call) {
                    b.unresolved.push(unresolved(call, "built from `**kwargs`"));
                }
            }
            BuildKind::LoadOpLibrary => {
                let Some(arg) = name_arg else {
                    b.unresolved.push(unresolved(call, "no library path"));
                    return b;
                };
                match self.string(arg, &[], 0) {
                    Some(s) => self.op_library_sources(arg, &s, &mut b),
                    None => b
                        .unresolved
                        .push(unresolved(arg, "the library path is not a constant")),
                }
            }
            _ => {
                let Some(arg) = argument(call, 1, "sources", src) else {
                    let why = if has_dict_splat(call) {
                        "built from `**kwargs`"
                    } else {
                        "no `sources` argument"
                    };
                    b.unresolved.push(unresolved(call, why));
                    return b;
                };
                let mut items = Vec::new();
                self.items(arg, &[], &mut items, 0);
                // Relative paths are relative to the working directory of the build: certain
                // for a setup.py (run from its folder), unknown for a script.
                let setup = gpulint_syntax::kind::is_setup_py(self.file);
                for item in items {
                    match item {
                        Ok((s, span)) => {
                            let mut path = self.resolve(&s);
                            let mut exists = path.is_file();
                            if !exists
                                && !s.anchored
                                && !setup
                                && !Path::new(&s.value).is_absolute()
                            {
                                // Relative to the repository root, or to a source root above.
                                if let Some(p) = in_ancestor(&self.dir(), &s.value) {
                                    (path, exists) = (p, true);
                                }
                            }
                            gpulint_source::note_dependency(&path);
                            if !exists
                                && !s.anchored
                                && !setup
                                && !Path::new(&s.value).is_absolute()
                            {
                                b.unresolved.push(Unresolved {
                                    span,
                                    reason: format!(
                                        "`{}` is relative to the working directory at run time and is not next to this file",
                                        s.value
                                    ),
                                });
                                continue;
                            }
                            if path.is_dir() {
                                // `""` joined to a root, say: not a source.
                                b.unresolved.push(Unresolved {
                                    span,
                                    reason: format!("`{}` names a folder", s.value),
                                });
                                continue;
                            }
                            if !exists && !folder_has_entries(&path) {
                                // A submodule not checked out, or sources generated by the
                                // build: not a wrong path.
                                b.unresolved.push(Unresolved {
                                    span,
                                    reason: format!(
                                        "the folder of `{}` is missing or empty (a submodule not checked out, or generated sources?)",
                                        s.value
                                    ),
                                });
                                continue;
                            }
                            push_source(&mut b.sources, Source { path, span, exists });
                        }
                        Err(u) => b.unresolved.push(u),
                    }
                }
            }
        }
        b.unresolved.sort_by_key(|u| (u.span, u.reason.clone()));
        b.unresolved.dedup();
        b
    }
}
