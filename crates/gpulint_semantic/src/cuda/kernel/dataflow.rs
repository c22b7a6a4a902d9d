//! How a kernel's locals derive from each other: the locals each is computed from
//! (transitively, control dependence included), which depend on `blockIdx`, and which point
//! into global memory with the offsets they were built with.

use super::syntax::{peel, peel_pointer};
use super::{identifiers, intersects, Kernel, LocalSet};
use crate::cuda::{CudaModel, GuardKind};
use gpulint_syntax::text;
use gpulint_syntax::NodeExt;
use tree_sitter::Node;

impl<'t> Kernel<'t> {
    pub(super) fn compute_closures(
        &mut self,
        model: &CudaModel<'t>,
        def_guards: &[Vec<Option<u32>>],
    ) {
        let source = model.source;
        let n = self.locals.len();
        let mut direct: Vec<Vec<usize>> = vec![Vec::new(); n];
        let mut add = |i: usize, names: &[&str], this: &Self| {
            for name in names {
                if let Some(j) = this.local(name) {
                    if !direct[i].contains(&j) {
                        direct[i].push(j);
                    }
                }
            }
        };
        // A guard's condition is shared by every definition under it: its names are read once.
        let mut cond_names: crate::hash::HashMap<usize, Vec<&'t str>> = Default::default();
        let mut reads_block = vec![false; n];
        for (i, defs) in self.defs.iter().enumerate() {
            for (d, guard) in defs.iter().zip(&def_guards[i]) {
                let names = identifiers(*d, source);
                reads_block[i] |= names.contains(&"blockIdx");
                add(i, &names, self);
                // Control dependence: `if (x >= n) valid = false;` makes `valid` depend on `x`.
                for g in model.guard_chain(*guard).take(4) {
                    if !matches!(
                        g.kind,
                        GuardKind::RangeLoop | GuardKind::LoopMacro | GuardKind::Macro
                    ) {
                        let names = cond_names
                            .entry(g.cond.id())
                            .or_insert_with(|| identifiers(g.cond, source));
                        add(i, names, self);
                    }
                }
            }
        }
        for (i, set) in self.closure.iter_mut().enumerate() {
            let mut stack = vec![i];
            while let Some(v) = stack.pop() {
                if set[v / 64] & (1 << (v % 64)) != 0 {
                    continue;
                }
                set[v / 64] |= 1 << (v % 64);
                stack.extend(direct[v].iter().copied());
            }
        }
        let mut reads: LocalSet = vec![0; n.div_ceil(64)];
        for (j, r) in reads_block.iter().enumerate() {
            if *r {
                reads[j / 64] |= 1 << (j % 64);
            }
        }
        for i in 0..n {
            self.block_dependent[i] = intersects(&self.closure[i], &reads);
        }
    }

    pub(super) fn compute_pointers(&mut self, source: &str) {
        // A local points into global memory if it is built from a pointer parameter or from
        // another such local; iterate to a fixpoint over definition order.
        for _ in 0..8 {
            let mut changed = false;
            for i in 0..self.locals.len() {
                if self.pointer_offsets[i].is_some() {
                    continue;
                }
                for d in self.defs[i].clone() {
                    if let Some(offsets) = self.global_pointer_expr(d, source, 0) {
                        self.pointer_offsets[i] = Some(offsets);
                        changed = true;
                        break;
                    }
                }
            }
            if !changed {
                break;
            }
        }
    }

    /// If `expr` is a pointer into global memory, the offsets added to its base.
    fn global_pointer_expr(
        &self,
        expr: Node<'t>,
        source: &str,
        depth: usize,
    ) -> Option<Vec<Node<'t>>> {
        if depth > 16 {
            return None;
        }
        let e = peel_pointer(expr, source);
        match e.kind_name() {
            "identifier" => {
                let name = text(e, source);
                match self.local(name) {
                    Some(i) => self.pointer_offsets[i].clone(),
                    None => self
                        .params
                        .iter()
                        .any(|p| p.pointer && p.name == name)
                        .then(Vec::new),
                }
            }
            "binary_expression" if e.field("operator").is_some_and(|o| o.kind_name() == "+") => {
                let (l, r) = (e.field("left")?, e.field("right")?);
                if let Some(mut offs) = self.global_pointer_expr(l, source, depth + 1) {
                    offs.push(r);
                    Some(offs)
                } else {
                    let mut offs = self.global_pointer_expr(r, source, depth + 1)?;
                    offs.push(l);
                    Some(offs)
                }
            }
            "pointer_expression" if e.field("operator").is_some_and(|o| o.kind_name() == "&") => {
                let sub = peel(e.field("argument")?);
                if sub.kind_name() != "subscript_expression" {
                    return None;
                }
                let mut offs =
                    self.global_pointer_expr(sub.field("argument")?, source, depth + 1)?;
                offs.extend(sub.field("indices").and_then(|i| i.named_child(0)));
                Some(offs)
            }
            "conditional_expression" => self
                .global_pointer_expr(e.field("consequence")?, source, depth + 1)
                .or_else(|| self.global_pointer_expr(e.field("alternative")?, source, depth + 1)),
            _ => None,
        }
    }
}
