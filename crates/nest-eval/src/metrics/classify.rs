//! Classification on frozen embeddings: multinomial logistic regression (own L-BFGS), accuracy
//! and macro-F1.
//!
//! Protocol (SentEval / MTEB style): fit on the train split, score the test split; features are
//! standardised with the train split's mean and standard deviation (ddof 0; a constant feature
//! keeps scale 1). The objective is scikit-learn's `LogisticRegression` with `lbfgs`:
//! `mean cross-entropy + ||W||^2 / (2 C n)`, the intercept not penalised. Defaults `C = 1`,
//! `max_iter = 100`, gradient tolerance `1e-4` (max-abs), as scikit-learn's and MTEB's. Own
//! implementation rather than linfa because the whole fit runs as a few libtorch matmuls per
//! iteration on the tensors the grid already holds (no copy into ndarray), which keeps the
//! 36-cell grid fast; `tests/reference/classify.py` checks it against scikit-learn.

use tch::{Kind, Tensor};

/// Logistic-regression settings.
#[derive(Debug, Clone, Copy)]
pub struct LogRegConfig {
    /// Inverse L2 strength, as scikit-learn's `C`.
    pub c: f64,
    pub max_iter: usize,
    /// Stop when the largest gradient component is below this.
    pub tol: f64,
    /// L-BFGS memory.
    pub memory: usize,
}

impl Default for LogRegConfig {
    fn default() -> Self {
        LogRegConfig {
            c: 1.0,
            max_iter: 100,
            tol: 1e-4,
            memory: 10,
        }
    }
}

/// A fitted model with its standardisation.
#[derive(Debug)]
pub struct LogReg {
    mean: Tensor,
    scale: Tensor,
    w: Tensor,
    b: Tensor,
    pub iterations: usize,
}

/// Objective and gradient at `theta` (flat `[d*k + k]`).
fn objective(theta: &Tensor, x: &Tensor, y1h: &Tensor, d: i64, k: i64, l2: f64) -> (f64, Tensor) {
    let n = x.size()[0] as f64;
    let w = theta.narrow(0, 0, d * k).view([d, k]);
    let b = theta.narrow(0, d * k, k);
    let logits = x.matmul(&w) + &b;
    let logp = logits.log_softmax(1, Kind::Double);
    let ce = -(&logp * y1h).sum(Kind::Double).double_value(&[]) / n;
    let f = ce + 0.5 * l2 * w.square().sum(Kind::Double).double_value(&[]);
    let diff = (logp.exp() - y1h) / n; // [n, k]
    let gw = x.transpose(0, 1).matmul(&diff) + &w * l2;
    let gb = diff.sum_dim_intlist(0, false, Kind::Double);
    (f, Tensor::cat(&[gw.view([-1]), gb], 0))
}

fn dot(a: &Tensor, b: &Tensor) -> f64 {
    a.dot(b).double_value(&[])
}

/// Features standardised with their own column mean and scale.
struct Standardised {
    mean: Tensor,
    /// Standard deviation (ddof 0), 1 for a constant feature.
    scale: Tensor,
    xs: Tensor,
}

/// Standardises `x` `[n, d]` column by column.
fn standardise(x: &Tensor) -> Standardised {
    let mean = x.mean_dim([0i64].as_slice(), true, Kind::Double);
    let std = x.std_dim([0i64].as_slice(), false, true);
    let scale = std.where_self(&std.gt(1e-12), &std.ones_like());
    let xs = (x - &mean) / &scale;
    Standardised { mean, scale, xs }
}

/// The regularised cross-entropy to minimise: standardised features, one-hot labels, sizes.
struct Problem<'a> {
    xs: &'a Tensor,
    y1h: Tensor,
    d: i64,
    k: i64,
    l2: f64,
}

impl Problem<'_> {
    /// Objective and gradient at `theta`.
    fn eval(&self, theta: &Tensor) -> (f64, Tensor) {
        objective(theta, self.xs, &self.y1h, self.d, self.k, self.l2)
    }
}

