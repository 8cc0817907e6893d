//! On a GPU (skipped, with a message, where there is none): what the recorded passes rely on
//! and only a GPU can show. Built for the GPU machine by `scripts/gpu/gpu_bundle.sh` and run by
//! section 11 of `scripts/gpu/gpu_issue41.sh`.
//!
//! GradCache's two recorded passes of a chunk (nest-train's `graphed_chunks.rs`: the encode
//! without autograd, then the re-encode with its backward) must draw the same dropout masks:
//! two different CUDA graphs replayed after the same seed. And graphs sharing one memory pool
//! (the default, `NEST_GRAPH_POOL=shared`) must give what graphs with pools of their own give,
//! in any replay order. And a server's workers sharing one GPU (`nest serve --workers 2`: each
//! its own encoder and stream) must record and replay at once without touching each other's
//! graphs.
//! And a pool must read the card's memory for its recordings' budget. And an encode's inputs,
//! which go up through pinned blocks freed as soon as their copies are queued, must land intact
//! while the device is still busy with earlier work.

use std::cell::RefCell;

use nest_model::graph::{Captured, GraphMode, Pool};
use nest_model::tiny::{write_tiny_model, TinySpec};
use nest_model::{Architecture, ClsAttention, ElasticEncoder, EncoderInput};
use tch::{Device, Kind, Tensor};

/// A static input of `rows` texts of `len` tokens and the last layer's states out.
struct Pass {
    input: EncoderInput,
    out: RefCell<Option<Tensor>>,
}

/// The tests seed libtorch's global generator: one at a time.
static RNG: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn gpu() -> Option<Device> {
    if !tch::Cuda::is_available() {
        eprintln!("no GPU here: skipped");
        return None;
    }
    Some(Device::Cuda(0))
}

fn pass(enc: &ElasticEncoder, rows: usize, len: usize) -> Pass {
    let seqs: Vec<Vec<i64>> = (0..rows)
        .map(|r| {
            (0..len - r % 3)
                .map(|k| 5 + ((r * 7 + k) % 40) as i64)
                .collect()
        })
        .collect();
    let refs: Vec<&[i64]> = seqs.iter().map(Vec::as_slice).collect();
    Pass {
        input: enc.make_input_on(&refs, len, enc.device()),
        out: RefCell::new(None),
    }
}

/// The forward pass in training mode (dropout on), with or without autograd, into the static
/// output (made at the warm-up pass, outside the capture).
fn body(enc: &ElasticEncoder, s: &Pass, grad: bool) -> nest_model::Result<()> {
    let run = || {
        let out = nest_model::without_packing(|| {
            enc.forward_with(&s.input, enc.num_layers(), true, ClsAttention::None)
        });
        out.hidden_states.last().expect("states").detach()
    };
    let h = match grad {
        true => run(),
        false => tch::no_grad(run),
    };
    let mut slot = s.out.borrow_mut();
    match slot.as_ref() {
        Some(o) => {
            o.shallow_clone().copy_(&h);
        }
        None => *slot = Some(h.copy()),
    }
    Ok(())
}

fn record(enc: &ElasticEncoder, pool: &mut Pool, s: Pass, grad: bool) -> Captured<Pass> {
    let mut b = |s: &Pass| body(enc, s, grad);
    Captured::record(pool, s, 1, &mut b)
        .map_err(|f| f.error)
        .expect("recording")
}

fn replay(enc: &ElasticEncoder, c: &mut Captured<Pass>, seed: i64, grad: bool) -> Tensor {
    tch::manual_seed(seed);
    c.run(&mut |s: &Pass| body(enc, s, grad)).expect("replay");
    c.state
        .out
        .borrow()
        .as_ref()
        .expect("out")
        .to_device(Device::Cpu)
        .copy() // the next replay writes the same tensor (the same one on the CPU)
}

fn max_diff(a: &Tensor, b: &Tensor) -> f64 {
    (a - b).abs().max().to_kind(Kind::Double).double_value(&[])
}

/// A folder with a tiny random BERT (`nest_model::tiny`).
fn tiny_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write_tiny_model(dir.path(), &TinySpec::new(Architecture::Bert)).unwrap();
    dir
}

fn tiny(dev: Device) -> (tempfile::TempDir, ElasticEncoder) {
    let dir = tiny_dir();
    let mut enc = ElasticEncoder::load(dir.path(), dev, None).unwrap();
    enc.set_dropout(0.1);
    (dir, enc)
}

