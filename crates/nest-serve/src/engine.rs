//! The model side: loading (in the background, so the server answers 503 meanwhile), the
//! operating points a model offers, and the worker threads that run forward passes.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use nest_model::tokenize::TextTokenizer;
use nest_model::{Adaptor, ElasticEncoder};
use tch::{Device, Kind, Tensor};

use crate::batcher::{Item, Queue};
use crate::metrics::METRICS;
use crate::{Error, Result};

/// What the server needs to start.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    pub model: PathBuf,
    pub adaptor: Option<PathBuf>,
    /// The name reported as `model` (and accepted from clients).
    pub served_name: String,
    pub allow_any_point: bool,
    pub max_length: Option<usize>,
    pub max_batch_tokens: usize,
    /// Most inputs in one forward batch.
    pub max_batch_inputs: usize,
    pub max_queued_inputs: usize,
    pub workers: usize,
    /// The arithmetic (`--dtype`), resolved on this machine once, before the workers load.
    pub dtype: nest_model::dtype::Resolved,
}

/// What the handlers need to know about the loaded model.
#[derive(Debug, Clone)]
pub struct ModelInfo {
    /// Shared, never cloned per request (a `tokenizers::Tokenizer` clone copies the vocabulary).
    pub tokenizer: Arc<TextTokenizer>,
    pub hidden: usize,
    pub num_layers: usize,
    pub vocab_size: usize,
    /// Dims served without `--allow-any-point` (increasing).
    pub dims: Vec<usize>,
    /// Layers served without `--allow-any-point` (increasing).
    pub layers: Vec<usize>,
    pub default_dim: usize,
    pub adaptor: bool,
    /// The arithmetic the workers run in, and why (`auto`'s measurement, or as asked).
    pub dtype: nest_model::dtype::Resolved,
}

/// Whether the model is ready, still loading, or failed.
#[derive(Debug)]
pub struct Engine {
    pub config: EngineConfig,
    pub queue: Arc<Queue>,
    info: OnceLock<std::result::Result<ModelInfo, String>>,
}

impl ModelInfo {
    fn new(
        enc: &ElasticEncoder,
        adaptor: Option<&Adaptor>,
        dtype: nest_model::dtype::Resolved,
    ) -> Self {
        let hidden = enc.output_dim();
        let num_layers = enc.num_layers();
        let meta = &enc.meta;
        let mut dims = match adaptor {
            Some(a) => a.dims(),
            None if !meta.matryoshka_dims.is_empty() => meta.matryoshka_dims.clone(),
            None => vec![hidden],
        };
        if adaptor.is_none() && !dims.contains(&hidden) {
            dims.push(hidden);
        }
        dims.sort_unstable();
        dims.dedup();
        let mut layers = meta.trained_layers.clone();
        layers.push(num_layers);
        layers.sort_unstable();
        layers.dedup();
        let default_dim = match adaptor {
            Some(a) => *a.dims().last().unwrap_or(&hidden),
            None => meta.default_dim.unwrap_or(hidden),
        };
        ModelInfo {
            tokenizer: Arc::new(enc.tokenizer.clone()),
            hidden,
            num_layers,
            vocab_size: enc.config.vocab_size,
            dims,
            layers,
            default_dim,
            adaptor: adaptor.is_some(),
            dtype,
        }
    }

    /// Resolves and checks a request's (dims, layers).
    pub fn point(
        &self,
        dims: Option<usize>,
        layers: Option<usize>,
        any: bool,
    ) -> Result<(usize, usize)> {
        let dim = dims.unwrap_or(self.default_dim);
        let layer = layers.unwrap_or(self.num_layers);
        let list = |v: &[usize]| {
            v.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        if layer > self.num_layers {
            return Err(Error::bad(
                Some("layers"),
                format!("layers={layer}: the model has {} layers", self.num_layers),
            ));
        }
        if !any && !self.layers.contains(&layer) {
            return Err(Error::bad(
                Some("layers"),
                format!(
                    "layers={layer} is not a trained exit of this model (trained: {}); start the server with --allow-any-point to serve any layer",
                    list(&self.layers)
                ),
            ));
        }
        let fits = if self.adaptor {
            self.dims.contains(&dim)
        } else {
            dim <= self.hidden
        };
        if !fits {
            return Err(Error::bad(
                Some("dimensions"),
                format!(
                    "dimensions={dim}: this model serves at most {} dims{}",
                    self.hidden,
                    if self.adaptor {
                        format!(" (its adaptor serves {})", list(&self.dims))
                    } else {
                        String::new()
                    }
                ),
            ));
        }
        if !any && !self.dims.contains(&dim) {
            return Err(Error::bad(
                Some("dimensions"),
                format!(
                    "dimensions={dim} is not a trained dim of this model (trained: {}); start the server with --allow-any-point to serve any prefix",
                    list(&self.dims)
                ),
            ));
        }
        Ok((dim, layer))
    }
}

impl Engine {
    /// Starts loading in the background and returns at once.
    pub fn start(config: EngineConfig) -> Arc<Engine> {
        let engine = Arc::new(Engine {
            queue: Arc::new(Queue::new(config.max_queued_inputs)),
            config,
            info: OnceLock::new(),
        });
        for w in 0..engine.config.workers.max(1) {
            let e = Arc::clone(&engine);
            std::thread::Builder::new()
                .name(format!("nest-worker-{w}"))
                .spawn(move || e.worker())
                .expect("spawning a worker thread");
        }
        engine
    }

