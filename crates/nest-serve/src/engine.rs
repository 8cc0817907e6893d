//! The model side: loading (in the background, so the server answers 503 meanwhile), the
//! operating points a model offers, and the worker threads that run forward passes.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use nest_model::graph::GraphMode;
use nest_model::point::{self, Keys, Offer, Point, Policy};
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
    /// Freed memory goes back to the kernel at most this often, between batches
    /// (`nest_core::heap::release_freed`); `None`: never.
    pub trim_interval: Option<std::time::Duration>,
}

/// What the handlers need to know about the loaded model (the evaluation report's model record
/// is `nest_eval::report::ModelInfo`; this one is the server's).
#[derive(Debug, Clone)]
pub struct ServedModel {
    /// Shared, never cloned per request (a `tokenizers::Tokenizer` clone copies the vocabulary).
    pub tokenizer: Arc<TextTokenizer>,
    pub vocab_size: usize,
    /// The operating points the model offers (trained exits and dims, default dim, adaptor).
    pub offer: Offer,
    /// The arithmetic the workers run in, and why (`auto`'s measurement, or as asked).
    pub dtype: nest_model::dtype::Resolved,
    /// The model's named prompts and default.
    pub prompts: nest_model::prompt::Prompts,
    /// Whether pooling counts the prompt's tokens.
    pub include_prompt: bool,
}

/// What a worker loads: the encoder, the adaptor, and what the handlers are told.
struct Loaded {
    enc: ElasticEncoder,
    adaptor: Option<Adaptor>,
    served: ServedModel,
}

/// Whether the model is ready, still loading, or failed.
#[derive(Debug)]
pub struct Engine {
    pub config: EngineConfig,
    pub queue: Arc<Queue>,
    info: OnceLock<std::result::Result<ServedModel, String>>,
    /// Signalled when a worker failed to load the model: the server stops with the reason
    /// (a supervisor then sees a failed process, not a live one answering 503).
    pub(crate) load_failed: tokio::sync::Notify,
}

impl ServedModel {
    /// A request's prompt text (`prompt_name`, `prompt`, else the model's default) and how many
    /// leading tokens the pooling leaves out for it.
    pub fn prompt<'a>(
        &'a self,
        name: Option<&'a str>,
        text: Option<&'a str>,
    ) -> Result<(Option<&'a str>, usize)> {
        self.prompt_for(name, text, nest_model::prompt::Side::Text)
    }

    /// [`Self::prompt`] for texts on `side` of a search: without `name` or `text`, the model's
    /// prompt for that side (its `query` prompt for queries), else its default.
    pub fn prompt_for<'a>(
        &'a self,
        name: Option<&'a str>,
        text: Option<&'a str>,
        side: nest_model::prompt::Side,
    ) -> Result<(Option<&'a str>, usize)> {
        let field = match (name, text) {
            (None, Some(_)) => "prompt",
            _ => "prompt_name",
        };
        let choice = nest_model::prompt::PromptChoice { name, text };
        let p = self
            .prompts
            .for_side(choice, field, side)
            .map_err(|e| match e {
                nest_core::Error::Value { message, .. } => Error::bad(Some(field), message),
                other => Error::bad(Some(field), other.to_string()),
            })?
            .filter(|p| !p.is_empty());
        let skip = match (p, self.include_prompt) {
            (Some(p), false) => self.tokenizer.encode(&[p])?[0].len().saturating_sub(1),
            _ => 0,
        };
        Ok((p, skip))
    }
    /// Resolves and checks a request's `dimensions` and `layers` (`nest_model::point`, with the
    /// API's field names; trained points only unless the server allows any).
    pub fn point(&self, dims: Option<usize>, layers: Option<usize>, any: bool) -> Result<Point> {
        let policy = match any {
            true => Policy::AnyInRange,
            false => Policy::TrainedOnly {
                unlock: "start the server with --allow-any-point",
            },
        };
        self.offer
            .resolve(layers, dims, Keys::API, policy)
            .map_err(|e| Error::bad(Some(e.key), e.message))
    }
}