#[test]
fn two_recorded_passes_draw_the_same_dropout_after_the_same_seed() {
    let _rng = RNG
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let Some(dev) = gpu() else { return };
    let (_dir, enc) = tiny(dev);
    let mut pool = Pool::with_sharing(dev, false);
    let mut no_grad = record(&enc, &mut pool, pass(&enc, 8, 16), false);
    let mut with_grad = record(&enc, &mut pool, pass(&enc, 8, 16), true);
    assert!(no_grad.records(), "a CUDA graph on the GPU");
    let a = replay(&enc, &mut no_grad, 7, false);
    let b = replay(&enc, &mut with_grad, 7, true);
    let d = max_diff(&a, &b);
    eprintln!("same seed, with and without autograd: max |difference| {d:e}");
    assert!(d < 1e-6, "the two passes drew different masks: {d}");
    // dropout is on: another seed gives other states
    let c = replay(&enc, &mut no_grad, 8, false);
    assert!(
        max_diff(&a, &c) > 1e-3,
        "dropout did not change with the seed"
    );
    // and the eager pass of that shape after the same seed draws what the recordings drew
    tch::manual_seed(7);
    let eager = tch::no_grad(|| {
        let s = pass(&enc, 8, 16);
        let out = nest_model::without_packing(|| {
            enc.forward_with(&s.input, enc.num_layers(), true, ClsAttention::None)
        });
        out.hidden_states.last().unwrap().to_device(Device::Cpu)
    });
    let d = max_diff(&a, &eager);
    eprintln!("recorded against eager, same seed: max |difference| {d:e}");
    assert!(d < 1e-5, "{d}");
}

#[test]
fn graphs_sharing_a_pool_give_what_private_pools_give() {
    let _rng = RNG
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let Some(dev) = gpu() else { return };
    let (_dir, enc) = tiny(dev);
    let shapes = [(8, 16), (4, 32), (16, 16), (2, 48)];
    let outputs = |shared: bool| -> Vec<Tensor> {
        let mut pool = Pool::with_sharing(dev, shared);
        let mut graphs: Vec<Captured<Pass>> = shapes
            .iter()
            .map(|&(r, l)| record(&enc, &mut pool, pass(&enc, r, l), true))
            .collect();
        // replays in an order other than the recording's, twice over
        let mut out = Vec::new();
        for round in 0..2 {
            for k in [3, 1, 0, 2] {
                let t = replay(&enc, &mut graphs[k], 100 + k as i64, true);
                if round == 1 {
                    out.push(t);
                }
            }
        }
        out
    };
    let (private, shared) = (outputs(false), outputs(true));
    for (p, s) in private.iter().zip(&shared) {
        let d = max_diff(p, s);
        assert!(d < 1e-6, "shared pool against private pools: {d}");
    }
    eprintln!(
        "shared pool: {} replays as the private pools'",
        shared.len()
    );
}

