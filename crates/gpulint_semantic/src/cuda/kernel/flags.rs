//! How integer expressions in a kernel derive from the thread coordinates: `threadIdx`,
//! `blockIdx`, `blockDim`, `gridDim`, block bases, global linear indices, and the canonical
//! `blockIdx.x * blockDim.x + threadIdx.x`.

use super::{peel_pointer, Kernel};
use crate::cuda::CudaModel;
use gpulint_syntax::NodeExt;
use gpulint_syntax::{named_children, text};
use tree_sitter::Node;

/// How an integer expression depends on the thread coordinates (a bit set).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Flags(pub u16);

impl Flags {
    /// Reads `threadIdx`.
    pub const TID: u16 = 1;
    /// Reads `blockIdx`.
    pub const BID: u16 = 2;
    /// Reads `blockDim`.
    pub const BDIM: u16 = 4;
    /// Reads `gridDim`.
    pub const GDIM: u16 = 8;
    /// `blockIdx` scaled by the block size (`blockIdx.x * blockDim.x`, `blockIdx.x * 256`).
    pub const BLOCK_BASE: u16 = 16;
    /// A global linear index: a block base plus `threadIdx` (any permutation, any axis).
    pub const GLOBAL: u16 = 32;
    /// A compile-time constant (literal, `#define`, `constexpr`, template parameter).
    pub const CONST: u16 = 64;
    /// A scalar kernel parameter.
    pub const PARAM: u16 = 128;
    /// The canonical global index of one axis, `blockIdx.x * blockDim.x + threadIdx.x` (in any
    /// order, through casts and locals), or something computed from it.
    pub const CANONICAL: u16 = 256;

    pub fn has(self, bits: u16) -> bool {
        self.0 & bits != 0
    }

    /// Depends on the thread or block coordinates.
    pub fn thread_dependent(self) -> bool {
        self.has(Self::TID | Self::BID | Self::BLOCK_BASE | Self::GLOBAL)
    }

    /// Differs between the threads of one block (reads `threadIdx`); values built only from
    /// `blockIdx`, `blockDim`, `gridDim`, parameters and constants are uniform per block.
    pub fn per_thread(self) -> bool {
        self.has(Self::TID | Self::GLOBAL | Self::CANONICAL)
    }

    pub fn is_global_index(self) -> bool {
        self.has(Self::GLOBAL)
    }
}

impl std::ops::BitOr for Flags {
    type Output = Flags;
    fn bitor(self, o: Flags) -> Flags {
        Flags(self.0 | o.0)
    }
}

impl<'t> Kernel<'t> {
    /// How `expr` derives from the thread coordinates.
    pub fn flags(&self, model: &CudaModel<'t>, expr: Node<'_>) -> Flags {
        self.flags_depth(model, expr, 0)
    }

    /// Does a condition differ between the threads of one block: does any name or builtin in
    /// it derive from `threadIdx`? Names built from `blockIdx`, `blockDim`, `gridDim`,
    /// parameters and constants are uniform per block.
    pub fn per_thread(&self, model: &CudaModel<'t>, cond: Node<'_>) -> bool {
        gpulint_syntax::descendants(cond)
            .take(4096)
            .filter(|n| matches!(n.kind_name(), "identifier" | "field_expression"))
            .any(|n| match loop_counter_def(model, n) {
                // A counter of an enclosing `for`: what its own loop starts and steps it by
                // (locals are merged by name over the kernel, and `i` is often reused).
                Some((init, update)) => {
                    self.flags(model, init).per_thread()
                        || update.is_some_and(|u| {
                            gpulint_syntax::descendants(u)
                                .take(256)
                                .filter(|x| {
                                    x.kind_name() == "field_expression"
                                        || x.kind_name() == "identifier"
                                })
                                .filter(|x| text(*x, model.source) != text(n, model.source))
                                .any(|x| self.flags(model, x).per_thread())
                        })
                }
                // A local declared in an enclosing block (`const int i = off + k;`), where the
                // same name is declared elsewhere in the kernel with another value.
                None => match block_decl_value(model, n) {
                    Some(value) => self.flags(model, value).per_thread(),
                    None => self.flags(model, n).per_thread(),
                },
            })
    }