impl Engine {
    /// Starts loading in the background and returns at once.
    pub fn start(config: EngineConfig) -> Arc<Engine> {
        let engine = Arc::new(Engine {
            queue: Arc::new(Queue::new(config.max_queued_inputs)),
            config,
            info: OnceLock::new(),
            load_failed: tokio::sync::Notify::new(),
        });
        // the libtorch threads are shared out between the workers (each runs its batches on
        // its own OpenMP team), as `ElasticEncoder::embed_layers` shares them between streams
        let workers = engine.config.workers.max(1);
        let threads = nest_model::threads_each(workers);
        for w in 0..workers {
            let e = Arc::clone(&engine);
            std::thread::Builder::new()
                .name(format!("nest-worker-{w}"))
                .spawn(move || {
                    tch::set_num_threads(threads);
                    e.worker()
                })
                .expect("spawning a worker thread");
        }
        engine
    }

    /// Why the model failed to load, once it has (`None` while loading or when it loaded).
    pub fn load_error(&self) -> Option<&str> {
        match self.info.get() {
            Some(Err(e)) => Some(e),
            _ => None,
        }
    }

    /// The model's description, or 503 while loading / after a failed load.
    pub fn info(&self) -> Result<&ServedModel> {
        match self.info.get() {
            Some(Ok(i)) => Ok(i),
            Some(Err(e)) => Err(Error::Unavailable(format!("the model failed to load: {e}"))),
            None => Err(Error::Unavailable("the model is loading".into())),
        }
    }

    /// Loads the model (converted to the resolved dtype) and the adaptor, and what they offer.
    fn load(&self) -> std::result::Result<Loaded, String> {
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
            Some(p) => Some(Adaptor::load(p).map_err(|e| e.to_string())?),
            None => None,
        };
        let offer = Offer::new(&enc, adaptor.as_ref()).map_err(|e| match &self.config.adaptor {
            Some(p) => format!("{}: {e}", p.display()),
            None => e.to_string(),
        })?;
        if let Some(note) = adaptor
            .as_ref()
            .map(|a| a.foreign_note(&enc))
            .transpose()
            .map_err(|e| e.to_string())?
            .flatten()
        {
            eprintln!("nest serve: warning: {note}");
        }
        let served = ServedModel {
            tokenizer: Arc::new(enc.tokenizer.clone()),
            vocab_size: enc.config.vocab_size,
            offer,
            dtype,
            prompts: enc.prompts.clone(),
            include_prompt: enc.include_prompt,
        };
        Ok(Loaded {
            enc,
            adaptor,
            served,
        })
    }

    fn worker(&self) {
        // several workers on one GPU: each queues on a stream of its own, so that one's host
        // work (taking a batch, uploading it, answering) overlaps another's device work, and a
        // worker's copy to the host waits for its own passes only
        let device = nest_model::default_device();
        if device.is_cuda() && self.config.workers > 1 {
            if let Err(e) = nest_model::graph::own_stream(device) {
                eprintln!("warning: a worker stays on the default stream ({e})");
            }
        }
        let Loaded {
            enc,
            adaptor,
            served,
        } = match self.load() {
            Ok(m) => m,
            Err(e) => {
                let _ = self.info.set(Err(e));
                self.load_failed.notify_one();
                return;
            }
        };
        METRICS
            .model_dtype
            .with_label_values(&[served.dtype.dtype.name()])
            .set(1);
        let _ = self.info.set(Ok(served));
        let _guard = tch::no_grad_guard();
        let mut trimmed = std::time::Instant::now();
        while let Some(mut batch) = self
            .queue
            .take_batch(self.config.max_batch_tokens, self.config.max_batch_inputs)
        {
            METRICS.batch_inputs.observe(batch.len() as f64);
            batch.sort_by_key(|i| i.ids.len());
            let lens: Vec<usize> = batch.iter().map(|i| i.ids.len()).collect();
            let mut rest = batch.into_iter();
            for run in crate::batcher::passes(&lens, enc.hidden_size(), enc.device()) {
                let part: Vec<Item> = rest.by_ref().take(run.len()).collect();
                self.run_part(&enc, adaptor.as_ref(), part);
            }
            if let Some(every) = self.config.trim_interval {
                if trimmed.elapsed() >= every {
                    nest_core::heap::release_freed();
                    trimmed = std::time::Instant::now();
                }
            }
        }
    }

    /// One forward pass; answers each input (an error for all when the pass fails; the worker
    /// lives on).
    fn run_part(&self, enc: &ElasticEncoder, adaptor: Option<&Adaptor>, part: Vec<Item>) {
        // a libtorch error (out of memory...) answers these inputs with its message, unprinted
        let run = nest_core::caught::catch(std::panic::AssertUnwindSafe(|| {
            embed_batch(enc, adaptor, &part)
        }));
        let result = run.unwrap_or_else(|c| {
            // the clients get the message; the operator's log gets it once a failed batch
            eprintln!(
                "warning: a batch of {} inputs failed: {}",
                part.len(),
                c.describe()
            );
            Err(c.describe())
        });
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
}

