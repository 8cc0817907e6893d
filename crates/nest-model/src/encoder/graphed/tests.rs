//! The recorded encode passes on the CPU fake: the eager vectors to 1e-5, prompts, failures,
//! the memory budget, buckets.

use super::*;
use crate::config::Architecture;
use crate::graph::GraphMode;
use crate::tiny::{write_tiny_model, TinySpec};
use crate::EncodeOptions;

/// Lengths from 3 to over 30 tokens: several token buckets.
const TEXTS: [&str; 7] = [
    "the cat sat on the mat",
    "a man is playing music",
    "dog",
    "the dog is playing guitar on the mat, a man sat!",
    "xyz 123",
    "the cat and the dog sat on a mat while a man is playing guitar music",
    "a",
];

fn tiny(arch: Architecture) -> (tempfile::TempDir, ElasticEncoder) {
    let dir = tempfile::tempdir().unwrap();
    write_tiny_model(dir.path(), &TinySpec::new(arch)).unwrap();
    let enc = ElasticEncoder::load(dir.path(), Device::Cpu, None).unwrap();
    (dir, enc)
}

fn opts(batch_size: usize, graphs: GraphMode) -> EncodeOptions {
    EncodeOptions {
        batch_size,
        graphs,
        ..EncodeOptions::default()
    }
}

fn max_diff(a: &[Tensor], b: &[Tensor]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(a, b)| {
            assert_eq!(a.size(), b.size());
            (a - b).abs().max().double_value(&[])
        })
        .fold(0.0, f64::max)
}

/// Forced on (the CPU fake), padded rows and tokens and no packing give the eager vectors
/// to 1e-5: every architecture, several batch sizes (a last partial batch among them), one
/// and several layers at once; a second encode reuses the recorded shapes.
#[test]
fn recorded_passes_give_the_eager_vectors() {
    for arch in [
        Architecture::Bert,
        Architecture::Mpnet,
        Architecture::ModernBert,
        Architecture::Qwen3,
    ] {
        let (_d, enc) = tiny(arch);
        for layers in [&[2usize][..], &[1], &[1, 2]] {
            for batch in [1, 3, 4, 7, 32] {
                let off = opts(batch, GraphMode::Off);
                let eager = enc.embed_layers(&TEXTS, layers, off, &mut |_| {}).unwrap();
                let on = opts(batch, GraphMode::On);
                let graphed = enc.embed_layers(&TEXTS, layers, on, &mut |_| {}).unwrap();
                let d = max_diff(&eager, &graphed);
                assert!(d < 1e-5, "{arch:?} layers {layers:?} batch {batch}: {d}");
            }
        }
        let shapes = enc.recorded_encode_shapes();
        assert!(shapes > 1 && shapes <= MAX_GRAPHS, "{arch:?}: {shapes}");
        enc.embed_layers(&TEXTS, &[1, 2], opts(3, GraphMode::On), &mut |_| {})
            .unwrap();
        assert_eq!(enc.recorded_encode_shapes(), shapes, "{arch:?}: reused");
    }
}

/// A prompt left out of the pooling (its tokens skipped) is skipped in the recorded pass too.
#[test]
fn recorded_passes_skip_a_prompt() {
    let (_d, mut enc) = tiny(Architecture::Bert);
    enc.include_prompt = false;
    let run = |mode| {
        let o = opts(3, mode);
        enc.embed_prompted(&TEXTS, &[1, 2], o, Some("the man "), &mut |_| {})
            .unwrap()
    };
    let (eager, graphed) = (run(GraphMode::Off), run(GraphMode::On));
    assert!(max_diff(&eager, &graphed) < 1e-5);
    let unprompted = enc
        .embed_layers(&TEXTS, &[1, 2], opts(3, GraphMode::Off), &mut |_| {})
        .unwrap();
    assert!(max_diff(&eager, &unprompted) > 1e-3, "the prompt counts");
}

