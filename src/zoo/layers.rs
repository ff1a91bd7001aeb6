//! Layer algebra: for each kind of layer, its output shape, its arithmetic
//! and its parameter count, per example. The zoo's graph files are built
//! from these numbers, so they are the one place where a published figure
//! (138.4 M parameters for VGG16, ...) either comes out right or does not.
//!
//! Shapes leave the batch out: images are `[H, W, C]` (channels last, as
//! in Keras), sequences `[T, D]`, vectors `[N]`. Parameter counts follow
//! Keras' "total params" (batch-norm moving statistics included), which is
//! how the published counts were made.

use std::fmt;

/// One example's tensor shape (the batch dimension is left out).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Shape(pub Vec<u64>);

impl Shape {
    pub fn elems(&self) -> u64 {
        self.0.iter().product()
    }

    pub fn last(&self) -> u64 {
        self.0.last().copied().unwrap_or(1)
    }

    fn image(&self, what: &str) -> Result<(u64, u64, u64), String> {
        match self.0.as_slice() {
            &[h, w, c] => Ok((h, w, c)),
            _ => Err(format!("{what} needs an [H, W, C] input, got {self}")),
        }
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dims: Vec<String> = self.0.iter().map(|d| d.to_string()).collect();
        write!(f, "[{}]", dims.join(", "))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Padding {
    /// Output size `ceil(in / stride)` (TensorFlow's rule).
    Same,
    /// No padding: `floor((in - k) / stride) + 1`.
    Valid,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Act {
    Relu,
    Relu6,
    Gelu,
    Softmax,
}

impl Act {
    /// FLOPs per element; a convention (see docs/zoo.md), not a profile.
    fn flops(self) -> u64 {
        match self {
            Act::Relu => 1,
            Act::Relu6 => 2,
            Act::Gelu => 8,
            Act::Softmax => 5,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Act::Relu => "relu",
            Act::Relu6 => "relu6",
            Act::Gelu => "gelu",
            Act::Softmax => "softmax",
        }
    }

    /// What the activation's own backward needs: relu, relu6 and softmax
    /// are differentiated from their output, gelu from its input.
    fn needs_output(self) -> bool {
        !matches!(self, Act::Gelu)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Layer {
    /// 2-D convolution; `act` is an activation fused into the same Keras
    /// layer (VGG's `Conv2D(..., activation='relu')`).
    Conv2d {
        filters: u64,
        kernel: (u64, u64),
        stride: (u64, u64),
        padding: Padding,
        bias: bool,
        act: Option<Act>,
    },
    /// Depthwise 2-D convolution (depth multiplier 1).
    DepthwiseConv2d {
        kernel: (u64, u64),
        stride: (u64, u64),
        padding: Padding,
        bias: bool,
    },
    /// Transposed convolution with Keras' default `valid` padding:
    /// output `(in - 1) * stride + k`.
    ConvTranspose2d {
        filters: u64,
        kernel: (u64, u64),
        stride: (u64, u64),
        bias: bool,
    },
    /// Fully connected on the last axis.
    Dense {
        units: u64,
        bias: bool,
        act: Option<Act>,
    },
    BatchNorm,
    LayerNorm,
    Activation(Act),
    MaxPool {
        size: (u64, u64),
        stride: (u64, u64),
        padding: Padding,
    },
    /// Global average pooling to `[C]`.
    GlobalAvgPool,
    ZeroPad {
        top: u64,
        bottom: u64,
        left: u64,
        right: u64,
    },
    Crop {
        top: u64,
        bottom: u64,
        left: u64,
        right: u64,
    },
    /// Nearest-neighbour upsampling by an integer factor.
    UpSample(u64, u64),
    Flatten,
    /// A new shape with the same element count; one 0 is inferred.
    Reshape(Vec<u64>),
    Dropout,
    /// Elementwise sum of inputs of one shape.
    Add,
    /// Concatenation on the last axis.
    Concat,
    /// Token plus learned position embeddings for `seq` tokens. Reads no
    /// graph value: token ids are data, like the input image.
    Embedding {
        vocab: u64,
        positions: u64,
        seq: u64,
        dim: u64,
    },
    /// `softmax`-free attention logits `Q K^T / sqrt(d)` with the causal
    /// mask, from a fused `[T, 3D]` qkv projection: output `[heads, T, T]`.
    AttentionScores {
        heads: u64,
    },
    /// `P V`: attention probabilities `[heads, T, T]` times the value part
    /// of the qkv projection `[T, 3D]`: output `[T, D]`.
    AttentionContext {
        heads: u64,
    },
    /// Output projection onto a vocabulary whose matrix is the (tied)
    /// token embedding, so it adds no parameters.
    TiedLmHead {
        vocab: u64,
    },
    /// Cross-entropy to one loss value per example. `from_logits` when the
    /// input has not been through a softmax yet.
    CrossEntropy {
        from_logits: bool,
    },
}

/// What the zoo needs to know about one layer instance.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerInfo {
    pub out: Shape,
    /// Multiply-accumulates of the matrix/convolution part.
    pub macs: u64,
    /// Every other forward FLOP (bias, activations, normalization, copies).
    pub other_flops: u64,
    pub params: u64,
}

impl LayerInfo {
    /// Forward FLOPs: two per MAC plus the rest.
    pub fn flops(&self) -> u64 {
        2 * self.macs + self.other_flops
    }
}

/// Which values the backward of a layer reads (besides the incoming
/// gradient); the rule is documented in docs/zoo.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Saves {
    pub inputs: bool,
    pub output: bool,
}

fn conv_out(input: u64, k: u64, s: u64, p: Padding) -> Result<u64, String> {
    if s == 0 || k == 0 {
        return Err("kernel and stride must be positive".into());
    }
    match p {
        Padding::Same => Ok(input.div_ceil(s)),
        Padding::Valid => {
            if input < k {
                Err(format!("input size {input} is smaller than the window {k}"))
            } else {
                Ok((input - k) / s + 1)
            }
        }
    }
}

fn one<'a>(inputs: &[&'a Shape], what: &str) -> Result<&'a Shape, String> {
    match inputs {
        [x] => Ok(x),
        _ => Err(format!("{what} takes one input, got {}", inputs.len())),
    }
}

