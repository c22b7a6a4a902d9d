//! Code run under conditions whose value is unknown: undo journals of name writes, merging
//! the outcomes of `if` arms, and loops that cannot be unrolled.

use super::{Flow, Frame, Interp, Journal};
use crate::value::Val;
use gpulint_semantic::hash::HashMap;
use tree_sitter::Node;

/// Names written by a branch, (global, name), with their final values.
type Writes = HashMap<(bool, String), Val>;

impl<'a, 't> Interp<'a, 't> {
    pub(super) fn uncertain_arms(
        &mut self,
        bodies: &[Node<'_>],
        has_else: bool,
        frame: &mut Frame,
    ) -> Flow {
        self.uncertain += 1;
        let pending_before = frame.pending.clone();
        let mut may_return = false;
        // Per arm: the names it wrote with their final values, and its return value.
        let mut outcomes: Vec<(Writes, Option<Val>)> = Vec::new();
        for body in bodies {
            self.journals.push(Vec::new());
            let ret = match self.block(*body, frame) {
                Flow::Return(v) => Some(v),
                _ => None,
            };
            let journal = self.journals.pop().unwrap_or_default();
            let writes = self.undo(journal, frame);
            if !frame
                .pending
                .as_ref()
                .is_some_and(|p| pending_before.as_ref().is_some_and(|b| b.same(p)))
                && frame.pending.is_some()
            {
                may_return = true;
            }
            frame.pending = pending_before.clone();
            outcomes.push((writes, ret));
        }
        if !has_else {
            outcomes.push((HashMap::default(), None));
        }
        self.uncertain -= 1;
        let rets: Vec<&Val> = outcomes.iter().filter_map(|o| o.1.as_ref()).collect();
        let merged_ret = merge_all(&rets);
        let falls: Vec<&HashMap<(bool, String), Val>> = outcomes
            .iter()
            .filter(|o| o.1.is_none())
            .map(|o| &o.0)
            .collect();
        if falls.is_empty() {
            return Flow::Return(merged_ret.unwrap_or(Val::Unknown(0)));
        }
        // Names whose values differ between the arms that fall through become unknown.
        let mut keys: Vec<&(bool, String)> = falls.iter().flat_map(|w| w.keys()).collect();
        keys.sort();
        keys.dedup();
        let mut merged = Vec::new();
        for key in keys {
            let current = self.current(key.0, &key.1, frame);
            let mut vals = falls.iter().map(|w| {
                w.get(key)
                    .cloned()
                    .or_else(|| current.clone())
                    .unwrap_or(Val::Unknown(0))
            });
            let first = vals.next().unwrap_or(Val::Unknown(0));
            let same = vals.all(|v| v.same(&first));
            merged.push((key.clone(), if same { first } else { Val::Unknown(0) }));
        }
        for ((global, name), v) in merged {
            self.set_name(frame, global, &name, v);
        }
        if may_return || merged_ret.is_some() {
            let r = merged_ret.unwrap_or(Val::Unknown(0));
            frame.pending = Some(match frame.pending.take() {
                Some(p) if p.same(&r) && !may_return => p,
                Some(_) => Val::Unknown(0),
                None if may_return => Val::Unknown(0),
                None => r,
            });
        }
        Flow::Normal
    }

    fn current(&self, global: bool, name: &str, frame: &Frame) -> Option<Val> {
        if global {
            self.globals.get(name).cloned()
        } else {
            frame.locals.get(name).cloned()
        }
    }

    /// Undoes the writes of a journal to `frame` and the globals; returns the names written
    /// with the values they had before the undo.
    fn undo(&mut self, journal: Journal, frame: &mut Frame) -> HashMap<(bool, String), Val> {
        let mut writes = HashMap::default();
        for (global, fid, name, _) in &journal {
            if *global || *fid == frame.id {
                let v = self
                    .current(*global, name, frame)
                    .unwrap_or(Val::Unknown(0));
                writes.insert((*global, name.clone()), v);
            }
        }
        for (global, fid, name, prev) in journal.into_iter().rev() {
            if !global && fid != frame.id {
                continue;
            }
            let map = if global {
                &mut self.globals
            } else {
                &mut frame.locals
            };
            match prev {
                Some(p) => {
                    map.insert(name, p);
                }
                None => {
                    map.remove(&name);
                }
            }
        }
        writes
    }

    /// Sets a name, recording the write in the innermost journal.
    pub(super) fn set_name(&mut self, frame: &mut Frame, global: bool, name: &str, v: Val) {
        let prev = if global {
            self.globals.insert(name.to_string(), v)
        } else {
            frame.locals.insert(name.to_string(), v)
        };
        if let Some(j) = self.journals.last_mut() {
            j.push((global, frame.id, name.to_string(), prev));
        }
    }

    /// A loop that cannot be unrolled: run its body once to see what it calls, then forget
    /// what it assigned.
    pub(super) fn opaque_loop(
        &mut self,
        body: Node<'_>,
        frame: &mut Frame,
        target: Option<Node<'_>>,
    ) {
        if let Some(t) = target {
            let v = self.unknown(t, "loop variable");
            self.assign(frame, t, v);
        }
        self.journals.push(Vec::new());
        self.uncertain += 1;
        let flow = self.block(body, frame);
        self.uncertain -= 1;
        let journal = self.journals.pop().unwrap_or_default();
        if let Flow::Return(v) = flow {
            frame.pending = Some(v.unknown_or(0));
        }
        // What the body changed is only known for one iteration: forget it.
        let mut first: HashMap<(bool, String), Option<Val>> = HashMap::default();
        for (global, fid, name, prev) in journal {
            if global || fid == frame.id {
                first.entry((global, name)).or_insert(prev);
            }
        }
        for ((global, name), prev) in first {
            let now = self.current(global, &name, frame);
            let unchanged = matches!((&prev, &now), (Some(a), Some(b)) if a.same(b));
            if !unchanged {
                self.set_name(frame, global, &name, Val::Unknown(0));
            }
        }
    }
}

fn merge_all(vals: &[&Val]) -> Option<Val> {
    let first = (*vals.first()?).clone();
    if vals.iter().all(|v| v.same(&first)) {
        Some(first)
    } else {
        Some(Val::Unknown(0))
    }
}
