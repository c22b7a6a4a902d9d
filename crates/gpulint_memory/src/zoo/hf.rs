//! Hugging Face transformers: configurations (`GPT2Config(n_layer=...)`, the published numbers
//! of common checkpoints for `from_pretrained("gpt2")`), heads (`...Model`, `...ForCausalLM`,
//! `...ForSequenceClassification`, `...ForMaskedLM`, T5 `ForConditionalGeneration`, ViT
//! `ForImageClassification`) and the layers each runs, so the sequence length, batch and
//! precision change the estimate.

use super::net::{cv, Net, X};
use crate::layer::Params;

mod config;

pub use config::{apply, checkpoint, config, family_of, head_of, Config, Family, Head};

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
                let f = n.act(&format!("{p}.mlp.act"), "NewGELUActivation", &f);
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
    // The learned relative-position bias is added to the scores: attention runs unfused and
    // keeps its score matrices (`attn_implementation` aside).
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
            let a = attend(n, &q, &[&k, &v], c.heads, inner, true);
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
                let a = attend(n, &q, &[&k, &v], c.heads, inner, true);
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
