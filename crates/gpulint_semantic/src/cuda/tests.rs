use super::*;
use crate::Options;
use gpulint_syntax::{parse, Lang};

/// Builds the model of `src` with the same enter/leave walk as the checker.
fn with_model(src: &str, options: &Options, f: impl FnOnce(&CudaModel<'_>)) {
    let tree = parse(Lang::Cuda, src).unwrap();
    let model = CudaBuilder::model_of(src, &tree, options);
    f(&model);
}

fn model(src: &str, f: impl FnOnce(&CudaModel<'_>)) {
    with_model(src, &Options::default(), f)
}

/// The access whose text is `t`.
fn access<'a, 't>(k: &'a Kernel<'t>, m: &CudaModel<'t>, t: &str) -> &'a Access<'t> {
    k.accesses
        .iter()
        .find(|a| m.text(a.node) == t)
        .unwrap_or_else(|| panic!("no access `{t}`"))
}

/// Is the access `t` bounded by one of its guards?
fn covered<'t>(m: &CudaModel<'t>, k: &Kernel<'t>, t: &str) -> bool {
    let a = access(k, m, t);
    let mut parts: Vec<_> = a.alias_offsets.clone();
    parts.extend(a.index);
    let target = m.index_target(k, &parts);
    m.guard_chain(a.guard)
        .any(|g| m.guard_covers(k, g, &target))
}

#[test]
fn constants_fold_through_defines_constexpr_const_and_enums() {
    let src = "#define THREADS 256\n#define BLOCKS (THREADS * 4)\nconstexpr int kWarps = THREADS / 32;\nstatic const int kTile = 1 << 4;\nenum { A, B, C = 10, D };\nenum class E : int { X = 3, Y };\n#define SMEM (sizeof(float) * BLOCKS)\n";
    model(src, |m| {
        assert_eq!(m.constant("THREADS"), Some(256));
        assert_eq!(m.constant("BLOCKS"), Some(1024));
        assert_eq!(m.constant("kWarps"), Some(8));
        assert_eq!(m.constant("kTile"), Some(16));
        assert_eq!(m.constant("B"), Some(1));
        assert_eq!(m.constant("D"), Some(11));
        assert_eq!(m.constant("Y"), Some(4));
        assert_eq!(m.constant("SMEM"), Some(4096));
        assert_eq!(m.constant("nothing"), None);
    });
}

#[test]
fn self_referential_defines_do_not_loop() {
    model("#define A B\n#define B A\n#define C (C + 1)\n", |m| {
        assert_eq!(m.constant("A"), None);
        assert_eq!(m.constant("C"), None);
    });
}

#[test]
fn template_arguments_from_launches() {
    let src = "template <int BLOCK, typename T, int UNROLL = 4>\n__global__ void k(T* x) { x[threadIdx.x] = BLOCK; }\nvoid go(float* x) {\n  k<256, float><<<1, 256>>>(x);\n  k<256, float, 4><<<1, 256>>>(x);\n}\ntemplate <int N>\n__global__ void two(float* x) {}\nvoid g(float* x) { two<1><<<1, 1>>>(x); two<2><<<1, 1>>>(x); }\n";
    model(src, |m| {
        let k = m.functions.iter().find(|f| f.name == "k").unwrap();
        assert_eq!(m.constant_in(k, "BLOCK"), Some(256));
        assert_eq!(m.constant_in(k, "UNROLL"), Some(4));
        let two = m.functions.iter().find(|f| f.name == "two").unwrap();
        assert_eq!(m.constant_in(two, "N"), None, "launches disagree");
        assert_eq!(m.launches_of("k").count(), 2);
        let l = m.launches_of("k").next().unwrap();
        assert_eq!(m.text(l.config[0]), "1");
        assert_eq!(l.args.len(), 1);
    });
}

#[test]
fn function_table_on_real_kernel_shapes() {
    let src = r#"template <typename T>
__global__ void __launch_bounds__(256) tk(T* x) {}
static __global__ void sk(float* x) {}
extern "C" __global__ void ck(float* x) {}
extern "C" { __global__ void ck2(float* x) {} }
__device__ __forceinline__ float dev(float a) { return a; }
__host__ __device__ float both(float a) { return a; }
void host(float* x) {}
CUTLASS_DEVICE int macro_dev(int a) { return a; }
__global__ void loops(float* a, int n) {
  CUDA_1D_KERNEL_LOOP(i, n) { a[i] = 0; }
}
"#;
    model(src, |m| {
        let kernels: Vec<&str> = m.kernel_functions().map(|f| f.name.as_str()).collect();
        assert_eq!(kernels, ["tk", "sk", "ck", "ck2", "loops"]);
        let f = |n: &str| m.functions.iter().find(|f| f.name == n).unwrap().space;
        assert!(f("dev").device && !f("dev").global);
        assert!(f("both").device && f("both").host);
        assert_eq!(f("host"), ExecSpace::default());
        assert!(f("macro_dev").device);
        assert!(
            !m.functions.iter().any(|f| f.name == "CUDA_1D_KERNEL_LOOP"),
            "a loop macro is not a function"
        );
        assert_eq!(m.kernels.len(), 5);
        let inner = m.kernels[4].accesses[0].node;
        assert_eq!(m.enclosing_function(inner).unwrap().name, "loops");
    });
}

#[test]
fn thread_index_derivation() {
    let src = "__global__ void k(const float* x, float* y, int n, int cols) {\n  int tid = threadIdx.x;\n  int base = blockIdx.x * blockDim.x;\n  int i = base + tid;\n  int64_t j = static_cast<int64_t>(blockIdx.y) * 128 + threadIdx.y;\n  int row = i / cols;\n  int col = i % cols;\n  int r2 = blockIdx.x * cols + threadIdx.x;\n  int c = min(i, n - 1);\n  int s;\n  s = blockDim.x * gridDim.x;\n}\n";
    model(src, |m| {
        let k = &m.kernels[0];
        let fl = |n: &str| k.flags[k.local(n).unwrap()];
        assert!(fl("tid").has(Flags::TID) && !fl("tid").is_global_index());
        assert!(fl("base").has(Flags::BLOCK_BASE) && !fl("base").is_global_index());
        assert!(fl("i").is_global_index());
        assert!(fl("j").is_global_index());
        assert!(
            fl("row").is_global_index(),
            "a row of a global index is unbounded"
        );
        assert!(!fl("col").is_global_index(), "a remainder is bounded");
        assert!(
            !fl("r2").is_global_index(),
            "blockIdx times a size is a row, not a global index"
        );
        assert!(!fl("c").is_global_index(), "min() clamps");
        assert!(fl("s").has(Flags::GDIM) && !fl("s").thread_dependent());
        assert!(k
            .params
            .iter()
            .filter(|p| p.pointer)
            .map(|p| p.name)
            .eq(["x", "y"]));
    });
}

#[test]
fn pointers_into_global_memory() {
    let src = "__global__ void k(const float* __restrict__ x, float* y, int n) {\n  __shared__ float s[256];\n  float local[4];\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  const float* row = x + blockIdx.x * n;\n  float* out = &y[i];\n  s[threadIdx.x] = row[threadIdx.x];\n  local[0] = s[0];\n  *out = local[0];\n  atomicAdd(y + i, 1.f);\n  reinterpret_cast<float4*>(y)[i] = make_float4(0, 0, 0, 0);\n}\n";
    model(src, |m| {
        let k = &m.kernels[0];
        let g = |t: &str| access(k, m, t).global;
        assert!(!g("s[threadIdx.x]"), "shared memory");
        assert!(!g("local[0]"), "a local array");
        assert!(g("row[threadIdx.x]"));
        assert!(g("*out"));
        assert_eq!(
            access(k, m, "*out")
                .alias_offsets
                .iter()
                .map(|o| m.text(*o))
                .collect::<Vec<_>>(),
            ["i"]
        );
        assert!(g("y + i"));
        assert!(g("reinterpret_cast<float4*>(y)[i]"));
    });
}

#[test]
fn guards_dominate_their_regions() {
    let src = r#"__global__ void k(const float* x, float* y, float* z, int n, int m) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y * blockDim.y + threadIdx.y;
  z[i] = 0;
  if (i < n) { y[i] = x[i]; } else { y[i + 1] = 0; }
  float v = i < n ? x[i] : 0.f;
  bool ok = i < n && x[i] > 0;
  for (int j = i; j < n; j += blockDim.x * gridDim.x) y[j] = 1;
  if (row < m && i < n) y[row * n + i] = 2;
  if (i >= n) return;
  x[i + 0] = 3;
}
"#;
    model(src, |m| {
        let k = &m.kernels[0];
        assert!(!covered(m, k, "z[i]"), "before any guard");
        assert!(covered(m, k, "y[i]"));
        assert!(!covered(m, k, "y[i + 1]"), "the else branch has i >= n");
        let ternary = k
            .accesses
            .iter()
            .filter(|a| m.text(a.node) == "x[i]")
            .map(|a| m.guard_chain(a.guard).count())
            .collect::<Vec<_>>();
        assert_eq!(ternary, [1, 1, 1], "if, ternary and && each guard x[i]");
        assert!(covered(m, k, "y[j]"), "grid-stride loop");
        assert!(covered(m, k, "y[row * n + i]"), "2-D guard");
        assert!(covered(m, k, "x[i + 0]"), "early return");
        let early = m
            .guard_chain(access(k, m, "x[i + 0]").guard)
            .next()
            .unwrap();
        assert_eq!(early.kind, GuardKind::EarlyExit);
        assert_eq!(
            &src[early.label.start..early.label.end],
            "if (i >= n) return;"
        );
        let b = early.bounds[0];
        assert_eq!(
            (
                &src[b.term.start..b.term.end],
                &src[b.limit.start..b.limit.end]
            ),
            ("i", "n")
        );
    });
}

