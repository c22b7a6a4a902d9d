//! Calls into extensions and what each argument is guaranteed to be.

use super::*;
use super::{CONTIG, DEVICE, DTYPE};
use gpulint_syntax::{parse, Lang};

fn calls(src: &str) -> Vec<ExtCall> {
    let tree = parse(Lang::Python, src).unwrap();
    let m = super::super::build(&tree, src);
    collect(&m)
}

fn only(src: &str) -> ExtCall {
    let mut c = calls(src);
    assert_eq!(c.len(), 1, "{c:?}");
    c.remove(0)
}

#[test]
fn contiguous_arguments_and_fresh_outputs() {
    let c = only(
        "import torch\nimport my_ext\n\ndef f(x, y):\n    out = torch.empty_like(x.contiguous())\n    my_ext.run(out, x.contiguous(), y, x.t().contiguous().view(-1))\n",
    );
    assert_eq!((c.module.as_str(), c.function.as_str()), ("my_ext", "run"));
    assert_eq!(c.args, vec![CONTIG, CONTIG, 0, CONTIG]);
    assert!(!c.open && !c.backward);
}

#[test]
fn names_made_contiguous_before_the_call() {
    let src = "import torch\nimport my_ext\n\ndef f(a, b, c):\n    if a.dtype != torch.float32:\n        raise TypeError('a')\n    if not a.is_contiguous():\n        a = a.contiguous()\n    b = b.contiguous()\n    b = b.t()\n    assert c.is_contiguous()\n    my_ext.run(a, b, c)\n";
    assert_eq!(only(src).args, vec![CONTIG | DTYPE, 0, CONTIG]);
}

#[test]
fn a_branch_that_does_not_make_it_contiguous_grants_nothing() {
    // The `if` tests another tensor: when it is not taken, `a` is as it came.
    let src = "import torch\nimport my_ext\n\ndef f(a, b):\n    if not b.is_contiguous():\n        a = a.contiguous()\n    my_ext.run(a)\n";
    assert_eq!(only(src).args, vec![0]);
    // An `if not x.is_contiguous()` around the call: the call runs only when it is not.
    let src = "import torch\nimport my_ext\n\ndef f(a):\n    if not a.is_contiguous():\n        my_ext.run(a)\n";
    assert_eq!(only(src).args, vec![0]);
    // Transposed in place after it was made contiguous.
    let src = "import torch\nimport my_ext\n\ndef f(a):\n    a = a.contiguous()\n    a.transpose_(0, 1)\n    my_ext.run(a)\n";
    assert_eq!(only(src).args, vec![0]);
    // Rebound in a loop after the use.
    let src = "import torch\nimport my_ext\n\ndef f(a):\n    a = a.contiguous()\n    for i in range(3):\n        my_ext.run(a)\n        a = a.t()\n";
    assert_eq!(only(src).args, vec![0]);
}

#[test]
fn dtype_conversions_and_dispatch() {
    let src = "import torch\nimport my_ext\n\ndef f(a, b, c):\n    if a.dtype == torch.half:\n        my_ext.half(a, b.float(), c.to(torch.float16).contiguous())\n";
    assert_eq!(only(src).args, vec![DTYPE, DTYPE, DTYPE | CONTIG]);
    let src = "import torch\nimport my_ext\n\ndef f(a):\n    my_ext.run(a.cuda(), torch.zeros(3, dtype=torch.int32))\n";
    assert_eq!(only(src).args, vec![DEVICE, CONTIG | DTYPE]);
}

#[test]
fn saved_tensors_keep_what_forward_gave_them() {
    let src = "import torch\nimport my_ext\n\nclass F(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x, w):\n        x = x.contiguous()\n        ctx.save_for_backward(x, w)\n        ctx.pair = (x, w.contiguous())\n        return x\n\n    @staticmethod\n    def backward(ctx, grad):\n        x, w = ctx.saved_tensors\n        a, b = ctx.pair\n        my_ext.grad(grad, x, w, a, b, grad.contiguous())\n        return grad, None\n";
    let c = only(src);
    assert_eq!(c.args, vec![0, CONTIG, 0, CONTIG, CONTIG, CONTIG]);
    assert!(c.backward);
}

#[test]
fn modules_recorded() {
    // `from ext import fn` and a module returned by `load`; not a registered op (`torch.ops`).
    let src = "import torch\nfrom torch.utils.cpp_extension import load\nfrom pkg._C import scan\next = load(name='fused', sources=['f.cu'])\n\ndef f(x):\n    scan(x)\n    ext.go(x, alpha=2)\n    torch.ops.my_ops.neg(x)\n    torch.relu(x)\n    import os\n    os.path.join('a', 'b')\n";
    let got: Vec<(String, String, bool)> = calls(src)
        .into_iter()
        .map(|c| (c.module, c.function, c.open))
        .collect();
    assert_eq!(
        got,
        vec![
            ("pkg._C".into(), "scan".into(), false),
            ("fused".into(), "go".into(), true),
        ]
    );
}

#[test]
fn a_module_built_inline_is_known_by_its_name_and_nothing_else_is() {
    let names = |src: &str| -> Vec<String> {
        calls(src)
            .into_iter()
            .map(|c| format!("{}.{}", c.module, c.function))
            .collect()
    };
    // Built by a spelled-out `load_inline`, the call after the use of the module.
    let src = "import torch\n\ndef f(x):\n    return ext.go(x)\n\next = torch.utils.cpp_extension.load_inline(name='inl', cpp_sources='')\nf(1)\n";
    assert_eq!(names(src), ["inl.go"]);
    // A module-like object made by another call, in a file that builds nothing: not a module.
    let src =
        "import torch\nimport helpers\next = helpers.load(name='fused')\next.go(torch.ones(2))\n";
    assert_eq!(names(src), ["helpers.load"]);
    // A file that builds one module: its other objects are still not modules.
    let src = "from torch.utils.cpp_extension import load\nimport helpers\next = load(name='fused', sources=['f.cu'])\nobj = helpers.make(name='x')\nobj.go(1)\next.go(2)\n";
    assert_eq!(names(src), ["helpers.make", "fused.go"]);
}
