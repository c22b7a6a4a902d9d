//! The file's classes: their methods and bases, the framework a class derives from, method
//! and base look-ups.

use super::Interp;
use crate::value::{Fw, Val};
use gpulint_semantic::hash::HashMap;
use gpulint_syntax::named_children;
use gpulint_syntax::NodeExt;
use std::rc::Rc;
use tree_sitter::Node;

/// A class of the file.
#[derive(Debug, Clone)]
pub struct ClassDef<'t> {
    pub name: String,
    pub node: Node<'t>,
    pub bases: Vec<Val>,
    /// Method name → index into `PythonModel::functions`.
    pub methods: HashMap<String, usize>,
}

impl<'a, 't> Interp<'a, 't> {
    pub(super) fn collect_classes(&mut self) {
        let mut defs = Vec::new();
        for child in self.pm.roots.iter().flat_map(|r| named_children(*r)) {
            let node = if child.kind_name() == "decorated_definition" {
                child.field("definition").unwrap_or(child)
            } else {
                child
            };
            if node.kind_name() == "class_definition" {
                defs.push(node);
            }
        }
        for node in defs {
            let name = node
                .field("name")
                .map(|n| self.text(n).to_string())
                .unwrap_or_default();
            // The `def`s of the class's own body (directly, or under decorators), found from
            // the class's children: asking every function of the file about every class, each
            // with `Node::parent` (which descends from the root), grows with their product.
            let mut methods = HashMap::default();
            let mut cursor = node.walk();
            let blocks: Vec<Node<'t>> = node.children(&mut cursor).collect();
            for block in blocks {
                let mut cursor = block.walk();
                for stmt in block.children(&mut cursor) {
                    let defs: Vec<Node<'t>> = if stmt.kind_name() == "decorated_definition" {
                        let mut c = stmt.walk();
                        stmt.children(&mut c).collect()
                    } else {
                        vec![stmt]
                    };
                    for def in defs {
                        if def.kind_name() != "function_definition" {
                            continue;
                        }
                        let Some(i) = self.pm.function_of_node(def) else {
                            continue;
                        };
                        let f = &self.pm.functions[i];
                        if f.class.as_deref() == Some(name.as_str()) && f.parent.is_none() {
                            methods.insert(f.name.clone(), i);
                        }
                    }
                }
            }
            self.classes.push(ClassDef {
                name,
                node,
                bases: Vec::new(),
                methods,
            });
        }
        // Bases: framework names or earlier classes of the file.
        let mut first_of_name: HashMap<String, usize> = HashMap::default();
        for (j, c) in self.classes.iter().enumerate() {
            first_of_name.entry(c.name.clone()).or_insert(j);
        }
        for i in 0..self.classes.len() {
            let node = self.classes[i].node;
            let mut bases = Vec::new();
            if let Some(sup) = node.field("superclasses") {
                for b in named_children(sup) {
                    if b.kind_name() == "keyword_argument" {
                        continue;
                    }
                    let t = self.text(b);
                    if let Some(&j) = first_of_name.get(t) {
                        bases.push(Val::Class(j));
                    } else if let Some(q) = self.pm.qualified_name(b) {
                        bases.push(Val::Q(Rc::from(q.as_str())));
                    } else {
                        bases.push(Val::Unknown(0));
                    }
                }
            }
            self.classes[i].bases = bases;
        }
    }

    /// The framework a class of the file derives from.
    pub fn class_fw(&self, class: usize) -> Option<Fw> {
        let mut stack = vec![(class, 0)];
        while let Some((c, depth)) = stack.pop() {
            if depth > 8 {
                continue;
            }
            for b in &self.classes[c].bases {
                match b {
                    Val::Class(j) => stack.push((*j, depth + 1)),
                    Val::Q(q) => {
                        if is_torch_module(q) {
                            return Some(Fw::Torch);
                        }
                        if let Some(rest) = crate::keras::keras_path(q) {
                            if matches!(
                                rest,
                                "Model"
                                    | "models.Model"
                                    | "layers.Layer"
                                    | "Layer"
                                    | "engine.training.Model"
                            ) {
                                return Some(Fw::Keras);
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        None
    }

    /// A method of a class of the file, searching its local bases.
    pub fn find_method(&self, class: usize, name: &str) -> Option<usize> {
        let mut stack = vec![(class, 0)];
        while let Some((c, depth)) = stack.pop() {
            if let Some(f) = self.classes[c].methods.get(name) {
                return Some(*f);
            }
            if depth < 8 {
                for b in self.classes[c].bases.iter().rev() {
                    if let Val::Class(j) = b {
                        stack.push((*j, depth + 1));
                    }
                }
            }
        }
        None
    }
}

/// `torch.nn.Module` and the Lightning module classes.
pub fn is_torch_module(q: &str) -> bool {
    matches!(
        q,
        "torch.nn.Module"
            | "torch.nn.modules.module.Module"
            | "pytorch_lightning.LightningModule"
            | "lightning.LightningModule"
            | "lightning.pytorch.LightningModule"
    )
}
