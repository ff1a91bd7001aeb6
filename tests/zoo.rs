//! The model zoo against published figures, the committed files against
//! their generator, and every committed model through the solve pipeline.

use remat::graph::analysis::{checkpoint_all_peak, min_feasible_budget};
use remat::strategies::{self, SolveOptions};
use remat::units::BudgetSpec;
use remat::zoo::networks::{self, Input, NETWORKS};
use remat::zoo::synthetic::{self, Dist, RandomDag, ResidualChain};
use remat::zoo::{committed_files, net::Net};
use remat::{solve, Graph};
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn build(name: &str) -> Net {
    networks::build(name, None).unwrap()
}

fn within(got: u64, published: f64, tol: f64) -> bool {
    ((got as f64) - published).abs() <= tol * published
}

/// Published parameter counts and forward MACs per example, within 2%.
#[test]
fn published_counts() {
    // (network, parameters, MACs or None where no figure is published)
    let published: [(&str, f64, Option<f64>); 6] = [
        ("vgg16", 138.4e6, Some(15.5e9)),
        ("vgg19", 143.7e6, Some(19.6e9)),
        ("resnet50", 25.6e6, Some(4.1e9)),
        ("mobilenet", 4.2e6, Some(0.569e9)),
        ("gpt2", 124e6, None),
        ("resnet50-v1", 25.6e6, Some(3.86e9)),
    ];
    for (name, params, macs) in published {
        let net = build(name);
        assert!(
            within(net.params(), params, 0.02),
            "{name}: {} parameters, published {params}",
            net.params()
        );
        if let Some(m) = macs {
            assert!(
                within(net.macs(), m, 0.02),
                "{name}: {} MACs, published {m}",
                net.macs()
            );
        }
    }
}

/// Exact counts (Keras' "total params" for the Keras models; see
/// docs/zoo.md for how each was counted). Regression values for the
/// segmentation networks, which have no single published figure.
#[test]
fn exact_counts() {
    let expected: [(&str, u64, u64); 8] = [
        ("vgg16", 138_357_544, 15_470_264_320),
        ("vgg19", 143_667_240, 19_632_062_464),
        ("mobilenet", 4_253_864, 568_740_352),
        ("resnet50", 25_636_712, 4_089_184_256),
        ("unet", 12_332_755, 94_368_448_512),
        ("fcn8", 134_456_985, 107_305_767_088),
        ("segnet", 3_707_411, 27_935_391_744),
        ("gpt2", 124_439_808, 145_824_153_600),
    ];
    for (name, params, macs) in expected {
        let net = build(name);
        assert_eq!((net.params(), net.macs()), (params, macs), "{name}");
    }
}

/// The committed models directory is exactly what the generator makes.
#[test]
fn committed_files_are_byte_for_byte() {
    let files = committed_files().unwrap();
    assert_eq!(files.len(), 16);
    for f in &files {
        let path = root().join(&f.path);
        let disk = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e}; run `remat zoo --all`", path.display()));
        assert!(
            disk == f.contents,
            "{} differs from the generator; run `remat zoo --all`",
            f.path
        );
    }
}

/// Every committed model loads from disk, gets its backward pass, and runs
/// with checkpoint-all at exactly its checkpoint-all peak.
#[test]
fn committed_models_solve_with_checkpoint_all() {
    let strat = strategies::by_name("checkpoint-all").unwrap();
    for spec in NETWORKS.iter().filter(|s| s.committed) {
        let path = root().join(format!("models/{}.yaml", spec.name));
        let g = Graph::load(&path).unwrap();
        let net = build(spec.name);
        let fwd = g.forward_ids().count();
        assert_eq!(fwd, net.nodes().len(), "{}", spec.name);
        let bwd = g.len() - fwd;
        assert!(bwd > 0 && bwd < fwd, "{}: {bwd} gradient nodes", spec.name);
        assert_eq!(g.batch_size, spec.batch);
        assert_eq!(g.fixed_memory.get(), 8 * net.params(), "{}", spec.name);
        assert_eq!(g.forward_cost(), (net.flops() * spec.batch as u64) as f64);
        let peak = checkpoint_all_peak(&g);
        let out = solve::run(&g, strat.as_ref(), peak, &SolveOptions::default()).unwrap();
        let sim = out.sim.expect("checkpoint-all has a plan at its own peak");
        assert_eq!(sim.peak, peak, "{}", spec.name);
        assert_eq!(sim.cost, g.total_cost(), "{}", spec.name);
        assert!(min_feasible_budget(&g) < peak, "{}", spec.name);
    }
}