#[test]
fn guards_from_loop_macros_asserts_and_continue() {
    let src = r#"__global__ void k(float* y, int n) {
  CUDA_1D_KERNEL_LOOP(i, n) {
    y[i] = 0;
  }
  CUDA_2D_KERNEL_LOOP(a, n, b, n) { y[a * n + b] = 0; }
  MY_LOOP(q, n) { y[q] = 0; }
  for (int t = 0; t < 4; ++t) {
    int p = blockIdx.x * blockDim.x + threadIdx.x + t;
    if (p >= n) continue;
    y[p] = 1;
  }
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  CUDA_KERNEL_ASSERT(r < n);
  y[r] = 2;
}
"#;
    model(src, |m| {
        let k = &m.kernels[0];
        let g = m.guard_chain(access(k, m, "y[i]").guard).next().unwrap();
        assert_eq!(g.kind, GuardKind::LoopMacro);
        assert_eq!(
            &src[g.label.start..g.label.end],
            "CUDA_1D_KERNEL_LOOP(i, n)"
        );
        assert_eq!(g.bounds.len(), 1);
        let g2 = m
            .guard_chain(access(k, m, "y[a * n + b]").guard)
            .next()
            .unwrap();
        assert_eq!(g2.bounds.len(), 2);
        let g3 = m.guard_chain(access(k, m, "y[q]").guard).next().unwrap();
        assert_eq!(g3.kind, GuardKind::Macro, "an unknown macro block");
        assert!(covered(m, k, "y[p]"), "early continue");
        assert!(covered(m, k, "y[r]"), "assert");
    });
    let options = Options {
        loop_macros: vec!["MY_LOOP".into()],
        ..Options::default()
    };
    with_model(src, &options, |m| {
        let k = &m.kernels[0];
        let g3 = m.guard_chain(access(k, m, "y[q]").guard).next().unwrap();
        assert_eq!(g3.kind, GuardKind::LoopMacro, "configured loop macro");
    });
}

