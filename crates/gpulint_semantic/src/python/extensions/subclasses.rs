//! Op builders whose base class builds `CUDAExtension(sources=self.sources())` while each
//! subclass (in the same file or a sibling module) returns its own list: each such subclass is
//! its own build entry (`FusedAdamBuilder.sources`).

use super::calls::{bases, chain, line_at, method, MAX_CLASSES};
use super::{
    absolute, argument, is_var, BuildKind, ExtensionBuild, Folder, SelfCtx, SiblingSubclass,
    Unresolved, Via, MAX_SIBLING_SIZE,
};
use gpulint_source::Span;
use gpulint_syntax::{descendants, named_children, NodeExt};
use gpulint_syntax::{parse, Lang};
use std::path::PathBuf;
use tree_sitter::Node;

/// Sibling modules read for subclasses.
const MAX_SIBLINGS: usize = 256;

impl Folder<'_, '_> {
    /// The builds of one build call: inside a method of a class whose subclasses (in this file
    /// or a sibling module) override the methods it calls on `self`, one build per such
    /// subclass; otherwise the call's own build.
    pub(super) fn builds_for(&self, call: Node<'_>, kind: BuildKind) -> Vec<ExtensionBuild> {
        let m = self.m;
        let class = m
            .enclosing_function(call)
            .and_then(|f| m.functions[f].class.clone());
        let Some(class) = class else {
            return vec![self.build(call, kind)];
        };
        *self.ctx.borrow_mut() = SelfCtx {
            chain: chain(m, &class),
            ..Default::default()
        };
        let own = self.build(call, kind);
        let mut consulted = std::mem::take(&mut self.ctx.borrow_mut().consulted);
        // Methods that only give the extension's name (`name=self.absolute_name()`) do not
        // make a subclass an entry; `sources` names the entry when it is among the others.
        let name_arg = argument(call, 0, "name", m.source);
        consulted.retain(|c| {
            !name_arg.is_some_and(|a| {
                descendants(a).any(|n| {
                    n.kind_name() == "call"
                        && n.field("function").is_some_and(|f| {
                            f.kind_name() == "attribute"
                                && f.field("object").is_some_and(|o| is_var(m, o, "self"))
                                && f.field("attribute").is_some_and(|x| self.text(x) == c)
                        })
                })
            })
        });
        consulted.sort_by_key(|c| c != "sources");
        if consulted.is_empty() {
            *self.ctx.borrow_mut() = SelfCtx::default();
            return vec![own];
        }
        let mut out = Vec::new();
        // Subclasses in this file.
        let mut family = vec![class.clone()];
        let mut i = 0;
        while i < family.len() && family.len() < MAX_CLASSES {
            for c in &m.classes {
                if !family.contains(&c.name) && bases(m, c.node).contains(&family[i].as_str()) {
                    family.push(c.name.clone());
                }
            }
            i += 1;
        }
        for sub in family.iter().skip(1) {
            let Some((name, f)) = consulted
                .iter()
                .find_map(|n| method(m, sub, n).map(|f| (n, f)))
            else {
                continue;
            };
            *self.ctx.borrow_mut() = SelfCtx {
                chain: chain(m, sub),
                ..Default::default()
            };
            let mut b = self.build(call, kind);
            b.via = Some(Via {
                what: format!("{sub}.{name}"),
                file: None,
                at: Span::of(&m.functions[f].node),
            });
            out.push(b);
        }
        // Subclasses in sibling modules.
        for (file, sub, name, line, overrides) in self.sibling_subclasses(&family, &consulted) {
            *self.ctx.borrow_mut() = SelfCtx {
                chain: chain(m, &class),
                overrides,
                ..Default::default()
            };
            let mut b = self.build(call, kind);
            // Spans point into this file: a missing source is not reported here.
            let (exist, missing): (Vec<_>, Vec<_>) = b.sources.drain(..).partition(|s| s.exists);
            b.sources = exist;
            for s in missing {
                b.unresolved.push(Unresolved {
                    span: s.span,
                    reason: format!("`{}` does not exist", s.path.display()),
                });
            }
            b.via = Some(Via {
                what: format!("{sub}.{name}"),
                file: Some((file, line)),
                at: Span::of(&call),
            });
            out.push(b);
        }
        *self.ctx.borrow_mut() = SelfCtx::default();
        // The base's own list is abstract when subclasses give theirs.
        if out.is_empty() || !own.sources.is_empty() {
            out.insert(0, own);
        }
        out
    }