/// Layer counts match the Checkmate paper's Keras graphs (forward layers
/// without the loss), and so do activation sizes where the layers agree.
#[test]
fn matches_checkmate_layer_counts_and_sizes() {
    let counts = [
        ("vgg16", 22),
        ("vgg19", 25),
        ("mobilenet", 92),
        ("resnet50", 176),
        ("unet", 35),
        ("fcn8", 36),
        ("segnet", 38),
        ("gpt2", 147),
    ];
    for (name, n) in counts {
        assert_eq!(build(name).nodes().len(), n + 1, "{name}");
    }
    // Bytes at the paper's batch sizes, as in the Checkmate graphs.
    let sizes = [
        ("vgg16", "block1_conv1", 3_288_334_336u64),
        ("vgg16", "fc1", 4_194_304),
        ("resnet50", "conv1_pad", 162_508_800),
        ("resnet50", "conv2_block1_out", 822_083_584),
        ("mobilenet", "conv_pad_2", 1_673_658_368),
        ("fcn8", "upscore8", 635_199_488),
        ("unet", "concat1", 388_497_408),
        ("segnet", "enc4_pool", 32_374_784),
    ];
    for (name, node, bytes) in sizes {
        let g = Graph::load(&root().join(format!("models/{name}.yaml"))).unwrap();
        let id = g.find(node).unwrap_or_else(|| panic!("{name}: no {node}"));
        assert_eq!(g.memory(id).get(), bytes, "{name}/{node}");
    }
}

/// The saves rule: conv+relu keeps input and output, add nothing, max
/// pooling both; the padding in front of the first conv gets no gradient.
#[test]
fn gradient_reads_follow_the_saves_rule() {
    let g = Graph::load(&root().join("models/resnet50.yaml")).unwrap();
    let deps = |n: &str| -> Vec<String> {
        let id = g.find(n).unwrap();
        let mut v: Vec<String> = g.deps(id).iter().map(|&d| g.node(d).name.clone()).collect();
        v.sort();
        v
    };
    assert!(g.find("grad/conv1_pad").is_none());
    assert_eq!(deps("grad/conv2_block2_add"), ["grad/conv2_block2_out"]);
    assert_eq!(
        deps("grad/conv2_block2_out"),
        [
            "conv2_block2_out",
            "grad/conv2_block3_1_conv",
            "grad/conv2_block3_add"
        ]
    );
    assert_eq!(
        deps("grad/pool1_pool"),
        [
            "grad/conv2_block1_0_conv",
            "grad/conv2_block1_1_conv",
            "pool1_pad",
            "pool1_pool"
        ]
    );
    // A pooling layer's backward produces its input's gradient, 4x its output.
    let pool = g.find("grad/pool1_pool").unwrap();
    assert_eq!(g.memory(pool), g.memory(g.find("pool1_pad").unwrap()));
    // The first conv only makes weight gradients: no activation-sized output.
    assert_eq!(g.memory(g.find("grad/conv1_conv").unwrap()).get(), 0);
}

#[test]
fn budget_files_resolve() {
    for spec in NETWORKS.iter().filter(|s| s.committed) {
        let text =
            std::fs::read_to_string(root().join(format!("budgets/{}.yaml", spec.name))).unwrap();
        let v: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
        assert_eq!(v["model"].as_str(), Some(spec.name));
        let list = v["budgets"].as_sequence().unwrap();
        assert!(list.len() >= 2, "{}", spec.name);
        let g = Graph::load(&root().join(format!("models/{}.yaml", spec.name))).unwrap();
        let (peak, min) = (checkpoint_all_peak(&g), min_feasible_budget(&g));
        for item in list {
            match item {
                serde_yaml::Value::String(s) => {
                    let b = BudgetSpec::parse(s).unwrap().resolve(peak);
                    assert!(b >= min && b <= peak, "{}: {s}", spec.name);
                }
                serde_yaml::Value::Mapping(m) => {
                    assert_eq!(m.get("from").and_then(|x| x.as_str()), Some("min"));
                    assert_eq!(m.get("to").and_then(|x| x.as_str()), Some("100%"));
                    assert!(m.get("steps").and_then(|x| x.as_u64()).unwrap() >= 10);
                }
                other => panic!("{}: unexpected budget {other:?}", spec.name),
            }
        }
    }
}