#[test]
fn guards_do_not_leak_out_of_their_block() {
    let src = r#"__global__ void k(float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  {
    if (i >= n) return;
  }
  for (int t = 0; t < 2; ++t) if (i >= n) break;
  y[i] = 0;
}
"#;
    model(src, |m| {
        let k = &m.kernels[0];
        // The early return inside the inner block does guard what follows in real C++, but the
        // model only claims the rest of the same block: a missed guard here would be a false
        // positive, so the rule stays lenient elsewhere. The `break` guard is inside the loop.
        assert_eq!(m.guard_chain(access(k, m, "y[i]").guard).count(), 0);
    });
}

#[test]
fn sum_terms_split_sums() {
    let src = "int f(int i, int n) { return (i + n) - (1 + (int)n); }\n";
    let tree = parse(Lang::Cuda, src).unwrap();
    let ret = gpulint_syntax::descendants(tree.root_node())
        .find(|n| n.kind() == "return_statement")
        .unwrap()
        .named_child(0)
        .unwrap();
    let terms: Vec<(String, bool)> = guards::sum_terms(ret)
        .unwrap()
        .into_iter()
        .map(|(n, s)| (gpulint_syntax::text(n, src).to_string(), s))
        .collect();
    assert_eq!(
        terms,
        [
            ("i".into(), true),
            ("n".into(), true),
            ("1".into(), false),
            ("n".into(), false)
        ]
    );
}

