//! The paper's seven networks and a GPT-2-small stack, layer by layer.
//! Each follows one exact published variant (named in its description and
//! in docs/zoo.md): Keras applications for the classifiers, the
//! `keras_segmentation` models that the Checkmate paper used for the
//! segmentation networks, and OpenAI's GPT-2 small.

use super::layers::{Act, Layer, Padding};
use super::net::{Net, Tensor};
use super::ZooError;

/// A network the zoo can build, with the paper's batch size and input.
#[derive(Debug, Clone, Copy)]
pub struct NetworkSpec {
    pub name: &'static str,
    pub about: &'static str,
    /// The batch size of the committed file (the paper's, where it has one).
    pub batch: u32,
    pub input: Input,
    /// Whether `models/` holds this network.
    pub committed: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    /// Height × width of an RGB image.
    Image(u64, u64),
    /// Sequence length in tokens.
    Tokens(u64),
}

pub const NETWORKS: &[NetworkSpec] = &[
    NetworkSpec {
        name: "vgg16",
        about: "VGG16 (Keras applications, with the 3 dense layers), 1000 classes",
        batch: 256,
        input: Input::Image(224, 224),
        committed: true,
    },
    NetworkSpec {
        name: "vgg19",
        about: "VGG19 (Keras applications, with the 3 dense layers), 1000 classes",
        batch: 256,
        input: Input::Image(224, 224),
        committed: true,
    },
    NetworkSpec {
        name: "mobilenet",
        about: "MobileNet v1, alpha 1.0 (Keras applications), 1000 classes",
        batch: 512,
        input: Input::Image(224, 224),
        committed: true,
    },
    NetworkSpec {
        name: "resnet50",
        about: "ResNet50 v1.5 (stride on the 3x3 conv; Keras layer names and biases), 1000 classes",
        batch: 256,
        input: Input::Image(224, 224),
        committed: true,
    },
    NetworkSpec {
        name: "resnet50-v1",
        about:
            "ResNet50 v1 (stride on the first 1x1 conv, exactly Keras applications), 1000 classes",
        batch: 256,
        input: Input::Image(224, 224),
        committed: false,
    },
    NetworkSpec {
        name: "unet",
        about: "U-Net with a VGG16 encoder (keras_segmentation vgg_unet), 19 classes",
        batch: 32,
        input: Input::Image(416, 608),
        committed: true,
    },
    NetworkSpec {
        name: "fcn8",
        about: "FCN-8s with a VGG16 encoder (keras_segmentation fcn_8_vgg), 19 classes",
        batch: 32,
        input: Input::Image(416, 608),
        committed: true,
    },
    NetworkSpec {
        name: "segnet",
        about: "SegNet (keras_segmentation segnet: vanilla encoder, 3 upsamplings), 19 classes",
        batch: 32,
        input: Input::Image(416, 608),
        committed: true,
    },
    NetworkSpec {
        name: "gpt2",
        about: "GPT-2 small (12 layers, 12 heads, width 768, vocabulary 50257, tied LM head)",
        batch: 8,
        input: Input::Tokens(1024),
        committed: true,
    },
];

pub fn spec(name: &str) -> Option<&'static NetworkSpec> {
    NETWORKS.iter().find(|s| s.name == name)
}

const IMAGENET_CLASSES: u64 = 1000;
/// The class count of the Checkmate paper's segmentation graphs (their
/// score layers are 19 channels wide).
const SEGMENTATION_CLASSES: u64 = 19;