#[test]
fn other_inputs_and_bad_inputs() {
    // Batch scales activations and cost, not fixed memory.
    let net = build("vgg16");
    let (a, b) = (net.to_file(1), net.to_file(4));
    assert_eq!(a.fixed_memory, b.fixed_memory);
    assert_eq!(4.0 * a.nodes[0].memory, b.nodes[0].memory);
    // Another resolution changes VGG16's dense input, hence its size.
    let small = networks::build("vgg16", Some(Input::Image(64, 64))).unwrap();
    assert_eq!(
        small.params(),
        138_357_544 - 7 * 7 * 512 * 4096 + 2 * 2 * 512 * 4096
    );
    let e = networks::build("vgg16", Some(Input::Image(16, 16))).unwrap_err();
    assert!(e.to_string().contains("block5_pool"), "{e}");
    assert!(networks::build("unet", Some(Input::Image(100, 100))).is_err());
    assert!(networks::build("gpt2", Some(Input::Tokens(2048))).is_err());
    let short = networks::build("gpt2", Some(Input::Tokens(128))).unwrap();
    assert_eq!(short.params(), 124_439_808);
    assert!(networks::build("gpt2", Some(Input::Image(8, 8))).is_err());
    assert!(networks::build("alexnet", None).is_err());
    // Past 65,536 pixels a side a layer's figures wrapped in u64: VGG16 at
    // 4294967311x4294967357 was written, with 84 TB for its first layer.
    let e = networks::build("vgg16", Some(Input::Image(4_294_967_311, 4_294_967_357))).unwrap_err();
    assert!(e.to_string().contains("past 65536 pixels a side"), "{e}");
    // A batch that takes a layer past 2^53 bytes is refused by the graph's
    // validation, not wrapped.
    let big = networks::build("vgg16", Some(Input::Image(65_536, 65_536))).unwrap();
    assert!(Graph::from_file(&big.to_file(u32::MAX), "big").is_err());
    // All-to-all skips on a long random DAG drew 4×10¹⁰ times and ran out
    // of memory; refused before drawing.
    let all_to_all = RandomDag {
        nodes: 200_000,
        width: 1,
        skip_prob: 1.0,
        skip_span: 200_000,
        ..RandomDag::default()
    };
    let e = all_to_all.check().unwrap_err();
    assert!(e.contains("candidate edges"), "{e}");
    // The depth counts the source's layer: 5 nodes at depth 2 and width 3
    // were said not to fit "2 layers after a single source" (room for 7).
    let deep = |nodes, depth| RandomDag {
        nodes,
        width: 3,
        depth: Some(depth),
        ..RandomDag::default()
    };
    assert_eq!(
        deep(5, 2).check().unwrap_err(),
        "5 nodes do not fit a depth of 2: a single source, then 1 layer of width 1..=3 (2..=4 nodes in all)"
    );
    assert!(deep(4, 2).check().is_ok());
    assert!(deep(2, 2).check().is_ok());
    assert_eq!(
        deep(4, 0).check().unwrap_err(),
        "the depth must be at least 1 (the source's layer)"
    );
}

