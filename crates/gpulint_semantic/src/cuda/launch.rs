//! Launch configurations: is a launch's grid rounded up to cover a size (`(n + 255) / 256`,
//! `DIVUP(n, 256)`), plain (`n / 256`, `batch`, `dim3(h, w)`), or unknown?

use super::{CudaModel, Launch};
use gpulint_syntax::NodeExt;
use gpulint_syntax::{named_children, text};
use tree_sitter::Node;

/// How a grid is computed, from the most to the least reassuring. Combining two takes the
/// worse one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum GridKind {
    /// Literals, sizes, products and floor divisions: every thread maps to data the launching
    /// code knows about (`<<<batch * heads, dim>>>`, `<<<n / 256, 256>>>`).
    Plain,
    /// Computed in a way not understood (a helper function, a configuration filled in by a call).
    Unknown,
    /// Rounded up to whole blocks: the last block has threads past the data.
    CeilDiv,
}

/// Names of helpers that round a division up.
pub(super) fn is_ceil_helper(name: &str) -> bool {
    let n = name.to_ascii_lowercase().replace('_', "");
    [
        "ceil",
        "divup",
        "cdiv",
        "roundup",
        "getblocks",
        "divru",
        "blocks",
        "gridsize",
        "numblock",
        "divideup",
    ]
    .iter()
    .any(|m| n.contains(m))
}