/// The L-BFGS memory: the last steps `s` and gradient changes `y`, oldest first.
struct Memory {
    s: Vec<Tensor>,
    y: Vec<Tensor>,
    size: usize,
}

impl Memory {
    /// An empty memory of `size` pairs.
    fn new(size: usize) -> Self {
        Memory {
            s: Vec::new(),
            y: Vec::new(),
            size,
        }
    }

    /// The search direction `-H g` by the two-loop recursion.
    fn direction(&self, g: &Tensor) -> Tensor {
        let (s_hist, y_hist) = (&self.s, &self.y);
        let mut q = g.copy(); // a real copy: q is updated in place below
        let mut alphas = Vec::with_capacity(s_hist.len());
        for (s, yv) in s_hist.iter().zip(y_hist).rev() {
            let rho = 1.0 / dot(yv, s);
            let a = rho * dot(s, &q);
            q -= yv * a;
            alphas.push((a, rho));
        }
        let gamma = match (s_hist.last(), y_hist.last()) {
            (Some(s), Some(yv)) => dot(s, yv) / dot(yv, yv),
            _ => 1.0 / g.norm().double_value(&[]).max(1e-12),
        };
        let mut r = q * gamma;
        for ((s, yv), (a, rho)) in s_hist.iter().zip(y_hist).zip(alphas.into_iter().rev()) {
            let beta = rho * dot(yv, &r);
            r += s * (a - beta);
        }
        -r
    }

    /// Forgets every pair.
    fn clear(&mut self) {
        self.s.clear();
        self.y.clear();
    }

    /// Keeps the pair `(s, yv)` if its curvature is positive, dropping the oldest when full.
    fn push(&mut self, s: Tensor, yv: Tensor) {
        if dot(&s, &yv) > 1e-12 {
            self.s.push(s);
            self.y.push(yv);
            if self.s.len() > self.size {
                drop(self.s.remove(0));
                drop(self.y.remove(0));
            }
        }
    }
}

/// A point accepted by the line search, with its objective and gradient.
struct Accepted {
    theta: Tensor,
    f: f64,
    g: Tensor,
}

/// Backtracking line search (Armijo) from `theta` (objective `f`) along `dir` (slope `slope`).
fn line_search(p: &Problem, theta: &Tensor, dir: &Tensor, f: f64, slope: f64) -> Option<Accepted> {
    let mut step = 1.0;
    for _ in 0..40 {
        let cand = theta + dir * step;
        let (fc, gc) = p.eval(&cand);
        if fc <= f + 1e-4 * step * slope {
            return Some(Accepted {
                theta: cand,
                f: fc,
                g: gc,
            });
        }
        step *= 0.5;
    }
    None
}

/// The minimiser L-BFGS reached (flat `[d*k + k]`) and its iteration count.
struct Solution {
    theta: Tensor,
    iterations: usize,
}

/// Minimises `p` by L-BFGS from zero.
fn lbfgs(p: &Problem, cfg: &LogRegConfig, device: tch::Device) -> Solution {
    let (d, k) = (p.d, p.k);
    let mut theta = Tensor::zeros([d * k + k], (Kind::Double, device));
    let (mut f, mut g) = p.eval(&theta);
    let mut memory = Memory::new(cfg.memory);
    let mut iterations = 0;
    for it in 0..cfg.max_iter {
        if g.abs().max().double_value(&[]) < cfg.tol {
            break;
        }
        iterations = it + 1;
        let dir = memory.direction(&g);
        let slope = dot(&g, &dir);
        if slope >= 0.0 {
            // not a descent direction: restart from steepest descent
            memory.clear();
            continue;
        }
        let Some(Accepted {
            theta: cand,
            f: fc,
            g: gc,
        }) = line_search(p, &theta, &dir, f, slope)
        else {
            break;
        };
        memory.push(&cand - &theta, &gc - &g);
        let rel = (f - fc).abs() / f.abs().max(fc.abs()).max(1.0);
        theta = cand;
        f = fc;
        g = gc;
        if rel < 64.0 * f64::EPSILON {
            break;
        }
    }
    Solution { theta, iterations }
}