    /// The model's description, or 503 while loading / after a failed load.
    pub fn info(&self) -> Result<&ModelInfo> {
        match self.info.get() {
            Some(Ok(i)) => Ok(i),
            Some(Err(e)) => Err(Error::Unavailable(format!("the model failed to load: {e}"))),
            None => Err(Error::Unavailable("the model is loading".into())),
        }
    }

    #[allow(clippy::type_complexity)]
    fn load(
        &self,
    ) -> std::result::Result<(ElasticEncoder, Option<Adaptor>, nest_model::dtype::Resolved), String>
    {
        let mut enc = ElasticEncoder::load(
            &self.config.model,
            nest_model::default_device(),
            self.config.max_length,
        )
        .map_err(|e| e.to_string())?;
        let dtype = self.config.dtype.clone();
        enc.convert_for_inference(dtype.dtype)
            .map_err(|e| e.to_string())?;
        let adaptor = match &self.config.adaptor {
            Some(p) => {
                let a = Adaptor::load(p).map_err(|e| e.to_string())?;
                if a.meta.input_dim != enc.output_dim() {
                    return Err(format!(
                        "{}: the adaptor takes {} dims, the model gives {}",
                        p.display(),
                        a.meta.input_dim,
                        enc.output_dim()
                    ));
                }
                Some(a)
            }
            None => None,
        };
        Ok((enc, adaptor, dtype))
    }

    fn worker(&self) {
        let (enc, adaptor, dtype) = match self.load() {
            Ok(m) => m,
            Err(e) => {
                let _ = self.info.set(Err(e));
                return;
            }
        };
        METRICS
            .model_dtype
            .with_label_values(&[dtype.dtype.name()])
            .set(1);
        let _ = self
            .info
            .set(Ok(ModelInfo::new(&enc, adaptor.as_ref(), dtype)));
        let _guard = tch::no_grad_guard();
        while let Some(mut batch) = self
            .queue
            .take_batch(self.config.max_batch_tokens, self.config.max_batch_inputs)
        {
            METRICS.batch_inputs.observe(batch.len() as f64);
            batch.sort_by_key(|i| i.ids.len());
            let lens: Vec<usize> = batch.iter().map(|i| i.ids.len()).collect();
            let mut rest = batch.into_iter();
            for run in crate::batcher::length_runs(&lens) {
                let part: Vec<Item> = rest.by_ref().take(run.len()).collect();
                self.run_part(&enc, adaptor.as_ref(), part);
            }
        }
    }

    /// One forward pass; answers each input (an error for all when the pass fails; the worker
    /// lives on).
    fn run_part(&self, enc: &ElasticEncoder, adaptor: Option<&Adaptor>, part: Vec<Item>) {
        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            embed_batch(enc, adaptor, &part)
        }));
        let result = match run {
            Ok(r) => r,
            Err(p) => Err(p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "the forward pass failed".into())),
        };
        match result {
            Ok(vectors) => {
                for (it, v) in part.into_iter().zip(vectors) {
                    let _ = it.reply.send(Ok(v));
                }
            }
            Err(e) => {
                for it in part {
                    let _ = it.reply.send(Err(e.clone()));
                }
            }
        }
    }

    /// Resolves the model an API caller named (`None` or the served name).
    pub fn check_model_name(&self, name: Option<&str>) -> Result<()> {
        match name {
            None => Ok(()),
            Some(n) if n == self.config.served_name || n.is_empty() => Ok(()),
            Some(n) => Err(Error::bad(
                Some("model"),
                format!(
                    "model '{n}' is not served here; this server serves '{}'",
                    self.config.served_name
                ),
            )),
        }
    }
}

/// One forward pass over a batch (all at one layer); each input's vector, normalised.
fn embed_batch(
    enc: &ElasticEncoder,
    adaptor: Option<&Adaptor>,
    batch: &[Item],
) -> std::result::Result<Vec<Vec<f32>>, String> {
    let layer = batch[0].layer;
    let seqs: Vec<&[i64]> = batch.iter().map(|i| i.ids.as_slice()).collect();
    let longest = seqs.iter().map(|s| s.len()).max().unwrap_or(0);
    METRICS.batch_tokens.observe((longest * batch.len()) as f64);
    let input = enc.make_input(&seqs);
    let out = enc.forward(&input, layer, false);
    let pooled = enc
        .embed_pooled(&out.hidden_states[layer], &input.mask)
        .to_device(Device::Cpu)
        .to_kind(Kind::Float);
    let mut result = vec![Vec::new(); batch.len()];
    match adaptor {
        None => {
            let flat = nest_model::pooling::to_vec_f32(&pooled);
            let h = enc.output_dim();
            for (k, it) in batch.iter().enumerate() {
                let row = &flat[k * h..k * h + it.dim];
                let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
                result[k] = row.iter().map(|x| x / norm).collect();
            }
        }
        Some(a) => {
            let mut dims: Vec<usize> = batch.iter().map(|i| i.dim).collect();
            dims.sort_unstable();
            dims.dedup();
            for d in dims {
                let rows: Vec<i64> = (0..batch.len())
                    .filter(|&k| batch[k].dim == d)
                    .map(|k| k as i64)
                    .collect();
                let x = pooled.index_select(0, &Tensor::from_slice(&rows));
                let y = a.apply(&x, d).map_err(|e| e.to_string())?;
                let flat = nest_model::pooling::to_vec_f32(&y);
                for (j, &k) in rows.iter().enumerate() {
                    result[k as usize] = flat[j * d..(j + 1) * d].to_vec();
                }
            }
        }
    }
    METRICS.inputs.inc_by(batch.len() as u64);
    METRICS
        .tokens
        .inc_by(batch.iter().map(|i| i.ids.len() as u64).sum());
    Ok(result)
}