impl<'t> CudaModel<'t> {
    /// The worst grid over the launches of the kernel `name` in this file; `None` when it is not
    /// launched here.
    pub fn kernel_grid<'a>(&'a self, name: &'a str) -> Option<(GridKind, &'a Launch<'t>)> {
        self.launches_of(name)
            .filter_map(|l| Some((self.grid_kind(l)?, l)))
            .max_by_key(|(k, _)| *k)
    }

    /// How each axis (x, y, z) of the grid of `launch` is computed: `dim3((w + 15) / 16, h)`
    /// is rounded up on x and plain on y; a scalar grid is plain on y and z. When the axes
    /// cannot be told apart (a helper returning a `dim3`, fields assigned one by one), every
    /// axis gets the kind of the whole grid.
    pub fn grid_axis_kinds(&self, launch: &Launch<'t>) -> Option<[GridKind; 3]> {
        let grid = super::kernel::peel(*launch.config.first()?);
        let whole = self.grid_kind(launch)?;
        // The first function of the file that holds the launch.
        let func = self.functions_around(launch.node).min();
        let at = launch.node.start_byte();
        let dim3_args = |e: Node<'t>| -> Option<Vec<Node<'t>>> {
            match e.kind_name() {
                "argument_list" | "initializer_list" => Some(named_children(e).collect()),
                "call_expression"
                    if e.field("function")
                        .is_some_and(|f| text(f, self.source) == "dim3") =>
                {
                    Some(named_children(e.field("arguments")?).collect())
                }
                _ => None,
            }
        };
        let args = match grid.kind_name() {
            "identifier" => {
                let defs = func.and_then(|f| self.host_defs.get(&(f, text(grid, self.source))));
                let visible: Vec<_> = defs
                    .into_iter()
                    .flatten()
                    .filter(|d| d.scope.start <= at && at < d.scope.end)
                    .collect();
                match visible.as_slice() {
                    // Not defined here: a parameter or a global, one value.
                    [] => None,
                    [d] => match d.value {
                        Some(v) => match dim3_args(super::kernel::peel(v)) {
                            Some(a) => Some(a),
                            // A scalar value, or a call that may return a `dim3`.
                            None if super::kernel::peel(v).kind_name() == "call_expression" => {
                                return Some([whole; 3])
                            }
                            None => None,
                        },
                        None => return Some([whole; 3]),
                    },
                    _ => return Some([whole; 3]),
                }
            }
            "call_expression" => match dim3_args(grid) {
                Some(a) => Some(a),
                None => return Some([whole; 3]),
            },
            _ => dim3_args(grid),
        };
        let Some(args) = args else {
            // A scalar grid: only x has more than one block.
            return Some([whole, GridKind::Plain, GridKind::Plain]);
        };
        if args.is_empty() || args.len() > 3 {
            return Some([whole; 3]);
        }
        let mut out = [GridKind::Plain; 3];
        for (axis, a) in args.iter().enumerate() {
            let mut budget = 2000;
            out[axis] = self.classify(*a, func, at, 0, &mut budget);
        }
        Some(out)
    }

    /// How the grid of `launch` is computed; `None` if the launch has no grid argument.
    pub fn grid_kind(&self, launch: &Launch<'t>) -> Option<GridKind> {
        let grid = *launch.config.first()?;
        // The first function of the file that holds the launch.
        let func = self.functions_around(launch.node).min();
        let mut budget = 2000;
        let at = launch.node.start_byte();
        Some(self.classify(grid, func, at, 0, &mut budget))
    }

    fn classify(
        &self,
        e: Node<'_>,
        func: Option<usize>,
        at: usize,
        depth: usize,
        budget: &mut u32,
    ) -> GridKind {
        if depth > 24 || *budget == 0 {
            return GridKind::Unknown;
        }
        *budget -= 1;
        let d = depth + 1;
        let field = |f: &str| e.field(f);
        match e.kind_name() {
            "number_literal" | "sizeof_expression" | "true" | "false" => GridKind::Plain,
            "identifier" => self.classify_name(text(e, self.source), func, at, depth, budget),
            "field_expression" => match field("argument") {
                Some(a) if a.kind_name() == "identifier" => {
                    self.classify_name(text(a, self.source), func, at, depth, budget)
                }
                Some(a) => self.classify(a, func, at, d, budget),
                None => GridKind::Plain,
            },
            "parenthesized_expression"
            | "argument_list"
            | "initializer_list"
            | "conditional_expression" => {
                let cond = field("condition").map(|x| x.id());
                let mut worst = GridKind::Plain;
                for c in named_children(e).filter(|c| Some(c.id()) != cond) {
                    worst = worst.max(self.classify(c, func, at, d, budget));
                }
                worst
            }
            "cast_expression" => match field("value") {
                Some(v) => self.classify(v, func, at, d, budget),
                None => GridKind::Plain,
            },
            "call_expression" => {
                let Some(f) = field("function") else {
                    return GridKind::Unknown;
                };
                if f.kind_name() == "field_expression" {
                    // `x.size(0)`, `t.numel()`: sizes.
                    return GridKind::Plain;
                }
                let name = super::last_name(text(f.field("name").unwrap_or(f), self.source));
                if is_ceil_helper(name) {
                    return GridKind::CeilDiv;
                }
                match name {
                    "dim3" | "min" | "max" | "static_cast" | "int" | "unsigned" | "size_t"
                    | "int64_t" | "uint32_t" | "make_uint3" => match field("arguments") {
                        Some(a) => self.classify(a, func, at, d, budget),
                        None => GridKind::Plain,
                    },
                    _ => GridKind::Unknown,
                }
            }
            "binary_expression" => {
                let op = field("operator").map(|o| o.kind_name()).unwrap_or("");
                let (Some(l), Some(r)) = (field("left"), field("right")) else {
                    return GridKind::Unknown;
                };
                let has = |n: Node<'_>, ops: &[&str]| {
                    gpulint_syntax::descendants(n).take(256).any(|x| {
                        x.kind_name() == "binary_expression"
                            && x.field("operator")
                                .is_some_and(|o| ops.contains(&o.kind_name()))
                    })
                };
                match op {
                    // `(n + 255) / 256`, `(n - 1) / 256 + 1`, `n / 256 + (n % 256 != 0)`.
                    "/" | ">>" if has(l, &["+"]) => GridKind::CeilDiv,
                    "+" if has(l, &["/", ">>"]) || has(r, &["/", ">>", "%", "!="]) => {
                        GridKind::CeilDiv
                    }
                    _ => {
                        // Operands of arithmetic are sizes: only a rounding up inside them
                        // counts, not how they were obtained.
                        let operand = |k: GridKind| {
                            if k == GridKind::CeilDiv {
                                k
                            } else {
                                GridKind::Plain
                            }
                        };
                        let left = operand(self.classify(l, func, at, d, budget));
                        left.max(operand(self.classify(r, func, at, d, budget)))
                    }
                }
            }
            // Subscripts, members of other expressions, …: values.
            _ => GridKind::Plain,
        }
    }

    /// A name in a grid: its definitions in the launching function, or a plain value (a
    /// parameter, a member, a global) when it has none.
    fn classify_name(
        &self,
        name: &str,
        func: Option<usize>,
        at: usize,
        depth: usize,
        budget: &mut u32,
    ) -> GridKind {
        let Some(defs) = func.and_then(|f| self.host_defs.get(&(f, name))) else {
            return GridKind::Plain;
        };
        // The definitions visible at the launch and before it.
        let visible: Vec<_> = defs
            .iter()
            .filter(|d| {
                d.scope.start <= at
                    && at < d.scope.end
                    && d.value.is_none_or(|v| v.start_byte() < at)
            })
            .collect();
        if visible.is_empty() {
            return GridKind::Plain;
        }
        let values: Vec<Node<'_>> = visible.iter().filter_map(|d| d.value).collect();
        if values.is_empty() {
            // Declared here without a value: filled in by a call (`launch_config(n, grid)`).
            return GridKind::Unknown;
        }
        let mut worst = GridKind::Plain;
        for v in values {
            worst = worst.max(self.classify(v, func, at, depth + 1, budget));
        }
        worst
    }
}