/// Two threads, each with its own encoder on a stream of its own (a server's two workers on
/// one GPU), encode at once through recorded passes: their recordings take turns (captures share
/// the side stream), one's replays go on while the other records, and every vector equals the
/// eager encode's.
#[test]
fn two_threads_record_and_replay_at_once() {
    let Some(dev) = gpu() else { return };
    let words = [
        "the", "cat", "sat", "on", "mat", "a", "dog", "is", "playing", "music",
    ];
    // 1 to 40 words: several token buckets, so that each thread records several shapes
    let texts: Vec<String> = (0..120)
        .map(|i| {
            (0..1 + (i * 7) % 40)
                .map(|k| words[(i + k) % words.len()])
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    let dir = tiny_dir();
    let load = || ElasticEncoder::load(dir.path(), dev, None).unwrap();
    // one encode's vectors at layer 2 as plain floats (a tensor cannot be shared between threads)
    let encode = |enc: &ElasticEncoder, graphs| -> Vec<f32> {
        let opts = nest_model::EncodeOptions {
            batch_size: 8,
            graphs,
            ..nest_model::EncodeOptions::default()
        };
        let v = enc.embed_layers(&texts, &[2], opts, &mut |_| {}).unwrap();
        Vec::<f32>::try_from(v[0].to_kind(Kind::Float).flatten(0, -1)).unwrap()
    };
    let eager = encode(&load(), GraphMode::Off);
    let worst = std::thread::scope(|s| {
        let workers: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    nest_model::graph::own_stream(dev).unwrap();
                    let enc = load();
                    let mut worst = 0f64;
                    for _ in 0..3 {
                        let v = encode(&enc, GraphMode::On);
                        assert_eq!(v.len(), eager.len());
                        let d = v
                            .iter()
                            .zip(&eager)
                            .map(|(a, b)| (a - b).abs())
                            .fold(0f32, f32::max);
                        worst = worst.max(d as f64);
                    }
                    assert!(
                        !enc.encode_graphs_failed(),
                        "a recording failed (then eager)"
                    );
                    assert!(enc.recorded_encode_shapes() > 1, "several shapes recorded");
                    worst
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().unwrap())
            .fold(0f64, f64::max)
    });
    eprintln!("two threads recording at once: max |difference| from eager {worst:e}");
    assert!(worst < 1e-5, "{worst}");
}

/// The machine record names the card as `nvidia-smi` does (name, memory within 1%, driver).
#[test]
fn the_machine_record_names_the_card() {
    let Some(dev) = gpu() else { return };
    let m = nest_model::machine::Machine::this(dev);
    eprintln!("machine: {m}");
    let g = m.gpu.expect("a GPU record on a GPU");
    assert!(!g.name.is_empty() && g.memory_mib > 0 && g.multiprocessors > 0);
    let query = "--query-gpu=name,memory.total,driver_version";
    let Ok(out) = std::process::Command::new("nvidia-smi")
        .args(["-i", "0", query, "--format=csv,noheader,nounits"])
        .output()
    else {
        eprintln!("no nvidia-smi here: the record is not compared");
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let fields: Vec<&str> = text.trim().split(", ").collect();
    assert_eq!(fields.len(), 3, "nvidia-smi said {text:?}");
    assert_eq!(g.name, fields[0]);
    let smi_mib: f64 = fields[1].parse().expect("memory.total in MiB");
    let ratio = g.memory_mib as f64 / smi_mib;
    assert!(
        (0.99..=1.01).contains(&ratio),
        "{} MiB against {smi_mib}",
        g.memory_mib
    );
    assert_eq!(g.driver.as_deref(), Some(fields[2]));
}

/// A pool on the card watches its memory ([`nest_model::graph::Budget`]): recordings may fill
/// 80% of the card as the machine record reads it, and a recording whose pass holds 64 MiB of
/// temporaries notes at least that much (its private pool's new segment).
#[test]
fn a_pool_on_the_card_budgets_its_recordings() {
    let Some(dev) = gpu() else { return };
    if std::env::var_os("NEST_GRAPH_MEMORY").is_some() {
        eprintln!("NEST_GRAPH_MEMORY is set: the default share is not checked");
        return;
    }
    let mut pool = Pool::new(dev);
    let budget = pool.budget().expect("a budget on a GPU");
    let card = nest_model::machine::Machine::this(dev)
        .gpu
        .expect("a GPU record");
    let share = budget.limit() as f64 / (card.memory_mib << 20) as f64;
    assert!((0.799..=0.801).contains(&share), "{share}");
    assert!(pool.has_room(), "a test process holds little");
    let out = Tensor::zeros([1], (Kind::Float, dev));
    let mut body = |o: &Tensor| {
        let big = Tensor::ones([16 << 20], (Kind::Float, dev));
        o.shallow_clone().copy_(&big.sum(Kind::Float).reshape([1]));
        Ok(())
    };
    let mut c = Captured::record(&mut pool, out, 1, &mut body)
        .map_err(|f| f.error)
        .expect("recording");
    let largest = pool.budget().expect("budget").largest();
    eprintln!(
        "recording budget: {} of {} MiB; a 64 MiB pass's recording took {} MiB",
        budget.limit() >> 20,
        card.memory_mib,
        largest >> 20
    );
    assert!(largest >= 64 << 20, "{largest}");
    c.run(&mut body).expect("replay");
    let sum = c.state.to_device(Device::Cpu).double_value(&[0]);
    assert_eq!(sum, (16 << 20) as f64);
}

/// An encode's batches go up through pinned memory without waiting (`encoder/transfer.rs`,
/// `upload` and `upload_into`), and each pinned block is freed as soon as its copy is queued:
/// libtorch's pinned allocator must not hand it to the next batch before that copy has run.
/// With the device kept busy first (a chain of large products queued before the encode), the
/// host queues every batch's copy before any of them runs, so a block reused early would give
/// one batch another's ids: the vectors, eager and recorded, tokenised ahead and not, equal
/// the CPU's.
#[test]
fn pinned_uploads_land_intact_while_the_device_is_busy() {
    let Some(dev) = gpu() else { return };
    let texts: Vec<String> = (0..300)
        .map(|i| {
            (0..1 + (i * 13) % 37)
                .map(|k| format!("w{}", (i * 31 + k * 7) % 997))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    let dir = tiny_dir();
    let cpu = ElasticEncoder::load(dir.path(), Device::Cpu, None).unwrap();
    let enc = ElasticEncoder::load(dir.path(), dev, None).unwrap();
    let opts = |graphs, ahead| nest_model::EncodeOptions {
        batch_size: 4,
        graphs,
        tokenize_ahead: Some(ahead),
        ..nest_model::EncodeOptions::default()
    };
    let want = cpu
        .embed_layers(&texts, &[1, 2], opts(GraphMode::Off, false), &mut |_| {})
        .unwrap();
    let a = Tensor::randn([4096, 4096], (Kind::Float, dev));
    for (graphs, ahead) in [
        (GraphMode::Off, false),
        (GraphMode::Off, true),
        (GraphMode::On, true),
        (GraphMode::On, true), // replays of the shapes recorded by the one before
    ] {
        // about 27 TFLOP queued: the device is busy long after the host has queued the encode
        let mut busy = a.shallow_clone();
        for _ in 0..200 {
            busy = busy.matmul(&a).clamp(-1.0, 1.0);
        }
        let got = enc
            .embed_layers(&texts, &[1, 2], opts(graphs, ahead), &mut |_| {})
            .unwrap();
        drop(busy);
        for (g, w) in got.iter().zip(&want) {
            let d = max_diff(g, w);
            eprintln!("pinned uploads, {graphs:?}, ahead {ahead}: max |GPU - CPU| {d:e}");
            assert!(d < 1e-4, "{graphs:?}, ahead {ahead}: {d}");
        }
    }
}
