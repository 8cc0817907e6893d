//! [`Recipe::validate`]: the value checks that need no model (the dims are checked against
//! the model later), one method per group of keys.

use super::{DataFormat, LossKind, QuantPrecision, Recipe};

impl Recipe {
    /// The keys of GradCache and deterministic runs.
    fn validate_scale(&self) -> std::result::Result<(), String> {
        if let Some(p) = self.dropout {
            if !(0.0..1.0).contains(&p) {
                return Err(format!("dropout must be in [0, 1), got {p}"));
            }
        }
        if self.mini_batch_size > 0 && self.mini_batch_size >= self.batch_size {
            return Err(format!(
                "mini_batch_size {} must be below batch_size {} (0 turns GradCache off)",
                self.mini_batch_size, self.batch_size
            ));
        }
        Ok(())
    }

    /// `quantization` and `quantization_weight`.
    fn validate_quantization(&self) -> std::result::Result<(), String> {
        let q = &self.quantization;
        if let Some(p) = q.iter().find(|p| q.iter().filter(|x| x == p).count() > 1) {
            return Err(format!("quantization lists {} twice", p.name()));
        }
        let binary = q.contains(&QuantPrecision::Binary);
        for (key, v) in [
            ("quantization_binary_scale", self.quantization_binary_scale),
            ("quantization_spread", self.quantization_spread),
        ] {
            match v {
                Some(_) if !binary => {
                    return Err(format!(
                        "{key} is set but quantization does not list \"binary\" (e.g. quantization = [\"binary\"])"
                    ))
                }
                Some(x) if !(x > 0.0 && x.is_finite()) => {
                    return Err(format!("{key} must be > 0, got {x}"))
                }
                _ => {}
            }
        }
        match self.quantization_weight {
            Some(_) if q.is_empty() => Err(
                "quantization_weight is set but quantization is empty (e.g. quantization = [\"int8\", \"binary\"])"
                    .into(),
            ),
            Some(w) if !(w > 0.0 && w.is_finite()) => {
                Err(format!("quantization_weight must be > 0, got {w}"))
            }
            _ if !q.is_empty() && self.loss == LossKind::None => Err(
                "quantization scores the task loss, but the recipe's loss is \"none\"".into(),
            ),
            _ => Ok(()),
        }
    }

    /// Value checks that need no model (the dims are checked against the model later).
    /// The data sources: at least one, positive weights, formats the loss can read.
    fn validate_data(&self) -> std::result::Result<(), String> {
        if self.data.is_empty() && self.mine.is_none() {
            return Err(
                "data: at least one data source is needed (or a [mine] table that mines it)".into(),
            );
        }
        if let Some(m) = &self.mine {
            m.validate()?;
            if !matches!(
                self.loss,
                LossKind::Mnrl | LossKind::MnrlSymmetric | LossKind::None
            ) {
                return Err(format!(
                    "mine: the mined tuples are triplets, which loss {} cannot use (use \"mnrl\" or \"mnrl-symmetric\")",
                    toml::Value::try_from(self.loss).map(|v| v.to_string()).unwrap_or_default()
                ));
            }
        }
        for d in &self.data {
            if !(d.weight > 0.0 && d.weight.is_finite()) {
                return Err(format!("data: weight of {} must be > 0", d.path.display()));
            }
            let (ok, takes) = match self.loss {
                LossKind::Mnrl | LossKind::MnrlSymmetric => (
                    matches!(d.format, DataFormat::Pairs | DataFormat::Triplets),
                    "pairs or triplets",
                ),
                LossKind::Cosent => (d.format == DataFormat::Scored, "scored"),
                LossKind::Simcse => (d.format == DataFormat::Single, "single"),
                LossKind::None => (true, "any"),
            };
            if !ok {
                // the names a recipe spells (serde's), not the Rust ones
                fn name<T: serde::Serialize + std::fmt::Debug>(x: &T) -> String {
                    toml::Value::try_from(x)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_else(|| format!("{x:?}"))
                }
                // a flag's `--data FILE` without `:FORMAT` whose columns say pairs (or that
                // cannot be read): say how to name one
                let first = takes.split(' ').next().unwrap_or(takes);
                let hint = match d.format {
                    DataFormat::Pairs => format!(
                        "; `--data {}:{first}` as a flag, `format = \"{first}\"` in a [[data]] \
                         table (a flag's path without `:FORMAT` takes the format its columns say, \
                         pairs unless they name another)",
                        d.path.display()
                    ),
                    _ => String::new(),
                };
                return Err(format!(
                    "data: {} is format {}, which loss {} cannot use (loss {} takes {takes}){hint}",
                    d.path.display(),
                    name(&d.format),
                    name(&self.loss),
                    name(&self.loss),
                ));
            }
        }
        Ok(())
    }