/// Builds a network for an input (its default when `None`).
pub fn build(name: &str, input: Option<Input>) -> Result<Net, ZooError> {
    let s = spec(name).ok_or_else(|| ZooError::Unknown(name.to_string()))?;
    const MAX_SIDE: u64 = 65_536;
    let input = input.unwrap_or(s.input);
    let about = match input {
        Input::Image(h, w) => format!("{} at {h}x{w}x3.", s.about),
        Input::Tokens(t) => format!("{} at sequence length {t}.", s.about),
    };
    let mut net = Net::new(s.name, about);
    let image = match (input, s.input) {
        (Input::Image(h, w), Input::Image(..)) => Some((h, w)),
        (Input::Tokens(_), Input::Tokens(_)) => None,
        (Input::Image(..), Input::Tokens(_)) => {
            return Err(ZooError::Invalid(format!(
                "{name} takes a sequence length, not an image resolution"
            )))
        }
        (Input::Tokens(_), Input::Image(..)) => {
            return Err(ZooError::Invalid(format!(
                "{name} takes an image resolution, not a sequence length"
            )))
        }
    };
    if let Some((h, w)) = image {
        if h == 0 || w == 0 {
            return Err(ZooError::Invalid("the resolution must be positive".into()));
        }
        // Past this a layer's per-example figures pass u64 and wrapped into
        // a plausible graph (VGG16 at 4294967311x4294967357: 84 TB a layer).
        if h > MAX_SIDE || w > MAX_SIDE {
            return Err(ZooError::Invalid(format!(
                "the resolution {h}x{w} is past {MAX_SIDE} pixels a side, the most the zoo builds"
            )));
        }
        let x = net.input(vec![h, w, 3]);
        match name {
            "vgg16" => vgg(&mut net, x, &[2, 2, 3, 3, 3])?,
            "vgg19" => vgg(&mut net, x, &[2, 2, 4, 4, 4])?,
            "mobilenet" => mobilenet(&mut net, x)?,
            "resnet50" => resnet50(&mut net, x, true)?,
            "resnet50-v1" => resnet50(&mut net, x, false)?,
            "unet" => unet(&mut net, x)?,
            "fcn8" => fcn8(&mut net, x)?,
            "segnet" => segnet(&mut net, x)?,
            _ => unreachable!("every image network in NETWORKS is built here"),
        }
    } else if let Input::Tokens(t) = input {
        gpt2(&mut net, t)?;
    }
    Ok(net)
}

fn conv(
    filters: u64,
    k: u64,
    stride: u64,
    padding: Padding,
    bias: bool,
    act: Option<Act>,
) -> Layer {
    Layer::Conv2d {
        filters,
        kernel: (k, k),
        stride: (stride, stride),
        padding,
        bias,
        act,
    }
}

fn pad(n: u64) -> Layer {
    Layer::ZeroPad {
        top: n,
        bottom: n,
        left: n,
        right: n,
    }
}

fn max_pool(k: u64, stride: u64) -> Layer {
    Layer::MaxPool {
        size: (k, k),
        stride: (stride, stride),
        padding: Padding::Valid,
    }
}

fn dense(units: u64, act: Option<Act>) -> Layer {
    Layer::Dense {
        units,
        bias: true,
        act,
    }
}

/// VGG's convolutional blocks (`block{b}_conv{c}`, `block{b}_pool`);
/// returns each block's pooled output.
fn vgg_blocks(net: &mut Net, mut x: Tensor, convs: &[usize]) -> Result<Vec<Tensor>, ZooError> {
    const FILTERS: [u64; 5] = [64, 128, 256, 512, 512];
    let mut levels = Vec::new();
    for (b, &n) in convs.iter().enumerate() {
        for c in 1..=n {
            x = net.layer(
                format!("block{}_conv{c}", b + 1),
                conv(FILTERS[b], 3, 1, Padding::Same, true, Some(Act::Relu)),
                &[x],
            )?;
        }
        x = net.layer(format!("block{}_pool", b + 1), max_pool(2, 2), &[x])?;
        levels.push(x);
    }
    Ok(levels)
}

