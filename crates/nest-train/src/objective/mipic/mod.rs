//! MIPIC: Matryoshka learning via Self-Distilled Intra-Relational Alignment (SIA) and
//! Progressive Information Chaining (PIC) (`MIPIC.md`, section 3, Appendix A.5).
//!
//! Paper: "MIPIC: Matryoshka Representation Learning via Self-Distilled Intra-Relational and
//! Progressive Information Chaining" (Huy, Vu, Truong et al. 2026, arXiv:2604.24374), eq. 4-13
//! (SIA), eq. 14-17 (PIC) and eq. 18 (the sum).
//!
//! The component returns the SIA and PIC terms; eq. 18's
//! `alpha * L_MRL + (1 - alpha) * (L_SIA + L_PIC)` is a recipe with an `mrl` component of
//! weight `alpha` next to this one with weight `1 - alpha` (`recipes/mipic.toml`, alpha = 0.4
//! as Table 7). Every term comes from the
//! one forward pass the trainer already ran (the first column: with SimCSE, the first dropout
//! view). The projectors `P_i` and `phi_i` live in the objective's parameter store, which the
//! trainer optimises and checkpoints and the exported model never holds.
//!
//! `config.rs` holds the recipe keys, `resolve.rs` their defaults for a model and the
//! projectors' registration, `terms.rs` the pure tensor functions; this file the objective.

use tch::nn::{self, Module};
use tch::{Kind, Tensor};

mod config;
mod resolve;
mod terms;

pub use config::MipicConfig;
use resolve::{
    pic_projectors, resolve_checkpoints, resolve_gammas, resolve_sia_layers, sia_projections,
};
use terms::anchor_first;
pub use terms::{attention_kl, chain_link, checkpoint_layers, teacher_scores, top_k, topk_cka};

use super::component::{increasing, BuildContext, Component};
use super::{BatchOutput, Objective, StepContext, Term};

/// MIPIC's SIA and PIC terms with their trainable projectors.
#[derive(Debug)]
pub struct Mipic {
    config: MipicConfig,
    /// `d_1 < ... < d_n = D`.
    dims: Vec<usize>,
    /// SIA's prefix dims (those below `D`) and their `gamma_i`.
    sia_dims: Vec<usize>,
    gammas: Vec<f64>,
    /// `P_i`: `[d_i, D]` per SIA dim.
    projections: Vec<Tensor>,
    /// `phi_i`: `d_i -> d_{i+1}`, Linear-GELU-Linear, per link.
    projectors: Vec<(nn::Linear, nn::Linear)>,
    /// `l_i` per checkpoint and SIA's layers.
    checkpoints: Vec<usize>,
    sia_layers: Vec<usize>,
}

impl Mipic {
    /// Registers `P_i` (initialised to `[I | 0]`, so that the student's scores start as the
    /// prefix's own \[CLS\] scores; the paper leaves the start open) and `phi_i` (PyTorch's
    /// default `Linear` start) under `params`. `dims` must be increasing and end at `hidden`.
    pub fn new(
        config: MipicConfig,
        dims: Vec<usize>,
        hidden: usize,
        num_layers: usize,
        params: &nn::Path,
    ) -> std::result::Result<Self, String> {
        if dims.last() != Some(&hidden) {
            return Err(format!(
                "dims {dims:?} must end at the model's hidden size {hidden}"
            ));
        }
        let checkpoints = resolve_checkpoints(&config, dims.len(), num_layers)?;
        let sia_layers = resolve_sia_layers(&config, &checkpoints, num_layers)?;
        let sia_dims: Vec<usize> = dims.iter().copied().filter(|&d| d < hidden).collect();
        let gammas = resolve_gammas(&config, &sia_dims)?;
        let projections = if config.sia {
            sia_projections(params, &sia_dims, hidden)
        } else {
            Vec::new()
        };
        let projectors = if config.pic {
            pic_projectors(params, &dims)
        } else {
            Vec::new()
        };
        Ok(Mipic {
            config,
            dims,
            sia_dims,
            gammas,
            projections,
            projectors,
            checkpoints,
            sia_layers,
        })
    }

    /// `L_SIA` (eq. 13-14): at every SIA layer, the attention KL and the top-k CKA at every
    /// prefix dim, summed.
    fn sia(&self, out: &BatchOutput) -> (Tensor, Tensor) {
        let col = &out.columns[0];
        let anchor = anchor_first(&col.mask, col.pooling);
        let mask = anchor
            .as_ref()
            .map_or(col.mask.shallow_clone(), |p| col.mask.gather(1, p, false));
        let (mut att, mut cka) = (Vec::new(), Vec::new());
        for &l in &self.sia_layers {
            let h = match &anchor {
                Some(p) => {
                    let d = col.hidden[l].size()[2];
                    col.hidden[l].gather(1, &p.unsqueeze(-1).expand([-1, -1, d], false), false)
                }
                None => col.hidden[l].shallow_clone(),
            };
            let h = &h;
            let (cand, s) = teacher_scores(h, &mask);
            for p in &self.projections {
                att.push(attention_kl(
                    h,
                    &cand,
                    &s,
                    p,
                    self.config.attention_temperature,
                ));
            }
            cka.extend(topk_cka(
                h,
                &cand,
                &s,
                &self.sia_dims,
                &self.gammas,
                self.config.min_k,
            ));
        }
        (
            Tensor::stack(&att, 0).sum(None::<Kind>),
            Tensor::stack(&cka, 0).sum(None::<Kind>),
        )
    }