#[test]
fn deep_nesting_does_not_recurse() {
    let depth = 5000;
    let src = format!(
        "__global__ void k(float* o, int n) {{\n{}o[blockIdx.x * blockDim.x + threadIdx.x] = 1;\n{}}}\n",
        "if (n) {\n".repeat(depth),
        "}\n".repeat(depth)
    );
    model(&src, |m| {
        let k = &m.kernels[0];
        assert_eq!(m.guard_chain(k.accesses[0].guard).count(), depth);
    });
}

#[test]
fn launch_grids_are_classified() {
    let src = r#"__global__ void k(float* x, int n) {}
void go(float* x, int n, int batch, int heads) {
  k<<<(n + 255) / 256, 256>>>(x, n);
  k<<<n / 256, 256>>>(x, n);
  k<<<DIVUP(n, 256), 256>>>(x, n);
  dim3 plain(batch, heads);
  k<<<plain, 64>>>(x, n);
  int blocks = n / 512 + 1;
  k<<<blocks, 512>>>(x, n);
  dim3 filled;
  make_config(n, filled);
  k<<<filled, 128>>>(x, n);
  if (n > 4) {
    dim3 g((n + 63) / 64);
    k<<<g, 64>>>(x, n);
  } else {
    dim3 g(n);
    k<<<g, 64>>>(x, n);
  }
}
"#;
    model(src, |m| {
        let kinds: Vec<Option<GridKind>> = m.launches.iter().map(|l| m.grid_kind(l)).collect();
        use GridKind::*;
        assert_eq!(
            kinds,
            [
                Some(CeilDiv),
                Some(Plain),
                Some(CeilDiv),
                Some(Plain),
                Some(CeilDiv),
                Some(Unknown),
                Some(CeilDiv),
                Some(Plain)
            ]
        );
        assert_eq!(m.kernel_grid("k").map(|(g, _)| g), Some(CeilDiv));
    });
}