fn vgg(net: &mut Net, x: Tensor, convs: &[usize]) -> Result<(), ZooError> {
    let levels = vgg_blocks(net, x, convs)?;
    let mut x = *levels.last().expect("five blocks");
    x = net.layer("flatten", Layer::Flatten, &[x])?;
    x = net.layer("fc1", dense(4096, Some(Act::Relu)), &[x])?;
    x = net.layer("fc2", dense(4096, Some(Act::Relu)), &[x])?;
    x = net.layer(
        "predictions",
        dense(IMAGENET_CLASSES, Some(Act::Softmax)),
        &[x],
    )?;
    loss(net, x, false)
}

fn loss(net: &mut Net, x: Tensor, from_logits: bool) -> Result<(), ZooError> {
    net.layer("loss", Layer::CrossEntropy { from_logits }, &[x])?;
    Ok(())
}

/// conv → batch-norm → activation with Keras' names: `{prefix}{conv}`,
/// `{prefix}_bn`, `{prefix}_relu`.
fn conv_bn_act(
    net: &mut Net,
    x: Tensor,
    (prefix, conv): (&str, &str),
    layer: Layer,
    act: Act,
) -> Result<Tensor, ZooError> {
    let x = net.layer(format!("{prefix}{conv}"), layer, &[x])?;
    let x = net.layer(format!("{prefix}_bn"), Layer::BatchNorm, &[x])?;
    net.layer(format!("{prefix}_relu"), Layer::Activation(act), &[x])
}

fn mobilenet(net: &mut Net, x: Tensor) -> Result<(), ZooError> {
    let pad_br = Layer::ZeroPad {
        top: 0,
        bottom: 1,
        left: 0,
        right: 1,
    };
    let x = net.layer("conv1_pad", pad_br.clone(), &[x])?;
    let mut x = conv_bn_act(
        net,
        x,
        ("conv1", ""),
        conv(32, 3, 2, Padding::Valid, false, None),
        Act::Relu6,
    )?;
    const BLOCKS: [(u64, u64); 13] = [
        (64, 1),
        (128, 2),
        (128, 1),
        (256, 2),
        (256, 1),
        (512, 2),
        (512, 1),
        (512, 1),
        (512, 1),
        (512, 1),
        (512, 1),
        (1024, 2),
        (1024, 1),
    ];
    for (i, &(filters, stride)) in BLOCKS.iter().enumerate() {
        let id = i + 1;
        let padding = if stride == 1 {
            Padding::Same
        } else {
            x = net.layer(format!("conv_pad_{id}"), pad_br.clone(), &[x])?;
            Padding::Valid
        };
        let dw = Layer::DepthwiseConv2d {
            kernel: (3, 3),
            stride: (stride, stride),
            padding,
            bias: false,
        };
        x = conv_bn_act(net, x, (&format!("conv_dw_{id}"), ""), dw, Act::Relu6)?;
        let pw = conv(filters, 1, 1, Padding::Same, false, None);
        x = conv_bn_act(net, x, (&format!("conv_pw_{id}"), ""), pw, Act::Relu6)?;
    }
    x = net.layer("global_average_pooling2d", Layer::GlobalAvgPool, &[x])?;
    let c = net.shape(x).elems();
    x = net.layer("reshape_1", Layer::Reshape(vec![1, 1, c]), &[x])?;
    x = net.layer("dropout", Layer::Dropout, &[x])?;
    x = net.layer(
        "conv_preds",
        conv(IMAGENET_CLASSES, 1, 1, Padding::Same, true, None),
        &[x],
    )?;
    x = net.layer("reshape_2", Layer::Reshape(vec![IMAGENET_CLASSES]), &[x])?;
    x = net.layer("act_softmax", Layer::Activation(Act::Softmax), &[x])?;
    loss(net, x, false)
}

