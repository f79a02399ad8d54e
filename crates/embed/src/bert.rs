//! A BERT encoder (the MiniLM family: sentence-transformers' all-MiniLM-L6-v2) run on the CPU in
//! safe Rust: weights from a safetensors file, matrix products through `ndarray` (which uses
//! `matrixmultiply`'s SIMD kernels, chosen at run time), mean pooling and L2 normalization.
//!
//! Several texts are embedded together: their rows are stacked for every linear layer (one
//! large matrix product instead of many small ones); only attention runs per text.

use std::collections::HashMap;

use ndarray::{Array1, Array2, ArrayView2, Axis, s};

use crate::EmbedError;

/// The architecture numbers from `config.json`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BertConfig {
    pub(crate) hidden: usize,
    pub(crate) heads: usize,
    pub(crate) layers: usize,
    pub(crate) max_positions: usize,
    pub(crate) eps: f32,
}

impl BertConfig {
    pub(crate) fn from_json(json: &str) -> Result<BertConfig, EmbedError> {
        let bad = |m: String| EmbedError::Model(format!("config.json: {m}"));
        let v: serde_json::Value = serde_json::from_str(json).map_err(|e| bad(e.to_string()))?;
        let n = |k: &str| v[k].as_u64().map(|x| x as usize).ok_or_else(|| bad(format!("no `{k}`")));
        if v["model_type"].as_str() != Some("bert") {
            return Err(bad("not a BERT model".into()));
        }
        if v["hidden_act"].as_str() != Some("gelu") {
            return Err(bad("only the `gelu` activation is supported".into()));
        }
        let cfg = BertConfig {
            hidden: n("hidden_size")?,
            heads: n("num_attention_heads")?,
            layers: n("num_hidden_layers")?,
            max_positions: n("max_position_embeddings")?,
            eps: v["layer_norm_eps"].as_f64().unwrap_or(1e-12) as f32,
        };
        if cfg.heads == 0 || !cfg.hidden.is_multiple_of(cfg.heads) {
            return Err(bad("hidden_size is not a multiple of num_attention_heads".into()));
        }
        Ok(cfg)
    }
}

struct Linear {
    /// `[in, out]`: PyTorch's `[out, in]` transposed once at load, so the matrix product reads
    /// it row by row (packing a transposed view for every product was most of a short text's
    /// embedding time).
    weight: Array2<f32>,
    bias: Array1<f32>,
}

impl Linear {
    fn forward(&self, x: &Array2<f32>) -> Array2<f32> {
        let mut y = x.dot(&self.weight);
        y += &self.bias;
        y
    }
}

struct LayerNorm {
    weight: Array1<f32>,
    bias: Array1<f32>,
    eps: f32,
}

impl LayerNorm {
    fn forward(&self, x: &mut Array2<f32>) {
        let n = x.ncols() as f32;
        for mut row in x.rows_mut() {
            let mean = row.sum() / n;
            let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / n;
            let inv = 1.0 / (var + self.eps).sqrt();
            for ((v, w), b) in row.iter_mut().zip(self.weight.iter()).zip(self.bias.iter()) {
                *v = (*v - mean) * inv * w + b;
            }
        }
    }
}

struct Layer {
    query: Linear,
    key: Linear,
    value: Linear,
    attn_out: Linear,
    attn_norm: LayerNorm,
    intermediate: Linear,
    output: Linear,
    out_norm: LayerNorm,
}

/// The encoder's weights.
pub(crate) struct Bert {
    cfg: BertConfig,
    word: Array2<f32>,
    position: Array2<f32>,
    token_type: Array1<f32>,
    emb_norm: LayerNorm,
    layers: Vec<Layer>,
}

impl std::fmt::Debug for Bert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bert").field("hidden", &self.cfg.hidden).field("layers", &self.cfg.layers).finish()
    }
}