#[test]
fn synthetic_families() {
    // Seeds name the same graphs as the first version of the generator.
    let g = synthetic::random_layered(&RandomDag {
        nodes: 30,
        seed: 7,
        ..RandomDag::default()
    });
    assert_eq!((g.len(), g.num_edges(), g.total_cost()), (30, 47, 174.0));
    // An exact depth and width.
    let p = RandomDag {
        nodes: 41,
        width: 5,
        depth: Some(11),
        skip_prob: 0.5,
        cost: Dist::LogUniform(10, 10_000),
        memory: Dist::Const(64),
        seed: 3,
        ..RandomDag::default()
    };
    let f = synthetic::random_layered_file(&p);
    assert_eq!(f.nodes.len(), 41);
    assert!(f.nodes.iter().all(|n| n.memory == 64.0));
    assert!(f.nodes.iter().all(|n| (10.0..=10_000.0).contains(&n.cost)));
    let g = synthetic::random_layered(&p);
    // Longest path from the source = depth - 1 edges.
    let mut level = vec![0usize; g.len()];
    for v in g.ids() {
        level[v.idx()] = g
            .deps(v)
            .iter()
            .map(|d| level[d.idx()] + 1)
            .max()
            .unwrap_or(0);
    }
    assert_eq!(level.iter().max(), Some(&10));
    assert!(RandomDag {
        depth: Some(3),
        nodes: 41,
        ..p.clone()
    }
    .check()
    .is_err());
    // Forward variant: one loss, gradients generated.
    let fw = synthetic::random_layered(&RandomDag {
        forward: true,
        ..p.clone()
    });
    assert_eq!(fw.forward_ids().count(), 42);
    assert_eq!(fw.len(), 42 + 41);

    let r = synthetic::residual(&ResidualChain {
        blocks: 4,
        ..ResidualChain::default()
    });
    assert_eq!(r.forward_ids().count(), 2 + 4 * 3);
    assert_eq!(r.len(), 2 * (2 + 4 * 3) - 1);
    // Adds save nothing: their gradient reads only the gradients of the
    // next block's first layer and add.
    let add = r.find("grad/b2_add").unwrap();
    let names: Vec<&str> = r
        .deps(add)
        .iter()
        .map(|&d| r.node(d).name.as_str())
        .collect();
    assert_eq!(names, ["grad/b3_f1", "grad/b3_add"]);

    assert_eq!(Dist::parse("log:10..1000"), Ok(Dist::LogUniform(10, 1000)));
    assert_eq!(Dist::parse("3..7"), Ok(Dist::Uniform(3, 7)));
    assert_eq!(Dist::parse("5"), Ok(Dist::Const(5)));
    assert!(Dist::parse("7..3").is_err() && Dist::parse("log:0..9").is_err());
}