    /// `L_PIC` (eq. 17): the chain over consecutive checkpoints, on the model's own pooling
    /// (the paper pools \[CLS\]; all-MiniLM-L6-v2 was trained with mean pooling) unless
    /// `pic_pooling` names another.
    fn pic(&self, out: &BatchOutput) -> Tensor {
        let col = &out.columns[0];
        let pooled = |l: usize| match self.config.pic_pooling {
            Some(p) if p != col.pooling => col.head.forward(&p.pool(&col.hidden[l], &col.mask)),
            _ => col.pooled(l),
        };
        let z: Vec<Tensor> = self
            .checkpoints
            .iter()
            .zip(&self.dims)
            .map(|(&l, &d)| pooled(l).narrow(1, 0, d as i64))
            .collect();
        let links: Vec<Tensor> = self
            .projectors
            .iter()
            .enumerate()
            .map(|(i, (a, b))| {
                let projected = b.forward(&a.forward(&z[i]).gelu("none"));
                let target = if self.config.pic_detach_target {
                    z[i + 1].detach()
                } else {
                    z[i + 1].shallow_clone()
                };
                chain_link(&projected, &target, self.config.pic_temperature)
            })
            .collect();
        Tensor::stack(&links, 0).sum(None::<Kind>)
    }
}

impl Objective for Mipic {
    fn describe(&self) -> String {
        let mut parts = Vec::new();
        if self.config.sia {
            parts.push(format!(
                "SIA layers {:?} dims {:?} k-ratios {:?}",
                self.sia_layers, self.sia_dims, self.gammas
            ));
        }
        if self.config.pic {
            let c: Vec<String> = self
                .checkpoints
                .iter()
                .zip(&self.dims)
                .map(|(l, d)| format!("({d},{l})"))
                .collect();
            let detach = if self.config.pic_detach_target {
                ", deeper side detached"
            } else {
                ""
            };
            let pooling = match self.config.pic_pooling {
                Some(p) => format!(", {p:?} pooling"),
                None => String::new(),
            };
            parts.push(format!(
                "PIC {} tau {}{detach}{pooling}",
                c.join(" "),
                self.config.pic_temperature
            ));
        }
        format!("mipic[{}]", parts.join("; "))
    }

    fn reads_tokens(&self) -> Option<String> {
        if self.config.pic && self.config.pic_pooling.is_some() {
            return Some(
                "MIPIC's PIC with its own pic_pooling pools token states (leave pic_pooling \
                 unset, or train without mini_batch_size in one process)"
                    .to_string(),
            );
        }
        (self.config.sia && !self.sia_dims.is_empty()).then(|| {
            "MIPIC's SIA compares token states and attention across layers (turn it off with \
             sia = false, or train MIPIC without mini_batch_size in one process)"
                .to_string()
        })
    }

    /// Nothing drawn, nothing read back (each row's top-k count is reckoned on the device).
    fn recorded_draws(&self, _ctx: &StepContext, _num_layers: usize) -> Option<Vec<usize>> {
        Some(Vec::new())
    }

    fn terms(&self, out: &BatchOutput, _ctx: &StepContext) -> Vec<Term> {
        let mut terms = Vec::new();
        if self.config.sia && !self.sia_dims.is_empty() {
            let (att, cka) = self.sia(out);
            terms.push(Term {
                name: "sia/attention".into(),
                value: att,
            });
            terms.push(Term {
                name: "sia/cka".into(),
                value: cka,
            });
        }
        if self.config.pic && self.dims.len() > 1 {
            terms.push(Term {
                name: "pic".into(),
                value: self.pic(out),
            });
        }
        terms
    }

    fn trained_dims(&self) -> Vec<usize> {
        self.dims.clone()
    }

    fn trained_layers(&self, num_layers: usize) -> Vec<usize> {
        vec![num_layers]
    }
}

impl Component for MipicConfig {
    fn evidence(&self) -> Option<&'static str> {
        Some(
            "MIPIC measured significantly below MRL from a sentence-trained backbone \
             (all-MiniLM-L6-v2: STS-B -7 to -9.5; 3 seeds, paired tests), above it only from a \
             paper-like one with head_lr 1e-3: docs/STRUCTURE.md, \"Why they lose here\"",
        )
    }

    fn weight(&self) -> f64 {
        self.weight
    }

    fn validate(&self) -> Result<(), String> {
        if !self.dims.is_empty() {
            increasing(&self.dims, &[])?;
        }
        if !self.sia && !self.pic {
            return Err("sia and pic are both off: the component would do nothing".into());
        }
        if !(self.attention_temperature > 0.0 && self.pic_temperature > 0.0) {
            return Err("attention_temperature and pic_temperature must be > 0".into());
        }
        Ok(())
    }

    fn build(&self, cx: &BuildContext) -> Result<Box<dyn Objective>, String> {
        let (dims, _) = cx.dims(&self.dims, &[])?;
        let m = Mipic::new(self.clone(), dims, cx.hidden, cx.num_layers, &cx.params)?;
        Ok(Box::new(m))
    }
}