    /// Classes in the `.py` files next to this one that derive (through any chain of classes
    /// there) from one of `family` and define one of `methods`: (file, class, method, 1-based
    /// line of its `def`, the zero-argument methods of `methods` it defines, folded there).
    fn sibling_subclasses(&self, family: &[String], methods: &[String]) -> Vec<SiblingSubclass> {
        let key = (family.to_vec(), methods.to_vec());
        if let Some(found) = self.siblings.borrow().get(&key) {
            return found.clone();
        }
        let found = self.read_sibling_subclasses(family, methods);
        self.siblings.borrow_mut().insert(key, found.clone());
        found
    }

    #[allow(clippy::type_complexity)]
    fn read_sibling_subclasses(
        &self,
        family: &[String],
        methods: &[String],
    ) -> Vec<SiblingSubclass> {
        let dir = self.dir();
        gpulint_source::note_dependency(&dir);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return Vec::new();
        };
        let mut files: Vec<PathBuf> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "py") && *p != self.absolute)
            .filter(|p| {
                std::fs::metadata(p).is_ok_and(|md| md.is_file() && md.len() <= MAX_SIBLING_SIZE)
            })
            .collect();
        files.sort();
        files.truncate(MAX_SIBLINGS);
        // Read each once: (file, text, [(class, bases)]).
        let mut read: Vec<(PathBuf, String, Vec<(String, Vec<String>)>)> = Vec::new();
        for f in files {
            let Ok(text) = std::fs::read_to_string(&f) else {
                continue;
            };
            if !text.contains("class ") {
                continue;
            }
            let Some(tree) = parse(Lang::Python, &text) else {
                continue;
            };
            let sm = crate::python::build(&tree, &text);
            let classes = sm
                .classes
                .iter()
                .filter(|c| c.parent.is_none())
                .map(|c| {
                    let b = bases(&sm, c.node).into_iter().map(str::to_string).collect();
                    (c.name.clone(), b)
                })
                .collect();
            read.push((f, text, classes));
        }
        let mut family: Vec<String> = family.to_vec();
        let mut members: Vec<(usize, String)> = Vec::new();
        loop {
            let before = members.len();
            for (i, (_, _, classes)) in read.iter().enumerate() {
                for (c, b) in classes {
                    if members.iter().any(|(j, n)| *j == i && n == c) || family.len() >= MAX_CLASSES
                    {
                        continue;
                    }
                    if b.iter().any(|b| family.contains(b)) {
                        members.push((i, c.clone()));
                        family.push(c.clone());
                    }
                }
            }
            if members.len() == before {
                break;
            }
        }
        members.sort();
        let mut out = Vec::new();
        for (i, class) in members {
            let (file, text, _) = &read[i];
            gpulint_source::note_dependency(file);
            let Some(tree) = parse(Lang::Python, text) else {
                continue;
            };
            let sm = crate::python::build(&tree, text);
            let folder = Folder {
                m: &sm,
                file,
                absolute: absolute(file),
                budget: std::cell::Cell::new(self.budget.get()),
                siblings: Default::default(),
                // `self` there is the subclass (methods of its file only).
                ctx: std::cell::RefCell::new(SelfCtx {
                    chain: chain(&sm, &class),
                    foreign: true,
                    ..Default::default()
                }),
            };
            let mut overrides = Vec::new();
            let mut first: Option<(String, usize)> = None;
            for name in methods {
                let Some(f) = method(&sm, &class, name) else {
                    continue;
                };
                let takes_args = sm.functions[f]
                    .node
                    .field("parameters")
                    .is_some_and(|p| named_children(p).count() > 1);
                if takes_args {
                    continue;
                }
                if first.is_none() {
                    let line = sm.functions[f].node.start_position().row + 1;
                    first = Some((name.clone(), line));
                }
                let mut items = Vec::new();
                let values = folder.return_values(f);
                if values.is_empty() {
                    continue;
                }
                for v in values {
                    folder.items(v, &[], &mut items, 1);
                }
                // Unresolved parts are shown at the call in this file: say where they are.
                let shown = file.file_name().map(|n| n.to_string_lossy().into_owned());
                for i in &mut items {
                    if let Err(u) = i {
                        let line = line_at(text, u.span.start);
                        u.reason =
                            format!("{}:{line}: {}", shown.as_deref().unwrap_or(""), u.reason);
                    }
                }
                overrides.push((name.clone(), items));
            }
            self.budget.set(folder.budget.get());
            if let Some((name, line)) = first.filter(|_| !overrides.is_empty()) {
                out.push((file.clone(), class, name, line, overrides));
            }
        }
        out
    }
}
