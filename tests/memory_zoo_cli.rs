//! Library models as users write them: `torchvision.models.resnet50()`,
//! `timm.create_model(...)`, `tf.keras.applications.ResNet50(...)`, Hugging Face models from a
//! configuration or `from_pretrained`, a functional Keras model merged with `layers.add`, a
//! custom TensorFlow loop; `gpulint estimate --max-batch`.

mod common;

use common::{gpulint, stderr, stdout};
use serde_json::Value;

const TORCHVISION: &str = "import torch\nimport torchvision\nfrom torch.utils.data import DataLoader\n\nmodel = torchvision.models.resnet50(weights=None).cuda()\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)\nloader = DataLoader(train_set, batch_size=256, shuffle=True)\nfor images, labels in loader:\n    loss = torch.nn.functional.cross_entropy(model(images.cuda()), labels.cuda())\n    optimizer.zero_grad()\n    loss.backward()\n    optimizer.step()\n";

const TIMM: &str = "import timm\nimport torch\n\nmodel = timm.create_model(\"vit_base_patch16_224\", pretrained=True, num_classes=100).cuda()\noptimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)\ntrain_loader = torch.utils.data.DataLoader(ds, batch_size=512)\nfor x, y in train_loader:\n    torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda()).backward()\n    optimizer.step()\n    optimizer.zero_grad()\n";

const KERAS_APP: &str = "import tensorflow as tf\n\nmodel = tf.keras.applications.ResNet50(weights=None, input_shape=(224, 224, 3), classes=10)\nmodel.compile(optimizer=\"adam\", loss=\"sparse_categorical_crossentropy\")\nmodel.fit(x_train, y_train, batch_size=256, epochs=3)\n";

const GPT2: &str = "import torch\nfrom transformers import GPT2Config, GPT2LMHeadModel\n\nmodel = GPT2LMHeadModel(GPT2Config()).cuda()\noptimizer = torch.optim.AdamW(model.parameters(), lr=5e-5)\nloader = torch.utils.data.DataLoader(dataset, batch_size=32)\nfor batch in loader:\n    model(input_ids=batch.cuda(), labels=batch.cuda()).loss.backward()\n    optimizer.step()\n    optimizer.zero_grad()\n";

const AUTO: &str = "import torch\nfrom transformers import AutoModelForCausalLM\n\nmodel = AutoModelForCausalLM.from_pretrained(\"gpt2\")\noptimizer = torch.optim.AdamW(model.parameters(), lr=5e-5)\nloader = torch.utils.data.DataLoader(dataset, batch_size=16)\nfor batch in loader:\n    model(**batch).loss.backward()\n    optimizer.step()\n";

const KERAS_ADD: &str = "import tensorflow as tf\nfrom tensorflow.keras import layers\n\ninputs = tf.keras.Input(shape=(64, 64, 3))\nx = layers.Conv2D(32, 3, padding=\"same\", activation=\"relu\")(inputs)\ny = layers.Conv2D(32, 3, padding=\"same\")(x)\nx = layers.add([x, y])\nz = layers.multiply([x, y])\nx = layers.concatenate([x, z])\nx = layers.GlobalAveragePooling2D()(x)\noutputs = layers.Dense(10)(x)\nmodel = tf.keras.Model(inputs, outputs)\nmodel.compile(optimizer=\"adam\", loss=\"mse\")\nmodel.fit(xs, ys, batch_size=128)\n";

const TF_LOOP: &str = "import tensorflow as tf\n\nBATCH = 512\nmodel = tf.keras.applications.MobileNetV2(weights=None, input_shape=(224, 224, 3), classes=100)\noptimizer = tf.keras.optimizers.Adam(1e-3)\nloss_fn = tf.keras.losses.SparseCategoricalCrossentropy()\ntrain_ds = tf.data.Dataset.from_tensor_slices((images, labels)).shuffle(1000).batch(BATCH)\n\nfor x, y in train_ds:\n    with tf.GradientTape() as tape:\n        loss = loss_fn(y, model(x, training=True))\n    grads = tape.gradient(loss, model.trainable_variables)\n    optimizer.apply_gradients(zip(grads, model.trainable_variables))\n";