    fn flags_depth(&self, model: &CudaModel<'t>, expr: Node<'_>, depth: usize) -> Flags {
        if depth > 64 {
            return Flags::default();
        }
        let d = depth + 1;
        let src = model.source;
        let field = |f: &str| expr.field(f);
        let sub =
            |n: Option<Node<'_>>| n.map(|n| self.flags_depth(model, n, d)).unwrap_or_default();
        match expr.kind_name() {
            "field_expression" => match field("argument").map(|a| text(a, src)) {
                Some("threadIdx") => Flags(Flags::TID),
                Some("blockIdx") => Flags(Flags::BID),
                Some("blockDim") => Flags(Flags::BDIM),
                Some("gridDim") => Flags(Flags::GDIM),
                _ => Flags::default(),
            },
            "identifier" => {
                let name = text(expr, src);
                if let Some(i) = self.local(name) {
                    self.flags[i]
                } else if self.param(name).is_some_and(|p| !p.pointer) {
                    Flags(Flags::PARAM)
                } else if name == "warpSize" || is_constant_name(name) || {
                    let f = &model.functions[self.function];
                    f.template_params.iter().any(|(p, _)| *p == name)
                        || model.constant(name).is_some()
                } {
                    Flags(Flags::CONST)
                } else {
                    Flags::default()
                }
            }
            "number_literal" | "sizeof_expression" => Flags(Flags::CONST),
            "parenthesized_expression" => sub(expr.named_child(0)),
            "cast_expression" => sub(field("value")),
            "unary_expression" => match field("operator").map(|o| o.kind_name()) {
                Some("-" | "+" | "~") => sub(field("argument")),
                _ => Flags::default(),
            },
            "update_expression" => sub(field("argument")),
            "assignment_expression" => sub(field("right")),
            "comma_expression" => sub(field("right")),
            "conditional_expression" => sub(field("consequence")) | sub(field("alternative")),
            "call_expression" => {
                let name = field("function")
                    .map(|f| {
                        let f = f.field("name").unwrap_or(f);
                        crate::cuda::last_name(text(f, src))
                    })
                    .unwrap_or("");
                let args: Vec<Node<'_>> = field("arguments")
                    .map(|a| named_children(a).collect())
                    .unwrap_or_default();
                match name {
                    "static_cast" | "reinterpret_cast" | "int" | "int64_t" | "size_t" | "long"
                    | "unsigned" | "uint32_t" | "uint64_t" | "index_t" => {
                        sub(args.first().copied())
                    }
                    "__mul24" | "__umul24" | "mul24" if args.len() == 2 => {
                        combine("*", sub(Some(args[0])), sub(Some(args[1])))
                    }
                    "min" | "umin" | "llmin" | "ullmin" | "fminf" | "__min" | "clamp" => {
                        let all: Vec<Flags> = args.iter().map(|a| sub(Some(*a))).collect();
                        let u = all.iter().fold(Flags::default(), |a, b| a | *b);
                        if all.iter().any(|f| !f.is_global_index()) {
                            // Clamped from above: a bounded value, whatever it came from.
                            Flags(u.0 & (Flags::CONST | Flags::PARAM))
                        } else {
                            u
                        }
                    }
                    "max" | "umax" | "llmax" | "fmaxf" | "__max" => {
                        args.iter().fold(Flags::default(), |a, n| a | sub(Some(*n)))
                    }
                    _ => Flags::default(),
                }
            }
            "binary_expression" => {
                let op = field("operator").map(|o| o.kind_name()).unwrap_or("");
                let (l, r) = (field("left"), field("right"));
                let f = combine(op, sub(l), sub(r));
                if op == "+" && f.is_global_index() && self.is_canonical_sum(l, r, src) {
                    Flags(f.0 | Flags::CANONICAL)
                } else {
                    f
                }
            }
            _ => Flags::default(),
        }
    }