fn remat(args: &[&str], dir: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_remat"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

#[test]
fn zoo_command() {
    let tmp = tempfile::tempdir().unwrap();
    let out = remat(
        &[
            "zoo", "random", "--nodes", "50", "--seed", "3", "-o", "r.yaml",
        ],
        tmp.path(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let g = Graph::load(&tmp.path().join("r.yaml")).unwrap();
    assert_eq!(g.len(), 50);

    let out = remat(
        &["zoo", "resnet50", "--batch", "2", "-o", "m.yaml"],
        tmp.path(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let g = Graph::load(&tmp.path().join("m.yaml")).unwrap();
    assert_eq!(g.batch_size, 2);

    for bad in [
        &["zoo", "vgg16", "--resolution", "16x16"][..],
        &["zoo", "vgg16", "--resolution", "big"],
        &["zoo", "vgg16", "--layers", "3"],
        &["zoo", "random", "--cost", "9..1"],
        &["zoo", "nosuchnet"],
        &["zoo", "--all", "--batch", "3"],
    ] {
        let out = remat(bad, tmp.path());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{bad:?}: {err}");
    }

    let out = remat(&["zoo", "--all", "--check"], &root());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = remat(&["zoo", "--all", "--check"], tmp.path());
    assert_eq!(out.status.code(), Some(1));
}

/// The operator-level families against their closed forms: node and edge
/// counts, and that every gradient reads exactly what autograd saves.
#[test]
fn operator_level_families() {
    use remat::zoo::ops::{self, OpsChain, OpsTransformer};
    for layers in [1, 2, 12] {
        let p = OpsTransformer {
            layers,
            ..OpsTransformer::default()
        };
        let g = ops::transformer(&p);
        assert_eq!(g.len(), 43 * layers + 8, "transformer L={layers}");
        assert_eq!(g.len(), p.node_count());
        assert_eq!(g.num_edges(), p.edge_count(), "transformer L={layers}");
        let fwd = g.forward_ids().count();
        assert_eq!(fwd, 24 * layers + 5);
    }
    assert_eq!(
        OpsTransformer::default().params(),
        124_439_808,
        "GPT-2 small"
    );
    // The position table is GPT-2's 1024 rows at any length, and a longer
    // one is refused (the parameters grew with --seq-len).
    for seq_len in [16, 512, 1024] {
        let p = OpsTransformer {
            seq_len,
            ..OpsTransformer::default()
        };
        assert_eq!(p.params(), 124_439_808, "seq_len {seq_len}");
        assert!(p.check().is_ok());
    }
    let long = OpsTransformer {
        seq_len: 1025,
        ..OpsTransformer::default()
    };
    assert_eq!(
        long.check().unwrap_err(),
        "sequence length 1025 exceeds the 1024 learned positions"
    );
    let p48 = OpsTransformer {
        layers: 48,
        ..OpsTransformer::default()
    };
    assert_eq!(ops::transformer(&p48).len(), 2072);

    let g = ops::transformer(&OpsTransformer {
        layers: 2,
        ..OpsTransformer::default()
    });
    let deps = |name: &str| -> Vec<String> {
        let id = g.find(name).unwrap_or_else(|| panic!("no node {name}"));
        let mut v: Vec<String> = g.deps(id).iter().map(|&d| g.node(d).name.clone()).collect();
        v.sort();
        v
    };
    let s = |v: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = v.iter().map(|x| x.to_string()).collect();
        v.sort();
        v
    };
    // Norm backward: the input and the statistics, never the norm's output.
    assert_eq!(
        deps("grad/h1_ln1"),
        s(&["grad/h1_qkv_mm", "h0_res2", "h1_ln1_stats"])
    );
    // Statistics and masks take no gradient.
    for v in [
        "h1_ln1_stats",
        "h1_ln2_stats",
        "h1_attn_drop_mask",
        "ln_f_stats",
    ] {
        assert!(g.find(&format!("grad/{v}")).is_none(), "{v}");
    }
    // Matmul: its input; bias: nothing; softmax: its output; GELU: its input.
    assert_eq!(deps("grad/h1_fc1_mm"), s(&["grad/h1_fc1_bias", "h1_ln2"]));
    assert_eq!(deps("grad/h1_fc1_bias"), s(&["grad/h1_gelu"]));
    assert_eq!(
        deps("grad/h1_attn_softmax"),
        s(&["grad/h1_attn_drop", "h1_attn_softmax"])
    );
    assert_eq!(deps("grad/h1_gelu"), s(&["grad/h1_fc2_mm", "h1_fc1_bias"]));
    // Dropout: only the mask.
    assert_eq!(
        deps("grad/h1_attn_drop"),
        s(&["grad/h1_attn_ctx", "h1_attn_drop_mask"])
    );
    // Attention products: both operands.
    assert_eq!(
        deps("grad/h1_attn_ctx"),
        s(&["grad/h1_proj_mm", "h1_attn_drop", "h1_qkv_bias"])
    );
    // Residual add: nothing saved; the next layer's norm and add gradients.
    assert_eq!(deps("grad/h0_res2"), s(&["grad/h1_ln1", "grad/h1_res1"]));
    assert_eq!(deps("grad/lm_head"), s(&["loss", "ln_f"]));
    // A mask is one byte per element; statistics two fp32 per row.
    let mask = g.find("h0_proj_drop_mask").unwrap();
    let drop = g.find("h0_proj_drop").unwrap();
    assert_eq!(g.memory(mask).0 * 4, g.memory(drop).0);
    assert_eq!(
        g.memory(g.find("h0_ln1_stats").unwrap()).0,
        2 * 8 * 1024 * 4
    );

    for layers in [1, 3, 100] {
        let p = OpsChain {
            layers,
            ..OpsChain::default()
        };
        let g = ops::chain(&p);
        assert_eq!(g.len(), 14 * layers + 3, "chain L={layers}");
        assert_eq!(g.len(), p.node_count());
        assert_eq!(g.num_edges(), p.edge_count(), "chain L={layers}");
    }
    let l = OpsChain::layers_for(200_000);
    assert_eq!(l, 14_286);
    // At least one block, as --layers asks: the header's command reruns.
    for (nodes, layers) in [(1, 1), (3, 1), (17, 1), (18, 2)] {
        assert_eq!(OpsChain::layers_for(nodes), layers, "--nodes {nodes}");
    }
    let big = ops::chain(&OpsChain {
        layers: l,
        ..OpsChain::default()
    });
    assert_eq!(big.len(), 200_007);
    assert_eq!(big.num_edges(), 22 * l + 2);
}