impl LogReg {
    /// Fits on `x` `[n, d]` (any float kind) with labels `y` in `0..classes`.
    pub fn fit(x: &Tensor, y: &[i64], classes: usize, cfg: LogRegConfig) -> LogReg {
        let _g = tch::no_grad_guard();
        let x = x.to_kind(Kind::Double);
        let (n, d) = x.size2().expect("features are [n, d]");
        let k = classes as i64;
        let Standardised { mean, scale, xs } = standardise(&x);
        let y_t = Tensor::from_slice(y);
        let problem = Problem {
            xs: &xs,
            y1h: y_t.one_hot(k).to_kind(Kind::Double),
            d,
            k,
            l2: 1.0 / (cfg.c * n as f64),
        };
        let Solution { theta, iterations } = lbfgs(&problem, &cfg, x.device());
        let w = theta.narrow(0, 0, d * k).view([d, k]);
        let b = theta.narrow(0, d * k, k);
        LogReg {
            mean,
            scale,
            w,
            b,
            iterations,
        }
    }

    /// Predicted class per row of `x` `[n, d]`.
    pub fn predict(&self, x: &Tensor) -> Vec<i64> {
        let _g = tch::no_grad_guard();
        let xs = (x.to_kind(Kind::Double) - &self.mean) / &self.scale;
        let pred = (xs.matmul(&self.w) + &self.b).argmax(1, false);
        Vec::<i64>::try_from(&pred).unwrap_or_default()
    }
}

/// Accuracy and macro-F1 (over the classes present in `truth` or `pred`, as scikit-learn's
/// `f1_score(average="macro")`; a class with no true and no predicted example is skipped).
pub fn accuracy_macro_f1(truth: &[i64], pred: &[i64], classes: usize) -> (f64, f64) {
    let mut tp = vec![0usize; classes];
    let mut fp = vec![0usize; classes];
    let mut fn_ = vec![0usize; classes];
    let mut correct = 0;
    for (&t, &p) in truth.iter().zip(pred) {
        if t == p {
            tp[t as usize] += 1;
            correct += 1;
        } else {
            fp[p as usize] += 1;
            fn_[t as usize] += 1;
        }
    }
    let mut f1s = Vec::new();
    for c in 0..classes {
        if tp[c] + fp[c] + fn_[c] == 0 {
            continue;
        }
        let denom = 2 * tp[c] + fp[c] + fn_[c];
        f1s.push(if denom == 0 {
            0.0
        } else {
            2.0 * tp[c] as f64 / denom as f64
        });
    }
    let acc = correct as f64 / truth.len().max(1) as f64;
    let f1 = if f1s.is_empty() {
        0.0
    } else {
        f1s.iter().sum::<f64>() / f1s.len() as f64
    };
    (acc, f1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separable_blobs_are_learned() {
        tch::manual_seed(0);
        let a = Tensor::randn([50, 3], (Kind::Float, tch::Device::Cpu)) + 3.0;
        let b = Tensor::randn([50, 3], (Kind::Float, tch::Device::Cpu)) - 3.0;
        let x = Tensor::cat(&[a, b], 0);
        let y: Vec<i64> = (0..100).map(|i| if i < 50 { 0 } else { 1 }).collect();
        let m = LogReg::fit(&x, &y, 2, LogRegConfig::default());
        let (acc, f1) = accuracy_macro_f1(&y, &m.predict(&x), 2);
        assert_eq!((acc, f1), (1.0, 1.0));
    }

    #[test]
    fn macro_f1_hand_worked() {
        // class 0: tp1 fp1 fn1 -> 0.5; class 1: tp1 fp1 fn1 -> 0.5; class 2: tp1 -> 1
        let (acc, f1) = accuracy_macro_f1(&[0, 0, 1, 1, 2], &[0, 1, 1, 0, 2], 4);
        assert!((acc - 0.6).abs() < 1e-12);
        assert!((f1 - 2.0 / 3.0).abs() < 1e-12);
    }
}