#[test]
fn array_extents_fold_with_template_launches() {
    let src = "#define N 8\ntemplate <int B>\n__global__ void k(float* x) {\n  __shared__ float s[B][N + 1];\n  float acc[N];\n  extern __shared__ char dyn[];\n  for (int j = 0; j < N; j += 4) x[0] = acc[j + 3];\n}\nvoid run(float* x) { k<32><<<1, 32>>>(x); }\n";
    model(src, |m| {
        let s = m.arrays.iter().find(|a| a.name == "s").unwrap();
        assert_eq!(s.space, ArraySpace::Shared);
        assert_eq!(m.array_bytes(s), Some(32 * 9 * 4));
        let acc = m.arrays.iter().find(|a| a.name == "acc").unwrap();
        assert_eq!(acc.space, ArraySpace::Local);
        assert_eq!(m.array_elements(acc), Some(8));
        let dyn_ = m.arrays.iter().find(|a| a.name == "dyn").unwrap();
        assert_eq!(dyn_.space, ArraySpace::DynamicShared);
        // `j` steps by 4 below 8: it ends at 4, so `j + 3` reaches 7.
        let (f, sub) = m
            .subscripts
            .iter()
            .find(|(_, n)| m.text(*n) == "acc[j + 3]")
            .copied()
            .unwrap();
        let index = sub.field("indices").unwrap().named_child(0).unwrap();
        assert_eq!(m.index_range(&m.functions[f], index), Some((3, 7)));
    });
}

#[test]
fn barrier_conditions_per_thread_or_uniform() {
    let src = "__global__ void k(float* x, int n) {\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  for (int s = blockDim.x / 2; s > 0; s >>= 1) { __syncthreads(); }\n  if (i < n) { __syncthreads(); }\n}\n";
    model(src, |m| {
        let k = &m.kernels[0];
        assert_eq!(m.barriers.len(), 2);
        let conds: Vec<bool> = m
            .barriers
            .iter()
            .map(|b| m.guard_chain(b.guard).any(|g| k.per_thread(m, g.cond)))
            .collect();
        assert_eq!(conds, vec![false, true]);
    });
}

#[test]
fn glue_facts_of_a_torch_op() {
    let src = r#"#include <torch/extension.h>
#define CHECK_CUDA(x) TORCH_CHECK(x.is_cuda(), #x " must be a CUDA tensor")
#define CHECK_INPUT(x) \
  CHECK_CUDA(x);       \
  TORCH_CHECK(x.is_contiguous(), #x " must be contiguous")
__global__ void k(const float* a, float* b, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) b[i] = a[i];
}
void launch(const at::Tensor& a, at::Tensor& b) {
  int64_t n = a.numel();
  AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "k", [&] {
    k<<<1, 256>>>(a.data_ptr<float>(), b.data_ptr<float>(), n);
  });
}
at::Tensor op(at::Tensor x, at::Tensor w, int64_t dim) {
  CHECK_INPUT(x);
  TORCH_CHECK(w.size(0) == x.size(dim), "shapes");
  const at::cuda::OptionalCUDAGuard guard(device_of(x));
  auto xc = x.contiguous();
  auto out = at::empty_like(xc);
  launch(xc, out);
  return out;
}
PYBIND11_MODULE(ext, m) { m.def("op", &op); }
"#;
    model(src, |m| {
        use super::glue::*;
        let g = &m.glue;
        assert!(g.facts.bound.contains("op"));
        assert!(!g.facts.bound.contains("launch"));
        let op = g
            .fns
            .iter()
            .find(|f| m.functions[f.func].name == "op")
            .unwrap();
        let facts = &g.facts.fns[op.facts];
        assert_eq!(
            facts.covered[0], ALL,
            "x: macro expansion, size, and dtype by the callee's dispatch"
        );
        assert_eq!(facts.covered[1], SHAPE, "w: size only");
        assert_eq!(facts.covered[2], 0, "not a tensor");
        assert!(facts.guarded);
        let call = facts.calls.iter().find(|c| c.callee == "launch").unwrap();
        assert_eq!(
            call.args,
            vec![Some((0, CONTIG)), None],
            "xc is x made contiguous; out is fresh"
        );
        let launch = g
            .fns
            .iter()
            .find(|f| m.functions[f.func].name == "launch")
            .unwrap();
        assert_eq!(launch.uses.len(), 2);
        assert!(launch.uses.iter().all(|u| u.dispatch.is_some()));
        assert_eq!(g.dispatches[0].tensor, Some("a"));
        assert_eq!(launch.launches.len(), 1);
        assert!(
            g.facts.fns[launch.facts].covered[0] & DTYPE != 0,
            "dispatched on a"
        );
        // For callers in other files: `launch` hands `a` to a kernel and holds no guard;
        // `op` launches nothing itself and holds one.
        assert_eq!(g.facts.fns[launch.facts].launches, Some(0));
        assert_eq!(facts.launches, None);
        // The launch is not a call of a host function named `k`.
        assert!(g.facts.fns[launch.facts]
            .calls
            .iter()
            .all(|c| c.callee != "k"));
        assert_eq!(launch.calls.len(), g.facts.fns[launch.facts].calls.len());
    });
}

