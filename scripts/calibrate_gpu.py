#!/usr/bin/env python3
"""Real GPU memory of the models in tests/memory_models/, for the estimator's calibration test.

For every PyTorch (`torch_*.py`) and Keras (`keras_*.py`) model file, on a CUDA machine:

- builds the file's `model` with the real framework, and its training set-up as the file writes
  it: the batch size (`batch_size=` of the file's DataLoader / fit, evaluated in the file's own
  namespace, so `BATCH_SIZE` or `args.batch_size` work), the optimizer (the file's
  `torch.optim.*(...)` call, or Keras' `model.compile(...)`), and the loss (an `nn.*Loss()`
  or `torch.nn.functional` loss the file calls, Hugging Face `labels=`; Keras: the compiled loss);
  a file whose loss is a name it never defines is trained on `output.sum()` (it keeps nothing for
  backward), and the record says so;
- runs two full training steps (forward, backward, optimizer step: the second holds the
  optimizer's state) on random inputs of the file's shapes (the per-sample shapes of
  `scripts/memory_ground_truth.py`) at the file's own batch and records:
  - `allocated_peak_mib`: the framework allocator's peak of live tensors
    (`torch.cuda.max_memory_allocated`, TensorFlow's `get_memory_info()['peak']`);
  - `reserved_peak_mib` (PyTorch): the caching allocator's peak of reserved segments;
  - `device_peak_mib`: the whole process on the GPU at its peak = the CUDA context and driver
    (`cuda_context_and_driver_mib`, measured as total - free right after the context is made)
    + the reserved peak (PyTorch); for TensorFlow the context + TensorFlow's own peak;
- finds the largest batch whose two training steps run with the framework's allocator capped at
  `--cap-gib` (default 8 GiB; PyTorch: `set_per_process_memory_fraction`, TensorFlow: a logical
  device with `memory_limit`), the CUDA context outside the cap: doubling from the file's batch
  until the first out-of-memory error, then bisection to 1%;
- writes `tests/calibration/<framework>-<gpu>.json` (e.g. `torch-h100.json`, `keras-h100.json`)
  with the GPU's name, driver, framework, CUDA and cuDNN versions.

Each model runs in a process of its own (a crashed or exhausted model cannot disturb the next,
and TensorFlow cannot change its memory limit once started).

    python3 scripts/calibrate_gpu.py                       # every model, both frameworks
    python3 scripts/calibrate_gpu.py --framework torch --models 'torch_lenet*'
    python3 scripts/calibrate_gpu.py --dry-run             # CPU: one step at batch 2 per model,
                                                           # checks the set-up; no memory figures

Needs scripts/requirements-memory.txt's frameworks (with CUDA builds on the GPU machine). It
never runs as part of `cargo test`: the JSON it writes is committed, never edited by hand.
"""
import argparse
import ast
import fnmatch
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
_VISIBLE = os.environ.get("CUDA_VISIBLE_DEVICES")
import memory_ground_truth as gt  # noqa: E402  (the per-sample inputs and the model loader)

# That module hides the GPU (it works on the CPU); this one must see it.
if _VISIBLE is None:
    os.environ.pop("CUDA_VISIBLE_DEVICES", None)
else:
    os.environ["CUDA_VISIBLE_DEVICES"] = _VISIBLE

ROOT = gt.ROOT
MODELS = gt.MODELS
MIB = 1 << 20

# torch.nn.functional losses a training file may call, by name.
TORCH_FUNCTIONAL_LOSSES = {
    "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div", "cosine_embedding_loss",
}


def load_module(path):
    """The model file as a module (its `model` and the names its set-up refers to)."""
    import importlib.util

    sys.argv = [str(path)]  # argparse in a model file must see no arguments of ours
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---------------------------------------------------------------------------------------------
# Reading the file's training set-up (its `if __name__ == "__main__":` block and module body).

