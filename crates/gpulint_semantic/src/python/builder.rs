//! Collecting the model during the checker's enter/leave walk: imports, definitions, calls,
//! assignments, loops and the bindings that folding and name resolution read later.

use super::string_literal;
use super::{Binding, Class, Function, Import, PythonModel};
use crate::hash::HashMap;
use gpulint_syntax::NodeExt;
use gpulint_syntax::{is_plain_token, named_children, text};
use std::cell::OnceCell;
use std::sync::LazyLock;
use tree_sitter::{Node, Tree};

/// The kinds of node the builder tells apart (every other kind is [`K::Other`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum K {
    Other,
    Assignment,
    AugmentedAssignment,
    For,
    While,
    Identifier,
    Attribute,
    Call,
    FunctionDefinition,
    ClassDefinition,
    DecoratedDefinition,
    Lambda,
    NamedExpression,
    AsPatternTarget,
    WithItem,
    Import,
    ImportFrom,
}

/// [`K`] of each kind id of the Python grammar, from the kind's name: every node the walk
/// enters is told apart by one table read (comparing its kind's name with each name of
/// several `match`es cost more than the rest of the builder's work on most nodes). Kinds are
/// matched by name, named or not, as [`NodeExt::kind_name`] compares.
static KINDS: LazyLock<Vec<K>> = LazyLock::new(|| {
    let Some(grammar) = gpulint_syntax::Lang::Python.grammar() else {
        return Vec::new();
    };
    (0..grammar.node_kind_count() as u16)
        .map(|id| match grammar.node_kind_for_id(id).unwrap_or("") {
            "assignment" => K::Assignment,
            "augmented_assignment" => K::AugmentedAssignment,
            "for_statement" => K::For,
            "while_statement" => K::While,
            "identifier" => K::Identifier,
            "attribute" => K::Attribute,
            "call" => K::Call,
            "function_definition" => K::FunctionDefinition,
            "class_definition" => K::ClassDefinition,
            "decorated_definition" => K::DecoratedDefinition,
            "lambda" => K::Lambda,
            "named_expression" => K::NamedExpression,
            "as_pattern_target" => K::AsPatternTarget,
            "with_item" => K::WithItem,
            "import_statement" => K::Import,
            "import_from_statement" => K::ImportFrom,
            _ => K::Other,
        })
        .collect()
});

/// The [`K`] of a node of a Python tree.
#[inline]
fn kind_of(node: Node<'_>) -> K {
    KINDS
        .get(node.kind_id() as usize)
        .copied()
        .unwrap_or(K::Other)
}