#[test]
fn glue_check_classification() {
    use super::glue::*;
    assert_eq!(
        classify("TORCH_CHECK(x.device().is_cuda())", "x", true),
        DEVICE
    );
    assert_eq!(
        classify("TORCH_CHECK(x.type().is_cuda())", "x", true),
        DEVICE
    );
    assert_eq!(
        classify("TORCH_CHECK(x.type() == y.type())", "y", true),
        DTYPE
    );
    assert_eq!(classify("MY_CHECK(x, y)", "y", true), ALL);
    assert_eq!(classify("MY_CHECK(x, y)", "y", false), 0);
    assert_eq!(
        classify("TORCH_CHECK(p.x.is_cuda())", "x", true),
        0,
        "a member"
    );
    assert!(is_dispatch(
        "AT_DISPATCH_V2",
        &["AT_DISPATCH_*".to_string()]
    ));
    assert!(!is_dispatch("DISPATCH_X", &["AT_DISPATCH_*".to_string()]));
}

/// A `CUTLASS_DEVICE` function read through the second parse (the macro rewritten to
/// `__device__`) is still a `__device__` function, and the 16-bit bound it passes a size to is
/// found.
#[test]
fn macro_specifier_after_reparse() {
    let src = "struct Params { int32_t num_keys; float* x; };\n__device__ void isoft(float* frag, int16_t max_col) {\n    if (threadIdx.x < max_col) frag[0] = 0.f;\n}\nCUTLASS_DEVICE void kern(Params& p) {\n    for (int32_t s = 0; s < p.num_keys; s += 64) {\n      isoft(p.x, p.num_keys - s);\n    }\n}\n";
    let first = parse(Lang::Cuda, src).unwrap();
    assert!(first.root_node().has_error());
    let tree = gpulint_syntax::cuda_retry::reparse(src, first);
    assert!(!tree.root_node().has_error());
    let m = CudaBuilder::model_of(src, &tree, &Options::default());
    let kern = m.functions.iter().find(|f| f.name == "kern").unwrap();
    assert!(kern.space.device && !kern.space.host && !kern.space.global);
    let b = m.short_bounds();
    assert_eq!(b.len(), 1);
    assert_eq!(b[0].name, "max_col");
    assert_eq!(m.text(b[0].arg), "p.num_keys - s");
}

#[test]
fn kernels_keep_their_compound_assignments_in_order() {
    let src = "__global__ void k(float* p, const float* q, int n) {\n  int i = threadIdx.x;\n  p += blockIdx.x * n;\n  i -= 1;\n  i = 2;\n  q += i;\n  i *= 3;\n}\n__global__ void h(float* r) { r -= 4; }\n";
    model(src, |m| {
        let texts = |k: &Kernel<'_>| -> Vec<String> {
            k.advances.iter().map(|n| m.text(*n).to_string()).collect()
        };
        let named = |name: &str| {
            m.kernels
                .iter()
                .find(|k| m.functions[k.function].name == name)
                .unwrap()
        };
        let k = named("k");
        assert_eq!(texts(k), ["p += blockIdx.x * n", "i -= 1", "q += i"]);
        let h = named("h");
        assert_eq!(texts(h), ["r -= 4"]);
    });
}
