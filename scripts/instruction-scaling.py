#!/usr/bin/env python3
"""Instructions per file against its size, for shapes of code that a quadratic analysis hides in.

Each shape is one file written at a size and at 4 times that size (a function of n statements,
a file of n imports, a kernel of n parameters, ...); gpulint checks each alone in an empty
folder under Valgrind (`valgrind --tool=cachegrind --cache-sim=no`, which counts the
instructions executed, the same on every machine and under any load), and the script prints the
ratio of the two counts. A linear analysis gives about 4 (a little under: the start-up costs the
same at both sizes); an analysis that asks every statement about every other one gives up to
16. Shapes over `--limit` (default 4.4) are marked and make the exit status 1.

The time of a check does not tell this apart: between a small and a large file the time per
instruction itself grows, once the large file's trees leave the processor's caches (see
tests/scaling.rs).

    python3 scripts/instruction-scaling.py --gpulint target/release/gpulint [--only py_imports]

Needs Valgrind. Writes only under a temporary folder.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile


def py_long_function(n):
    s = "import torch\n\ndef train(model, loader, opt):\n    total = 0\n"
    for i in range(n):
        s += f"    x{i} = model(torch.randn({i % 7 + 1}, 3).cuda())\n    total += x{i}.sum()\n    opt.step()\n"
    return s


def py_rebound_name(n):
    s = "import torch\n\ndef f(model, loader):\n"
    for i in range(n):
        s += f"    x = torch.zeros({i}, 10, device='cuda')\n    y = x * 2 + x\n    if y.sum() > 0:\n        x = y\n"
    return s


def py_elif_chain(n):
    s = "import torch\n\ndef pick(k):\n    if k == 0:\n        return torch.zeros(1)\n"
    for i in range(1, n):
        s += f"    elif k == {i}:\n        return torch.zeros({i})\n"
    return s


def py_calls_between_functions(n):
    s = "import torch\n\ndef helper(x):\n    return x.cuda()\n\n"
    for i in range(n):
        s += f"def f{i}(model, t):\n    y = helper(t)\n    z = f{max(i - 1, 0)}(model, y) if {i} else y\n    return model(z)\n\n"
    return s


def py_training_loop_body(n):
    s = "import torch\n\ndef train(model, loader, opt, crit):\n    losses = []\n    for x, y in loader:\n"
    for i in range(n):
        s += f"        out{i} = model(x)\n        loss{i} = crit(out{i}, y)\n        loss{i}.backward()\n        losses.append(loss{i})\n"
    return s


def py_modules(n):
    s = "import torch\nimport torch.nn as nn\n\n"
    for i in range(n):
        s += f"class M{i}(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.l = nn.Linear({i + 1}, {i + 2})\n        self.buf = []\n    def forward(self, x):\n        y = self.l(x)\n        self.buf.append(y)\n        return y\n\n"
    return s


def py_layers_of_one_module(n):
    s = "import torch\nimport torch.nn as nn\n\nclass Big(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
    s += "".join(f"        self.l{i} = nn.Linear(1024, 1024)\n" for i in range(n))
    s += "    def forward(self, x):\n" + "".join(f"        x = self.l{i}(x)\n" for i in range(n))
    return s + "        return x\n"


def py_keras_models(n):
    s = "import tensorflow as tf\nfrom tensorflow import keras\n\n"
    for i in range(n):
        s += f"gpus{i} = tf.config.list_physical_devices('GPU')\nmodel{i} = keras.Sequential([keras.layers.Dense({i + 1})])\nmodel{i}.compile(optimizer='adam', loss='mse')\nmodel{i}.fit(x, y, batch_size={i + 8})\n"
    return s


def py_tf_functions(n):
    s = "import tensorflow as tf\n\n"
    for i in range(n):
        s += f"@tf.function\ndef step{i}(x):\n    v = tf.Variable(1.0)\n    print(x)\n    return x * v\n\n"
    return s


def py_imports(n):
    s = "".join(f"import mod{i}\nfrom pkg{i} import thing{i} as t{i}\n" for i in range(n))
    return s + "import torch\n" + "".join(f"t{i}.run(torch.zeros({i}).cuda())\n" for i in range(n))


def py_with_blocks(n):
    s = "import torch\n\ndef evaluate(model, loader):\n    model.eval()\n"
    for i in range(n):
        s += f"    with torch.no_grad():\n        out{i} = model(loader[{i}])\n    acc = out{i}.argmax()\n"
    return s


def py_notebook_cells(n):
    cells = [
        {
            "cell_type": "code",
            "metadata": {},
            "execution_count": None,
            "outputs": [],
            "source": ["import torch\n", f"x{i} = torch.zeros({i}).cuda()\n", f"y{i} = model(x{i})\n", "total += y.sum()\n"],
        }
        for i in range(n)
    ]
    return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


EXTENSION_CPP = (
    "#include <torch/extension.h>\n"
    "__global__ void k(const float* x, float* y, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = x[i]; }\n"
    "torch::Tensor forward(torch::Tensor x) { auto y = torch::empty_like(x); k<<<1, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel()); return y; }\n"
    'PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("forward", &forward); }\n'
)


def py_extension_calls(n):
    s = "import torch\nfrom torch.utils.cpp_extension import load\next = load(name='ext', sources=['ext.cpp'])\n\ndef run(x):\n"
    for i in range(n):
        s += f"    y{i} = x.transpose(0, 1)\n    z{i} = ext.forward(y{i})\n"
    return s


def cu_launches(n):
    s = "__global__ void kern(float* x, int n) {\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) x[i] = 0;\n}\n\nvoid launch_all(at::Tensor x) {\n"
    s += "".join(f"  kern<<<(x.numel() + 255) / 256, 256>>>(x.data_ptr<float>() + {i}, x.numel());\n" for i in range(n))
    return s + "  C10_CUDA_KERNEL_LAUNCH_CHECK();\n}\n"


def cu_pointer_variables(n):
    s = "#include <torch/extension.h>\n__global__ void kern(const float* x, float* y, int n) {\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) y[i] = x[i];\n}\nvoid launch_all(at::Tensor x, at::Tensor y) {\n"
    for i in range(n):
        s += f"  const float* p{i} = x.data_ptr<float>();\n  float* q{i} = y.data_ptr<float>();\n  kern<<<(x.numel() + 255) / 256, 256>>>(p{i}, q{i}, x.numel());\n"
    return s + '}\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("launch_all", &launch_all); }\n'


def cu_checks_and_launches(n):
    s = "#include <torch/extension.h>\n#define CHECK_INPUT(x) TORCH_CHECK(x.is_contiguous(), #x)\n__global__ void kern(const float* x, float* y, int n) {\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) y[i] = x[i];\n}\nvoid launch_all(at::Tensor x, at::Tensor y) {\n"
    for i in range(n):
        s += f'  CHECK_INPUT(x);\n  TORCH_CHECK(y.size(0) == {i}, "bad");\n  kern<<<(x.numel() + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());\n  cudaDeviceSynchronize();\n'
    return s + "}\n"


def cu_kernel_statements(n):
    s = "__global__ void kern(float* x, const float* y, int n) {\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  __shared__ float sh[256];\n"
    for i in range(n):
        s += f"  int j{i} = i * {i + 1} + threadIdx.x;\n  if (j{i} < n) x[j{i}] += y[j{i}] * sh[threadIdx.x % 256];\n  __syncthreads();\n"
    return s + "}\n"


def cu_kernel_parameters(n):
    params = ", ".join(f"float* a{i}" for i in range(n))
    s = f"__global__ void kern({params}, int n) {{\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    s += "".join(f"  if (i < n) a{i}[i] = a{(i + 1) % n}[i];\n" for i in range(n))
    return s + "}\n"


def cu_switch(n):
    s = "__global__ void kern(float* x, int n, int k) {\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  switch (k) {\n"
    s += "".join(f"  case {i}: if (i + {i} < n) x[i + {i}] = {i}; break;\n" for i in range(n))
    return s + "  }\n}\n"


def cu_else_if_chain(n):
    s = "__global__ void kern(float* x, int n, int k) {\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (k == 0) { x[i] = 0; }\n"
    s += "".join(f"  else if (k == {j}) {{ if (i + {j} < n) x[i + {j}] = {j}; }}\n" for j in range(1, n))
    return s + "}\n"


def cu_macros(n):
    s = "#define M0(a) (a)\n" + "".join(f"#define M{i}(a) ((a) * {i} + M{i - 1}(a))\n" for i in range(1, n))
    s += "__global__ void kern(float* x, int n) {\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    return s + "".join(f"  if (i < n) x[i] = M{i}(x[i]);\n" for i in range(n)) + "}\n"


def cu_helper_chain(n):
    s = "__device__ int h0(int i) { return i; }\n"
    s += "".join(f"__device__ int h{j}(int i) {{ return h{j - 1}(i) + {j}; }}\n" for j in range(1, n))
    return s + f"__global__ void kern(float* x, int n) {{\n  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  x[h{n - 1}(i)] = 1;\n}}\n"


def cu_reductions(n):
    s = "__global__ void kern(float* x, int n) {\n  __shared__ float sh[256];\n  int t = threadIdx.x;\n"
    for j in range(n):
        s += f"  for (int s{j} = 128; s{j} > 0; s{j} >>= 1) {{\n    if (t < s{j}) sh[t] += sh[t + s{j}];\n    __syncthreads();\n  }}\n"
    return s + "  if (t == 0) x[blockIdx.x] = sh[0];\n}\n"


def cu_bound_ops(n):
    s = "#include <torch/extension.h>\n__global__ void kern(const float* x, float* y, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = x[i]; }\n"
    for j in range(n):
        s += f'torch::Tensor f{j}(torch::Tensor x) {{\n  TORCH_CHECK(x.is_cuda(), "x");\n  TORCH_CHECK(x.is_contiguous(), "x");\n  auto y = torch::empty_like(x);\n  kern<<<(x.numel() + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());\n  return y;\n}}\n'
    return s + "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n" + "".join(f'  m.def("f{j}", &f{j});\n' for j in range(n)) + "}\n"


# name: (generator, small size, file name, other files of the folder)
SHAPES = {
    "py_long_function": (py_long_function, 500, "f.py", {}),
    "py_rebound_name": (py_rebound_name, 500, "f.py", {}),
    "py_elif_chain": (py_elif_chain, 500, "f.py", {}),
    "py_calls_between_functions": (py_calls_between_functions, 250, "f.py", {}),
    "py_training_loop_body": (py_training_loop_body, 500, "f.py", {}),
    "py_modules": (py_modules, 250, "f.py", {}),
    "py_layers_of_one_module": (py_layers_of_one_module, 500, "f.py", {}),
    "py_keras_models": (py_keras_models, 250, "f.py", {}),
    "py_tf_functions": (py_tf_functions, 250, "f.py", {}),
    "py_imports": (py_imports, 500, "f.py", {}),
    "py_with_blocks": (py_with_blocks, 500, "f.py", {}),
    "py_notebook_cells": (py_notebook_cells, 250, "f.ipynb", {}),
    "py_extension_calls": (py_extension_calls, 250, "f.py", {"ext.cpp": EXTENSION_CPP}),
    "cu_launches": (cu_launches, 1000, "f.cu", {}),
    "cu_pointer_variables": (cu_pointer_variables, 250, "f.cu", {}),
    "cu_checks_and_launches": (cu_checks_and_launches, 250, "f.cu", {}),
    "cu_kernel_statements": (cu_kernel_statements, 250, "f.cu", {}),
    "cu_kernel_parameters": (cu_kernel_parameters, 250, "f.cu", {}),
    "cu_switch": (cu_switch, 500, "f.cu", {}),
    "cu_else_if_chain": (cu_else_if_chain, 500, "f.cu", {}),
    "cu_macros": (cu_macros, 250, "f.cu", {}),
    "cu_helper_chain": (cu_helper_chain, 250, "f.cu", {}),
    "cu_reductions": (cu_reductions, 250, "f.cu", {}),
    "cu_bound_ops": (cu_bound_ops, 250, "f.cu", {}),
}


def instructions(gpulint, folder, name):
    """Instructions of one `gpulint check` of `name` in `folder` (all of it: the folder holds
    only what the shape needs)."""
    out = subprocess.run(
        ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
         gpulint, "check", ".", "--no-cache", "--isolated", "--exit-zero", "--threads", "1", "--quiet"],
        cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False,
    )
    m = re.search(r"I\s+refs:\s+([\d,]+)", out.stderr)
    if not m:
        sys.exit(f"instruction-scaling: no instruction count for {name} in {folder}:\n{out.stderr[-2000:]}")
    return int(m.group(1).replace(",", ""))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpulint", default="target/release/gpulint")
    ap.add_argument("--only", action="append", help="run only these shapes (repeatable)")
    ap.add_argument("--limit", type=float, default=4.4, help="largest ratio taken as linear (4x the input)")
    args = ap.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("instruction-scaling: needs valgrind on PATH")
    gpulint = os.path.abspath(args.gpulint)
    names = args.only or list(SHAPES)
    unknown = [n for n in names if n not in SHAPES]
    if unknown:
        sys.exit(f"instruction-scaling: unknown shapes {unknown}; known: {', '.join(SHAPES)}")
    over = []
    with tempfile.TemporaryDirectory(prefix="instruction-scaling-") as tmp:
        print(f"{'shape':28} {'n':>6} {'instructions':>15} {'4n':>6} {'instructions':>15} {'ratio':>6}")
        for name in names:
            make, n, file_name, others = SHAPES[name]
            counts = []
            for size in (n, 4 * n):
                folder = os.path.join(tmp, f"{name}-{size}")
                os.makedirs(folder)
                with open(os.path.join(folder, file_name), "w", encoding="utf-8") as f:
                    f.write(make(size))
                for other, text in others.items():
                    with open(os.path.join(folder, other), "w", encoding="utf-8") as f:
                        f.write(text)
                counts.append(instructions(gpulint, folder, name))
            ratio = counts[1] / counts[0]
            mark = "  over the limit" if ratio > args.limit else ""
            print(f"{name:28} {n:>6} {counts[0]:>15,} {4 * n:>6} {counts[1]:>15,} {ratio:>6.2f}{mark}", flush=True)
            if mark:
                over.append(name)
    if over:
        print(f"{len(over)} shape(s) over {args.limit}: {', '.join(over)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