impl<'t> CudaModel<'t> {
    /// The `(x, y, z)` extents of a launch's grid (`which` = 0) or block (`which` = 1) when
    /// they fold to constants: an integer, `dim3(x, y, z)`, or a local `dim3 block(x, y)` with
    /// one definition visible at the launch. `None` when any part is unknown.
    pub fn launch_dims(&self, launch: &Launch<'t>, which: usize) -> Option<[i128; 3]> {
        let e = *launch.config.get(which)?;
        // The enclosing function as `enclosing_function` chooses it, with its index (looking
        // the index up among all functions costs the file's functions per launch).
        let fi = self
            .functions_around(launch.node)
            .min_by_key(|&i| (self.functions[i].node.byte_range().len(), i));
        let func = fi.map(|i| &self.functions[i]);
        let at = launch.node.start_byte();
        let eval = |n: Node<'_>| match func {
            Some(f) => self.eval_in_function(f, n),
            None => self.eval(n),
        };
        let dims_of_args = |args: Node<'_>| -> Option<[i128; 3]> {
            let vals: Vec<Node<'_>> = gpulint_syntax::named_children(args).collect();
            if vals.is_empty() || vals.len() > 3 {
                return None;
            }
            let mut out = [1i128; 3];
            for (i, v) in vals.iter().enumerate() {
                out[i] = eval(*v)?;
            }
            Some(out)
        };
        let e = super::kernel::peel(e);
        match e.kind_name() {
            "call_expression" => {
                let f = e.field("function")?;
                if self.text(f) != "dim3" {
                    return None;
                }
                dims_of_args(e.field("arguments")?)
            }
            "identifier" => {
                if let Some(v) = eval(e) {
                    return Some([v, 1, 1]);
                }
                let defs = self.host_defs.get(&(fi?, self.text(e)))?;
                let visible: Vec<_> = defs
                    .iter()
                    .filter(|d| d.scope.start <= at && at < d.scope.end)
                    .collect();
                let [d] = visible.as_slice() else {
                    return None;
                };
                let v = d.value?;
                if v.start_byte() >= at {
                    return None;
                }
                match v.kind_name() {
                    "argument_list" => dims_of_args(v),
                    "initializer_list" => dims_of_args(v),
                    _ => eval(v).map(|x| [x, 1, 1]),
                }
            }
            _ => eval(e).map(|v| [v, 1, 1]),
        }
    }
}

impl<'t> CudaModel<'t> {
    /// The values assigned to `name` in the host function around `launch`, in definitions
    /// visible at the launch and made before it (`int n = x.numel();`, `blocks = …`).
    pub fn host_values_at(&self, launch: &Launch<'t>, name: &str) -> Vec<Node<'t>> {
        let at = launch.node.start_byte();
        // The first function in `functions` that holds the launch.
        let Some(func) = self.functions_around(launch.node).min() else {
            return Vec::new();
        };
        let Some(defs) = self.host_defs.get(&(func, name)) else {
            return Vec::new();
        };
        defs.iter()
            .filter(|d| d.scope.start <= at && at < d.scope.end)
            .filter_map(|d| d.value)
            .filter(|v| v.start_byte() < at)
            .collect()
    }
}

impl<'t> CudaModel<'t> {
    /// The launches sorted by start byte, as `(start, end, index into launches)`.
    fn launch_spans(&self) -> &[(usize, usize, usize)] {
        self.launch_spans.get_or_init(|| {
            let mut v: Vec<(usize, usize, usize)> = self
                .launches
                .iter()
                .enumerate()
                .map(|(i, l)| (l.node.start_byte(), l.node.end_byte(), i))
                .collect();
            v.sort_unstable();
            v
        })
    }

    /// The launches inside `node`, as indexes into `launches` (by start byte): a binary search
    /// and the launches found, not a scan of every launch of the file.
    pub fn launches_within(&self, node: Node<'_>) -> impl Iterator<Item = usize> + '_ {
        let (start, end) = (node.start_byte(), node.end_byte());
        let spans = self.launch_spans();
        let i = spans.partition_point(|&(s, _, _)| s < start);
        spans[i..]
            .iter()
            .take_while(move |&&(s, _, _)| s < end)
            .filter(move |&&(_, e, _)| e <= end)
            .map(|&(_, _, i)| i)
    }

    /// Does `node` hold a kernel launch?
    pub fn holds_launch(&self, node: Node<'_>) -> bool {
        self.launches_within(node).next().is_some()
    }
}