    /// `eval_layers` / `eval_dims` parse (their ranges need the model: checked after loading).
    fn validate_eval_grid(&self) -> std::result::Result<(), String> {
        if !self.eval_layers.is_empty() {
            nest_core::parse_layers(&self.eval_layers)
                .map_err(|e| e.with_key("eval_layers").to_string())?;
        }
        if !self.eval_dims.is_empty() {
            nest_core::parse_dims(&self.eval_dims)
                .map_err(|e| e.with_key("eval_dims").to_string())?;
        }
        Ok(())
    }

    pub fn validate(&self) -> std::result::Result<(), String> {
        if self.dtype == nest_model::DtypeChoice::Fixed(nest_model::Dtype::Int8) {
            return Err("dtype: int8 is for inference only; train in float32, bf16 or auto".into());
        }
        self.validate_data()?;
        self.validate_eval_grid()?;
        if self.matryoshka_dims.windows(2).any(|w| w[0] >= w[1])
            || self.matryoshka_dims.contains(&0)
        {
            return Err(format!(
                "matryoshka_dims {:?} must be increasing and >= 1",
                self.matryoshka_dims
            ));
        }
        if !self.matryoshka_weights.is_empty()
            && self.matryoshka_weights.len() != self.matryoshka_dims.len()
        {
            return Err(format!(
                "matryoshka_weights has {} values for {} dims",
                self.matryoshka_weights.len(),
                self.matryoshka_dims.len()
            ));
        }
        for (k, v, lo) in [
            ("batch_size", self.batch_size, 2),
            ("grad_accum", self.grad_accum, 1),
            ("epochs", self.epochs, 1),
            ("keep_last", self.keep_last, 1),
        ] {
            if v < lo {
                return Err(format!("{k} must be at least {lo}, got {v}"));
            }
        }
        self.validate_scale()?;
        self.validate_quantization()?;
        if !(self.lr > 0.0 && self.lr.is_finite()) {
            return Err(format!("lr must be > 0, got {}", self.lr));
        }
        if !(0.0..1.0).contains(&self.warmup_ratio) {
            return Err(format!(
                "warmup_ratio must be in [0, 1), got {}",
                self.warmup_ratio
            ));
        }
        if let Some(lr) = self.head_lr.filter(|lr| !(*lr >= 0.0 && lr.is_finite())) {
            return Err(format!("head_lr must be >= 0, got {lr}"));
        }
        if let Some(w) = self.head_warmup_ratio.filter(|w| !(0.0..1.0).contains(w)) {
            return Err(format!("head_warmup_ratio must be in [0, 1), got {w}"));
        }
        if self.weight_decay < 0.0
            || self.max_grad_norm < 0.0
            || self.scale <= 0.0
            || self.angle_weight < 0.0
        {
            return Err(
                "weight_decay, max_grad_norm, angle_weight must be >= 0 and scale > 0".into(),
            );
        }
        for (i, o) in self.objective.iter().enumerate() {
            o.validate()
                .map_err(|m| format!("objective[{i}] ({}): {m}", o.kind()))?;
        }
        if self.angle_weight > 0.0 && self.loss != LossKind::Cosent {
            return Err("angle_weight applies to loss = \"cosent\" only".into());
        }
        Ok(())
    }
}
