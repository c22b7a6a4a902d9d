//! Hugging Face transformers: configurations (`GPT2Config(n_layer=...)`, the published numbers
//! of common checkpoints for `from_pretrained("gpt2")`), heads (`...Model`, `...ForCausalLM`,
//! `...ForSequenceClassification`, `...ForMaskedLM`, T5 `ForConditionalGeneration`, ViT
//! `ForImageClassification`) and the layers each runs, so the sequence length, batch and
//! precision change the estimate.

use super::net::{cv, Net, X};
use crate::layer::Params;
use crate::value::Args;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// BERT and RoBERTa: post-norm encoder with learned positions and token types.
    Bert,
    Roberta,
    Gpt2,
    T5,
    /// Llama, Mistral, Qwen2: RMSNorm, rotary positions, gated MLP, grouped-query attention.
    Llama,
    Vit,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Head {
    Base,
    CausalLm,
    MaskedLm,
    SeqCls(u64),
    Seq2Seq,
    ImageCls(u64),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub family: Family,
    pub vocab: u64,
    pub hidden: u64,
    pub layers: u64,
    pub heads: u64,
    pub kv_heads: u64,
    pub inter: u64,
    pub max_pos: u64,
    pub type_vocab: u64,
    pub tie: bool,
    pub qkv_bias: bool,
    /// T5: decoder layers, key/value width per head, relative-position buckets.
    pub dec_layers: u64,
    pub d_kv: u64,
    pub buckets: u64,
    /// ViT: image size and patch.
    pub image: u64,
    pub patch: u64,
    pub head: Head,
    /// `attn_implementation="eager"`: the score matrices are materialized.
    pub eager: bool,
}

impl Config {
    fn new(family: Family) -> Config {
        let base = Config {
            family,
            vocab: 30522,
            hidden: 768,
            layers: 12,
            heads: 12,
            kv_heads: 12,
            inter: 3072,
            max_pos: 512,
            type_vocab: 2,
            tie: true,
            qkv_bias: true,
            dec_layers: 0,
            d_kv: 64,
            buckets: 32,
            image: 224,
            patch: 16,
            head: Head::Base,
            eager: false,
        };
        match family {
            Family::Bert => base,
            Family::Roberta => Config {
                vocab: 50265,
                max_pos: 514,
                type_vocab: 1,
                ..base
            },
            Family::Gpt2 => Config {
                vocab: 50257,
                max_pos: 1024,
                ..base
            },
            Family::T5 => Config {
                vocab: 32128,
                hidden: 512,
                layers: 6,
                dec_layers: 6,
                heads: 8,
                kv_heads: 8,
                inter: 2048,
                qkv_bias: false,
                ..base
            },
            Family::Llama => Config {
                vocab: 32000,
                hidden: 4096,
                layers: 32,
                heads: 32,
                kv_heads: 32,
                inter: 11008,
                max_pos: 2048,
                tie: false,
                qkv_bias: false,
                ..base
            },
            Family::Vit => Config { ..base },
        }
    }

    /// The sequence length the model is fed when the file does not say: its longest
    /// (at most 2048).
    pub fn default_seq(&self) -> u64 {
        self.max_pos.min(2048)
    }
}

/// `GPT2Config`, `LlamaConfig`, ... → the family.
pub fn family_of(class: &str) -> Option<Family> {
    let stem = class
        .trim_end_matches("Config")
        .trim_end_matches("Model")
        .trim_end_matches("LMHead");
    let stem = stem.split("For").next().unwrap_or(stem);
    Some(match stem {
        "Bert" => Family::Bert,
        "Roberta" => Family::Roberta,
        "GPT2" => Family::Gpt2,
        "T5" => Family::T5,
        "Llama" | "Mistral" | "Qwen2" => Family::Llama,
        "ViT" => Family::Vit,
        _ => return None,
    })
}

