//! The buffers names refer to: `__shared__` declarations, pointers taken from them, and the
//! buffer parameters of a called helper bound to the caller's buffers.

use super::walk::{Buf, Sum, Walker};
use super::{Acc, HelperSummary};
use crate::cuda::kernel::{peel, peel_pointer};
use crate::hash::HashMap;
use gpulint_syntax::{named_children, NodeExt};
use tree_sitter::Node;

impl<'a, 'c, 't> Walker<'a, 'c, 't> {
    /// `__shared__` declarations, pointers into shared buffers, and the accesses of the
    /// initialisers.
    pub(super) fn declaration(&mut self, d: Node<'t>) -> Sum<'t> {
        let m = self.f.m;
        let text = m.text(d);
        let shared = text.contains("__shared__");
        let volatile = text.contains("volatile");
        let aggregate = d.field("type").is_some_and(|t| {
            let tt = m.text(t);
            matches!(
                t.kind_name(),
                "union_specifier" | "struct_specifier" | "class_specifier"
            ) || tt.contains("Storage")
                || tt.contains("::")
        });
        let mut out = Sum::empty();
        for c in named_children(d) {
            let (decl, value) = match c.kind_name() {
                "init_declarator" => (c.field("declarator"), c.field("value")),
                "identifier" | "array_declarator" | "pointer_declarator" => (Some(c), None),
                _ => continue,
            };
            let Some(decl) = decl else {
                continue;
            };
            if let Some(v) = value {
                let e = self.expr(v);
                out = self.seq(out, e);
            }
            let (name_node, _) = crate::cuda::kernel::declarator_name(decl);
            let Some(name_node) = name_node else {
                continue;
            };
            let name = m.text(name_node);
            if shared {
                self.bufs.insert(
                    name,
                    Buf {
                        scalar: decl.kind_name() == "identifier",
                        aggregate,
                        ..Buf::array(name, volatile)
                    },
                );
                continue;
            }
            self.bufs.remove(name);
            if decl.kind_name() == "reference_declarator" {
                // `auto& scan = *reinterpret_cast<Scan::TempStorage*>(smem + k);`: library
                // temporary storage carved out of a shared buffer, handed whole to calls.
                if let Some(b) = value.and_then(|v| self.storage_into(v)) {
                    let b = Buf {
                        scalar: true,
                        aggregate: true,
                        ..b
                    };
                    self.bufs.insert(name, b);
                }
                continue;
            }
            let auto = d.field("type").is_some_and(|t| m.text(t) == "auto");
            let pointer = decl.kind_name() == "pointer_declarator";
            // `U* buf = shared.getPointer();`: a function of the file that returns one of its
            // `__shared__` arrays hands out shared memory.
            if (pointer || auto && decl.kind_name() == "identifier")
                && value.is_some_and(|v| self.ctx.returns_shared(v))
            {
                self.bufs.insert(name, Buf::array(name, volatile));
                continue;
            }
            if !pointer {
                continue;
            }
            if let Some(v) = value {
                if let Some(mut b) = self.pointer_into(v) {
                    // `float* kj = &sram[tile]; float* vj = &sram[2 * tile];`: views of one
                    // buffer at multiples of a size the block shares are separate arrays.
                    if b.offset.as_ref().is_some_and(|o| self.is_view(o)) {
                        b.root = format!("{} (in {})", name, b.root);
                        b.offset = None;
                    }
                    self.bufs.insert(
                        name,
                        Buf {
                            volatile: b.volatile || volatile,
                            ..b
                        },
                    );
                }
            }
        }
        out
    }

    /// The buffer a reference initialiser names: `*p` or a cast of a pointer into a buffer.
    fn storage_into(&self, v: Node<'t>) -> Option<Buf> {
        let v = peel_pointer(v, self.f.m.source);
        let v = match v.kind_name() {
            "pointer_expression" if v.child(0).is_some_and(|o| o.kind_name() == "*") => {
                v.field("argument")?
            }
            _ => v,
        };
        self.pointer_into(v)
    }

    /// Is `o` a multiple of one size that is the same for the whole block (`tile`,
    /// `2 * tile`, `n / 8`), with no constant added?
    fn is_view(&self, o: &crate::cuda::interval::Poly) -> bool {
        o.term_count() == 1 && o.as_const().is_none() && o.atoms().all(|a| !self.f.thread_atom(a))
    }

    /// The buffer a pointer expression points into: `s`, `s + k`, `&s[k]`, `(T*)s`.
    pub(super) fn pointer_into(&self, v: Node<'t>) -> Option<Buf> {
        let v = peel_pointer(v, self.f.m.source);
        match v.kind_name() {
            "identifier" => {
                let b = self.bufs.get(self.f.m.text(v))?;
                (!b.scalar).then(|| b.clone())
            }
            "binary_expression" => {
                let op = v.field("operator").map(|o| o.kind_name()).unwrap_or("");
                let (l, r) = (v.field("left")?, v.field("right")?);
                if op != "+" {
                    return None;
                }
                let mut b = self.pointer_into(l)?;
                b.offset = match (b.offset.take(), self.f.form(r)) {
                    (None, Some(p)) => Some(p),
                    (Some(o), Some(p)) => o.add(&p),
                    _ => None,
                };
                b.offset.as_ref()?;
                b.warp_private |= self.f.warp_only(r) == Some(true);
                Some(b)
            }
            "pointer_expression" if v.child(0).is_some_and(|o| o.kind_name() == "&") => {
                let arg = peel(v.field("argument")?);
                if arg.kind_name() != "subscript_expression" {
                    return None;
                }
                let base = peel(arg.field("argument")?);
                let mut b = self.pointer_into(base)?;
                let idx = arg
                    .field("indices")
                    .and_then(|i| i.named_child(0))
                    .or_else(|| arg.field("index"))?;
                let p = self.f.form(idx)?;
                b.offset = match b.offset.take() {
                    None => Some(p),
                    Some(o) => Some(o.add(&p)?),
                };
                b.warp_private |= self.f.warp_only(idx) == Some(true);
                Some(b)
            }
            _ => None,
        }
    }

    /// The summary of a call to a helper with a summary, its buffer parameters bound to the
    /// caller's buffers.
    pub fn helper_call(&mut self, call: Node<'t>, name: &str) -> Option<Sum<'t>> {
        let h: HelperSummary<'t> = self.ctx.summary(name)?;
        let args: Vec<Node<'t>> = crate::cuda::call_arguments(call);
        let caller = self.threads();
        let mut map: HashMap<String, String> = HashMap::default();
        for (pos, pname) in &h.params {
            let arg = args.get(*pos)?;
            let root = match self.pointer_into(*arg) {
                Some(b) if b.offset.is_none() => b.root,
                Some(_) => return Some(Sum::barrier()),
                None => {
                    let a = peel_pointer(*arg, self.f.m.source);
                    if a.kind_name() != "identifier" {
                        return Some(Sum::barrier());
                    }
                    self.f.m.text(a).to_string()
                }
            };
            map.insert(pname.clone(), root);
        }
        let rebind = |v: &[Acc<'t>]| -> Vec<Acc<'t>> {
            v.iter()
                .map(|a| {
                    let mut a = a.clone();
                    a.buf = map
                        .get(&a.buf)
                        .cloned()
                        .unwrap_or_else(|| format!("{name}::{}", a.buf));
                    a.site = call;
                    a.threads.warp |= caller.warp;
                    a.threads.per_thread_guard |= caller.per_thread_guard;
                    if a.threads.single.is_none() {
                        a.threads.single = caller.single.clone();
                    }
                    a.via = Some(h.function);
                    a
                })
                .collect()
        };
        let mut pending = rebind(&h.sum.pending);
        pending.extend(rebind(&h.sum.exit));
        Some(Sum {
            exposed: rebind(&h.sum.exposed),
            pending,
            through: h.sum.through,
            warp_sync: h.sum.warp_sync,
            exit: Vec::new(),
            jump: Vec::new(),
            barrier: h.sum.barrier,
        })
    }
}