/// A pass that fails (here a panic inside the forward pass, as a capture's refusal would
/// be) gives `None`, warns, and turns recording off for good; encodes go on eagerly.
#[test]
fn a_failed_recording_falls_back_to_eager() {
    let (_d, enc) = tiny(Architecture::Bert);
    let ids = enc.tokenizer.encode(&TEXTS).unwrap();
    let seqs: Vec<&[i64]> = ids.iter().map(Vec::as_slice).collect();
    // layer 5 of a 2-layer model: the pooling indexes past the hidden states
    let bad = BatchJob {
        layers: &[5],
        deepest: 5,
        skip: 0,
    };
    assert!(enc.embed_graphed(&seqs, &bad, 8).is_none());
    assert_eq!(enc.recorded_encode_shapes(), 0);
    let good = BatchJob {
        layers: &[2],
        deepest: 2,
        skip: 0,
    };
    assert!(enc.embed_graphed(&seqs, &good, 8).is_none(), "off for good");
    let on = enc.embed_layers(&TEXTS, &[2], opts(2, GraphMode::On), &mut |_| {});
    let off = enc.embed_layers(&TEXTS, &[2], opts(2, GraphMode::Off), &mut |_| {});
    assert_eq!(
        max_diff(&on.unwrap(), &off.unwrap()),
        0.0,
        "eager, bit for bit"
    );
}

/// A pool whose memory budget is spent records no new shape: those batches run eagerly
/// (the same vectors as a recorded pass, to 1e-5), shapes recorded before still replay,
/// and the encoder is not marked failed.
#[test]
fn a_spent_memory_budget_records_no_new_shape() {
    use crate::graph::{Budget, Pool};
    let (_d, enc) = tiny(Architecture::Bert);
    let on = |batch| opts(batch, GraphMode::On);
    let first = enc.embed_layers(&TEXTS, &[2], on(4), &mut |_| {}).unwrap();
    let shapes = enc.recorded_encode_shapes();
    assert!(shapes > 0);
    {
        let mut c = enc.graphs.inner.lock().unwrap();
        // the process holds 900 of 1,000 bytes, 800 may be held with a new recording
        let full = Pool::with_sharing(Device::Cpu, false)
            .with_budget(Budget::new(1000, 0.8), |_| Some(900));
        c.pool = Some(full);
    }
    let again = enc.embed_layers(&TEXTS, &[2], on(4), &mut |_| {}).unwrap();
    assert_eq!(
        max_diff(&first, &again),
        0.0,
        "recorded shapes still replay"
    );
    let other = enc.embed_layers(&TEXTS, &[2], on(3), &mut |_| {}).unwrap();
    let eager = enc
        .embed_layers(&TEXTS, &[2], opts(3, GraphMode::Off), &mut |_| {})
        .unwrap();
    assert!(max_diff(&other, &eager) < 1e-5);
    assert_eq!(
        enc.recorded_encode_shapes(),
        shapes,
        "no new shape recorded"
    );
    assert!(!enc.encode_graphs_failed());
}

/// Buckets: rows at least the batch's, tokens rounded up to [`bucket`] (16 by default) but
/// not past the tokenizer's longest (64 here) unless a text is longer.
#[test]
fn buckets_round_tokens_up() {
    let (_d, enc) = tiny(Architecture::Bert);
    let job = BatchJob {
        layers: &[1, 2],
        deepest: 2,
        skip: 1,
    };
    let (a, b, c) = (vec![1i64; 17], vec![1i64; 3], vec![1i64; 70]);
    let up = |n: usize| n.div_ceil(bucket()) * bucket();
    let s = enc.bucket(&[&a, &b], &job, 4);
    assert_eq!((s.rows, s.tokens, s.deepest, s.skip), (4, up(17), 2, 1));
    assert_eq!(enc.bucket(&[&b], &job, 1).tokens, up(3));
    assert_eq!(enc.bucket(&[&c, &b], &job, 1).tokens, 70);
    assert_eq!(enc.bucket(&[&c, &b], &job, 1).rows, 2);
    let (bytes, layout, n) = enc.bucket_input(&[&a, &b], &s);
    let batch = unpack_batch(&bytes, &layout);
    let input = &batch.input;
    assert_eq!((input.ids.size(), n), (vec![4, up(17) as i64], 2));
    // the means' weights leave the prompt's token out (skip 1): 1/16 on tokens 1..17 of row 0
    let w = batch.weights.expect("a mean-pooled model's weights");
    assert_eq!(w.size(), [4, 1, up(17) as i64]);
    let row = Vec::<f32>::try_from(w.get(0).view([-1])).unwrap();
    assert!(
        row[0] == 0.0
            && row[1..17].iter().all(|&x| x == 1.0 / 16.0)
            && row.get(17).is_none_or(|&x| x == 0.0)
    );
    let additive = batch.additive.expect("BERT adds a padding mask");
    assert_eq!(additive.size(), [4, 1, 1, up(17) as i64]);
    assert_eq!(
        Vec::<i64>::try_from(input.ids.get(1).narrow(0, 3, 2)).unwrap(),
        [0, 0]
    );
    let mask = Vec::<i64>::try_from(input.mask.sum_dim_intlist(1, false, Kind::Int64));
    assert_eq!(mask.unwrap(), [17, 3, 1, 1], "padding rows hold one token");
}

