//! CU003: a 32-bit global thread index compared against a 64-bit size, and element counts
//! narrowed to 32 bits in host glue before a launch.

use super::cu003_glue;
use super::cu003_member;
use super::cu003_short;
use super::cu003_strides;
use super::short;
use super::SANITIZER;
use crate::context::Context;
use crate::declare_rule;
use crate::rule::{Rule, RuleLang, RuleMeta};
use gpulint_diagnostics::{Severity, Span};
use gpulint_semantic::cuda::interval::{CulpritKind, Evidence, MemberOverflow, OverflowKind};
use gpulint_semantic::cuda::{CudaModel, Flags, GuardKind, Kernel};
use gpulint_syntax::Lang;
use gpulint_syntax::NodeExt;

declare_rule! {
    /// ## What it does
    /// Finds kernels that compute a global thread index (`blockIdx.x * blockDim.x +
    /// threadIdx.x`) into a 32-bit variable (`int`, `unsigned`, `int32_t`, `uint32_t`) and
    /// bound it with a size parameter declared 64-bit (`int64_t`, `size_t`, `long`,
    /// `long long`): the kernel is written for tensors with more than 2³¹ − 1 elements, but its
    /// index cannot reach them.
    ///
    /// Kernels whose size parameter is itself 32-bit are not reported here: they are
    /// consistently limited to small tensors, and the glue must check the size. So in host
    /// glue, the rule also finds element counts narrowed to 32 bits that reach a kernel launch in
    /// the same file as an argument, directly or through a local: `int n = x.numel();`,
    /// `static_cast<int>(x.numel())`, `int size = t.NumElements()` (outside TensorFlow op
    /// kernels, where OP005 reports it), and `const int total = x.size(0) * x.size(1) *
    /// x.size(2)` (a warning). It stays silent when the function checks the 32-bit limit
    /// before the launch (`TORCH_CHECK(x.numel() <= std::numeric_limits<int>::max())`,
    /// `INT_MAX`, `canUse32BitIndexMath(x)`, `kint32max`), for 64-bit counts (`int64_t n`), for
    /// single dimensions (`int channels = x.size(1)`), for block counts
    /// (`int blocks = (x.numel() + 255) / 256`) and for counts that only size the grid. A
    /// narrowed element count is an error.
    ///
    /// It also follows index arithmetic through the kernel, with the range of values each part
    /// takes:
    /// - a product of two sizes evaluated in 32 bits that becomes an index or a pointer offset
    ///   (`int idx = row * cols + col; img[idx]`, `x + r * cols`), or an element count that bounds
    ///   a global index (`if (i < B * T * V)`). With the sizes at the launches in the same file
    ///   (constants) it is an error when the product passes the type's limit; otherwise it is a
    ///   warning in kernels that index framework tensors (the file includes PyTorch, ATen, c10,
    ///   TensorFlow or CUTLASS headers, or a launch passes `x.numel()`/`x.size(d)`), and only when
    ///   both factors range over data sizes: products with `threadIdx`, `blockDim`, or constants,
    ///   and products widened first (`static_cast<int64_t>(row) * cols`), are not reported. In
    ///   files with no framework header, two things still show large data: an element count that
    ///   bounds the global index and multiplies three or more sizes (`if (i < B * T * V)`; a
    ///   tensor of three dimensions passes 2³¹ at about 1,300 per dimension), and a factor that is
    ///   a `__device__` helper's 32-bit parameter to which a call passes a 64-bit value (the
    ///   caller kept it 64-bit). Offsets that multiply three sizes are not enough there (kernel
    ///   windows, sampling points and voxel grids multiply as many), nor are two-size counts;
    ///   but when a kernel of the file computes an offset into a tensor of four dimensions in 64
    ///   bits (`(b * heads + h) * seq * seq`, `size_t` sizes), an offset whose term with a block
    ///   or thread coordinate multiplies three or more sizes (`((b * h + hi) * q + qi) * k`) is;
    ///
    ///   Offsets count wherever they go: a pointer parameter advanced in place (`src +=
    ///   first_batch * element_count`), a pointer local built as `base + offset`, a 64-bit local
    ///   (`const index_t row_offset = m_block * h * d`) whose value was computed in 32 bits
    ///   before being widened. Member types and `using`/`typedef` aliases come from this file or
    ///   from the project headers it includes (`#include "params.h"`; an alias declared with
    ///   different types in different structs is not used). A header also sees what the files
    ///   of its directory include before it (a helper taking `Params` as a template parameter,
    ///   included after `params.h`); a member type known only that way is weaker evidence, and
    ///   the product must be a per-block offset (it reads a block or thread coordinate) whose
    ///   largest term multiplies three or more data sizes (`((b * H + h) * T + t) * D`, an
    ///   offset into a four-dimensional tensor), or that adds a helper's result computed from a
    ///   block coordinate and a product of three sizes (`binfo.q_offset(seqlen * h * d, h * d,
    ///   bidb)`: the batch stride of such a tensor), the product being in its highest term of
    ///   two or more sizes (`(m_block * kBlockM + 128 * bidb) * h * d`, the row offset over all
    ///   batches; not the head offset `bidh * d` beside it). Not reported: products inside an
    ///   explicit 64-bit cast (`(int64_t)(b * dim + d) * n`), divisors (`i / (H * W)`), and
    ///   unsigned products of launch geometry only (`gridDim.x * blockIdx.y`, a count of blocks).
    ///
    ///   `__device__` helpers called from kernels (multi-tensor-apply functors, index helpers;
    ///   not `__host__ __device__` functions) are followed the same way: `g += chunk_idx *
    ///   chunk_size` on a pointer local, `inp + idx * P` on a pointer parameter. A factor read
    ///   from memory (`tl.block_to_chunk[blockIdx.x]`) has no bound in the file and counts as a
    ///   data size; compile-time tile counts (template parameters, `Traits::kRows`, `constexpr`
    ///   locals initialised from them) do not. A `using index_t = typename Base::index_t;` that
    ///   re-exports an alias under the same name takes the type of the alias it re-exports.
    ///
    ///   A stride that is a struct member declared 32-bit (`int32_t bias_strideB;`), multiplied
    ///   by a block or thread coordinate into a pointer offset (`bias_ptr += batch_id *
    ///   bias_strideB;`), is reported once at the member's declaration when most pointer offsets
    ///   of the same function that scale that coordinate are 64-bit (`query_ptr += batch_id *
    ///   q_strideB;` with `int64_t q_strideB`, at least two, more than the 32-bit ones): the
    ///   code treats coordinate × stride as a 64-bit offset, and this member was left 32-bit.
    ///   The member is read as `p.bias_strideB` (declared once in this file) or, in a method of
    ///   the struct, without `this->`. Products that read such members without `this->` are
    ///   reported only there; strides of consistent width are left to the glue.
    ///
    ///   One finding per kernel or helper, for the first product whose factors are all bounded,
    ///   else the first. It is reported where the type must change when that is another
    ///   statement: at the declaration of the 32-bit local the product is stored in (`int
    ///   qk_offset;` … `qk_offset = ((b * h + hi) * q + qi) * k + ki;`), of a factor that is a
    ///   32-bit local holding a global index (`int first_batch = (blockDim.y * blockIdx.x +
    ///   threadIdx.y) * 4;` … `src += first_batch * element_count;`), or of a helper's 32-bit
    ///   parameter to which a call passes a 64-bit value (`long idx` passed to `int idx`, then
    ///   `inp + idx * P`). A factor holding one block coordinate (`const int b = blockIdx.x;`)
    ///   leaves the finding at the product.
    /// - a product of 64-bit sizes stored in a 32-bit local (`const int n = C * H * W;` with
    ///   `int64_t` dimensions);
    /// - a launch that passes `x.numel()` (or a 64-bit local holding it, or a product of
    ///   `x.size(d)`) to a 32-bit kernel parameter: the call narrows it (an error for an element
    ///   count);
    /// - an element count stored in a struct member declared 32-bit (`tl.sizes[t] =
    ///   x.numel();` with `int sizes[N];`, the member's type from this file or its project
    ///   headers), in host code with no check of the 32-bit limit before: reported at the
    ///   member's declaration when it is in this file (a warning);
    /// - batch strides stored in struct members declared 32-bit (`params.q_batch_stride =
    ///   q.stride(0);` with `index_t q_batch_stride;` and `using index_t = uint32_t;`), in host
    ///   code with no check of the 32-bit limit before: the outermost stride (`x.stride(0)`,
    ///   `x.strides()[0]`) of a tensor the same function shows to have three or more dimensions
    ///   (`x.stride(-3)`, `x.size(2)`, `x.dim() == 4`) spans two or more sizes, an element
    ///   count, and past 2³¹ − 1 it wraps. Reported in the file that declares the members, once per alias
    ///   (at `using index_t = uint32_t;`) or per struct (at the first member's type), with the
    ///   stores in the notes. A header's stores are read from the C/C++/CUDA files of its
    ///   directory, its parent and the parent's other subdirectories that include it (a file is
    ///   parsed only when it spells `stride`, the header's name and one of the members). Not
    ///   reported: 64-bit members, inner strides (`x.stride(1)`, `x.stride(-3)`: a row's
    ///   length), the outermost stride of a matrix or of a tensor of unknown rank, sizes of one
    ///   dimension (`x.size(1)`), stores after a check of the 32-bit limit;
    /// - sizes narrowed one by one in the glue (`int n1 = a.size(0);`), harmless alone, then
    ///   multiplied together in 32 bits (`torch::empty({n1 * n2})`): an element count;
    /// - a signed 32-bit local that counts the elements the whole grid covers (`const int
    ///   n_full = gridDim.x * BLOCK_SIZE;`, evaluated in `unsigned`) and bounds a signed
    ///   thread index (`for (int i = base_idx; i < n_full; …)`): a grid sized for an element
    ///   count within one block of 2³¹ − 1 covers more, the bound turns negative, and blocks
    ///   whose base index wrapped pass the check (a warning, at the declaration). Not reported:
    ///   unsigned indices (the comparison converts the bound back), clamped or 64-bit counts,
    ///   strides (`int stride = blockDim.x * gridDim.x`), and counts of blocks
    ///   (`gridDim.x * gridDim.y`);
    /// - a `__device__` helper parameter narrower than 32 bits (`int16_t max_col`, `uint16_t`,
    ///   `short`, `int8_t`) compared against an index (`if (col < max_col)`), to which a call
    ///   passes a 32- or 64-bit value that can pass its limit (`p.num_keys - key_start`, a size
    ///   with no bound in the file): reported at the parameter. Not reported: constants, casts,
    ///   calls, values already 16-bit, and values whose range at the call stays below the limit
    ///   (`threadIdx.x % 32`, a loop counter below a constant).
    ///
    /// ## Why is this risky?
    /// The product `blockIdx.x * blockDim.x` is evaluated in 32-bit unsigned arithmetic and the
    /// result is stored in a 32-bit variable. With more than 2³¹ − 1 elements (about 8.6 GB of
    /// fp32, common for embeddings and large batches) the index wraps or turns negative, and the
    /// kernel reads or writes far outside the tensor: an illegal memory access, or silent
    /// corruption. The comparison `i < n` against the 64-bit size does not catch it.
    ///
    /// ## Example
    /// ```cuda
    /// __global__ void scale(const float* x, float* y, float a, int64_t n) {
    ///     int i = blockIdx.x * blockDim.x + threadIdx.x;
    ///     if (i < n) y[i] = a * x[i];
    /// }
    /// ```
    ///
    /// ## Use instead
    /// ```cuda
    /// __global__ void scale(const float* x, float* y, float a, int64_t n) {
    ///     int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    ///     if (i < n) y[i] = a * x[i];
    /// }
    /// ```
    ///
    /// ## References
    /// - TensorFlow "Create an op", GPU kernels (`OP_REQUIRES(context, input_tensor.NumElements()
    ///   <= tensorflow::kint32max, …)`): <https://www.tensorflow.org/guide/create_op#gpu_kernels>
    /// - microsoft/onnxruntime#28107 (int32 index overflow in Gather, CUDA error 700):
    ///   <https://github.com/microsoft/onnxruntime/issues/28107>
    /// - tensorflow/tensorflow#60330 (illegal address when the element count exceeds int32):
    ///   <https://github.com/tensorflow/tensorflow/issues/60330>
    /// - Compute Sanitizer, memcheck tool:
    ///   <https://docs.nvidia.com/compute-sanitizer/ComputeSanitizer/index.html#memcheck-tool>
    pub static CU003 = {
        code: "CU003",
        name: "int32-thread-index",
        lang: RuleLang::Source(Lang::Cuda),
        severity: Severity::Warning,
        summary: "32-bit index arithmetic or element count on tensor-sized buffers: it overflows on large tensors",
        kinds: &[],
        needles: &["__global__", "GLOBAL", "<<<", "__device__", "stride"],
        options: &[],
    };
}