const FINE_TUNE: &str = "import torch\nimport torch.nn as nn\nfrom torchvision import models\n\nmodel = models.resnet50(weights=\"IMAGENET1K_V2\")\nmodel.fc = nn.Linear(model.fc.in_features, 10)\nmodel = model.to(\"cuda\")\noptimizer = torch.optim.Adam(model.parameters(), lr=1e-4)\nloader = torch.utils.data.DataLoader(ds, batch_size=512)\nfor x, y in loader:\n    nn.functional.cross_entropy(model(x), y).backward()\n    optimizer.step()\n";

const TRAINER: &str = "from transformers import AutoModelForSequenceClassification, Trainer, TrainingArguments\n\nmodel = AutoModelForSequenceClassification.from_pretrained(\"bert-base-uncased\", num_labels=3)\nargs = TrainingArguments(output_dir=\"out\", per_device_train_batch_size=64)\ntrainer = Trainer(model=model, args=args, train_dataset=train)\ntrainer.train()\n";

fn estimate_json(d: &std::path::Path, file: &str, extra: &[&str]) -> Value {
    let mut args = vec!["estimate", "--isolated", "--output-format", "json"];
    args.extend_from_slice(extra);
    args.push(file);
    let o = gpulint(d, &args);
    assert_eq!(o.status.code(), Some(0), "{file}: {}", stderr(&o));
    serde_json::from_str(&stdout(&o)).unwrap()
}

#[test]
fn library_models_have_the_libraries_parameter_counts_and_mem001_fires() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    // (file, source, parameters as the library counts them, batch in the file)
    let cases: &[(&str, &str, u64, u64)] = &[
        ("tv.py", TORCHVISION, 25_557_032, 256),
        ("timm_vit.py", TIMM, 85_875_556, 512),
        ("keras_app.py", KERAS_APP, 23_608_202, 256),
        ("gpt2.py", GPT2, 124_439_808, 32),
        ("auto.py", AUTO, 124_439_808, 16),
        ("keras_add.py", KERAS_ADD, 10_794, 128),
        ("tf_loop.py", TF_LOOP, 2_386_084, 512),
        ("fine_tune.py", FINE_TUNE, 23_528_522, 512),
        ("trainer.py", TRAINER, 109_484_547, 64),
    ];
    for (file, src, params, batch) in cases {
        std::fs::write(d.join(file), src).unwrap();
        let v = estimate_json(d, file, &[]);
        assert_eq!(v["params"], *params, "{file}: {v}");
        assert_eq!(v["batch_size"], *batch, "{file}: {v}");
        assert!(v["peak_bytes"].as_u64().is_some(), "{file}: {v}");
    }
    // Every script but the small functional model trains past 8 GiB at its batch.
    for (file, ..) in cases.iter().filter(|c| c.0 != "keras_add.py") {
        let o = gpulint(
            d,
            &[
                "--isolated",
                "--select",
                "MEM001",
                "--output-format",
                "json",
                file,
            ],
        );
        assert_eq!(o.status.code(), Some(1), "{file}: {}", stdout(&o));
        let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
        assert_eq!(v[0]["code"], "MEM001", "{file}: {v}");
        let notes = v[0]["notes"].to_string();
        assert!(
            notes.contains("CUDA context") && notes.contains("activations"),
            "{file}: {notes}"
        );
    }
    // On an 80 GB card ResNet-50 at batch 256 fits.
    let o = gpulint(
        d,
        &["--isolated", "--gpu", "h100", "--select", "MEM001", "tv.py"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
}

#[test]
fn max_batch_in_text_and_json() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(d.join("tv.py"), TORCHVISION).unwrap();
    let o = gpulint(d, &["estimate", "--isolated", "--max-batch", "tv.py"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    for want in [
        "largest batch that fits",
        "T4 16 GB",
        "A100 80 GB",
        "H200 141 GB",
        "the budget",
    ] {
        assert!(text.contains(want), "missing `{want}` in:\n{text}");
    }
    let v = estimate_json(d, "tv.py", &["--max-batch"]);
    let mb = &v["max_batch"];
    let gpus = mb["gpus"].as_array().unwrap();
    assert_eq!(gpus.len(), 11);
    let batch = |name: &str| {
        gpus.iter().find(|g| g["gpu"] == name).unwrap()["max_batch_size"]
            .as_u64()
            .unwrap()
    };
    assert!(batch("T4 16 GB") < batch("A100 40 GB"));
    assert!(batch("A100 40 GB") < batch("H200 141 GB"));
    assert_eq!(mb["max_batch_size"], v["max_batch_size"]);
    assert!(mb["gpus"][0]["usable_bytes"].as_u64().unwrap() < 15360 << 20);
}