/// ResNet50 with Keras' layer names. `v1_5` moves a block's stride from
/// the first 1×1 conv to the 3×3 conv (torchvision / MLPerf), the variant
/// behind the usual 4.1 GMAC figure; Keras applications are v1 (3.9).
fn resnet50(net: &mut Net, x: Tensor, v1_5: bool) -> Result<(), ZooError> {
    let x = net.layer("conv1_pad", pad(3), &[x])?;
    let x = net.layer(
        "conv1_conv",
        conv(64, 7, 2, Padding::Valid, true, None),
        &[x],
    )?;
    let x = net.layer("conv1_bn", Layer::BatchNorm, &[x])?;
    let x = net.layer("conv1_relu", Layer::Activation(Act::Relu), &[x])?;
    let x = net.layer("pool1_pad", pad(1), &[x])?;
    let mut x = net.layer("pool1_pool", max_pool(3, 2), &[x])?;
    const STAGES: [(u64, usize, u64); 4] = [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)];
    for (s, &(filters, blocks, stride)) in STAGES.iter().enumerate() {
        for b in 1..=blocks {
            let name = format!("conv{}_block{b}", s + 2);
            let stride = if b == 1 { stride } else { 1 };
            let shortcut = if b == 1 {
                let sc = net.layer(
                    format!("{name}_0_conv"),
                    conv(4 * filters, 1, stride, Padding::Valid, true, None),
                    &[x],
                )?;
                net.layer(format!("{name}_0_bn"), Layer::BatchNorm, &[sc])?
            } else {
                x
            };
            let (s1, s2) = if v1_5 { (1, stride) } else { (stride, 1) };
            let mut y = conv_bn_act(
                net,
                x,
                (&format!("{name}_1"), "_conv"),
                conv(filters, 1, s1, Padding::Valid, true, None),
                Act::Relu,
            )?;
            y = conv_bn_act(
                net,
                y,
                (&format!("{name}_2"), "_conv"),
                conv(filters, 3, s2, Padding::Same, true, None),
                Act::Relu,
            )?;
            y = net.layer(
                format!("{name}_3_conv"),
                conv(4 * filters, 1, 1, Padding::Valid, true, None),
                &[y],
            )?;
            y = net.layer(format!("{name}_3_bn"), Layer::BatchNorm, &[y])?;
            let sum = net.layer(format!("{name}_add"), Layer::Add, &[shortcut, y])?;
            x = net.layer(format!("{name}_out"), Layer::Activation(Act::Relu), &[sum])?;
        }
    }
    x = net.layer("avg_pool", Layer::GlobalAvgPool, &[x])?;
    x = net.layer("probs", dense(IMAGENET_CLASSES, Some(Act::Softmax)), &[x])?;
    loss(net, x, false)
}

/// keras_segmentation's `get_segmentation_model`: scores to
/// `[pixels, classes]`, a softmax over classes, and the loss.
fn segmentation_head(net: &mut Net, x: Tensor) -> Result<(), ZooError> {
    let x = net.layer(
        "reshape",
        Layer::Reshape(vec![0, SEGMENTATION_CLASSES]),
        &[x],
    )?;
    let x = net.layer("softmax", Layer::Activation(Act::Softmax), &[x])?;
    loss(net, x, false)
}

fn unet(net: &mut Net, x: Tensor) -> Result<(), ZooError> {
    // Block 5 of the encoder is built by keras_segmentation but feeds
    // nothing, so it is not part of the model.
    let levels = vgg_blocks(net, x, &[2, 2, 3, 3])?;
    let mut o = levels[3];
    const DECODER: [u64; 4] = [512, 256, 128, 64];
    for (i, &filters) in DECODER.iter().enumerate() {
        if i > 0 {
            o = net.layer(format!("up{i}"), Layer::UpSample(2, 2), &[o])?;
            o = net.layer(format!("concat{i}"), Layer::Concat, &[o, levels[3 - i]])?;
        }
        o = decoder_conv(net, i, filters, Some(Act::Relu), o)?;
    }
    o = net.layer(
        "score",
        conv(SEGMENTATION_CLASSES, 3, 1, Padding::Same, true, None),
        &[o],
    )?;
    segmentation_head(net, o)
}