const NARROW: &[&str] = &[
    "int",
    "unsigned",
    "unsigned int",
    "int32_t",
    "uint32_t",
    "uint",
];
const WIDE: &[&str] = &[
    "int64_t",
    "size_t",
    "long",
    "long long",
    "unsigned long",
    "unsigned long long",
    "uint64_t",
    "ssize_t",
    "ptrdiff_t",
];

pub struct Int32ThreadIndex;

impl Rule for Int32ThreadIndex {
    fn meta(&self) -> &'static RuleMeta {
        &CU003
    }

    fn check_file(&self, ctx: &mut Context<'_>) {
        cu003_glue::check_glue(ctx);
        cu003_strides::check(ctx);
        cu003_short::check_short_bounds(ctx);
        super::grid_counts::check(ctx);
        let m = ctx.cuda();
        // Struct members whose 32-bit type makes products overflow, reported once each at
        // their declaration (after the functions, in the order of the declarations).
        let mut members: Vec<MemberOverflow<'_>> = Vec::new();
        // `__device__` helpers (functors, index helpers) compute offsets the same way.
        for k in &m.helpers {
            if !k.too_large && !k.parse_damaged() {
                check_arithmetic(ctx, m, k, &mut members);
            }
        }
        for k in &m.kernels {
            if k.too_large || k.parse_damaged() {
                continue;
            }
            check_arithmetic(ctx, m, k, &mut members);
            if k.node.has_error() {
                continue;
            }
            let mut done: Vec<&str> = Vec::new();
            for g in m.guards_in(k).into_iter().map(|gi| &m.guards[gi]) {
                if !matches!(
                    g.kind,
                    GuardKind::If | GuardKind::EarlyExit | GuardKind::Loop
                ) {
                    continue;
                }
                let mut c = g.cond;
                for _ in 0..4 {
                    c = match c.kind_name() {
                        "condition_clause" | "parenthesized_expression" => {
                            match c.field("value").or_else(|| c.named_child(0)) {
                                Some(inner) => inner,
                                None => break,
                            }
                        }
                        _ => break,
                    };
                }
                if c.kind_name() != "binary_expression"
                    || !c
                        .field("operator")
                        .is_some_and(|o| matches!(o.kind_name(), "<" | "<=" | ">=" | ">"))
                {
                    continue;
                }
                let (Some(l), Some(r)) = (c.field("left"), c.field("right")) else {
                    continue;
                };
                let (idx, size) = (m.text(l), m.text(r));
                let Some(p) = k.param(size) else {
                    continue;
                };
                let pty = p.node.field("type").map(|t| m.text(t).trim()).unwrap_or("");
                if !WIDE.contains(&pty) || done.contains(&idx) {
                    continue;
                }
                let Some(li) = k.local(idx) else {
                    continue;
                };
                if !k.flags[li].has(Flags::CANONICAL) {
                    continue;
                }
                // The declaration of the index: a 32-bit type.
                let Some(decl) = k.defs[li].iter().find_map(|v| {
                    let d = m.parent(m.parent(*v)?)?;
                    (d.kind_name() == "declaration").then_some(d)
                }) else {
                    continue;
                };
                let ty = decl.field("type").map(|t| m.text(t).trim()).unwrap_or("");
                if !NARROW.contains(&ty) {
                    continue;
                }
                done.push(idx);
                let Some(tnode) = decl.field("type") else {
                    continue;
                };
                let d = ctx
                    .diagnostic(
                        tnode,
                        format!("thread index `{idx}` is a 32-bit `{ty}`, but it is bounded by `{size}`, a 64-bit `{pty}`: past 2³¹ − 1 elements it wraps and the kernel accesses memory far outside the tensor"),
                    )
                    .primary_label(format!("`{idx}` is 32-bit"))
                    .with_label(Span::of(&p.node), "the size is 64-bit")
                    .with_label(g.label, "this check cannot catch the wrapped index")
                    .note("`blockIdx.x * blockDim.x` is evaluated in 32-bit unsigned arithmetic")
                    .help(format!("declare `int64_t {idx} = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;`; confirm at run time with `{SANITIZER}`"));
                ctx.report(d);
            }
        }
        cu003_member::report(ctx, m, members);
    }
}