    /// `blockIdx.A * blockDim.A + threadIdx.A` for one axis A, either operand order.
    fn is_canonical_sum(&self, l: Option<Node<'_>>, r: Option<Node<'_>>, src: &str) -> bool {
        let (Some(l), Some(r)) = (l, r) else {
            return false;
        };
        let base_axis = |n: Node<'_>| {
            let n = self.resolve(n, src, 0);
            let (a, b) = match n.kind_name() {
                "binary_expression"
                    if n.field("operator").is_some_and(|o| o.kind_name() == "*") =>
                {
                    (n.field("left")?, n.field("right")?)
                }
                "call_expression" => {
                    let args = n.field("arguments")?;
                    (args.named_child(0)?, args.named_child(1)?)
                }
                _ => return None,
            };
            let (ba, da) = (
                self.builtin_axis(a, "blockIdx", src),
                self.builtin_axis(b, "blockDim", src),
            );
            let (bb, db) = (
                self.builtin_axis(b, "blockIdx", src),
                self.builtin_axis(a, "blockDim", src),
            );
            match (ba, da, bb, db) {
                (Some(x), Some(y), _, _) | (_, _, Some(x), Some(y)) if x == y => Some(x),
                _ => None,
            }
        };
        let tid = |n: Node<'_>| self.builtin_axis(n, "threadIdx", src);
        match (base_axis(l), tid(r), base_axis(r), tid(l)) {
            (Some(a), Some(b), _, _) | (_, _, Some(a), Some(b)) => a == b,
            _ => false,
        }
    }

    /// The axis of `threadIdx.x`-style builtins, through casts and single-definition locals.
    fn builtin_axis<'s>(&self, n: Node<'_>, builtin: &str, src: &'s str) -> Option<&'s str> {
        let n = self.resolve(n, src, 0);
        if n.kind_name() != "field_expression" || text(n.field("argument")?, src) != builtin {
            return None;
        }
        // The node belongs to this file's tree, so its text borrows from `src`.
        src.get(n.field("field")?.byte_range())
    }

    /// Peels casts and follows a local with a single definition (a few steps).
    fn resolve<'n>(&self, n: Node<'n>, src: &str, depth: usize) -> Node<'n>
    where
        't: 'n,
    {
        let mut n = peel_pointer(n, src);
        if depth < 4 && n.kind_name() == "identifier" {
            if let Some(i) = self.local(text(n, src)) {
                if let [d] = self.defs[i].as_slice() {
                    n = self.resolve(*d, src, depth + 1);
                }
            }
        }
        n
    }

    pub(super) fn compute_flags(&mut self, model: &CudaModel<'t>) {
        // Monotone fixpoint: flags only grow, so this ends; the cap guards pathological input.
        for _ in 0..16 {
            let mut changed = false;
            for i in 0..self.locals.len() {
                let f = self.defs[i]
                    .iter()
                    .fold(Flags::default(), |acc, d| acc | self.flags(model, *d));
                let merged = self.flags[i] | f;
                if merged != self.flags[i] {
                    self.flags[i] = merged;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
    }
}

/// The flags of `l op r`.
fn combine(op: &str, l: Flags, r: Flags) -> Flags {
    let u = l | r;
    let block = |a: Flags, b: Flags| {
        a.has(Flags::BID)
            && !a.has(Flags::TID | Flags::GLOBAL)
            && b.has(Flags::BDIM | Flags::CONST)
            && !b.has(Flags::TID)
    };
    match op {
        "*" | "<<" if block(l, r) || (op == "*" && block(r, l)) => Flags(u.0 | Flags::BLOCK_BASE),
        "+" | "|" | "^"
            if (l.has(Flags::BLOCK_BASE | Flags::GLOBAL) && r.has(Flags::TID))
                || (r.has(Flags::BLOCK_BASE | Flags::GLOBAL) && l.has(Flags::TID)) =>
        {
            Flags(u.0 | Flags::GLOBAL)
        }
        // A remainder or a mask is bounded by its right side.
        "%" => Flags(u.0 & !(Flags::GLOBAL | Flags::BLOCK_BASE | Flags::CANONICAL)),
        "&" if l.has(Flags::CONST) || r.has(Flags::CONST) => {
            Flags(u.0 & !(Flags::GLOBAL | Flags::BLOCK_BASE | Flags::CANONICAL))
        }
        "<" | ">" | "<=" | ">=" | "==" | "!=" | "&&" | "||" => Flags::default(),
        _ => u,
    }
}

/// `BLOCK_SIZE`, `kThreads`: names that are compile-time constants by convention.
fn is_constant_name(name: &str) -> bool {
    let b = name.as_bytes();
    (b.len() >= 2
        && b.iter()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == b'_')
        && b.iter().any(u8::is_ascii_uppercase))
        || (b.len() >= 2 && b[0] == b'k' && b[1].is_ascii_uppercase())
}

/// When `id` names the counter declared by an enclosing `for (int k = init; …; update)`: its
/// initial value and the update expression.
/// The value of the declaration of `id`'s name in an enclosing block, before `id` and not
/// assigned again between the two; `None` when there is none or it may have changed.
fn block_decl_value<'t>(model: &CudaModel<'t>, id: Node<'_>) -> Option<Node<'t>> {
    if id.kind_name() != "identifier" {
        return None;
    }
    let source = model.source;
    let name = text(id, source);
    let mut child_start = id.start_byte();
    for cur in model.parents().ancestors(id).take(64) {
        let child = std::mem::replace(&mut child_start, cur.start_byte());
        if cur.kind_name() == "function_definition" {
            return None;
        }
        if cur.kind_name() != "compound_statement" {
            continue;
        }
        let statements = model.statements(cur);
        let before = &statements[..statements.partition_point(|s| s.start_byte() <= child)];
        for (at, stmt) in before.iter().enumerate().rev().take(256) {
            if stmt.kind_name() != "declaration" {
                continue;
            }
            let Some(value) = named_children(*stmt)
                .filter(|d| d.kind_name() == "init_declarator")
                .find(|d| {
                    d.field("declarator")
                        .is_some_and(|v| text(v, source) == name)
                })
                .and_then(|d| d.field("value"))
            else {
                continue;
            };
            let from = before
                .get(at + 1)
                .map_or(id.start_byte(), |s| s.start_byte());
            let reassigned = may_assign(source, from, id.start_byte(), name)
                && before[at + 1..].iter().any(|s| {
                    gpulint_syntax::descendants(*s)
                        .take(4096)
                        .take_while(|n| n.start_byte() < id.start_byte())
                        .any(|n| {
                            let target = match n.kind_name() {
                                "assignment_expression" => n.field("left"),
                                "update_expression" => n.field("argument"),
                                _ => None,
                            };
                            target.is_some_and(|t| text(t, source) == name)
                        })
                });
            return (!reassigned).then_some(value);
        }
    }
    None
}

/// Could `source[from..to]` assign `name` (`name = …`, `name += …`, `name++`, `--name`)? `false`
/// only when no occurrence of the name there is next to an assignment or update operator, or
/// to a comment, a line continuation or a directive that could stand between the two.
fn may_assign(source: &str, from: usize, to: usize, name: &str) -> bool {
    let Some(text) = source.get(from..to.min(source.len())) else {
        return true;
    };
    let b = text.as_bytes();
    memchr::memmem::find_iter(b, name.as_bytes()).any(|at| {
        let after = b[at + name.len()..]
            .iter()
            .position(|c| !c.is_ascii_whitespace())
            .map(|i| &b[at + name.len() + i..]);
        let before = b[..at]
            .iter()
            .rposition(|c| !c.is_ascii_whitespace())
            .map(|i| &b[..=i]);
        let assigns_after = after.is_some_and(|a| match a {
            [b'=', b'=', ..] => false,
            [b'=', ..] | [b'/' | b'\\' | b'#', ..] | [b'+', b'+', ..] | [b'-', b'-', ..] => true,
            [b'+' | b'-' | b'*' | b'%' | b'&' | b'|' | b'^', b'=', ..] => true,
            [b'<', b'<', b'=', ..] | [b'>', b'>', b'=', ..] => true,
            _ => false,
        });
        let updates_before = before.is_some_and(|p| {
            p.ends_with(b"++") || p.ends_with(b"--") || p.ends_with(b"/") || p.ends_with(b"\\")
        });
        assigns_after || updates_before
    })
}

fn loop_counter_def<'t>(
    model: &CudaModel<'t>,
    id: Node<'_>,
) -> Option<(Node<'t>, Option<Node<'t>>)> {
    if id.kind_name() != "identifier" {
        return None;
    }
    let source = model.source;
    let name = text(id, source);
    for cur in model.parents().ancestors(id).take(64) {
        if cur.kind_name() == "function_definition" {
            return None;
        }
        if cur.kind_name() != "for_statement" {
            continue;
        }
        let Some(init) = cur.field("initializer") else {
            continue;
        };
        let decl = named_children(init)
            .chain(std::iter::once(init))
            .filter(|d| d.kind_name() == "init_declarator")
            .find(|d| {
                d.field("declarator")
                    .is_some_and(|v| text(v, source) == name)
            });
        if let Some(value) = decl.and_then(|d| d.field("value")) {
            return Some((value, cur.field("update")));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::may_assign;

    fn assigns(text: &str, name: &str) -> bool {
        may_assign(text, 0, text.len(), name)
    }

    #[test]
    fn assignments_and_updates_of_the_name_are_found() {
        for text in [
            "i = 0;",
            "i += 2;",
            "i <<= 1;",
            "i ^= m;",
            "i++;",
            "--i;",
            "++ i;",
            "i\n  -= 1;",
        ] {
            assert!(assigns(text, "i"), "{text}");
        }
        // Next to a comment or a directive: cannot tell, so it may.
        assert!(assigns("i /* c */ = 0;", "i"));
        assert!(assigns("i\n#if X\n= 1;\n#endif", "i"));
        // Reads only.
        for text in [
            "x = i + 1;",
            "if (i == n) return;",
            "a[i] = 0;",
            "f(i);",
            "y = -i;",
            "i < n",
            "p->i",
        ] {
            assert!(!assigns(text, "i"), "{text}");
        }
        // Only the range is searched.
        let text = "i = 0; int x = i;";
        assert!(!may_assign(text, 6, text.len(), "i"));
        assert!(may_assign(text, 0, 6, "i"));
    }
}