/// One decoder step of the keras_segmentation decoders: pad, 3×3 valid
/// conv, batch norm.
fn decoder_conv(
    net: &mut Net,
    i: usize,
    filters: u64,
    act: Option<Act>,
    o: Tensor,
) -> Result<Tensor, ZooError> {
    let o = net.layer(format!("dec{i}_pad"), pad(1), &[o])?;
    let o = net.layer(
        format!("dec{i}_conv"),
        conv(filters, 3, 1, Padding::Valid, true, act),
        &[o],
    )?;
    net.layer(format!("dec{i}_bn"), Layer::BatchNorm, &[o])
}

/// Crops the larger of two score maps to the smaller one, width then
/// height, from the right and bottom as keras_segmentation's `crop` does
/// (a zero-size crop is left out). Returns the cropped pair in order.
fn crop_to_match(
    net: &mut Net,
    mut a: Tensor,
    mut b: Tensor,
    tag: &str,
) -> Result<(Tensor, Tensor), ZooError> {
    let dims = |net: &Net, t: Tensor| (net.shape(t).0[0], net.shape(t).0[1]);
    let ((_, wa), (_, wb)) = (dims(net, a), dims(net, b));
    if wa != wb {
        let crop = Layer::Crop {
            top: 0,
            bottom: 0,
            left: 0,
            right: wa.abs_diff(wb),
        };
        if wa > wb {
            a = net.layer(format!("{tag}_crop_w"), crop, &[a])?;
        } else {
            b = net.layer(format!("{tag}_crop_w"), crop, &[b])?;
        }
    }
    let ((ha, _), (hb, _)) = (dims(net, a), dims(net, b));
    if ha != hb {
        let crop = Layer::Crop {
            top: 0,
            bottom: ha.abs_diff(hb),
            left: 0,
            right: 0,
        };
        if ha > hb {
            a = net.layer(format!("{tag}_crop_h"), crop, &[a])?;
        } else {
            b = net.layer(format!("{tag}_crop_h"), crop, &[b])?;
        }
    }
    Ok((a, b))
}

fn fcn8(net: &mut Net, x: Tensor) -> Result<(), ZooError> {
    let levels = vgg_blocks(net, x, &[2, 2, 3, 3, 3])?;
    let classes = SEGMENTATION_CLASSES;
    let up = |k: u64, s: u64| Layer::ConvTranspose2d {
        filters: classes,
        kernel: (k, k),
        stride: (s, s),
        bias: false,
    };
    let score = || conv(classes, 1, 1, Padding::Valid, true, None);
    let mut o = net.layer(
        "fc6",
        conv(4096, 7, 1, Padding::Same, true, Some(Act::Relu)),
        &[levels[4]],
    )?;
    o = net.layer("drop6", Layer::Dropout, &[o])?;
    o = net.layer(
        "fc7",
        conv(4096, 1, 1, Padding::Same, true, Some(Act::Relu)),
        &[o],
    )?;
    o = net.layer("drop7", Layer::Dropout, &[o])?;
    o = net.layer("score_fr", score(), &[o])?;
    o = net.layer("upscore2", up(4, 2), &[o])?;
    let o2 = net.layer("score_pool4", score(), &[levels[3]])?;
    let (up2, o2) = crop_to_match(net, o, o2, "upscore2")?;
    o = net.layer("fuse_pool4", Layer::Add, &[up2, o2])?;
    o = net.layer("upscore4", up(4, 2), &[o])?;
    let o2 = net.layer("score_pool3", score(), &[levels[2]])?;
    let (o2, up4) = crop_to_match(net, o2, o, "upscore4")?;
    o = net.layer("fuse_pool3", Layer::Add, &[o2, up4])?;
    o = net.layer("upscore8", up(16, 8), &[o])?;
    segmentation_head(net, o)
}

