//! `gpulint estimate`, `--gpu NAME` and the `gpu` configuration key, as users meet them.

mod common;

use common::{gpulint, stderr, stdout};

const TRAIN: &str = "from tensorflow import keras\nfrom tensorflow.keras import layers\n\nmodel = keras.Sequential([\n    keras.Input(shape=(224, 224, 3)),\n    layers.Conv2D(64, 3, padding=\"same\", activation=\"relu\"),\n    layers.GlobalAveragePooling2D(),\n    layers.Dense(10),\n])\nmodel.compile(optimizer=\"adam\", loss=\"mse\")\nmodel.fit(x, y, batch_size=512)\n";

#[test]
fn estimate_reports_a_table_and_json() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(d.join("train.py"), TRAIN).unwrap();
    let o = gpulint(d, &["estimate", "--isolated", "train.py"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    for want in [
        "conv2d (Conv2D)",
        "(224, 224, 64)",
        "1,792",
        "batch size: 512",
        "largest batch that fits",
        "8 GiB (the default",
    ] {
        assert!(text.contains(want), "missing `{want}` in:\n{text}");
    }

    let o = gpulint(
        d,
        &[
            "estimate",
            "--isolated",
            "--gpu",
            "rtx3090",
            "--output-format",
            "json",
            "train.py",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    for key in [
        "params",
        "param_bytes",
        "activation_bytes_per_sample",
        "batch_size",
        "peak_bytes",
        "max_batch_size",
        "layers",
    ] {
        assert!(
            v.get(key).is_some_and(|x| !x.is_null()),
            "JSON lacks `{key}`: {v}"
        );
    }
    assert_eq!(v["params"], 1792 + 650);
    assert_eq!(v["batch_size"], 512);
    assert_eq!(v["budget_bytes"], 24u64 << 30);
    assert!(v["budget_source"].as_str().unwrap().contains("RTX 3090"));
    assert_eq!(
        v["layers"][0]["output_shape"],
        serde_json::json!([224, 224, 64])
    );
    let peak = v["peak_bytes"].as_u64().unwrap();
    let per = v["activation_bytes_per_sample"].as_u64().unwrap();
    assert!(
        peak > 256 * per,
        "the peak holds the activations of the whole batch"
    );
}

#[test]
fn estimate_says_why_inference_stopped() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(
        d.join("net.py"),
        "import torch\nfrom torch import nn\n\nmodel = nn.Sequential(nn.Linear(10, 10), nn.TransformerEncoder(layer, 2))\nmodel(torch.randn(2, 10))\n",
    )
    .unwrap();
    let o = gpulint(d, &["estimate", "--isolated", "net.py"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("inference stopped"), "{}", stdout(&o));
    assert!(stdout(&o).contains("TransformerEncoder"), "{}", stdout(&o));

    std::fs::write(d.join("plain.py"), "print('hello')\n").unwrap();
    let o = gpulint(d, &["estimate", "--isolated", "plain.py"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("no Keras or PyTorch model"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn budget_flags_and_configuration() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(d.join("train.py"), TRAIN).unwrap();
    // Over 8 GiB: reported, and the message says where the budget came from.
    let o = gpulint(
        d,
        &[
            "--isolated",
            "--select",
            "MEM",
            "--output-format",
            "json",
            "train.py",
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v[0]["code"], "MEM001");
    assert!(v[0]["notes"].to_string().contains("the default"), "{v}");
    // An 80 GB card holds it.
    let o = gpulint(d, &["--isolated", "--gpu", "a100-80gb", "train.py"]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    // Ambiguous and unknown names, and both flags at once, are usage errors.
    let o = gpulint(d, &["--isolated", "--gpu", "a100", "train.py"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("a100-40gb"), "{}", stderr(&o));
    let o = gpulint(d, &["--isolated", "--gpu", "voodoo2", "train.py"]);
    assert_eq!(o.status.code(), Some(2));
    let o = gpulint(
        d,
        &[
            "--isolated",
            "--gpu",
            "t4",
            "--gpu-memory",
            "8GiB",
            "train.py",
        ],
    );
    assert_eq!(o.status.code(), Some(2));
    // `gpu` in the configuration.
    std::fs::write(d.join("gpulint.toml"), "gpu = \"h100\"\n").unwrap();
    let o = gpulint(d, &["train.py"]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    std::fs::write(
        d.join("gpulint.toml"),
        "gpu = \"rtx3060\"\n[rules.MEM002]\nhuge-tensor-fraction = 0.5\n",
    )
    .unwrap();
    let o = gpulint(d, &["--output-format", "concise", "train.py"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stdout(&o).contains("12 GiB budget"), "{}", stdout(&o));
    std::fs::write(
        d.join("gpulint.toml"),
        "[rules.MEM002]\nhuge-tensor-fraction = 2.5\n",
    )
    .unwrap();
    let o = gpulint(d, &["train.py"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("huge-tensor-fraction"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn huge_tensor_fraction_option() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    // 20000 × 20000 float32 = 1.5 GiB: 19% of 8 GiB.
    std::fs::write(
        d.join("t.py"),
        "import torch\nx = torch.randn(20000, 20000, device=\"cuda\")\n",
    )
    .unwrap();
    let o = gpulint(d, &["--isolated", "t.py"]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    std::fs::write(
        d.join("gpulint.toml"),
        "[rules.MEM002]\nhuge-tensor-fraction = 0.1\n",
    )
    .unwrap();
    let o = gpulint(d, &["--output-format", "concise", "t.py"]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(stdout(&o).contains("MEM002"));
}

/// The severities of the MEM002 findings of `t.py` in `d`.
fn mem002_severities(d: &std::path::Path, args: &[&str]) -> Vec<String> {
    let mut all = vec!["--no-cache", "--output-format", "json", "--exit-zero"];
    all.extend_from_slice(args);
    all.push("t.py");
    let o = gpulint(d, &all);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("JSON output");
    v.as_array()
        .unwrap()
        .iter()
        .filter(|f| f["code"] == "MEM002")
        .map(|f| f["severity"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn huge_tensor_severity_follows_the_budget_origin() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    // 70 GiB of float32: over the default 8 GiB budget, but it fits the largest cards.
    std::fs::write(
        d.join("t.py"),
        "import torch\nx = torch.randn(70 * 2**28, device=\"cuda\")\nprint(x.sum())\n",
    )
    .unwrap();
    assert_eq!(mem002_severities(d, &["--isolated"]), ["warning"]);
    // A budget the user sets is authoritative.
    assert_eq!(
        mem002_severities(d, &["--isolated", "--gpu-memory", "24GiB"]),
        ["error"]
    );
    std::fs::write(d.join("gpulint.toml"), "gpu = \"rtx4090\"\n").unwrap();
    assert_eq!(mem002_severities(d, &[]), ["error"]);
    std::fs::remove_file(d.join("gpulint.toml")).unwrap();
    // 400 GiB fits no card at all.
    std::fs::write(
        d.join("t.py"),
        "import torch\nx = torch.randn(400 * 2**28, device=\"cuda\")\nprint(x.sum())\n",
    )
    .unwrap();
    assert_eq!(mem002_severities(d, &["--isolated"]), ["error"]);
    // An unread reservation is left alone under the default budget, not under a set one.
    std::fs::write(
        d.join("t.py"),
        "import torch\n\n\ndef test_pressure():\n    dummy = torch.empty(70 * 2**30, dtype=torch.uint8, device=\"cuda\")\n    assert torch.ones(2, device=\"cuda\").sum() == 2\n",
    )
    .unwrap();
    assert!(mem002_severities(d, &["--isolated"]).is_empty());
    assert_eq!(
        mem002_severities(d, &["--isolated", "--gpu-memory", "24GiB"]),
        ["error"]
    );
}