/// The batch's pooled vectors at `layer` (float32, on the host): through the encoder's own
/// per-batch path ([`ElasticEncoder::pool_batch`]: recorded CUDA graphs on a GPU, no
/// synchronisation per batch) when every input leaves the same prompt out, else one eager pass
/// with a pooling mask per input.
///
/// # Shapes
/// - returns `[batch.len(), output_dim]`
fn pool(
    enc: &ElasticEncoder,
    batch: &[Item],
    seqs: &[&[i64]],
    layer: usize,
) -> std::result::Result<Tensor, String> {
    if batch.iter().all(|i| i.skip == batch[0].skip) {
        let mut pooled = enc
            .pool_batch(seqs, &[layer], batch[0].skip, GraphMode::Auto)
            .map_err(|e| e.to_string())?;
        return Ok(pooled.remove(0));
    }
    let input = enc.make_input(seqs);
    let state = enc.forward_exits(&input, &[layer]).remove(0);
    // the prompt's tokens out of the pooling, per input
    let mask = input.mask.copy();
    for (k, it) in batch.iter().enumerate().filter(|(_, i)| i.skip > 0) {
        let n = (it.skip as i64).min(mask.size()[1]);
        let _ = mask.get(k as i64).narrow(0, 0, n).fill_(0);
    }
    Ok(enc
        .embed_pooled(&state, &mask)
        .to_device(Device::Cpu)
        .to_kind(Kind::Float))
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
    let pooled = pool(enc, batch, &seqs, layer)?;
    // one `point::finish` per distinct dim in the batch (the cut, the adaptor, the norm)
    let mut result = vec![Vec::new(); batch.len()];
    let mut dims: Vec<usize> = batch.iter().map(|i| i.dim).collect();
    dims.sort_unstable();
    dims.dedup();
    for d in dims {
        let rows: Vec<i64> = (0..batch.len())
            .filter(|&k| batch[k].dim == d)
            .map(|k| k as i64)
            .collect();
        let x = match rows.len() == batch.len() {
            true => pooled.shallow_clone(),
            false => pooled.index_select(0, &Tensor::from_slice(&rows)),
        };
        let y = point::finish(&x, d, adaptor).map_err(|e| e.to_string())?;
        let flat = nest_model::pooling::to_vec_f32(&y);
        for (j, &k) in rows.iter().enumerate() {
            result[k as usize] = flat[j * d..(j + 1) * d].to_vec();
        }
    }
    METRICS.inputs.inc_by(batch.len() as u64);
    METRICS
        .tokens
        .inc_by(batch.iter().map(|i| i.ids.len() as u64).sum());
    Ok(result)
}