/// Collects the model during the checker's walk.
pub struct PythonBuilder<'t> {
    source: &'t str,
    model_imports: Vec<Import>,
    functions: Vec<Function<'t>>,
    classes: Vec<Class<'t>>,
    calls: Vec<(Node<'t>, Option<usize>)>,
    subscript_assignments: Vec<Node<'t>>,
    attribute_assignments: Vec<Node<'t>>,
    assignments: Vec<Node<'t>>,
    loops: Vec<Node<'t>>,
    identifiers: Vec<Node<'t>>,
    attributes: Vec<Node<'t>>,
    exec_events: Vec<(Node<'t>, Option<Node<'t>>)>,
    binding_sites: Vec<(usize, Node<'t>)>,
    /// One entry per node the walk is inside of, innermost last.
    open: Vec<Open<'t>>,
    scope_stack: Vec<usize>,
    class_stack: Vec<(usize, String)>,
    module_bindings: HashMap<&'t str, Binding<'t>>,
    local_aliases: HashMap<(usize, &'t str), Node<'t>>,
    argparse_defaults: HashMap<String, Node<'t>>,
    /// Does the text mention `add_argument` at all? When it does not, no call is an argparse
    /// option, and calls are not looked into for one.
    mentions_add_argument: bool,
    /// The parent of every node walked, recorded as the walk enters it: the model's parent
    /// table comes with the walk instead of a walk of its own.
    parents: gpulint_syntax::Parents<'t>,
}

impl<'t> PythonBuilder<'t> {
    pub fn new(source: &'t str) -> Self {
        PythonBuilder {
            source,
            model_imports: Vec::new(),
            functions: Vec::new(),
            classes: Vec::new(),
            calls: Vec::new(),
            subscript_assignments: Vec::new(),
            attribute_assignments: Vec::new(),
            assignments: Vec::new(),
            loops: Vec::new(),
            identifiers: Vec::new(),
            attributes: Vec::new(),
            exec_events: Vec::new(),
            binding_sites: Vec::new(),
            open: Vec::new(),
            scope_stack: Vec::new(),
            class_stack: Vec::new(),
            module_bindings: HashMap::default(),
            local_aliases: HashMap::default(),
            argparse_defaults: HashMap::default(),
            mentions_add_argument: memchr::memmem::find(source.as_bytes(), b"add_argument")
                .is_some(),
            parents: gpulint_syntax::Parents::default(),
        }
    }

    fn scope(&self) -> Option<usize> {
        self.scope_stack.last().copied()
    }

    pub fn enter(&mut self, node: Node<'t>) {
        let parent = self.open.last();
        // Punctuation and keywords (about half the nodes of a file) bind nothing, call nothing
        // and hold nothing: they are not recorded (their parent is found on demand, see
        // `PythonModel::parent`).
        if parent.is_some() && is_plain_token(node) {
            return;
        }
        let kind = kind_of(node);
        match parent {
            Some(p) => self.parents.record(node, p.node),
            None => self.parents.reserve(node.descendant_count()),
        }
        // The function whose own body holds this node (the body itself included).
        let local_to = parent.and_then(|p| match p.body {
            Some((body, f)) if body == node.id() => Some(f),
            _ => p.local_to_children,
        });
        let barrier = parent.and_then(|p| p.barrier);
        match kind {
            K::Assignment | K::AugmentedAssignment => self.assignments.push(node),
            K::For | K::While => self.loops.push(node),
            K::Identifier => self.identifiers.push(node),
            K::Attribute => self.attributes.push(node),
            _ => {}
        }
        if matches!(kind, K::Call | K::Assignment | K::AugmentedAssignment) {
            self.exec_events.push((node, barrier));
        }
        if let Some(f) = local_to {
            if matches!(
                kind,
                K::FunctionDefinition
                    | K::ClassDefinition
                    | K::Assignment
                    | K::AugmentedAssignment
                    | K::For
                    | K::NamedExpression
                    | K::AsPatternTarget
            ) {
                self.binding_sites.push((f, node));
            }
        }
        if kind != K::Other {
            self.enter_kind(node, kind);
        }
        let definition = matches!(kind, K::FunctionDefinition | K::ClassDefinition | K::Lambda);
        self.open.push(Open {
            node,
            local_to_children: if definition { None } else { local_to },
            body: (kind == K::FunctionDefinition)
                .then(|| {
                    node.field("body")
                        .map(|b| (b.id(), self.functions.len() - 1))
                })
                .flatten(),
            barrier: if definition || kind == K::DecoratedDefinition {
                Some(node)
            } else {
                barrier
            },
        });
    }

    fn enter_kind(&mut self, node: Node<'t>, kind: K) {
        match kind {
            K::Import => self.import(node, None),
            K::ImportFrom => {
                let module = node
                    .field("module_name")
                    .map(|m| text(m, self.source).to_string());
                if let Some(module) = module {
                    self.import(node, Some(module));
                }
            }
            K::FunctionDefinition => {
                let name = node
                    .field("name")
                    .map(|n| text(n, self.source).to_string())
                    .unwrap_or_default();
                let class = self
                    .class_stack
                    .last()
                    .filter(|(depth, _)| *depth == self.scope_stack.len())
                    .map(|(_, c)| c.clone());
                // The parent, from the walk's path (`enter_kind` runs before the node is
                // pushed).
                let decorators = self
                    .open
                    .last()
                    .map(|o| o.node)
                    .filter(|p| kind_of(*p) == K::DecoratedDefinition)
                    .map(|p| {
                        named_children(p)
                            .filter(|c| c.kind_name() == "decorator")
                            .collect()
                    })
                    .unwrap_or_default();
                if self.scope_stack.is_empty() && class.is_none() {
                    self.bind_module_name(node, name.clone(), None);
                }
                self.functions.push(Function {
                    node,
                    name,
                    class,
                    parent: self.scope(),
                    decorators,
                });
                self.scope_stack.push(self.functions.len() - 1);
            }
            K::ClassDefinition => {
                let name = node
                    .field("name")
                    .map(|n| text(n, self.source).to_string())
                    .unwrap_or_default();
                self.classes.push(Class {
                    node,
                    name: name.clone(),
                    parent: self.scope(),
                });
                self.class_stack.push((self.scope_stack.len(), name));
            }
            K::Call => {
                self.calls.push((node, self.scope()));
                if self.mentions_add_argument {
                    self.argparse(node);
                }
            }
            K::Assignment => self.assignment(node),
            K::AugmentedAssignment | K::For | K::WithItem | K::NamedExpression
                if self.scope_stack.is_empty() && self.class_stack.is_empty() =>
            {
                let target = node
                    .field("left")
                    .or_else(|| node.field("name"))
                    .or_else(|| node.field("value"));
                if let Some(target) = target {
                    for id in identifiers_in_target(target) {
                        let name = text(id, self.source);
                        self.module_bindings
                            .entry(name)
                            .and_modify(|b| b.count += 2)
                            .or_insert(Binding {
                                value: node,
                                count: 2,
                            });
                    }
                }
            }
            _ => {}
        }
    }

    pub fn leave(&mut self, node: Node<'t>) {
        // A token not recorded on the way in (it is not the innermost open node).
        if self.open.last().is_none_or(|o| o.node.id() != node.id()) && is_plain_token(node) {
            return;
        }
        self.open.pop();
        match kind_of(node) {
            K::FunctionDefinition => {
                self.scope_stack.pop();
            }
            K::ClassDefinition => {
                self.class_stack.pop();
            }
            _ => {}
        }
    }

    fn bind_module_name(&mut self, value: Node<'t>, name: String, _q: Option<()>) {
        let Some(name) = self
            .source
            .get(value.start_byte()..value.end_byte())
            .and_then(|_| {
                // Keep a borrowed &'t str for the name: find it in the source.
                find_name(self.source, value, &name)
            })
        else {
            return;
        };
        self.module_bindings
            .entry(name)
            .and_modify(|b| b.count += 1)
            .or_insert(Binding { value, count: 1 });
    }

    fn import(&mut self, node: Node<'t>, from_module: Option<String>) {
        let module_node = node.field("module_name");
        for child in named_children(node) {
            if Some(child) == module_node {
                continue;
            }
            let (path, alias) = match child.kind_name() {
                "dotted_name" => (text(child, self.source).to_string(), None),
                "aliased_import" => {
                    let path = child
                        .field("name")
                        .map(|n| text(n, self.source).to_string())
                        .unwrap_or_default();
                    let alias = child
                        .field("alias")
                        .map(|n| text(n, self.source).to_string());
                    (path, alias)
                }
                _ => continue,
            };
            let path = compact_dotted(&path);
            let (name, qualified) = match (&from_module, alias) {
                (None, Some(alias)) => (alias, path),
                // `import a.b.c` binds `a`.
                (None, None) => {
                    let head = path.split('.').next().unwrap_or("").to_string();
                    (head.clone(), head)
                }
                (Some(module), alias) => {
                    let module = compact_dotted(module);
                    let qualified = if module.ends_with('.') {
                        format!("{module}{path}")
                    } else {
                        format!("{module}.{path}")
                    };
                    (alias.unwrap_or(path), qualified)
                }
            };
            if self.scope_stack.is_empty() {
                if let Some(n) = find_name(self.source, child, &name) {
                    self.module_bindings
                        .entry(n)
                        .and_modify(|b| b.count += 1)
                        .or_insert(Binding {
                            value: child,
                            count: 1,
                        });
                }
            }
            self.model_imports.push(Import {
                name,
                qualified,
                scope: self.scope(),
                start_byte: node.start_byte(),
                end_byte: node.end_byte(),
            });
        }
    }

    fn assignment(&mut self, node: Node<'t>) {
        let (Some(left), right) = (node.field("left"), node.field("right")) else {
            return;
        };
        match left.kind_name() {
            "subscript" => self.subscript_assignments.push(node),
            "attribute" => self.attribute_assignments.push(node),
            _ => {}
        }
        let in_class_body = self
            .class_stack
            .last()
            .is_some_and(|(depth, _)| *depth == self.scope_stack.len());
        if in_class_body {
            return;
        }
        match self.scope() {
            None => {
                let ids = identifiers_in_target(left);
                let simple = left.kind_name() == "identifier";
                for id in ids {
                    let name = text(id, self.source);
                    let value = match (simple, right) {
                        (true, Some(r)) => r,
                        _ => node,
                    };
                    let extra = if simple && right.is_some() { 1 } else { 2 };
                    self.module_bindings
                        .entry(name)
                        .and_modify(|b| b.count += extra)
                        .or_insert(Binding {
                            value,
                            count: extra,
                        });
                }
            }
            Some(f) => {
                if left.kind_name() == "identifier" {
                    if let Some(r) =
                        right.filter(|r| matches!(r.kind_name(), "attribute" | "identifier"))
                    {
                        self.local_aliases.insert((f, text(left, self.source)), r);
                    }
                }
            }
        }
    }

    /// `parser.add_argument("--batch-size", type=int, default=64)` → `batch_size` ↦ `64`.
    fn argparse(&mut self, call: Node<'t>) {
        let Some(func) = call.field("function") else {
            return;
        };
        if func.kind_name() != "attribute"
            || func.field("attribute").map(|a| text(a, self.source)) != Some("add_argument")
        {
            return;
        }
        let Some(args) = call.field("arguments") else {
            return;
        };
        let mut dest: Option<String> = None;
        let mut long: Option<String> = None;
        let mut default = None;
        for arg in named_children(args) {
            match arg.kind_name() {
                "string" => {
                    let s = string_literal(arg, self.source).unwrap_or_default();
                    if let Some(flag) = s.strip_prefix("--") {
                        long.get_or_insert_with(|| flag.replace('-', "_"));
                    } else if !s.starts_with('-') && dest.is_none() {
                        dest = Some(s);
                    }
                }
                "keyword_argument" => {
                    let key = arg.field("name").map(|n| text(n, self.source));
                    let value = arg.field("value");
                    match key {
                        Some("default") => default = value,
                        Some("dest") => {
                            dest = value.and_then(|v| string_literal(v, self.source));
                        }
                        _ => {}
                    }
                }
                _ => {}
            }
        }
        if let (Some(name), Some(value)) = (dest.or(long), default) {
            self.argparse_defaults.insert(name, value);
        }
    }

    pub fn finish(self, tree: &'t Tree) -> PythonModel<'t> {
        let mut functions_by_name: HashMap<&'t str, Vec<usize>> = HashMap::default();
        let mut function_index =
            HashMap::with_capacity_and_hasher(self.functions.len(), Default::default());
        for (i, f) in self.functions.iter().enumerate() {
            if let Some(n) = f.node.field("name") {
                functions_by_name
                    .entry(text(n, self.source))
                    .or_default()
                    .push(i);
            }
            function_index.insert(f.node.id(), i);
        }
        let class_names = self.classes.iter().map(|c| c.name.clone()).collect();
        PythonModel {
            source: self.source,
            root: tree.root_node(),
            roots: vec![tree.root_node()],
            imports: self.model_imports,
            functions: self.functions,
            classes: self.classes,
            calls: self.calls,
            subscript_assignments: self.subscript_assignments,
            attribute_assignments: self.attribute_assignments,
            assignments: self.assignments,
            loops: self.loops,
            identifiers: self.identifiers,
            attributes: self.attributes,
            exec_events: self.exec_events,
            binding_sites: self.binding_sites,
            module_bindings: self.module_bindings,
            local_aliases: self.local_aliases,
            argparse_defaults: self.argparse_defaults,
            functions_by_name,
            function_index,
            class_names,
            call_graph: OnceCell::new(),
            loop_parents: OnceCell::new(),
            name_index: OnceCell::new(),
            locals: OnceCell::new(),
            order: OnceCell::new(),
            tf: OnceCell::new(),
            env_writes: OnceCell::new(),
            recursion: OnceCell::new(),
            training: OnceCell::new(),
            torch: OnceCell::new(),
            tf_functions: OnceCell::new(),
            calls_to: OnceCell::new(),
            jax_on_cpu: OnceCell::new(),
            parents: OnceCell::from(self.parents),
            statements: Default::default(),
            imported_modules: OnceCell::new(),
            block_statements: Default::default(),
            qualified_names: Default::default(),
            local_callees: Default::default(),
        }
    }
}

/// What the builder keeps about a node the walk is inside of.
struct Open<'t> {
    /// The node itself (the parent of the node entered next, if it is a child).
    node: Node<'t>,
    /// The function whose own body holds this node's children: not the children of a nested
    /// `def`, class or lambda (except a `def`'s body, which is its own function's).
    local_to_children: Option<usize>,
    /// For a `def`: its body's node id and the function's index.
    body: Option<(usize, usize)>,
    /// The innermost lambda, `def`, class or decorated definition around this node's children
    /// (this node included).
    barrier: Option<Node<'t>>,
}

/// Builds the model of a parsed file with the same enter/leave walk the checker does (for
/// files read on the side, such as a sibling setup module, and for tests).
pub fn build<'t>(tree: &'t Tree, source: &'t str) -> PythonModel<'t> {
    let mut b = PythonBuilder::new(source);
    gpulint_syntax::walk(tree, |node, entering| {
        if entering {
            b.enter(node)
        } else {
            b.leave(node)
        }
    });
    b.finish(tree)
}

/// `a . b` (with spaces or line continuations) → `a.b`.
fn compact_dotted(s: &str) -> String {
    s.chars()
        .filter(|c| !c.is_whitespace() && *c != '\\')
        .collect()
}

fn find_name<'t>(source: &'t str, node: Node<'_>, name: &str) -> Option<&'t str> {
    let region = source.get(node.start_byte()..node.end_byte())?;
    let at = region.rfind(name)?;
    source.get(node.start_byte() + at..node.start_byte() + at + name.len())
}

/// The identifiers a target binds (`a`, `a, b`, `(a, [b, c])`); attribute and subscript
/// targets bind nothing.
pub(super) fn identifiers_in_target(target: Node<'_>) -> Vec<Node<'_>> {
    let mut out = Vec::new();
    let mut stack = vec![target];
    while let Some(n) = stack.pop() {
        match n.kind_name() {
            "identifier" => out.push(n),
            "pattern_list"
            | "tuple_pattern"
            | "list_pattern"
            | "tuple"
            | "list"
            | "expression_list"
            | "parenthesized_expression"
            | "list_splat_pattern"
            | "as_pattern_target" => stack.extend(named_children(n)),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use gpulint_syntax::{descendants, parse_range, Lang, NodeExt, Parents};

    /// Every kind the builder tells apart names a kind of the Python grammar: a misspelt name
    /// would leave its nodes silently unrecorded.
    #[test]
    fn builder_kinds_are_grammar_kinds() {
        use super::{K, KINDS};
        for k in [
            K::Assignment,
            K::AugmentedAssignment,
            K::For,
            K::While,
            K::Identifier,
            K::Attribute,
            K::Call,
            K::FunctionDefinition,
            K::ClassDefinition,
            K::DecoratedDefinition,
            K::Lambda,
            K::NamedExpression,
            K::AsPatternTarget,
            K::WithItem,
            K::Import,
            K::ImportFrom,
        ] {
            assert!(KINDS.contains(&k), "{k:?}");
        }
    }

    /// The parent table the builder records during its walk is the one a walk of its own
    /// builds, on every fixture (broken ones included) and on a file parsed as several trees
    /// (notebook cells): every node of every tree has the same parent, a root none.
    #[test]
    fn recorded_parents_are_the_walked_ones() {
        let dir = format!("{}/../../fixtures/python", env!("CARGO_MANIFEST_DIR"));
        let mut texts: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap_or_default())
            .collect();
        texts.push("def f(:\n    return g(1,\nx = [\n".into());
        let mut checked = 0;
        for text in texts {
            // The whole text as one tree, and its two halves (at a line break) as two.
            let half = text.as_bytes()[..text.len() / 2]
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |i| i + 1);
            for ranges in [vec![(0, text.len())], vec![(0, half), (half, text.len())]] {
                let trees: Vec<_> = ranges
                    .iter()
                    .filter_map(|&(a, b)| parse_range(Lang::Python, &text, a, b))
                    .collect();
                if trees.len() != ranges.len() {
                    continue;
                }
                let roots: Vec<_> = trees.iter().map(|t| t.root_node()).collect();
                let walked = Parents::of(roots.iter().copied());
                crate::with_trees(&text, &trees, |m| {
                    for root in &roots {
                        for n in descendants(*root) {
                            assert_eq!(
                                m.parent(n).map(|p| p.id()),
                                walked.parent(n).map(|p| p.id()),
                                "{} at {}",
                                n.kind_name(),
                                n.start_byte()
                            );
                            checked += 1;
                        }
                    }
                });
            }
        }
        assert!(checked > 10_000);
    }
}
