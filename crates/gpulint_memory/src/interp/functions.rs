//! Calls of the file's own functions: a fresh frame, parameters bound from the arguments and
//! defaults, the body run with the caller's branch state set aside.

use super::{Flow, Frame, Interp, MAX_DEPTH};
use crate::value::{Args, Val};
use gpulint_syntax::named_children;
use gpulint_syntax::NodeExt;
use std::rc::Rc;
use tree_sitter::Node;

impl<'a, 't> Interp<'a, 't> {
    /// Calls a function of the file.
    pub fn call_function(&mut self, f: usize, self_val: Option<Val>, args: Args) -> Val {
        let Some(func) = self.pm.functions.get(f) else {
            return Val::Unknown(0);
        };
        let node = func.node;
        if self.depth >= MAX_DEPTH {
            return self.unknown(node, "calls nest too deeply to follow");
        }
        self.entered[f] = true;
        let id = self.fresh_frame_id();
        let mut frame = Frame {
            func: Some(f),
            id,
            ..Frame::default()
        };
        if let Some(Val::Obj(o)) = &self_val {
            frame.self_obj = Some(*o);
        }
        self.bind_params(node, &mut frame, self_val, args);
        let Some(body) = node.field("body") else {
            return Val::None;
        };
        // What a call builds is certain relative to the call, even under an unknown branch.
        let uncertain = std::mem::take(&mut self.uncertain);
        let journals = std::mem::take(&mut self.journals);
        self.depth += 1;
        let flow = self.block(body, &mut frame);
        self.depth -= 1;
        self.uncertain = uncertain;
        self.journals = journals;
        let ret = match flow {
            Flow::Return(v) => v,
            _ => Val::None,
        };
        match frame.pending {
            Some(p) if !p.same(&ret) => Val::Unknown(0),
            _ => ret,
        }
    }

    fn bind_params(&mut self, def: Node<'_>, frame: &mut Frame, self_val: Option<Val>, args: Args) {
        let Some(params) = def.field("parameters") else {
            return;
        };
        let mut pos = args.pos.into_iter();
        let kw = args.kw;
        let mut first = true;
        for p in named_children(params) {
            let (name_node, default) = match p.kind_name() {
                "identifier" => (Some(p), None),
                "typed_parameter" => (
                    p.named_child(0).filter(|n| n.kind_name() == "identifier"),
                    None,
                ),
                "default_parameter" | "typed_default_parameter" => {
                    (p.field("name"), p.field("value"))
                }
                "list_splat_pattern" => {
                    let rest: Vec<Val> = pos.by_ref().collect();
                    if let Some(n) = p.named_child(0) {
                        let name = self.text(n).to_string();
                        frame.locals.insert(name, Val::Tuple(Rc::new(rest)));
                    }
                    continue;
                }
                "dictionary_splat_pattern" => {
                    if let Some(n) = p.named_child(0) {
                        let v = self.unknown(n, "`**kwargs`");
                        frame.locals.insert(self.text(n).to_string(), v);
                    }
                    continue;
                }
                _ => continue,
            };
            let Some(name_node) = name_node else {
                continue;
            };
            let name = self.text(name_node).to_string();
            if first {
                first = false;
                if let Some(s) = self_val.clone() {
                    frame.locals.insert(name, s);
                    continue;
                }
            }
            let v = if let Some((_, v)) = kw.iter().find(|(k, _)| *k == name) {
                v.clone()
            } else if let Some(v) = pos.next() {
                v
            } else if let Some(d) = default {
                let mut module = Frame::default();
                self.eval(&mut module, d)
            } else {
                self.unknown(name_node, format!("argument `{name}` is not known"))
            };
            frame.locals.insert(name, v);
        }
    }
}
