#!/usr/bin/env python3
"""Ground truth for the GPU-memory estimator.

Builds every model in tests/memory_models/ with the real frameworks, on the CPU, and records
what the estimator is compared with in tests/memory_ground_truth.rs:

- the parameter count (`model.count_params()` for Keras, `sum(p.numel() for p in
  model.parameters())` for PyTorch) and the trainable one;
- per layer (Keras: `model.layers`; PyTorch: leaf modules, with `LSTM`/`GRU`/`RNN`/
  `MultiheadAttention` taken whole), its parameters and the per-sample output shape of each
  call, recorded while running a batch of two samples through the model;
- the sum of those outputs' elements per sample (what activation memory is made of);
- PyTorch: the bytes autograd keeps for backward per sample (`saved_bytes_per_sample`): the
  distinct tensors packed by `torch.autograd.graph.saved_tensors_hooks` during one training-mode
  forward pass (and the loss, where the model computes it), parameters excluded, at batch 3
  minus batch 2. This is the CPU's choice of saved tensors, which matches CUDA's for
  convolutions, normalizations, pooling, activations, dropout and fused attention (not for
  recurrent layers, where cuDNN keeps its own reserve space).

Library models (files named `*_zoo_*`: torchvision, timm, keras.applications, Hugging Face
transformers) are built by the libraries themselves from the file; `layers_strict` says whether
the estimator names their layers as the library does (torchvision, keras.applications).

Run it from the repository root after installing scripts/requirements-memory.txt:

    python3 scripts/memory_ground_truth.py            # writes tests/memory_ground_truth.json

It never runs as part of `cargo test`: the JSON it writes is committed.
"""
import gc
import importlib.util
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "tests" / "memory_models"
OUT = ROOT / "tests" / "memory_ground_truth.json"

# PyTorch modules do not declare their input: the per-sample shape fed to each model, and the
# vocabulary size for integer (token id) inputs.
TORCH_INPUTS = {
    "torch_lenet.py": ((3, 32, 32), None),
    "torch_mlp_sequential.py": ((1, 28, 28), None),
    "torch_vgg_cfg.py": ((3, 32, 32), None),
    "torch_resnet_cifar.py": ((3, 32, 32), None),
    "torch_mobilenet_dw.py": ((3, 224, 224), None),
    "torch_dcgan_generator.py": ((100, 1, 1), None),
    "torch_dcgan_discriminator.py": ((3, 64, 64), None),
    "torch_unet.py": ((3, 256, 256), None),
    "torch_lstm_classifier.py": ((80,), 25000),
    "torch_bigru_tagger.py": ((200, 40), None),
    "torch_embedding_bag.py": ((256,), 50000),
    "torch_transformer_block.py": ((128,), 8000),
    "torch_conv1d_audio.py": ((1, 8000), None),
    "torch_conv3d.py": ((3, 16, 112, 112), None),
    "torch_autoencoder.py": ((784,), None),
    "torch_batchnorm_mlp.py": ((57,), None),
    "torch_dilated_groupnorm.py": ((3, 320, 320), None),
    "torch_cnn_fashion.py": ((1, 28, 28), None),
    "torch_siamese.py": ((1, 105, 105), None),
    "torch_wide_pool.py": ((3, 57, 61), None),
    "torch_zoo_hf_bert.py": ((128,), 30522),
    "torch_zoo_hf_gpt2.py": ((512,), 50257),
    "torch_zoo_hf_roberta.py": ((256,), 50265),
    "torch_zoo_hf_t5.py": ((256,), 32128),
    "torch_zoo_hf_llama.py": ((512,), 32000),
    "torch_zoo_hf_qwen2.py": ((256,), 32000),
    "torch_zoo_hf_vit.py": ((3, 224, 224), None),
}

# Hugging Face models that compute their loss from `labels=` (language modelling).
HF_LABELS = ("torch_zoo_hf_gpt2.py", "torch_zoo_hf_roberta.py", "torch_zoo_hf_t5.py",
             "torch_zoo_hf_llama.py", "torch_zoo_hf_qwen2.py")


def torch_input(name):
    if name in TORCH_INPUTS:
        return TORCH_INPUTS[name]
    # torchvision and timm image classifiers: the 224 x 224 they are published at.
    return ((3, 224, 224), None)

# Subclassed Keras models have no symbolic inputs to read the shape from.
KERAS_INPUTS = {
    "keras_subclassed_build.py": (28, 28, 1),
    "keras_subclassed_input.py": (128, 128, 3),
}

TORCH_ATOMIC = ("LSTM", "GRU", "RNN", "MultiheadAttention")
# Modules that hand their input back: no memory, left out of the layers.
TORCH_SKIP = ("Identity",)


def load(path):
    # argparse in a model file must see no arguments of ours.
    sys.argv = [str(path)]
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.model


def prod(shape):
    n = 1
    for d in shape:
        n *= int(d)
    return n