def dotted(node):
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def calls(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            yield node


def setup_of(path):
    """The source of the file's batch-size expression, optimizer call, loss and compile call."""
    src = path.read_text()
    tree = ast.parse(src)
    found = {"batch": None, "optimizer": None, "loss": None, "loss_kind": None, "compile": None,
             "model_name": None}
    for call in calls(tree):
        name = dotted(call.func) or ""
        last = name.rsplit(".", 1)[-1]
        for kw in call.keywords:
            if kw.arg == "batch_size" and found["batch"] is None:
                found["batch"] = ast.get_source_segment(src, kw.value)
            if kw.arg == "labels" and found["loss"] is None:
                found["loss"], found["loss_kind"] = "labels", "hf"
        if ".optim." in f".{name}" and last[:1].isupper() and found["optimizer"] is None:
            found["optimizer"] = ast.get_source_segment(src, call)
            # The name the file gives the model there (`net.parameters()`).
            first = call.args[0] if call.args else None
            if isinstance(first, ast.Call) and isinstance(first.func, ast.Attribute):
                found["model_name"] = dotted(first.func.value)
        elif (name.startswith(("nn.", "torch.nn.")) and last.endswith("Loss")
              and found["loss_kind"] in (None, "functional")):
            found["loss"], found["loss_kind"] = ast.get_source_segment(src, call), "module"
        elif last in TORCH_FUNCTIONAL_LOSSES and found["loss"] is None:
            found["loss"], found["loss_kind"] = last, "functional"
        elif last == "compile" and name.endswith("model.compile"):
            found["compile"] = ast.get_source_segment(src, call)
    return found


# ---------------------------------------------------------------------------------------------
# PyTorch

def torch_targets(torch, out, loss_name):
    """Random targets that the loss accepts for this output."""
    if loss_name in ("cross_entropy", "nll_loss", "CrossEntropyLoss", "NLLLoss"):
        if out.dim() == 3:  # (batch, sequence, classes), flattened as training loops do
            out = out.reshape(-1, out.shape[-1])
        classes = out.shape[1] if out.dim() >= 2 else 2
        shape = (out.shape[0],) + tuple(out.shape[2:])
        return torch.randint(0, classes, shape, device=out.device)
    if loss_name in ("binary_cross_entropy", "BCELoss"):
        return torch.rand_like(out)
    return torch.randn_like(out)


class TorchStep:
    def __init__(self, name, module, device):
        import torch

        self.torch = torch
        self.name = name
        self.setup = setup_of(MODELS / name)
        self.shape, self.vocab = gt.torch_input(name)
        self.model = module.model.to(device).train()
        self.device = device
        ns = dict(vars(module))
        ns["model"] = self.model
        if self.setup["model_name"] and "." not in self.setup["model_name"]:
            ns[self.setup["model_name"]] = self.model
        self.batch = int(eval(self.setup["batch"], ns)) if self.setup["batch"] else None
        self.optimizer_src = self.setup["optimizer"] or "torch.optim.SGD(model.parameters(), lr=0.01)"
        self.optimizer = eval(self.optimizer_src, {**ns, "torch": torch})
        kind = self.setup["loss_kind"]
        if kind == "module":
            self.loss_fn = eval(self.setup["loss"], {**ns, "torch": torch, "nn": torch.nn})
            self.loss_name = type(self.loss_fn).__name__
        elif kind == "functional":
            self.loss_fn = getattr(torch.nn.functional, self.setup["loss"])
            self.loss_name = self.setup["loss"]
        elif kind == "hf":
            self.loss_fn, self.loss_name = None, "labels"
        else:
            self.loss_fn, self.loss_name = None, "output.sum() (the file's loss is not defined in it)"

    def inputs(self, batch):
        torch = self.torch
        if self.vocab is None:
            return torch.randn((batch,) + tuple(self.shape), device=self.device)
        return torch.randint(0, self.vocab, (batch,) + tuple(self.shape), device=self.device)

    def step(self, batch):
        x = self.inputs(batch)
        if hasattr(self.model, "config"):
            key = "input_ids" if self.vocab is not None else "pixel_values"
            kwargs = {key: x}
            if self.loss_name == "labels":
                classify = type(self.model).__name__.endswith("Classification")
                kwargs["labels"] = x if self.vocab is not None and not classify else (
                    self.torch.randint(0, self.model.config.num_labels, (batch,),
                                       device=self.device))
            out = self.model(**kwargs)
            loss = out.loss if getattr(out, "loss", None) is not None else out[0].float().sum()
        else:
            out = self.model(x)
            out = out[0] if isinstance(out, (list, tuple)) else out
            if self.loss_fn is None:
                loss = out.sum()
            else:
                if out.dim() == 3 and self.loss_name in (
                        "cross_entropy", "nll_loss", "CrossEntropyLoss", "NLLLoss"):
                    out = out.reshape(-1, out.shape[-1])
                loss = self.loss_fn(out, torch_targets(self.torch, out, self.loss_name))
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        del x, out, loss

    def two_steps(self, batch):
        self.step(batch)
        self.step(batch)
        self.optimizer.zero_grad(set_to_none=True)


def torch_worker(name, cap_gib, dry_run):
    import torch

    module = load_module(MODELS / name)
    if dry_run:
        run = TorchStep(name, module, "cpu")
        run.two_steps(2)
        return {"file": f"tests/memory_models/{name}", "batch": run.batch,
                "optimizer": run.optimizer_src, "loss": run.loss_name, "dry_run": True}
    torch.cuda.init()
    free, total = torch.cuda.mem_get_info()
    context = total - free
    run = TorchStep(name, module, "cuda")
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    run.two_steps(run.batch)
    torch.cuda.synchronize()
    allocated = torch.cuda.max_memory_allocated()
    reserved = torch.cuda.max_memory_reserved()
    torch.cuda.empty_cache()
    torch.cuda.set_per_process_memory_fraction(min(1.0, cap_gib * (1 << 30) / total))

    def fits(batch):
        try:
            run.two_steps(batch)
            torch.cuda.synchronize()
            return True
        except torch.OutOfMemoryError:
            return False
        finally:
            run.optimizer.zero_grad(set_to_none=True)
            gc.collect()
            torch.cuda.empty_cache()

    largest, trials = largest_batch(fits, run.batch)
    return {
        "file": f"tests/memory_models/{name}",
        "batch": run.batch,
        "optimizer": run.optimizer_src,
        "loss": run.loss_name,
        "cuda_context_and_driver_mib": round(context / MIB),
        "device_peak_mib": round((context + reserved) / MIB),
        "reserved_peak_mib": round(reserved / MIB),
        "allocated_peak_mib": round(allocated / MIB),
        f"largest_batch_allocator_cap_{cap_gib:g}gib": largest,
        "bisection_trials": trials,
    }


def largest_batch(fits, start, limit=1 << 24):
    """The largest batch for which `fits` holds: doubling from `start`, then bisection to 1%."""
    lo, hi, trials = 0, None, 0
    b = max(1, start)
    while b <= limit:
        trials += 1
        if fits(b):
            lo = b
            b *= 2
        else:
            hi = b
            break
    if hi is None:
        return lo, trials
    if lo == 0:  # even the file's batch does not fit: search below it
        lo_b = 0
        b = hi // 2
        while b >= 1:
            trials += 1
            if fits(b):
                lo_b = b
                break
            hi = b
            b //= 2
        lo = lo_b
        if lo == 0:
            return 0, trials
    while hi - lo > max(1, lo // 100):
        mid = (lo + hi) // 2
        trials += 1
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo, trials


def torch_versions():
    import torch

    out = {"torch": torch.__version__, "cuda": torch.version.cuda,
           "cudnn": torch.backends.cudnn.version(), **gt.library_versions()}
    if torch.cuda.is_available():
        out["gpu"] = torch.cuda.get_device_name(0)
    return out


# ---------------------------------------------------------------------------------------------
# Keras (TensorFlow)

def keras_specs(name, model):
    """Per-sample input shapes and dtypes: the model's inputs, or (subclassed models) the table's."""
    if name in gt.KERAS_INPUTS or not getattr(model, "inputs", None):
        return [(tuple(gt.KERAS_INPUTS[name]), "float32")]
    return [(tuple(int(d or 1) for d in t.shape[1:]), str(t.dtype)) for t in model.inputs]


def keras_data(np, name, model, batch):
    """Random inputs and targets of the model's shapes, and the loss's name."""
    vocab = min((l.input_dim for l in model.layers if type(l).__name__ == "Embedding"),
                default=1000)
    xs = []
    for shape, dtype in keras_specs(name, model):
        if "int" in dtype:
            xs.append(np.random.randint(0, vocab, (batch,) + shape))
        else:
            xs.append(np.random.rand(*((batch,) + shape)).astype("float32"))
    x = xs[0] if len(xs) == 1 else xs
    # The outputs' shapes from a call on one sample (subclassed models declare none).
    probe = model([a[:1] for a in xs] if len(xs) > 1 else xs[0][:1], training=False)
    outs = probe if isinstance(probe, (list, tuple)) else [probe]
    loss = getattr(model, "loss", None)
    loss_name = loss if isinstance(loss, str) else type(loss).__name__
    ys = []
    for out in outs:
        shape = (batch,) + tuple(int(d) for d in out.shape[1:])
        if "sparse" in loss_name.lower():
            ys.append(np.random.randint(0, shape[-1], shape[:-1]))
        else:
            ys.append(np.random.rand(*shape).astype("float32"))
    return x, (ys[0] if len(ys) == 1 else ys), loss_name


def keras_model(name, module):
    model = module.model
    if not getattr(model, "inputs", None) and name in gt.KERAS_INPUTS and not model.built:
        model.build((None,) + tuple(gt.KERAS_INPUTS[name]))
    setup = setup_of(MODELS / name)
    if setup["compile"] and not getattr(model, "optimizer", None):
        eval(setup["compile"], {**vars(module), "model": model})
    elif not getattr(model, "optimizer", None):
        model.compile(optimizer="sgd", loss="mse")
    batch = int(eval(setup["batch"], vars(module))) if setup["batch"] else 32
    return model, batch


def keras_worker(name, cap_gib, dry_run):
    import numpy as np
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if not dry_run:
        tf.config.set_logical_device_configuration(
            gpus[0], [tf.config.LogicalDeviceConfiguration(memory_limit=int(cap_gib * 1024))])
    import keras

    module = load_module(MODELS / name)
    model, batch = keras_model(name, module)

    def two_steps(b):
        x, y, _ = keras_data(np, name, model, b)
        model.train_on_batch(x, y)
        model.train_on_batch(x, y)

    _, _, loss_name = keras_data(np, name, model, 1)
    opt = type(model.optimizer).__name__
    if dry_run:
        two_steps(2)
        return {"file": f"tests/memory_models/{name}", "batch": batch, "optimizer": opt,
                "loss": loss_name, "dry_run": True}
    tf.config.experimental.reset_memory_stats("GPU:0")
    two_steps(batch)
    peak = tf.config.experimental.get_memory_info("GPU:0")["peak"]

    def fits(b):
        try:
            two_steps(b)
            return True
        except (tf.errors.ResourceExhaustedError, tf.errors.InternalError):
            return False
        finally:
            gc.collect()

    largest, trials = largest_batch(fits, batch)
    return {
        "file": f"tests/memory_models/{name}",
        "batch": batch,
        "optimizer": opt,
        "loss": loss_name,
        "allocated_peak_mib": round(peak / MIB),
        f"largest_batch_allocator_cap_{cap_gib:g}gib": largest,
        "bisection_trials": trials,
        "keras": keras.__version__,
    }


def keras_versions():
    import tensorflow as tf

    info = tf.sysconfig.get_build_info()
    out = {"tensorflow": tf.__version__, "cuda": info.get("cuda_version"),
           "cudnn": info.get("cudnn_version")}
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        out["gpu"] = tf.config.experimental.get_device_details(gpus[0]).get("device_name")
    return out


# ---------------------------------------------------------------------------------------------

def context_of_fresh_process():
    """The CUDA context and driver: total - free right after a bare context is made."""
    code = ("import torch; torch.cuda.init(); f, t = torch.cuda.mem_get_info(); "
            "print(t - f)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return round(int(out.stdout.strip()) / MIB)


def driver_version():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 else None
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return None


def slug(gpu):
    for key in ("H200", "H100", "A100", "L40S", "L4", "A10", "V100", "T4", "4090", "3090"):
        if key.lower() in gpu.lower():
            return key.lower()
    return "".join(c for c in gpu.lower().replace("nvidia", "") if c.isalnum())[:16] or "gpu"


def run_framework(which, args):
    files = sorted(p.name for p in MODELS.glob(f"{which}_*.py")
                   if fnmatch.fnmatch(p.name, args.models))
    versions_code = f"import json, calibrate_gpu as c; print(json.dumps(c.{which}_versions()))"
    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parent) + os.pathsep + env.get("PYTHONPATH", "")
    if args.dry_run:
        env["CUDA_VISIBLE_DEVICES"] = ""
    versions = json.loads(subprocess.run([sys.executable, "-c", versions_code], env=env,
                                         capture_output=True, text=True, check=True).stdout)
    records, failures = [], []
    for name in files:
        start = time.time()
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "r.json"
            cmd = [sys.executable, __file__, "--worker", which, name, str(out),
                   "--cap-gib", str(args.cap_gib)] + (["--dry-run"] if args.dry_run else [])
            try:
                proc = subprocess.run(cmd, env=env, capture_output=True, text=True,
                                      timeout=args.timeout)
                ok = proc.returncode == 0 and out.exists()
                why = proc.stderr.strip().splitlines()[-1:] if not ok else []
            except subprocess.TimeoutExpired:
                ok, why = False, [f"timed out after {args.timeout} s"]
            if ok:
                rec = json.loads(out.read_text())
                rec["seconds"] = round(time.time() - start, 1)
                records.append(rec)
                print(f"{name}: {rec}", file=sys.stderr)
            else:
                failures.append({"file": f"tests/memory_models/{name}", "error": " ".join(why)})
                print(f"{name}: FAILED {' '.join(why)}", file=sys.stderr)
    doc = {
        "generated_by": "scripts/calibrate_gpu.py",
        "gpu": versions.get("gpu"),
        "driver": None if args.dry_run else driver_version(),
        "versions": versions,
        "allocator_cap_gib": args.cap_gib,
        "method": ("two training steps (forward, backward, optimizer step) of each file's model, "
                   "optimizer and loss on random inputs of the file's shapes; largest batch: "
                   "doubling then bisection to 1% with the framework's allocator capped at "
                   f"{args.cap_gib:g} GiB, the CUDA context outside the cap"),
        "models": records,
        "failures": failures,
    }
    if which == "torch" and not args.dry_run:
        doc["cuda_context_and_driver_mib"] = context_of_fresh_process()
    return doc


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--framework", choices=("torch", "keras", "all"), default="all")
    ap.add_argument("--models", default="*", help="file name pattern (default: all)")
    ap.add_argument("--cap-gib", type=float, default=8.0)
    ap.add_argument("--timeout", type=int, default=600, help="seconds per model")
    ap.add_argument("--out-dir", default=str(ROOT / "tests" / "calibration"))
    ap.add_argument("--dry-run", action="store_true",
                    help="CPU only: one small step per model to check the set-up; writes nothing")
    ap.add_argument("--worker", nargs=3, metavar=("FRAMEWORK", "FILE", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        which, name, out = args.worker
        worker = torch_worker if which == "torch" else keras_worker
        Path(out).write_text(json.dumps(worker(name, args.cap_gib, args.dry_run)))
        return
    failed = 0
    for which in (("torch", "keras") if args.framework == "all" else (args.framework,)):
        doc = run_framework(which, args)
        failed += len(doc["failures"])
        if args.dry_run:
            print(f"{which}: {len(doc['models'])} models set up and stepped, "
                  f"{len(doc['failures'])} failed", file=sys.stderr)
            continue
        path = Path(args.out_dir) / f"{which}-{slug(doc['gpu'] or 'gpu')}.json"
        path.write_text(json.dumps(doc, indent=1) + "\n")
        print(f"wrote {path}", file=sys.stderr)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
