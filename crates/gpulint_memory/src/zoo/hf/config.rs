//! Hugging Face configurations: the families the estimator knows, keyword overrides
//! (`GPT2Config(n_layer=6)`), the head each model class puts on the base model, and the
//! published numbers of common checkpoints for `from_pretrained("<name>")`.

use crate::zoo::{Opt, Opts};

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
pub fn config(class: &str, a: &Opts) -> Option<Result<Config, String>> {
    let family = family_of(class)?;
    let mut c = Config::new(family);
    if class.starts_with("Qwen2") {
        c.qkv_bias = true;
    }
    Some(apply(&mut c, a).map(|_| c))
}

/// A numeric field of a configuration.
type Field = fn(&mut Config) -> &mut u64;

/// Keyword overrides of a configuration (also `from_pretrained(name, num_labels=...)`).
pub fn apply(c: &mut Config, a: &Opts) -> Result<(), String> {
    let keys: &[(&str, Field)] = &[
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
            if matches!(v, Opt::None) {
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
