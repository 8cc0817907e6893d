//! [`ElasticEncoder`]: a loaded model (weights, tokenizer, pooling) that embeds text at any
//! (layer, dim) point.

use std::path::Path;

use nest_core::spec::{check_dims, check_layers};
use tch::{nn::VarStore, Device, Tensor};

use crate::adaptor::Adaptor;
use crate::config::{read_json, Architecture, ModelConfig, ModelFiles, NestMeta, PoolingConfig};
use crate::dense::{module_of, Dense, DenseConfig, Head};
use crate::dtype::Dtype;
use crate::pooling::Pooling;
use crate::prompt::Prompts;
use crate::tokenize::TextTokenizer;
use crate::{weights, Error, Result};

mod build;
pub(crate) use build::net as build_net;
use build::Net;
mod ahead;
pub use ahead::ahead_blocks;
mod convert;
mod describe;
mod embed;
mod graphed;
mod halves;
pub mod phases;
mod pool;
pub mod stop;
mod streams;
mod transfer;
pub use crate::graph::GraphMode;

pub use crate::io::{ClsAttention, EncoderInput, EncoderOutput, Exits};

impl crate::point::Offer {
    /// What `enc` offers, through `adaptor` when one is given. Fails when the adaptor does not
    /// take the model's vectors (the one adaptor-width check).
    pub fn new(enc: &ElasticEncoder, adaptor: Option<&Adaptor>) -> Result<Self> {
        if let Some(a) = adaptor {
            if a.meta.input_dim != enc.output_dim() {
                return Err(crate::point::PointError {
                    key: "adaptor",
                    message: format!(
                        "the adaptor takes {} dims, the model gives {}",
                        a.meta.input_dim,
                        enc.output_dim()
                    ),
                }
                .into());
            }
        }
        Ok(Self::from_meta(
            enc.num_layers(),
            enc.output_dim(),
            &enc.meta,
            adaptor.map(Adaptor::dims),
        ))
    }
}

impl Adaptor {
    /// A warning when this adaptor was trained on another model's vectors than `enc` gives: the
    /// cosine between the vector its model gave [`crate::adaptor::PROBE_TEXT`] (recorded by
    /// `nest compress`) and `enc`'s is under [`crate::adaptor::PROBE_MIN_COSINE`]. `None` when
    /// they agree or the adaptor records no probe. Costs one forward pass of one sentence.
    pub fn foreign_note(&self, enc: &ElasticEncoder) -> Result<Option<String>> {
        let Some((layer, want)) = self.probe() else {
            return Ok(None);
        };
        let model = self.meta.info["source"]["model"]
            .as_str()
            .unwrap_or("its model");
        let cos = if layer > enc.num_layers() || want.len() != enc.output_dim() {
            None
        } else {
            let text = [crate::adaptor::PROBE_TEXT];
            let got = self::embed_one(enc, &text, layer)?;
            let dot: f64 = got.iter().zip(&want).map(|(a, b)| (a * b) as f64).sum();
            let norm = |v: &[f32]| v.iter().map(|a| (a * a) as f64).sum::<f64>().sqrt();
            Some(dot / (norm(&got) * norm(&want)).max(1e-12))
        };
        if cos.is_some_and(|c| c >= crate::adaptor::PROBE_MIN_COSINE) {
            return Ok(None);
        }
        let how = match cos {
            Some(c) => format!(
                "this model's vector of a probe sentence is at cosine {c:.3} to \
                 that model's (the same model gives 0.999 or more, in any dtype)"
            ),
            None => format!("it was trained on that model's layer {layer}"),
        };
        Ok(Some(format!(
            "the adaptor was trained on another model's vectors ({model}): {how}, so it may \
             serve this one poorly; train an adaptor for this model (`nest compress --model ...`)"
        )))
    }
}

/// The pooled vector `enc` gives `text` at `layer`.
fn embed_one(enc: &ElasticEncoder, text: &[&str], layer: usize) -> Result<Vec<f32>> {
    let x = enc.embed_layers(text, &[layer], EncodeOptions::batch(1), &mut |_| {})?;
    let x = x[0]
        .to_kind(tch::Kind::Float)
        .to_device(tch::Device::Cpu)
        .view([-1]);
    Ok(Vec::<f32>::try_from(&x)?)
}

/// Batching options for [`ElasticEncoder::embed_layers`].
#[derive(Debug, Clone, Copy)]
pub struct EncodeOptions {
    /// Texts per forward pass.
    pub batch_size: usize,
    /// Batches encoded at once, each on its share of libtorch's threads (at most one per batch;
    /// 0 counts as 1). One stream gives a batch the lowest latency; as many streams as threads
    /// the highest throughput on many texts (`embed_streams`).
    pub streams: usize,
    /// Whether batches run through recorded forward passes (CUDA graphs; one stream only):
    /// `Auto` on a GPU. `NEST_CUDA_GRAPHS=0|1` overrides it ([`GraphMode::resolve`]).
    pub graphs: GraphMode,
    /// With more than 0: a batch also holds at most this many padded tokens (its rows times its
    /// longest text), so that long texts go in small batches and short ones in large ones,
    /// never more than `batch_size` texts (at least one).
    pub max_tokens: usize,
    /// Tokenise the next block of texts on a worker thread while the device runs the batches
    /// of this one (one stream only): `None` (the default) on a GPU, whose work is queued
    /// without waiting, so that tokenising overlaps it; off on the CPU, where both would share
    /// the same cores. `NEST_TOKENIZE_AHEAD=0|1` overrides it, for measurements.
    pub tokenize_ahead: Option<bool>,
}