fn segnet(net: &mut Net, x: Tensor) -> Result<(), ZooError> {
    // The vanilla encoder's fifth level is unused at encoder_level 3.
    const ENCODER: [u64; 4] = [64, 128, 256, 256];
    let mut o = x;
    for (i, &filters) in ENCODER.iter().enumerate() {
        let e = i + 1;
        o = net.layer(format!("enc{e}_pad"), pad(1), &[o])?;
        o = conv_bn_act(
            net,
            o,
            (&format!("enc{e}"), "_conv"),
            conv(filters, 3, 1, Padding::Valid, true, None),
            Act::Relu,
        )?;
        o = net.layer(format!("enc{e}_pool"), max_pool(2, 2), &[o])?;
    }
    const DECODER: [u64; 4] = [512, 256, 128, 64];
    for (i, &filters) in DECODER.iter().enumerate() {
        if i > 0 {
            o = net.layer(format!("up{i}"), Layer::UpSample(2, 2), &[o])?;
        }
        o = decoder_conv(net, i, filters, None, o)?;
    }
    o = net.layer(
        "score",
        conv(SEGMENTATION_CLASSES, 3, 1, Padding::Same, true, None),
        &[o],
    )?;
    segmentation_head(net, o)
}

const GPT2_VOCAB: u64 = 50257;
const GPT2_POSITIONS: u64 = 1024;
const GPT2_WIDTH: u64 = 768;
const GPT2_HEADS: u64 = 12;
const GPT2_LAYERS: usize = 12;

/// Pre-norm transformer blocks as in GPT-2; dropout layers are left out
/// (GPT-2 fine-tuning commonly disables them, and they only add masks).
fn gpt2(net: &mut Net, seq: u64) -> Result<(), ZooError> {
    if seq == 0 {
        return Err(ZooError::Invalid(
            "the sequence length must be positive".into(),
        ));
    }
    let d = GPT2_WIDTH;
    let mut x = net.layer(
        "embed",
        Layer::Embedding {
            vocab: GPT2_VOCAB,
            positions: GPT2_POSITIONS,
            seq,
            dim: d,
        },
        &[],
    )?;
    for i in 0..GPT2_LAYERS {
        let h = format!("h{i}");
        let a = net.layer(format!("{h}_ln_1"), Layer::LayerNorm, &[x])?;
        let qkv = net.layer(format!("{h}_attn_qkv"), dense(3 * d, None), &[a])?;
        let heads = GPT2_HEADS;
        let s = net.layer(
            format!("{h}_attn_scores"),
            Layer::AttentionScores { heads },
            &[qkv],
        )?;
        let p = net.layer(
            format!("{h}_attn_softmax"),
            Layer::Activation(Act::Softmax),
            &[s],
        )?;
        let c = net.layer(
            format!("{h}_attn_context"),
            Layer::AttentionContext { heads },
            &[p, qkv],
        )?;
        let proj = net.layer(format!("{h}_attn_proj"), dense(d, None), &[c])?;
        x = net.layer(format!("{h}_add_1"), Layer::Add, &[x, proj])?;
        let m = net.layer(format!("{h}_ln_2"), Layer::LayerNorm, &[x])?;
        let fc = net.layer(format!("{h}_mlp_fc"), dense(4 * d, None), &[m])?;
        let g = net.layer(format!("{h}_mlp_gelu"), Layer::Activation(Act::Gelu), &[fc])?;
        let mp = net.layer(format!("{h}_mlp_proj"), dense(d, None), &[g])?;
        x = net.layer(format!("{h}_add_2"), Layer::Add, &[x, mp])?;
    }
    x = net.layer("ln_f", Layer::LayerNorm, &[x])?;
    x = net.layer("lm_head", Layer::TiedLmHead { vocab: GPT2_VOCAB }, &[x])?;
    loss(net, x, true)
}