/// 32-bit products that become an index or an element count, and 64-bit products narrowed to
/// 32-bit locals: one finding per kernel (or `__device__` helper), at the first whose factors
/// are all bounded, else at the first.
fn check_arithmetic<'t>(
    ctx: &mut Context<'_>,
    m: &CudaModel<'t>,
    k: &Kernel<'t>,
    members: &mut Vec<MemberOverflow<'t>>,
) {
    let mut found = m.int32_overflows(k);
    // Products reported at the 32-bit member declaration are not reported again here.
    // Products whose width rests on a member of a method's class read without `this->` are
    // reported only there.
    let own = m.member_overflows(k, &found);
    found.retain(|o| {
        !m.reads_implicit_member(k, o.node) && !own.iter().any(|x| x.product.id() == o.node.id())
    });
    members.extend(own);
    // Findings whose factors all have bounds first: they name the sizes that overflow.
    found.sort_by_key(|o| (o.unbounded, o.node.start_byte()));
    let Some(o) = found.first() else {
        return;
    };
    let what = short(m.text(o.node));
    let ty = o.ty;
    let mut d = match o.kind {
        OverflowKind::Narrowed => ctx
            .diagnostic(
                o.node,
                format!("`{what}` narrows a product of 64-bit sizes to a 32-bit `{ty}`: past 2³¹ − 1 elements it wraps and the indices computed from it go out of range"),
            )
            .primary_label(format!("stored in a 32-bit `{ty}`"))
            .help(format!("keep it 64-bit (`int64_t`); confirm at run time with `{SANITIZER}`")),
        OverflowKind::IndexProduct | OverflowKind::BoundProduct => {
            let role = if o.kind == OverflowKind::BoundProduct {
                "an element count that bounds the thread index"
            } else {
                "an index or a pointer offset"
            };
            let reach = match (o.proven, o.evidence) {
                (Some(v), _) => format!("with the sizes at the launches in this file it reaches {v}, past the limit of `{ty}`"),
                (None, Evidence::Dimensions) => "past 2³¹ − 1 elements it wraps (it multiplies three or more sizes: a tensor of three dimensions reaches that size at about 1,300 per dimension)".to_string(),
                (None, Evidence::NarrowedCall) => "past 2³¹ − 1 elements it wraps (the caller keeps the value in 64 bits)".to_string(),
                (None, Evidence::WideLayout) => "past 2³¹ − 1 elements it wraps (it offsets into a tensor of four or more dimensions, and another kernel of this file computes an offset of that shape in 64 bits)".to_string(),
                (None, _) => "past 2³¹ − 1 elements it wraps (the kernel indexes framework tensors, which reach that size)".to_string(),
            };
            let (l, r) = (
                o.node.field("left").map(|n| short(m.text(n))).unwrap_or_default(),
                o.node.field("right").map(|n| short(m.text(n))).unwrap_or_default(),
            );
            match m.overflow_culprit(k, o) {
                None => ctx
                    .diagnostic(
                        o.node,
                        format!("`{what}` is computed in 32-bit `{ty}` and becomes {role}: {reach}"),
                    )
                    .primary_label(format!("evaluated in `{ty}`"))
                    .help(format!("widen before multiplying: `static_cast<int64_t>({l}) * {r}`, or keep the sizes and the index in `int64_t`; confirm at run time with `{SANITIZER}`")),
                Some(c) => {
                    let line = m.line_of(o.node.start_byte());
                    let name = c.name;
                    let (message, label) = match c.kind {
                        CulpritKind::Destination => (
                            format!("`{name}` is declared 32-bit, and `{what}` (line {line}), stored in it, is computed in 32-bit `{ty}` and becomes {role}: {reach}"),
                            "declared 32-bit".to_string(),
                        ),
                        CulpritKind::GlobalIndex => (
                            format!("global index `{name}` is declared 32-bit, and `{what}` (line {line}) multiplies it in 32-bit `{ty}` into {role}: {reach}"),
                            "declared 32-bit".to_string(),
                        ),
                        CulpritKind::NarrowedParam { call_line } => (
                            format!("parameter `{name}` is 32-bit, and the call at line {call_line} passes it a 64-bit value; `{what}` (line {line}) multiplies it in 32-bit `{ty}` into {role}: {reach}"),
                            "narrows the 64-bit argument".to_string(),
                        ),
                    };
                    ctx.diagnostic(c.node, message)
                        .primary_label(label)
                        .with_label(Span::of(&o.node), format!("evaluated in `{ty}`"))
                        .help(format!("declare `{name}` as `int64_t`, or widen before multiplying: `static_cast<int64_t>({l}) * {r}`; confirm at run time with `{SANITIZER}`"))
                }
            }
        }
    };
    if let Some(u) = o.used_at {
        d = d.with_label(Span::of(&u), "used here");
    }
    d = if o.proven.is_some() {
        d.severity(Severity::Error)
    } else {
        d.severity(Severity::Warning)
    };
    if found.len() > 1 {
        d = d.note(format!(
            "{} more 32-bit products in this kernel can overflow the same way",
            found.len() - 1
        ));
    }
    ctx.report(d);
}