impl Default for EncodeOptions {
    fn default() -> Self {
        EncodeOptions {
            batch_size: 32,
            streams: 1,
            graphs: GraphMode::Auto,
            max_tokens: 0,
            tokenize_ahead: None,
        }
    }
}

impl EncodeOptions {
    /// `batch_size` texts per forward pass, one stream.
    pub fn batch(batch_size: usize) -> Self {
        EncodeOptions {
            batch_size,
            ..EncodeOptions::default()
        }
    }
}

/// A loaded elastic encoder.
#[derive(Debug)]
pub struct ElasticEncoder {
    /// The weights (trainable by `nest-train`).
    pub vs: VarStore,
    net: Net,
    arch: Architecture,
    pub tokenizer: TextTokenizer,
    pub pooling: Pooling,
    pub config: ModelConfig,
    pub files: ModelFiles,
    /// Whether the sentence-transformers pipeline ends with `Normalize`.
    pub normalize: bool,
    /// The `Dense` modules after pooling (IBKD's projection, section 3.4; EmbeddingGemma's
    /// two), empty when the pipeline has none.
    pub head: Head,
    /// Forward passes run so far (tests count them).
    forwards: std::sync::atomic::AtomicUsize,
    /// What a Nest training run recorded (trained dims and layers), if anything.
    pub meta: NestMeta,
    /// The model's named prompts and default (`config_sentence_transformers.json`).
    pub prompts: Prompts,
    /// Whether pooling counts the prompt's tokens (`1_Pooling/config.json` `include_prompt`).
    pub include_prompt: bool,
    /// The forward pass's arithmetic; `converted` when the weights themselves were converted
    /// for inference (then the encoder can no longer be trained, saved or reloaded).
    dtype: Dtype,
    converted: bool,
    /// The recorded encode passes, per shape ([`graphed`]).
    graphs: graphed::Graphs,
}

impl ElasticEncoder {
    /// Loads a model directory in Hugging Face / sentence-transformers layout onto `device`.
    ///
    /// `max_seq_length` overrides `sentence_bert_config.json` when given.
    pub fn load(dir: &Path, device: Device, max_seq_length: Option<usize>) -> Result<Self> {
        let files = ModelFiles::locate(dir)?;
        let config = ModelConfig::read(&files.config)?;
        let arch = config.architecture()?;
        let (pooling, normalize, dense_folders) = build::read_pipeline(&files)?;
        let include_prompt = match &files.pooling_config {
            Some(p) => read_json::<PoolingConfig>(p)?.include_prompt,
            None => true,
        };
        let prompts = Prompts::read(files.st_config.as_deref())?;
        let meta: NestMeta = files
            .nest_meta
            .as_deref()
            .map(read_json)
            .transpose()?
            .unwrap_or_default();
        let max_len = build::max_seq_len(&files, &config, max_seq_length)?;
        let mut tokenizer = TextTokenizer::load(&files.tokenizer, max_len)?;
        tokenizer.limit_ids(
            config.vocab_size,
            format!(
                "{} does not belong to the weights of {} (vocab_size {})",
                files.tokenizer.display(),
                files.config.display(),
                config.vocab_size
            ),
        );
        crate::weights::check_fits(
            &files.config,
            build::implied_values(&config),
            &files.weights,
        )?;
        let mut vs = VarStore::new(device);
        let net = build::net(arch, &vs, &config, &files.config)?;
        let head = build::head(&dense_folders, &vs, &config, &files)?;
        weights::load_part(&mut vs, &files.weights, &|n| {
            module_of(n).is_none().then(|| n.to_string())
        })?;
        for (k, folder) in dense_folders.iter().enumerate() {
            let p = Dense::weights_file(&files.dir, folder)?;
            weights::load_part(&mut vs, &p, &|n| {
                module_of(n).and_then(|(m, inner)| (m == k).then(|| inner.to_string()))
            })?;
        }
        Ok(ElasticEncoder {
            vs,
            net,
            arch,
            tokenizer,
            pooling,
            config,
            files,
            normalize,
            head,
            meta,
            prompts,
            include_prompt,
            forwards: Default::default(),
            dtype: Dtype::Float32,
            converted: false,
            graphs: Default::default(),
        })
    }

    /// Replaces the weights with those of a `model.safetensors` (e.g. a checkpoint), with the
    /// same presence and shape checks as loading.
    pub fn load_weights(&mut self, path: &Path) -> Result<()> {
        self.refuse_converted("loading weights")?;
        weights::load(&mut self.vs, path)
    }