def keras_truth(name, model):
    import keras
    import numpy as np

    if name in KERAS_INPUTS:
        specs = [(KERAS_INPUTS[name], "float32")]
    else:
        specs = [(tuple(int(d) for d in t.shape[1:]), str(t.dtype)) for t in model.inputs]
    arrays = [
        np.ones((2,) + shape, dtype="int32") if "int" in dtype else np.random.rand(*((2,) + shape)).astype("float32")
        for shape, dtype in specs
    ]
    calls = {}
    layers = [l for l in model.layers if type(l).__name__ != "InputLayer"]
    for layer in layers:
        original = layer.call

        def wrapped(*args, _original=original, _name=layer.name, **kwargs):
            out = _original(*args, **kwargs)
            first = out[0] if isinstance(out, (list, tuple)) else out
            calls.setdefault(_name, []).append([int(d) for d in first.shape[1:]])
            return out

        layer.call = wrapped
    model(arrays if len(arrays) > 1 else arrays[0], training=False)
    entries = []
    for layer in layers:
        entries.append({
            "name": layer.name,
            "class": type(layer).__name__,
            "params": int(layer.count_params()),
            "output_shapes": calls.get(layer.name, []),
        })
    return {
        "framework": "keras",
        "input_shape": list(specs[0][0]),
        "params": int(model.count_params()),
        "trainable_params": int(sum(prod(w.shape) for w in model.trainable_weights)),
        "layers": entries,
    }


def torch_truth(name, model):
    import torch

    shape, vocab = torch_input(name)
    model.eval()
    leaves = []
    skip = set()
    for path, module in model.named_modules():
        if any(path.startswith(p + ".") for p in skip) or path == "":
            continue
        if type(module).__name__ in TORCH_ATOMIC:
            skip.add(path)
            leaves.append((path, module))
        elif not list(module.children()) and type(module).__name__ not in TORCH_SKIP:
            leaves.append((path, module))
    calls = {}
    order = []

    def hook(path):
        def fn(_module, _inputs, out):
            first = out[0] if isinstance(out, (list, tuple)) else out
            calls.setdefault(path, []).append([int(d) for d in first.shape[1:]])
            order.append(path)

        return fn

    handles = [m.register_forward_hook(hook(p)) for p, m in leaves]

    def example(batch):
        if vocab is None:
            return torch.randn((batch,) + tuple(shape))
        return torch.randint(0, vocab, (batch,) + tuple(shape))

    def run(x):
        if not hasattr(model, "config"):
            out = model(x)
            return out[0] if isinstance(out, (list, tuple)) else out
        key = "input_ids" if vocab is not None else "pixel_values"
        kwargs = {key: x}
        if name in HF_LABELS:
            kwargs["labels"] = x
        out = model(**kwargs)
        return out.loss if getattr(out, "loss", None) is not None else out[0]

    with torch.no_grad():
        run(example(2))
    for h in handles:
        h.remove()
    if hasattr(model, "config"):
        # CUDA runs attention with dropout in one fused kernel that keeps no score matrix;
        # PyTorch on the CPU falls back to the unfused path when the attention dropout is not
        # zero. Without it the CPU takes its fused kernel too, and saves what CUDA saves.
        for path, module in model.named_modules():
            if isinstance(module, torch.nn.Dropout) and path.endswith(
                ("attn_dropout", "attention.self.dropout", "attention.attention.dropout")
            ):
                module.p = 0.0
            if type(module).__name__.endswith("Attention") and isinstance(
                getattr(module, "dropout", None), float
            ):
                module.dropout = 0.0
    saved = {b: saved_bytes(model, run, example(b)) for b in (2, 3)}
    entries = []
    for path, module in leaves:
        entries.append({
            "name": path,
            "class": type(module).__name__,
            "params": int(sum(p.numel() for p in module.parameters())),
            "output_shapes": calls.get(path, []),
        })
    return {
        "framework": "pytorch",
        "input_shape": list(shape),
        "params": int(sum(p.numel() for p in model.parameters())),
        "trainable_params": int(sum(p.numel() for p in model.parameters() if p.requires_grad)),
        "layers": entries,
        "saved_bytes_per_sample": saved[3] - saved[2],
    }


def saved_bytes(model, run, x):
    """Bytes of the distinct non-parameter tensors autograd saves in one training forward."""
    import torch

    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen = {}

    def pack(t):
        st = t.untyped_storage()
        ptr = st.data_ptr()
        if ptr not in params and ptr != 0:
            seen[ptr] = max(seen.get(ptr, 0), st.nbytes())
        return t

    model.train()
    torch.manual_seed(0)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        run(x)
    model.eval()
    return sum(seen.values())