/// `Auto` records on a GPU only (when `NEST_CUDA_GRAPHS` is not set).
#[test]
fn auto_is_off_on_the_cpu() {
    if std::env::var_os("NEST_CUDA_GRAPHS").is_some() {
        return;
    }
    assert!(!GraphMode::Auto.resolve(Device::Cpu));
    assert!(GraphMode::Auto.resolve(Device::Cuda(0)));
    assert!(GraphMode::On.resolve(Device::Cpu));
    assert!(!GraphMode::Off.resolve(Device::Cuda(0)));
    assert_eq!("on".parse::<GraphMode>(), Ok(GraphMode::On));
    assert!("yes".parse::<GraphMode>().is_err());
}

/// The operators of one recorded pass (bf16, as a GPU runs it) at `layers`, in a bucket of 8
/// rows of [`TEXTS`], after a first pass (as a recording's warm-up: what a model caches is
/// made there).
fn pass_ops(enc: &ElasticEncoder, layers: &[usize]) -> usize {
    let ids = enc.tokenizer.encode(&TEXTS).unwrap();
    let seqs: Vec<&[i64]> = ids.iter().map(Vec::as_slice).collect();
    let job = BatchJob {
        layers,
        deepest: layers.iter().copied().max().unwrap(),
        skip: 0,
    };
    let shape = enc.bucket(&seqs, &job, 8);
    let (host, layout, _) = enc.bucket_input(&seqs, &shape);
    let s = Static::new(&host, &layout, layers.len(), enc.output_dim(), Device::Cpu);
    fill(&s, &host);
    let _g = tch::no_grad_guard();
    enc.graphed_body(&s, &job).unwrap();
    let (done, n) = crate::ops::count(|| enc.graphed_body(&s, &job)).unwrap();
    done.unwrap();
    n
}

/// On a GPU a small batch's pass costs about one kernel's time per operator (BENCHMARKS.md, "On
/// a GPU"), so what a pass runs besides its layers bounds early exit there: the operators of
/// a recorded bf16 pass outside its layers (embeddings, mask, pooling, output) and for one more
/// pooled layer, counted on the CPU, stay within each architecture's budget: the counts of
/// 2026-11-28, when the tables that depend on the length alone were first cached, the
/// embeddings' lookups of positions 0..n and type 0 became views, the masks two operators and
/// the means one product (before: BERT 24 and 8, MPNet 46 and 8, ModernBERT 39 and 11, Qwen3
/// 32 and 16, Gemma 3 45 and 17), less what the host makes since (the means' weights; the
/// padding mask of BERT, MPNet and XLM-R; MPNet's and XLM-R's position ids: 16, 24, 21, 22 and
/// 27 outside the layers before) and the sliding windows made once per length (ModernBERT's and
/// Gemma 3's: 17 and 23 before), and the means written into the recording's output by their
/// product (a pooled layer: 4, 4, 7, 12 and 13 before).
#[test]
fn a_recorded_pass_runs_few_operators_outside_its_layers() {
    for (arch, budget) in [
        (Architecture::Bert, (8, 2)),
        (Architecture::Mpnet, (11, 2)),
        (Architecture::XlmRoberta, (9, 2)),
        (Architecture::ModernBert, (11, 5)),
        (Architecture::Qwen3, (16, 10)),
        (Architecture::Gemma3, (17, 11)),
    ] {
        let (_d, mut enc) = tiny(arch);
        enc.convert_for_inference(Dtype::Bf16).unwrap();
        let (one, two) = (pass_ops(&enc, &[1]), pass_ops(&enc, &[2]));
        let layer = two - one;
        let fixed = one - layer;
        let extra = pass_ops(&enc, &[1, 2]) - two;
        eprintln!("{arch:?}: {layer} operators a layer, {fixed} outside, {extra} a pooled layer");
        assert!(
            fixed <= budget.0 && extra <= budget.1,
            "{arch:?}: {fixed} operators outside the layers, {extra} for one more pooled layer; \
             budget {budget:?}"
        );
    }
}