impl Layer {
    /// The op label written to graph files.
    pub fn op(&self) -> &'static str {
        match self {
            Layer::Conv2d { .. } => "conv2d",
            Layer::DepthwiseConv2d { .. } => "depthwise_conv2d",
            Layer::ConvTranspose2d { .. } => "conv2d_transpose",
            Layer::Dense { .. } => "dense",
            Layer::BatchNorm => "batch_norm",
            Layer::LayerNorm => "layer_norm",
            Layer::Activation(a) => a.name(),
            Layer::MaxPool { .. } => "max_pool",
            Layer::GlobalAvgPool => "global_avg_pool",
            Layer::ZeroPad { .. } => "zero_pad",
            Layer::Crop { .. } => "crop",
            Layer::UpSample(..) => "upsample",
            Layer::Flatten => "flatten",
            Layer::Reshape(_) => "reshape",
            Layer::Dropout => "dropout",
            Layer::Add => "add",
            Layer::Concat => "concat",
            Layer::Embedding { .. } => "embedding",
            Layer::AttentionScores { .. } => "attention_scores",
            Layer::AttentionContext { .. } => "attention_context",
            Layer::TiedLmHead { .. } => "lm_head",
            Layer::CrossEntropy { .. } => "cross_entropy",
        }
    }

    /// Which values the layer's backward reads. Weighted layers need their
    /// input for the weight gradient; relu-like and softmax are
    /// differentiated from their output; max pooling needs both to route
    /// the gradient to the arg-max; layers that only move or sum data need
    /// nothing but the incoming gradient.
    pub fn saves(&self) -> Saves {
        let (inputs, output) = match self {
            Layer::Conv2d { act, .. } | Layer::Dense { act, .. } => {
                (true, act.is_some_and(|a| a.needs_output()))
            }
            Layer::DepthwiseConv2d { .. } | Layer::ConvTranspose2d { .. } => (true, false),
            Layer::BatchNorm | Layer::LayerNorm => (true, false),
            Layer::Activation(a) => (!a.needs_output(), a.needs_output()),
            Layer::MaxPool { .. } => (true, true),
            Layer::Dropout => (false, true),
            Layer::AttentionScores { .. } | Layer::AttentionContext { .. } => (true, false),
            Layer::TiedLmHead { .. } => (true, false),
            Layer::CrossEntropy { .. } => (true, false),
            Layer::GlobalAvgPool
            | Layer::ZeroPad { .. }
            | Layer::Crop { .. }
            | Layer::UpSample(..)
            | Layer::Flatten
            | Layer::Reshape(_)
            | Layer::Add
            | Layer::Concat
            | Layer::Embedding { .. } => (false, false),
        };
        Saves { inputs, output }
    }

    /// Output shape, arithmetic and parameters for these input shapes.
    pub fn infer(&self, inputs: &[&Shape]) -> Result<LayerInfo, String> {
        let info = |out: Shape, macs: u64, other_flops: u64, params: u64| LayerInfo {
            out,
            macs,
            other_flops,
            params,
        };
        match self {
            Layer::Conv2d {
                filters,
                kernel,
                stride,
                padding,
                bias,
                act,
            } => {
                let (h, w, c) = one(inputs, "conv2d")?.image("conv2d")?;
                let ho = conv_out(h, kernel.0, stride.0, *padding)?;
                let wo = conv_out(w, kernel.1, stride.1, *padding)?;
                let out = Shape(vec![ho, wo, *filters]);
                let n = out.elems();
                let per_out = kernel.0 * kernel.1 * c;
                let other = n * (*bias as u64 + act.map_or(0, |a| a.flops()));
                let params = per_out * filters + if *bias { *filters } else { 0 };
                Ok(info(out, n * per_out, other, params))
            }
            Layer::DepthwiseConv2d {
                kernel,
                stride,
                padding,
                bias,
            } => {
                let (h, w, c) = one(inputs, "depthwise_conv2d")?.image("depthwise_conv2d")?;
                let ho = conv_out(h, kernel.0, stride.0, *padding)?;
                let wo = conv_out(w, kernel.1, stride.1, *padding)?;
                let out = Shape(vec![ho, wo, c]);
                let n = out.elems();
                let k = kernel.0 * kernel.1;
                let params = k * c + if *bias { c } else { 0 };
                Ok(info(out, n * k, n * *bias as u64, params))
            }
            Layer::ConvTranspose2d {
                filters,
                kernel,
                stride,
                bias,
            } => {
                let (h, w, c) = one(inputs, "conv2d_transpose")?.image("conv2d_transpose")?;
                if h == 0 || w == 0 || stride.0 == 0 || stride.1 == 0 {
                    return Err("empty input or zero stride".into());
                }
                let ho = (h - 1) * stride.0 + kernel.0;
                let wo = (w - 1) * stride.1 + kernel.1;
                let out = Shape(vec![ho, wo, *filters]);
                // Every input pixel scatters a k×k×filters patch.
                let macs = h * w * c * kernel.0 * kernel.1 * filters;
                let params = kernel.0 * kernel.1 * c * filters + if *bias { *filters } else { 0 };
                let other = if *bias { out.elems() } else { 0 };
                Ok(info(out, macs, other, params))
            }
            Layer::Dense { units, bias, act } => {
                let x = one(inputs, "dense")?;
                let d = x.last();
                let mut dims = x.0.clone();
                *dims.last_mut().ok_or("dense needs a non-scalar input")? = *units;
                let out = Shape(dims);
                let n = out.elems();
                let rows = n / units.max(&1);
                let other = n * (*bias as u64 + act.map_or(0, |a| a.flops()));
                let params = d * units + if *bias { *units } else { 0 };
                Ok(info(out, rows * d * units, other, params))
            }
            Layer::BatchNorm => {
                let x = one(inputs, "batch_norm")?;
                Ok(info(x.clone(), 0, 7 * x.elems(), 4 * x.last()))
            }
            Layer::LayerNorm => {
                let x = one(inputs, "layer_norm")?;
                Ok(info(x.clone(), 0, 7 * x.elems(), 2 * x.last()))
            }
            Layer::Activation(a) => {
                let x = one(inputs, a.name())?;
                Ok(info(x.clone(), 0, a.flops() * x.elems(), 0))
            }
            Layer::MaxPool {
                size,
                stride,
                padding,
            } => {
                let (h, w, c) = one(inputs, "max_pool")?.image("max_pool")?;
                let ho = conv_out(h, size.0, stride.0, *padding)?;
                let wo = conv_out(w, size.1, stride.1, *padding)?;
                let out = Shape(vec![ho, wo, c]);
                let n = out.elems();
                Ok(info(out, 0, n * size.0 * size.1, 0))
            }
            Layer::GlobalAvgPool => {
                let x = one(inputs, "global_avg_pool")?;
                let (_, _, c) = x.image("global_avg_pool")?;
                Ok(info(Shape(vec![c]), 0, x.elems(), 0))
            }
            Layer::ZeroPad {
                top,
                bottom,
                left,
                right,
            } => {
                let (h, w, c) = one(inputs, "zero_pad")?.image("zero_pad")?;
                let out = Shape(vec![h + top + bottom, w + left + right, c]);
                let n = out.elems();
                Ok(info(out, 0, n, 0))
            }
            Layer::Crop {
                top,
                bottom,
                left,
                right,
            } => {
                let (h, w, c) = one(inputs, "crop")?.image("crop")?;
                if top + bottom >= h || left + right >= w {
                    return Err(format!(
                        "cannot crop {h}x{w} by {top}+{bottom}, {left}+{right}"
                    ));
                }
                let out = Shape(vec![h - top - bottom, w - left - right, c]);
                let n = out.elems();
                Ok(info(out, 0, n, 0))
            }
            Layer::UpSample(fh, fw) => {
                let (h, w, c) = one(inputs, "upsample")?.image("upsample")?;
                let out = Shape(vec![h * fh, w * fw, c]);
                let n = out.elems();
                Ok(info(out, 0, n, 0))
            }
            Layer::Flatten => {
                let x = one(inputs, "flatten")?;
                Ok(info(Shape(vec![x.elems()]), 0, x.elems(), 0))
            }
            Layer::Reshape(dims) => {
                let x = one(inputs, "reshape")?;
                let known: u64 = dims.iter().filter(|&&d| d != 0).product();
                let unknown = dims.iter().filter(|&&d| d == 0).count();
                let mut out = dims.clone();
                match unknown {
                    0 if known == x.elems() => {}
                    1 if known > 0 && x.elems() % known == 0 => {
                        for d in &mut out {
                            if *d == 0 {
                                *d = x.elems() / known;
                            }
                        }
                    }
                    _ => return Err(format!("cannot reshape {x} to {}", Shape(dims.clone()))),
                }
                Ok(info(Shape(out), 0, x.elems(), 0))
            }
            Layer::Dropout => {
                let x = one(inputs, "dropout")?;
                Ok(info(x.clone(), 0, 2 * x.elems(), 0))
            }
            Layer::Add => {
                let first = inputs.first().ok_or("add needs inputs")?;
                if inputs.len() < 2 || inputs.iter().any(|s| s != first) {
                    return Err(format!(
                        "add needs two or more inputs of one shape, got {}",
                        inputs
                            .iter()
                            .map(|s| s.to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                }
                let n = first.elems();
                Ok(info((*first).clone(), 0, n * (inputs.len() as u64 - 1), 0))
            }
            Layer::Concat => {
                let first = inputs.first().ok_or("concat needs inputs")?;
                let lead = &first.0[..first.0.len().saturating_sub(1)];
                let mut last = 0;
                for s in inputs {
                    if s.0.len() != first.0.len() || &s.0[..s.0.len().saturating_sub(1)] != lead {
                        return Err(format!("cannot concatenate {first} and {s}"));
                    }
                    last += s.last();
                }
                let mut dims = lead.to_vec();
                dims.push(last);
                let out = Shape(dims);
                let n = out.elems();
                Ok(info(out, 0, n, 0))
            }
            Layer::Embedding {
                vocab,
                positions,
                seq,
                dim,
            } => {
                if !inputs.is_empty() {
                    return Err("embedding reads token ids, not graph values".into());
                }
                if seq > positions {
                    return Err(format!(
                        "sequence length {seq} exceeds the {positions} learned positions"
                    ));
                }
                let out = Shape(vec![*seq, *dim]);
                let n = out.elems();
                // Lookups are copies; adding the position embedding is one FLOP.
                Ok(info(out, 0, n, (vocab + positions) * dim))
            }
            Layer::AttentionScores { heads } => {
                let x = one(inputs, "attention_scores")?;
                let (t, d) = qkv_dims(x, *heads)?;
                let out = Shape(vec![*heads, t, t]);
                let n = out.elems();
                // Scale and causal mask: two FLOPs per score.
                Ok(info(out, t * t * d, 2 * n, 0))
            }
            Layer::AttentionContext { heads } => {
                let (p, qkv) = match inputs {
                    [p, qkv] => (p, qkv),
                    _ => return Err("attention_context takes (probabilities, qkv)".into()),
                };
                let (t, d) = qkv_dims(qkv, *heads)?;
                if p.0 != [*heads, t, t] {
                    return Err(format!(
                        "attention probabilities {p} do not match qkv {qkv}"
                    ));
                }
                Ok(info(Shape(vec![t, d]), t * t * d, 0, 0))
            }
            Layer::TiedLmHead { vocab } => {
                let x = one(inputs, "lm_head")?;
                let (t, d) = match x.0.as_slice() {
                    &[t, d] => (t, d),
                    _ => return Err(format!("lm_head needs a [T, D] input, got {x}")),
                };
                Ok(info(Shape(vec![t, *vocab]), t * d * vocab, 0, 0))
            }
            Layer::CrossEntropy { from_logits } => {
                let x = one(inputs, "cross_entropy")?;
                let per = if *from_logits {
                    3 + Act::Softmax.flops()
                } else {
                    3
                };
                Ok(info(Shape(vec![1]), 0, per * x.elems(), 0))
            }
        }
    }
}

/// `(T, D)` of a fused `[T, 3D]` qkv tensor split into `heads` heads.
fn qkv_dims(x: &Shape, heads: u64) -> Result<(u64, u64), String> {
    match x.0.as_slice() {
        &[t, d3] if d3 % 3 == 0 && heads > 0 && (d3 / 3) % heads == 0 => Ok((t, d3 / 3)),
        _ => Err(format!(
            "attention needs a [T, 3D] qkv input with D divisible by {heads} heads, got {x}"
        )),
    }
}
