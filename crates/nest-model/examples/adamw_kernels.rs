//! The AdamW update on MiniLM's 22.7M parameter shapes: the eight in-place tensor passes Nest
//! used before (kept here as the comparison) against libtorch's fused kernel that
//! `nest_model::optim::AdamW` now calls. Prints the median of 8 updates, three rounds.
//!
//!     cargo run --release -p nest-model --example adamw_kernels
//!
//! (BENCHMARKS.md, "Training step": 20-23 ms against 7-9 ms on 2 threads of the Zen 5 EPYC.)

use nest_model::optim::AdamW;
use std::time::Instant;
use tch::{Kind, Tensor};

/// The previous update: eight in-place passes per tensor, the gradient as scratch.
fn old_step(params: &[Tensor], m: &mut [Tensor], v: &mut [Tensor], t: i32, lr: f64) {
    let _g = tch::no_grad_guard();
    let (b1, b2, eps, wd) = (0.9f64, 0.999f64, 1e-8, 0.01);
    let bc1 = 1.0 - b1.powi(t);
    let bc2 = 1.0 - b2.powi(t);
    let sbc2 = bc2.sqrt();
    for i in 0..params.len() {
        let mut g = params[i].grad();
        let mut p = params[i].shallow_clone();
        let _ = p.g_mul_scalar_(1.0 - lr * wd);
        let _ = m[i].lerp_(&g, 1.0 - b1);
        let _ = g.g_mul_(&g.shallow_clone());
        let _ = v[i].lerp_(&g, 1.0 - b2);
        let _ = v[i].sqrt_out(&g);
        let _ = g.g_add_scalar_(eps * sbc2);
        let _ = g.g_mul_scalar_(-bc1 / (lr * sbc2));
        let _ = p.addcdiv_(&m[i], &g);
    }
}

fn main() {
    tch::set_num_threads(2);
    // MiniLM's shapes: word embeddings 30522x384, 6 layers of 4 x 384x384 + 1536x384 + 384x1536
    let mut shapes: Vec<Vec<i64>> = vec![vec![30522, 384], vec![512, 384]];
    for _ in 0..6 {
        for s in [
            [384, 384],
            [384, 384],
            [384, 384],
            [384, 384],
            [1536, 384],
            [384, 1536],
        ] {
            shapes.push(s.to_vec());
        }
    }
    let params: Vec<Tensor> = shapes
        .iter()
        .map(|s| {
            Tensor::randn(s.as_slice(), (Kind::Float, tch::Device::Cpu)).set_requires_grad(true)
        })
        .collect();
    let set_grads = || {
        for p in &params {
            let loss = (p * 1e-3).sum(Kind::Float);
            loss.backward();
        }
    };
    let named: Vec<(String, Tensor)> = params
        .iter()
        .enumerate()
        .map(|(i, p)| (format!("p{i}.weight"), p.shallow_clone()))
        .collect();
    let mut opt = AdamW::new(named, 0.01);
    let mut m: Vec<Tensor> = params.iter().map(Tensor::zeros_like).collect();
    let mut v: Vec<Tensor> = params.iter().map(Tensor::zeros_like).collect();
    for round in 0..3 {
        let mut old = vec![];
        let mut new = vec![];
        for t in 1..=8 {
            set_grads();
            let s = Instant::now();
            old_step(&params, &mut m, &mut v, t, 1e-4);
            old.push(s.elapsed().as_secs_f64());
            opt.zero_grad();
            set_grads();
            let s = Instant::now();
            opt.step(1e-4).unwrap();
            new.push(s.elapsed().as_secs_f64());
            opt.zero_grad();
        }
        old.sort_by(|a, b| a.partial_cmp(b).unwrap());
        new.sort_by(|a, b| a.partial_cmp(b).unwrap());
        println!(
            "round {round}: eight-pass {:.1} ms, fused {:.1} ms (medians of 8)",
            old[4] * 1e3,
            new[4] * 1e3
        );
    }
}