impl Bert {
    /// Loads the weights from the bytes of a safetensors file.
    pub(crate) fn load(cfg: BertConfig, safetensors: &[u8]) -> Result<Bert, EmbedError> {
        let mut t = Tensors::parse(safetensors)?;
        let h = cfg.hidden;
        let norm = |t: &mut Tensors<'_>, p: &str| -> Result<LayerNorm, EmbedError> {
            Ok(LayerNorm {
                weight: t.vector(&format!("{p}.weight"), h)?,
                bias: t.vector(&format!("{p}.bias"), h)?,
                eps: cfg.eps,
            })
        };
        let linear = |t: &mut Tensors<'_>, p: &str, out: usize, inp: usize| -> Result<Linear, EmbedError> {
            Ok(Linear {
                weight: t.matrix(&format!("{p}.weight"), out, inp)?.reversed_axes().as_standard_layout().into_owned(),
                bias: t.vector(&format!("{p}.bias"), out)?,
            })
        };
        let word = t.matrix_any_rows("embeddings.word_embeddings.weight", h)?;
        let position = t.matrix("embeddings.position_embeddings.weight", cfg.max_positions, h)?;
        let token_type = t.matrix_any_rows("embeddings.token_type_embeddings.weight", h)?.row(0).to_owned();
        let emb_norm = norm(&mut t, "embeddings.LayerNorm")?;
        let mut layers = Vec::with_capacity(cfg.layers);
        for i in 0..cfg.layers {
            let p = format!("encoder.layer.{i}");
            let inter = t.shape(&format!("{p}.intermediate.dense.weight"))?.first().copied().unwrap_or(0);
            layers.push(Layer {
                query: linear(&mut t, &format!("{p}.attention.self.query"), h, h)?,
                key: linear(&mut t, &format!("{p}.attention.self.key"), h, h)?,
                value: linear(&mut t, &format!("{p}.attention.self.value"), h, h)?,
                attn_out: linear(&mut t, &format!("{p}.attention.output.dense"), h, h)?,
                attn_norm: norm(&mut t, &format!("{p}.attention.output.LayerNorm"))?,
                intermediate: linear(&mut t, &format!("{p}.intermediate.dense"), inter, h)?,
                output: linear(&mut t, &format!("{p}.output.dense"), h, inter)?,
                out_norm: norm(&mut t, &format!("{p}.output.LayerNorm"))?,
            });
        }
        Ok(Bert { cfg, word, position, token_type, emb_norm, layers })
    }

    /// Longest input, in tokens.
    pub(crate) fn max_positions(&self) -> usize {
        self.cfg.max_positions
    }

    /// One unit-length, mean-pooled vector per token sequence.
    pub(crate) fn embed(&self, seqs: &[Vec<u32>]) -> Vec<Vec<f32>> {
        let h = self.cfg.hidden;
        let vocab = self.word.nrows();
        let total: usize = seqs.iter().map(Vec::len).sum();
        let mut x = Array2::<f32>::zeros((total, h));
        let mut row = 0;
        for seq in seqs {
            for (pos, id) in seq.iter().enumerate() {
                let id = (*id as usize).min(vocab - 1);
                let mut r = x.row_mut(row);
                r += &self.word.row(id);
                r += &self.position.row(pos.min(self.cfg.max_positions - 1));
                r += &self.token_type;
                row += 1;
            }
        }
        self.emb_norm.forward(&mut x);
        for layer in &self.layers {
            let q = layer.query.forward(&x);
            let k = layer.key.forward(&x);
            let v = layer.value.forward(&x);
            let ctx = self.attention(seqs, &q, &k, &v);
            let mut a = layer.attn_out.forward(&ctx);
            a += &x;
            layer.attn_norm.forward(&mut a);
            let mut inter = layer.intermediate.forward(&a);
            inter.mapv_inplace(gelu);
            let mut out = layer.output.forward(&inter);
            out += &a;
            layer.out_norm.forward(&mut out);
            x = out;
        }
        let mut start = 0;
        seqs.iter()
            .map(|seq| {
                let rows = x.slice(s![start..start + seq.len(), ..]);
                start += seq.len();
                let mut mean = rows.mean_axis(Axis(0)).unwrap_or_else(|| Array1::zeros(h));
                let norm = mean.dot(&mean).sqrt().max(1e-12);
                mean /= norm;
                mean.to_vec()
            })
            .collect()
    }

    /// Multi-head self-attention, per sequence (no padding, so no mask).
    fn attention(&self, seqs: &[Vec<u32>], q: &Array2<f32>, k: &Array2<f32>, v: &Array2<f32>) -> Array2<f32> {
        let h = self.cfg.hidden;
        let d = h / self.cfg.heads;
        let scale = 1.0 / (d as f32).sqrt();
        let mut out = Array2::<f32>::zeros(q.raw_dim());
        let mut start = 0;
        for seq in seqs {
            let end = start + seq.len();
            for head in 0..self.cfg.heads {
                let cols = head * d..(head + 1) * d;
                let qh: ArrayView2<'_, f32> = q.slice(s![start..end, cols.clone()]);
                let kh = k.slice(s![start..end, cols.clone()]);
                let vh = v.slice(s![start..end, cols.clone()]);
                let mut scores = qh.dot(&kh.t());
                for mut row in scores.rows_mut() {
                    let max = row.iter().fold(f32::NEG_INFINITY, |m, x| m.max(*x * scale));
                    let mut sum = 0.0;
                    row.mapv_inplace(|x| {
                        let e = (x * scale - max).exp();
                        sum += e;
                        e
                    });
                    row /= sum;
                }
                out.slice_mut(s![start..end, cols]).assign(&scores.dot(&vh));
            }
            start = end;
        }
        out
    }
}

/// GELU, exact (erf) form as BERT uses.
fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x / std::f32::consts::SQRT_2))
}