# Published configurations of checkpoints the estimator knows by name (their config.json
# numbers), and the model class `from_pretrained` is called on in the test of each. The
# libraries build them on the meta device (no weights, no download) to count parameters.
CHECKPOINTS = {
    "gpt2": ("GPT2LMHeadModel", "GPT2Config", {}),
    "gpt2-medium": ("GPT2LMHeadModel", "GPT2Config", dict(n_embd=1024, n_layer=24, n_head=16)),
    "gpt2-large": ("GPT2LMHeadModel", "GPT2Config", dict(n_embd=1280, n_layer=36, n_head=20)),
    "gpt2-xl": ("GPT2LMHeadModel", "GPT2Config", dict(n_embd=1600, n_layer=48, n_head=25)),
    "distilgpt2": ("GPT2LMHeadModel", "GPT2Config", dict(n_layer=6)),
    "bert-base-uncased": ("BertModel", "BertConfig", {}),
    "bert-large-uncased": ("BertModel", "BertConfig", dict(
        hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096)),
    "roberta-base": ("RobertaModel", "RobertaConfig", dict(
        vocab_size=50265, max_position_embeddings=514, type_vocab_size=1)),
    "t5-small": ("T5ForConditionalGeneration", "T5Config", {}),
    "t5-base": ("T5ForConditionalGeneration", "T5Config", dict(
        d_model=768, d_ff=3072, num_layers=12, num_heads=12)),
    "meta-llama/Llama-2-7b-hf": ("LlamaForCausalLM", "LlamaConfig", dict(
        max_position_embeddings=4096)),
    "meta-llama/Meta-Llama-3-8B": ("LlamaForCausalLM", "LlamaConfig", dict(
        vocab_size=128256, intermediate_size=14336, num_key_value_heads=8,
        max_position_embeddings=8192)),
    "meta-llama/Llama-3.2-1B": ("LlamaForCausalLM", "LlamaConfig", dict(
        vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
        num_attention_heads=32, num_key_value_heads=8, tie_word_embeddings=True)),
    "mistralai/Mistral-7B-v0.1": ("MistralForCausalLM", "MistralConfig", dict(
        vocab_size=32000, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
        num_attention_heads=32, num_key_value_heads=8)),
    "TinyLlama/TinyLlama-1.1B-Chat-v1.0": ("LlamaForCausalLM", "LlamaConfig", dict(
        hidden_size=2048, intermediate_size=5632, num_hidden_layers=22, num_attention_heads=32,
        num_key_value_heads=4)),
    "Qwen/Qwen2.5-0.5B": ("Qwen2ForCausalLM", "Qwen2Config", dict(
        vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
        num_attention_heads=14, num_key_value_heads=2, tie_word_embeddings=True)),
    "google/vit-base-patch16-224": ("ViTForImageClassification", "ViTConfig", dict(num_labels=1000)),
}


def checkpoint_truth():
    import torch
    import transformers

    out = {}
    for name, (model_class, config_class, kwargs) in CHECKPOINTS.items():
        config = getattr(transformers, config_class)(**kwargs)
        with torch.device("meta"):
            model = getattr(transformers, model_class)(config)
        out[name] = {"class": model_class, "params": int(sum(p.numel() for p in model.parameters()))}
        print(f"checkpoint {name}: {out[name]['params']} parameters", file=sys.stderr)
    return out


def library_versions():
    out = {}
    for lib in ("torchvision", "timm", "transformers"):
        try:
            out[lib] = __import__(lib).__version__
        except ImportError:
            pass
    return out


def part(which):
    """The models of one framework: TensorFlow's and PyTorch's LLVMs cannot share a process."""
    models = {}
    versions = {}
    if which == "keras":
        import keras
        import tensorflow as tf

        versions = {"tensorflow": tf.__version__, "keras": keras.__version__}
    else:
        import torch

        torch.manual_seed(0)
        versions = {"torch": torch.__version__, **library_versions()}
    for path in sorted(MODELS.glob(f"{which}_*.py")):
        name = path.name
        if which == "keras":
            keras.backend.clear_session()
            truth = keras_truth(name, load(path))
        else:
            truth = torch_truth(name, load(path))
        # Free one model's memory before the next is built.
        gc.collect()
        truth["layers_strict"] = "_zoo_" not in name or name.startswith(("torch_zoo_tv_", "keras_zoo_"))
        truth["activation_elements_per_sample"] = sum(
            prod(s) for layer in truth["layers"] for s in layer["output_shapes"]
        )
        models[name] = truth
        print(f"{name}: {truth['params']} parameters, {len(truth['layers'])} layers", file=sys.stderr)
    doc = {"versions": versions, "models": models}
    if which == "torch":
        doc["checkpoints"] = checkpoint_truth()
    return doc


def main():
    import subprocess

    import tempfile

    if len(sys.argv) == 4 and sys.argv[1] == "--part":
        which, out = sys.argv[2], Path(sys.argv[3])
        out.write_text(json.dumps(part(which)))
        return
    versions = {"python": sys.version.split()[0]}
    models = {}
    checkpoints = {}
    for which in ("keras", "torch"):
        with tempfile.TemporaryDirectory() as tmp:
            part_file = Path(tmp) / f"{which}.json"
            subprocess.run([sys.executable, __file__, "--part", which, str(part_file)], check=True)
            doc = json.loads(part_file.read_text())
        versions.update(doc["versions"])
        models.update(doc["models"])
        checkpoints.update(doc.get("checkpoints", {}))
    doc = {
        "generated_by": "scripts/memory_ground_truth.py",
        "versions": versions,
        "models": dict(sorted(models.items())),
        "checkpoints": checkpoints,
    }
    OUT.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)} ({len(models)} models)", file=sys.stderr)


if __name__ == "__main__":
    main()