    pub fn architecture(&self) -> Architecture {
        self.arch
    }

    /// Overrides every dropout probability of the network (hidden, attention, embedding) with
    /// `p`, e.g. 0 for runs that must be deterministic; the saved config is not changed.
    pub fn set_dropout(&mut self, p: f64) {
        self.net.set_dropout(p)
    }

    pub fn num_layers(&self) -> usize {
        self.net.num_layers()
    }

    /// The transformer's width (token states, pooled vectors before any Dense head).
    pub fn hidden_size(&self) -> usize {
        self.config.hidden_size
    }

    /// The embedding's width: the last Dense module's `out_features`, else `hidden_size`.
    pub fn output_dim(&self) -> usize {
        self.head.out_features().unwrap_or(self.config.hidden_size)
    }

    /// Adds IBKD's projection head (section 3.4, eq. 11: linear, no bias, `[I | 0]` start) with
    /// `out` outputs, registered in [`Self::vs`] so that training optimises and checkpoints it
    /// and export writes it as `2_Dense`. Refused when the model already has a head.
    ///
    /// `out` may exceed the hidden size: then the head is stage 1's `W` into a wider teacher's
    /// space (`W s`, the vector the IBKD authors' code scores), starting as `[I; 0]` (the
    /// student's vector padded with zeros, so cosines start as the student's own).
    pub fn add_projection(&mut self, out: usize) -> Result<()> {
        let path = self.files.dir.join("modules.json");
        if !self.head.is_empty() {
            return Err(Error::Config {
                path,
                message: format!(
                    "the model already has a Dense head ({})",
                    self.head.describe()
                ),
            });
        }
        if out == 0 {
            return Err(Error::Config {
                path,
                message: "projection to 0 dims: expected at least 1".into(),
            });
        }
        let cfg: DenseConfig = Dense::projection(self.hidden_size(), out);
        let d = Dense::new(&(self.vs.root() / "dense"), cfg, "2_Dense", &path)?;
        self.head = Head::new(vec![d], &path)?;
        Ok(())
    }

    pub fn device(&self) -> Device {
        self.vs.device()
    }

    /// Checks an operating point against this model.
    pub fn check(&self, layers: &[usize], dims: &[usize]) -> Result<()> {
        check_layers("layer", layers, self.num_layers())?;
        check_dims("dim", dims, self.output_dim())?;
        Ok(())
    }

    /// Pads token sequences into one batch on the model's device.
    pub fn make_input(&self, seqs: &[&[i64]]) -> EncoderInput {
        self.make_input_on(seqs, 0, self.device())
    }

    /// [`Self::make_input`] padded to at least `min_len` tokens, on `dev` (the host, for a copy
    /// into the static tensors of a recorded step).
    pub fn make_input_on(&self, seqs: &[&[i64]], min_len: usize, dev: Device) -> EncoderInput {
        let both = transfer::pack_input(seqs, min_len, self.config.pad_id());
        transfer::unpack_input(&both.to_device(dev))
    }

    /// Runs the encoder to `layers` layers (early exit). `train` turns dropout on.
    pub fn forward(&self, input: &EncoderInput, layers: usize, train: bool) -> EncoderOutput {
        self.forward_with(input, layers, train, ClsAttention::None)
    }

    /// [`forward`](Self::forward), also returning the [CLS]-row attention probabilities of every
    /// layer run when `capture` asks for them.
    pub fn forward_with(
        &self,
        input: &EncoderInput,
        layers: usize,
        train: bool,
        capture: ClsAttention,
    ) -> EncoderOutput {
        let layers = layers.min(self.num_layers());
        self.forwards
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.net.forward(input, Exits::UpTo(layers), train, capture)
    }

    /// An inference pass (no dropout) to the deepest of `layers` that keeps those layers'
    /// states only (0: the embeddings), freeing every other state once the next layer has run:
    /// the pass's memory is two or three layers' states instead of all of them.
    ///
    /// # Shapes
    /// - `input`: `[batch, seq]`; returns one `[batch, seq, hidden]` per entry of `layers`, in
    ///   its order (a layer asked twice gets the same state twice)
    ///
    /// # Panics
    /// On a layer past the model's (the callers [`check`](Self::check) the layers first).
    pub fn forward_exits(&self, input: &EncoderInput, layers: &[usize]) -> Vec<Tensor> {
        let n = self.num_layers();
        if let Some(l) = layers.iter().find(|&&l| l > n) {
            panic!("layer {l} of a {n}-layer model");
        }
        let mut keep = layers.to_vec();
        keep.sort_unstable();
        keep.dedup();
        self.forwards
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let out = self
            .net
            .forward(input, Exits::Only(&keep), false, ClsAttention::None);
        layers
            .iter()
            .map(|&l| {
                let at = keep.binary_search(&l).expect("every asked layer is kept");
                out.hidden_states[at].shallow_clone()
            })
            .collect()
    }

    /// How many forward passes this encoder has run.
    pub fn forward_count(&self) -> usize {
        self.forwards.load(std::sync::atomic::Ordering::Relaxed)
    }
}