/// A configuration built in the file: `GPT2Config(n_layer=6)`, `LlamaConfig(...)`.
pub fn config(class: &str, a: &Args) -> Option<Result<Config, String>> {
    let family = family_of(class)?;
    let mut c = Config::new(family);
    if class.starts_with("Qwen2") {
        c.qkv_bias = true;
    }
    Some(apply(&mut c, a).map(|_| c))
}

/// A keyword of a configuration and the field it sets.
type Key = (&'static str, fn(&mut Config) -> &mut u64);

/// Keyword overrides of a configuration (also `from_pretrained(name, num_labels=...)`).
pub fn apply(c: &mut Config, a: &Args) -> Result<(), String> {
    let keys: &[Key] = &[
        ("vocab_size", |c| &mut c.vocab),
        ("hidden_size", |c| &mut c.hidden),
        ("n_embd", |c| &mut c.hidden),
        ("d_model", |c| &mut c.hidden),
        ("num_hidden_layers", |c| &mut c.layers),
        ("n_layer", |c| &mut c.layers),
        ("num_layers", |c| &mut c.layers),
        ("num_decoder_layers", |c| &mut c.dec_layers),
        ("num_attention_heads", |c| &mut c.heads),
        ("n_head", |c| &mut c.heads),
        ("num_heads", |c| &mut c.heads),
        ("num_key_value_heads", |c| &mut c.kv_heads),
        ("intermediate_size", |c| &mut c.inter),
        ("n_inner", |c| &mut c.inter),
        ("d_ff", |c| &mut c.inter),
        ("d_kv", |c| &mut c.d_kv),
        ("max_position_embeddings", |c| &mut c.max_pos),
        ("n_positions", |c| &mut c.max_pos),
        ("type_vocab_size", |c| &mut c.type_vocab),
        ("relative_attention_num_buckets", |c| &mut c.buckets),
        ("image_size", |c| &mut c.image),
        ("patch_size", |c| &mut c.patch),
    ];
    let heads_given = a.kw("num_attention_heads").or(a.kw("n_head")).is_some();
    let layers_given = a.kw("num_layers").is_some();
    for (key, field) in keys {
        if let Some(v) = a.kw(key) {
            if matches!(v, crate::value::Val::None) {
                continue;
            }
            let n = v
                .int()
                .filter(|n| *n > 0)
                .ok_or_else(|| format!("`{key}` is not a constant"))?;
            *field(c) = n as u64;
        }
    }
    if c.family == Family::Gpt2 && a.kw("n_inner").is_none() {
        c.inter = 4 * c.hidden;
    }
    if heads_given && a.kw("num_key_value_heads").is_none() && c.family != Family::T5 {
        c.kv_heads = c.heads;
    }
    if c.family == Family::T5 {
        c.kv_heads = c.heads;
        if layers_given && a.kw("num_decoder_layers").is_none() {
            c.dec_layers = c.layers;
        }
    }
    if let Some(v) = a.kw("tie_word_embeddings") {
        c.tie = v
            .truthy()
            .ok_or("`tie_word_embeddings` is not a constant")?;
    }
    if let Some(v) = a.kw("attention_bias") {
        c.qkv_bias = v.truthy().ok_or("`attention_bias` is not a constant")?;
    }
    if let Some(v) = a.kw("num_labels") {
        let n = v
            .int()
            .filter(|n| *n > 0)
            .ok_or("`num_labels` is not a constant")? as u64;
        c.head = match c.head {
            Head::ImageCls(_) => Head::ImageCls(n),
            _ => Head::SeqCls(n),
        };
    }
    if let Some(v) = a.kw("attn_implementation").and_then(|v| v.str()) {
        c.eager = v == "eager";
    }
    Ok(())
}

/// The head a model class puts on the base model.
pub fn head_of(class: &str, family: Family) -> Option<Head> {
    let after = class.split("For").nth(1).unwrap_or("");
    Some(match after {
        "" if class.ends_with("LMHeadModel") => Head::CausalLm,
        "" => Head::Base,
        "CausalLM" => Head::CausalLm,
        "MaskedLM" => Head::MaskedLm,
        "SequenceClassification" => Head::SeqCls(2),
        "ConditionalGeneration" if family == Family::T5 => Head::Seq2Seq,
        "ImageClassification" if family == Family::Vit => Head::ImageCls(1000),
        _ => return None,
    })
}

/// The published configuration of a checkpoint name (`gpt2`, `bert-base-uncased`,
/// `meta-llama/Llama-2-7b-hf`).
pub fn checkpoint(name: &str) -> Option<Config> {
    let short = name.rsplit('/').next().unwrap_or(name).to_ascii_lowercase();
    let llama = |vocab, hidden, inter, layers, heads, kv, max_pos, tie, bias| Config {
        vocab,
        hidden,
        inter,
        layers,
        heads,
        kv_heads: kv,
        max_pos,
        tie,
        qkv_bias: bias,
        ..Config::new(Family::Llama)
    };
    Some(match short.as_str() {
        "bert-base-uncased" | "bert-base-cased" | "bert-base-multilingual-cased" => {
            let mut c = Config::new(Family::Bert);
            c.vocab = match short.as_str() {
                "bert-base-cased" => 28996,
                "bert-base-multilingual-cased" => 119547,
                _ => 30522,
            };
            c
        }
        "bert-large-uncased" | "bert-large-cased" => Config {
            vocab: if short.ends_with("uncased") {
                30522
            } else {
                28996
            },
            hidden: 1024,
            layers: 24,
            heads: 16,
            kv_heads: 16,
            inter: 4096,
            ..Config::new(Family::Bert)
        },
        "roberta-base" => Config::new(Family::Roberta),
        "roberta-large" => Config {
            hidden: 1024,
            layers: 24,
            heads: 16,
            kv_heads: 16,
            inter: 4096,
            ..Config::new(Family::Roberta)
        },
        "gpt2" => Config::new(Family::Gpt2),
        "gpt2-medium" | "gpt2-large" | "gpt2-xl" => {
            let (h, l, n) = match short.as_str() {
                "gpt2-medium" => (1024, 24, 16),
                "gpt2-large" => (1280, 36, 20),
                _ => (1600, 48, 25),
            };
            Config {
                hidden: h,
                layers: l,
                heads: n,
                kv_heads: n,
                inter: 4 * h,
                ..Config::new(Family::Gpt2)
            }
        }
        "distilgpt2" => Config {
            layers: 6,
            ..Config::new(Family::Gpt2)
        },
        "t5-small" => Config::new(Family::T5),
        "t5-base" => Config {
            hidden: 768,
            layers: 12,
            dec_layers: 12,
            heads: 12,
            kv_heads: 12,
            inter: 3072,
            ..Config::new(Family::T5)
        },
        "llama-2-7b-hf" | "llama-2-7b-chat-hf" => {
            llama(32000, 4096, 11008, 32, 32, 32, 4096, false, false)
        }
        "meta-llama-3-8b" | "llama-3.1-8b" | "meta-llama-3.1-8b" | "llama-3.1-8b-instruct" => {
            llama(128256, 4096, 14336, 32, 32, 8, 8192, false, false)
        }
        "llama-3.2-1b" | "llama-3.2-1b-instruct" => {
            llama(128256, 2048, 8192, 16, 32, 8, 8192, true, false)
        }
        "llama-3.2-3b" | "llama-3.2-3b-instruct" => {
            llama(128256, 3072, 8192, 28, 24, 8, 8192, true, false)
        }
        "mistral-7b-v0.1" | "mistral-7b-instruct-v0.2" => {
            llama(32000, 4096, 14336, 32, 32, 8, 8192, false, false)
        }
        "tinyllama-1.1b-chat-v1.0" | "tinyllama-1.1b-intermediate-step-1431k-3t" => {
            llama(32000, 2048, 5632, 22, 32, 4, 2048, false, false)
        }
        "qwen2.5-0.5b" | "qwen2.5-0.5b-instruct" | "qwen2-0.5b" => {
            llama(151936, 896, 4864, 24, 14, 2, 2048, true, true)
        }
        "qwen2.5-1.5b" | "qwen2.5-1.5b-instruct" => {
            llama(151936, 1536, 8960, 28, 12, 2, 2048, true, true)
        }
        "vit-base-patch16-224" | "vit-base-patch16-224-in21k" => Config::new(Family::Vit),
        _ => return None,
    })
}

fn linear(n: &mut Net, name: &str, x: &X, out: u64, bias: bool) -> X {
    n.linear(name, x, out, bias)
}

/// Token embedding lookup: an integer input of `seq` ids → `(seq, d)`.
fn embed(n: &mut Net, name: &str, x: &X, vocab: u64, d: u64) -> X {
    let mut s = x.shape.clone();
    s.push(d);
    n.push(name, "Embedding", &[x], s, Params::trainable(vocab * d))
}

/// Attention over `(seq, q_width)` queries: `eager` keeps the per-head score matrices.
fn attend(n: &mut Net, q: &X, kv: &[&X], heads: u64, width: u64, eager: bool) -> X {
    let mut ins = vec![q];
    ins.extend_from_slice(kv);
    let class = if eager {
        "eager_attention"
    } else {
        "scaled_dot_product_attention"
    };
    let seq = q.shape[0];
    let y = n.push_kind(
        class,
        class,
        &ins,
        vec![seq, width],
        Params::default(),
        false,
        false,
    );
    n.steps.last_mut().expect("a step").heads = heads;
    y
}

fn rms(n: &mut Net, name: &str, x: &X) -> X {
    let d = x.last();
    n.push(name, "RMSNorm", &[x], x.shape.clone(), Params::trainable(d))
}

/// The network for `cfg` fed `x` per sample (token ids, or an image for ViT).
pub fn build(cfg: &Config, x: X) -> Result<Net, String> {
    let mut n = Net::new(false);
    let c = cfg;
    let h = c.hidden;
    if c.family != Family::Vit {
        let seq = x.shape[0];
        if seq > c.max_pos && matches!(c.family, Family::Bert | Family::Roberta | Family::Gpt2) {
            return Err(format!(
                "sequences of {seq} tokens are longer than the model's {} positions",
                c.max_pos
            ));
        }
    }
    let logits_of = |n: &mut Net, y: &X, name: &str, bias: bool, tied: bool| {
        let mut s = y.shape.clone();
        *s.last_mut().expect("a shape") = c.vocab;
        let p = if tied { 0 } else { c.vocab * h } + if bias { c.vocab } else { 0 };
        let logits = n.push(name, "Linear", &[y], s.clone(), Params::trainable(p));
        n.op("cross_entropy", &[&logits], s, false)
    };
    match c.family {
        Family::Bert | Family::Roberta => {
            let e = embed(&mut n, "embeddings.word_embeddings", &x, c.vocab, h);
            let pos = c.max_pos * h + c.type_vocab * h;
            n.parameter(pos);
            let e = n.op("add", &[&e], e.shape.clone(), false);
            let e = n.layer_norm("embeddings.LayerNorm", &e, true);
            let mut y = n.act("embeddings.dropout", "Dropout", &e);
            for l in 0..c.layers {
                let p = format!("encoder.layer.{l}");
                let q = linear(&mut n, &format!("{p}.attention.self.query"), &y, h, true);
                let k = linear(&mut n, &format!("{p}.attention.self.key"), &y, h, true);
                let v = linear(&mut n, &format!("{p}.attention.self.value"), &y, h, true);
                let a = attend(&mut n, &q, &[&k, &v], c.heads, h, c.eager);
                let a = linear(&mut n, &format!("{p}.attention.output.dense"), &a, h, true);
                let a = n.act(&format!("{p}.attention.output.dropout"), "Dropout", &a);
                let a = n.add(&a, &y);
                let a = n.layer_norm(&format!("{p}.attention.output.LayerNorm"), &a, true);
                let f = linear(
                    &mut n,
                    &format!("{p}.intermediate.dense"),
                    &a,
                    c.inter,
                    true,
                );
                let f = n.act(&format!("{p}.intermediate.intermediate_act_fn"), "GELU", &f);
                let f = linear(&mut n, &format!("{p}.output.dense"), &f, h, true);
                let f = n.act(&format!("{p}.output.dropout"), "Dropout", &f);
                let f = n.add(&f, &a);
                y = n.layer_norm(&format!("{p}.output.LayerNorm"), &f, true);
            }
            let pooler = match c.head {
                Head::Base => true,
                Head::SeqCls(_) => c.family == Family::Bert,
                _ => false,
            };
            let cls = n.op("select", &[&y], vec![h], true);
            if pooler {
                let pooled = linear(&mut n, "pooler.dense", &cls, h, true);
                let pooled = n.act("pooler.activation", "Tanh", &pooled);
                if let Head::SeqCls(k) = c.head {
                    let z = n.act("dropout", "Dropout", &pooled);
                    linear(&mut n, "classifier", &z, k, true);
                }
            } else if let Head::SeqCls(k) = c.head {
                let z = linear(&mut n, "classifier.dense", &cls, h, true);
                let z = n.act("classifier.tanh", "Tanh", &z);
                linear(&mut n, "classifier.out_proj", &z, k, true);
            } else if c.head == Head::MaskedLm {
                let z = linear(&mut n, "lm.transform.dense", &y, h, true);
                let z = n.act("lm.transform.act", "GELU", &z);
                let z = n.layer_norm("lm.transform.LayerNorm", &z, true);
                logits_of(&mut n, &z, "lm.decoder", true, c.tie);
            }
        }
        Family::Gpt2 => {
            let e = embed(&mut n, "transformer.wte", &x, c.vocab, h);
            n.parameter(c.max_pos * h);
            let e = n.op("add", &[&e], e.shape.clone(), false);
            let mut y = n.act("transformer.drop", "Dropout", &e);
            for l in 0..c.layers {
                let p = format!("transformer.h.{l}");
                let z = n.layer_norm(&format!("{p}.ln_1"), &y, true);
                let qkv = linear(&mut n, &format!("{p}.attn.c_attn"), &z, 3 * h, true);
                let a = attend(&mut n, &qkv, &[], c.heads, h, c.eager);
                let a = linear(&mut n, &format!("{p}.attn.c_proj"), &a, h, true);
                let a = n.act(&format!("{p}.attn.resid_dropout"), "Dropout", &a);
                let y1 = n.add(&a, &y);
                let z = n.layer_norm(&format!("{p}.ln_2"), &y1, true);
                let f = linear(&mut n, &format!("{p}.mlp.c_fc"), &z, c.inter, true);
                let f = n.act(&format!("{p}.mlp.act"), "GELU", &f);
                let f = linear(&mut n, &format!("{p}.mlp.c_proj"), &f, h, true);
                let f = n.act(&format!("{p}.mlp.dropout"), "Dropout", &f);
                y = n.add(&f, &y1);
            }
            let y = n.layer_norm("transformer.ln_f", &y, true);
            match c.head {
                Head::CausalLm => {
                    logits_of(&mut n, &y, "lm_head", false, c.tie);
                }
                Head::SeqCls(k) => {
                    linear(&mut n, "score", &y, k, false);
                }
                _ => {}
            }
        }
        Family::Llama => {
            let hd = h / c.heads;
            let kvw = c.kv_heads * hd;
            let mut y = embed(&mut n, "model.embed_tokens", &x, c.vocab, h);
            for l in 0..c.layers {
                let p = format!("model.layers.{l}");
                let z = rms(&mut n, &format!("{p}.input_layernorm"), &y);
                let q = linear(&mut n, &format!("{p}.self_attn.q_proj"), &z, h, c.qkv_bias);
                let k = linear(
                    &mut n,
                    &format!("{p}.self_attn.k_proj"),
                    &z,
                    kvw,
                    c.qkv_bias,
                );
                let v = linear(
                    &mut n,
                    &format!("{p}.self_attn.v_proj"),
                    &z,
                    kvw,
                    c.qkv_bias,
                );
                let q = n.op("rotary", &[&q], q.shape.clone(), false);
                let k = n.op("rotary", &[&k], k.shape.clone(), false);
                let a = attend(&mut n, &q, &[&k, &v], c.heads, h, c.eager);
                let a = linear(&mut n, &format!("{p}.self_attn.o_proj"), &a, h, false);
                let y1 = n.add(&a, &y);
                let z = rms(&mut n, &format!("{p}.post_attention_layernorm"), &y1);
                let g = linear(&mut n, &format!("{p}.mlp.gate_proj"), &z, c.inter, false);
                let u = linear(&mut n, &format!("{p}.mlp.up_proj"), &z, c.inter, false);
                let g = n.act(&format!("{p}.mlp.act_fn"), "SiLU", &g);
                let m = n.op("mul", &[&g, &u], g.shape.clone(), false);
                let m = linear(&mut n, &format!("{p}.mlp.down_proj"), &m, h, false);
                y = n.add(&m, &y1);
            }
            let y = rms(&mut n, "model.norm", &y);
            match c.head {
                Head::CausalLm => {
                    logits_of(&mut n, &y, "lm_head", false, c.tie);
                }
                Head::SeqCls(k) => {
                    linear(&mut n, "score", &y, k, false);
                }
                _ => {}
            }
        }
        Family::T5 => t5(&mut n, c, &x),
        Family::Vit => {
            let y = n.conv(
                "embeddings.patch_embeddings.projection",
                &x,
                h,
                cv(c.patch, c.patch, 0).bias(),
            );
            let tokens: u64 = y.shape[1..].iter().product();
            let seq = tokens + 1;
            n.parameter(h + seq * h);
            let y = n.op("flatten", &[&y], vec![tokens, h], true);
            let y = n.op("cat", &[&y], vec![seq, h], false);
            let y = n.op("add", &[&y], vec![seq, h], false);
            let mut y = n.act("embeddings.dropout", "Dropout", &y);
            for l in 0..c.layers {
                let p = format!("encoder.layer.{l}");
                let z = n.layer_norm(&format!("{p}.layernorm_before"), &y, true);
                let q = linear(
                    &mut n,
                    &format!("{p}.attention.attention.query"),
                    &z,
                    h,
                    true,
                );
                let k = linear(&mut n, &format!("{p}.attention.attention.key"), &z, h, true);
                let v = linear(
                    &mut n,
                    &format!("{p}.attention.attention.value"),
                    &z,
                    h,
                    true,
                );
                let a = attend(&mut n, &q, &[&k, &v], c.heads, h, c.eager);
                let a = linear(&mut n, &format!("{p}.attention.output.dense"), &a, h, true);
                let a = n.act(&format!("{p}.attention.output.dropout"), "Dropout", &a);
                let y1 = n.add(&a, &y);
                let z = n.layer_norm(&format!("{p}.layernorm_after"), &y1, true);
                let f = linear(
                    &mut n,
                    &format!("{p}.intermediate.dense"),
                    &z,
                    c.inter,
                    true,
                );
                let f = n.act(&format!("{p}.intermediate.intermediate_act_fn"), "GELU", &f);
                let f = linear(&mut n, &format!("{p}.output.dense"), &f, h, true);
                let f = n.act(&format!("{p}.output.dropout"), "Dropout", &f);
                y = n.add(&f, &y1);
            }
            let y = n.layer_norm("layernorm", &y, true);
            let cls = n.op("select", &[&y], vec![h], true);
            match c.head {
                Head::ImageCls(k) => {
                    linear(&mut n, "classifier", &cls, k, true);
                }
                _ => {
                    let z = linear(&mut n, "pooler.dense", &cls, h, true);
                    n.act("pooler.activation", "Tanh", &z);
                }
            }
        }
    }
    Ok(n)
}

/// T5: encoder and decoder stacks without biases, RMS-style layer norms, relative position
/// buckets in each stack's first layer; the decoder is fed as many tokens as the encoder.
fn t5(n: &mut Net, c: &Config, x: &X) {
    let h = c.hidden;
    let inner = c.heads * c.d_kv;
    let shared = embed(n, "shared", x, c.vocab, h);
    let stack = |n: &mut Net, name: &str, layers: u64, input: &X, memory: Option<&X>| -> X {
        let mut y = n.act(&format!("{name}.dropout"), "Dropout", input);
        for l in 0..layers {
            let p = format!("{name}.block.{l}");
            let z = rms(n, &format!("{p}.layer.0.layer_norm"), &y);
            let q = linear(n, &format!("{p}.layer.0.SelfAttention.q"), &z, inner, false);
            let k = linear(n, &format!("{p}.layer.0.SelfAttention.k"), &z, inner, false);
            let v = linear(n, &format!("{p}.layer.0.SelfAttention.v"), &z, inner, false);
            if l == 0 {
                n.parameter(c.buckets * c.heads);
            }
            let a = attend(n, &q, &[&k, &v], c.heads, inner, c.eager);
            let a = linear(n, &format!("{p}.layer.0.SelfAttention.o"), &a, h, false);
            let a = n.act(&format!("{p}.layer.0.dropout"), "Dropout", &a);
            y = n.add(&a, &y);
            let mut f_idx = 1;
            if let Some(mem) = memory {
                let z = rms(n, &format!("{p}.layer.1.layer_norm"), &y);
                let q = linear(
                    n,
                    &format!("{p}.layer.1.EncDecAttention.q"),
                    &z,
                    inner,
                    false,
                );
                let k = linear(
                    n,
                    &format!("{p}.layer.1.EncDecAttention.k"),
                    mem,
                    inner,
                    false,
                );
                let v = linear(
                    n,
                    &format!("{p}.layer.1.EncDecAttention.v"),
                    mem,
                    inner,
                    false,
                );
                let a = attend(n, &q, &[&k, &v], c.heads, inner, c.eager);
                let a = linear(n, &format!("{p}.layer.1.EncDecAttention.o"), &a, h, false);
                let a = n.act(&format!("{p}.layer.1.dropout"), "Dropout", &a);
                y = n.add(&a, &y);
                f_idx = 2;
            }
            let p = format!("{p}.layer.{f_idx}");
            let z = rms(n, &format!("{p}.layer_norm"), &y);
            let f = linear(n, &format!("{p}.DenseReluDense.wi"), &z, c.inter, false);
            let f = n.act(&format!("{p}.DenseReluDense.act"), "ReLU", &f);
            let f = n.act(&format!("{p}.DenseReluDense.dropout"), "Dropout", &f);
            let f = linear(n, &format!("{p}.DenseReluDense.wo"), &f, h, false);
            let f = n.act(&format!("{p}.dropout"), "Dropout", &f);
            y = n.add(&f, &y);
        }
        let y = rms(n, &format!("{name}.final_layer_norm"), &y);
        n.act(&format!("{name}.final_dropout"), "Dropout", &y)
    };
    let enc = stack(n, "encoder", c.layers, &shared, None);
    if c.head == Head::Base || c.head == Head::Seq2Seq {
        let dec_in = n.op("embedding", &[x], shared.shape.clone(), false);
        let dec = stack(n, "decoder", c.dec_layers, &dec_in, Some(&enc));
        if c.head == Head::Seq2Seq {
            let mut s = dec.shape.clone();
            *s.last_mut().expect("a shape") = c.vocab;
            let p = if c.tie { 0 } else { c.vocab * h };
            let logits = n.push(
                "lm_head",
                "Linear",
                &[&dec],
                s.clone(),
                Params::trainable(p),
            );
            n.op("cross_entropy", &[&logits], s, false);
        }
    }
}