/// erf with an absolute error below 1.2e-7 (Numerical Recipes' `erfc` Chebyshev fit).
fn erf(x: f32) -> f32 {
    let x = f64::from(x);
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let r = t
        * (-z * z - 1.265_512_23
            + t * (1.000_023_68
                + t * (0.374_091_96
                    + t * (0.096_784_18
                        + t * (-0.186_288_06
                            + t * (0.278_868_07
                                + t * (-1.135_203_98
                                    + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77)))))))))
            .exp();
    (if x >= 0.0 { 1.0 - r } else { r - 1.0 }) as f32
}

/// The tensors of a safetensors file: an 8-byte little-endian header length, a JSON header
/// naming each tensor's dtype, shape and byte range, then the data.
struct Tensors<'a> {
    data: &'a [u8],
    entries: HashMap<String, (String, Vec<usize>, usize, usize)>,
}

impl<'a> Tensors<'a> {
    fn parse(bytes: &'a [u8]) -> Result<Tensors<'a>, EmbedError> {
        let bad = |m: String| EmbedError::Model(format!("model.safetensors: {m}"));
        let len_bytes: [u8; 8] =
            bytes.get(..8).and_then(|b| b.try_into().ok()).ok_or_else(|| bad("too short".into()))?;
        let len = usize::try_from(u64::from_le_bytes(len_bytes)).map_err(|_| bad("bad header length".into()))?;
        let header = bytes.get(8..8usize.saturating_add(len)).ok_or_else(|| bad("truncated header".into()))?;
        let data = &bytes[8 + len..];
        let v: serde_json::Value = serde_json::from_slice(header).map_err(|e| bad(e.to_string()))?;
        let mut entries = HashMap::new();
        for (name, t) in v.as_object().ok_or_else(|| bad("the header is not an object".into()))? {
            if name == "__metadata__" {
                continue;
            }
            let dtype = t["dtype"].as_str().unwrap_or_default().to_owned();
            let shape: Vec<usize> = t["shape"]
                .as_array()
                .map(|a| a.iter().filter_map(|x| x.as_u64().map(|x| x as usize)).collect())
                .unwrap_or_default();
            let offs = t["data_offsets"].as_array().ok_or_else(|| bad(format!("{name}: no data_offsets")))?;
            let (Some(a), Some(b)) = (offs.first().and_then(|x| x.as_u64()), offs.get(1).and_then(|x| x.as_u64()))
            else {
                return Err(bad(format!("{name}: bad data_offsets")));
            };
            entries.insert(name.clone(), (dtype, shape, a as usize, b as usize));
        }
        Ok(Tensors { data, entries })
    }

    fn shape(&self, name: &str) -> Result<Vec<usize>, EmbedError> {
        self.entries
            .get(name)
            .map(|e| e.1.clone())
            .ok_or_else(|| EmbedError::Model(format!("model.safetensors: no tensor `{name}`")))
    }

    fn floats(&mut self, name: &str, expect: &[usize]) -> Result<Vec<f32>, EmbedError> {
        let bad = |m: String| EmbedError::Model(format!("model.safetensors: `{name}`: {m}"));
        let (dtype, shape, a, b) = self.entries.remove(name).ok_or_else(|| bad("missing".into()))?;
        if dtype != "F32" {
            return Err(bad(format!("dtype {dtype}, expected F32")));
        }
        if shape != expect {
            return Err(bad(format!("shape {shape:?}, expected {expect:?}")));
        }
        let raw = self.data.get(a..b).ok_or_else(|| bad("data out of range".into()))?;
        if raw.len() != expect.iter().product::<usize>() * 4 {
            return Err(bad("data length does not match the shape".into()));
        }
        Ok(raw.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
    }

    fn vector(&mut self, name: &str, n: usize) -> Result<Array1<f32>, EmbedError> {
        Ok(Array1::from_vec(self.floats(name, &[n])?))
    }

    fn matrix(&mut self, name: &str, rows: usize, cols: usize) -> Result<Array2<f32>, EmbedError> {
        let v = self.floats(name, &[rows, cols])?;
        Array2::from_shape_vec((rows, cols), v).map_err(|e| EmbedError::Model(format!("`{name}`: {e}")))
    }

    fn matrix_any_rows(&mut self, name: &str, cols: usize) -> Result<Array2<f32>, EmbedError> {
        let rows = self.shape(name)?.first().copied().unwrap_or(0);
        if rows == 0 {
            return Err(EmbedError::Model(format!("model.safetensors: `{name}` is empty")));
        }
        self.matrix(name, rows, cols)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn erf_matches_known_values() {
        for (x, want) in [(0.0f32, 0.0f32), (0.5, 0.520_499_9), (1.0, 0.842_700_8), (-2.0, -0.995_322_3)] {
            assert!((super::erf(x) - want).abs() < 1e-6, "{x}");
        }
    }
}