/// What the host makes for a batch (the means' weights, the additive padding mask, the position
/// ids) gives the vectors of the pass that makes them from the ids and mask, bit for bit, and
/// so does pooling straight into a static output: every architecture, float32 and bf16, with
/// and without a prompt's tokens left out of the pooling.
#[test]
fn host_made_tensors_give_the_passes_vectors_bit_for_bit() {
    use super::super::transfer::Extras;
    for arch in [
        Architecture::Bert,
        Architecture::Mpnet,
        Architecture::XlmRoberta,
        Architecture::ModernBert,
        Architecture::Qwen3,
        Architecture::Gemma3,
    ] {
        let (_d, mut enc) = tiny(arch);
        let ids = enc.tokenizer.encode(&TEXTS).unwrap();
        let seqs: Vec<&[i64]> = ids.iter().map(Vec::as_slice).collect();
        let pad = enc.config.pad_id();
        for dtype in [Dtype::Float32, Dtype::Bf16] {
            if dtype == Dtype::Bf16 {
                enc.convert_for_inference(dtype).unwrap();
            }
            for skip in [0, 2] {
                let job = BatchJob {
                    layers: &[1, 2],
                    deepest: 2,
                    skip,
                };
                let (host, layout) = pack_batch(&seqs, 0, pad, enc.extras(skip));
                let none = Extras {
                    weights: None,
                    skip,
                    additive: false,
                    positions: false,
                };
                let (plain, plain_layout) = pack_batch(&seqs, 0, pad, none);
                let mean = enc.pooling.is_mean();
                assert_eq!(layout.weights, mean, "{arch:?}");
                assert!(!plain_layout.weights && !plain_layout.additive && !plain_layout.positions);
                let _g = tch::no_grad_guard();
                let made = enc.pool_layers(&unpack_batch(&host, &layout), &job, None);
                let own = enc.pool_layers(&unpack_batch(&plain, &plain_layout), &job, None);
                // and written into a recording's static output, by the product itself
                let out = Tensor::zeros(
                    [2, seqs.len() as i64, enc.output_dim() as i64],
                    (Kind::Float, Device::Cpu),
                );
                let into = enc.pool_layers(&unpack_batch(&host, &layout), &job, Some(&out));
                for (k, ((m, o), i)) in made.iter().zip(&own).zip(&into).enumerate() {
                    assert!(m.equal(o), "{arch:?} {dtype:?} skip {skip}: {:?}", layout);
                    assert!(i.equal(m) && out.get(k as i64).equal(m), "{arch:?} into");
                }
            }
        }
    }
}

/// An encode counts its batches' tokens for `nest bench encode`: the texts' own, and rows x
/// length as each pass is shaped (eager: the batch's longest; recorded: the first batch's rows
/// and the length rounded up to [`bucket`]), reckoned here from the tokenised lengths.
#[test]
fn an_encode_counts_real_and_padded_tokens() {
    let (_d, enc) = tiny(Architecture::Bert);
    let ids = enc.tokenizer.encode(&TEXTS).unwrap();
    let mut lens: Vec<usize> = ids.iter().map(Vec::len).collect();
    lens.sort_unstable_by(|a, b| b.cmp(a));
    let batch = 3;
    let eager: usize = lens.chunks(batch).map(|c| c.len() * c[0]).sum();
    let recorded: usize = lens
        .chunks(batch)
        .map(|c| batch * c[0].div_ceil(bucket()) * bucket())
        .sum();
    for (graphs, padded) in [(GraphMode::Off, eager), (GraphMode::On, recorded)] {
        let one = EncodeOptions {
            streams: 1,
            ..opts(batch, graphs)
        };
        let (out, p) =
            super::super::phases::measure(|| enc.embed_layers(&TEXTS, &[2], one, &mut |_| {}));
        out.unwrap();
        assert_eq!(p.real_tokens, lens.iter().sum::<usize>(), "{graphs:?}");
        assert_eq!(p.padded_tokens, padded, "{graphs:?}");
        assert_eq!((p.counted_batches, p.batch_count), (3, 3), "{graphs:?}");
    }
    assert!(recorded > eager, "the test's lengths span buckets");
}

/// `NEST_GRAPH_BUCKET`: unset or empty is the default, 1 to 64 is taken, anything else is an
/// error naming the variable and what it takes.
#[test]
fn the_bucket_variable_is_read_or_refused() {
    assert_eq!(bucket_from(None), Ok(BUCKET));
    assert_eq!(bucket_from(Some(" ")), Ok(BUCKET));
    assert_eq!(bucket_from(Some("4")), Ok(4));
    assert_eq!(bucket_from(Some("64")), Ok(64));
    for bad in ["0", "65", "-8", "eight", "4.5"] {
        let e = bucket_from(Some(bad)).unwrap_err();
        assert!(
            e.contains("NEST_GRAPH_BUCKET") && e.contains("1 to 64"),
            "{e}"
        );
    }
}
