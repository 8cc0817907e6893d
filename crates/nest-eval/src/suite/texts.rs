//! The text cache: every distinct (prompt, text) pair of every task, embedded once at all
//! requested layers.

use std::collections::HashMap;

use nest_model::{ElasticEncoder, EncodeOptions};
use tch::Tensor;

use super::spec::Progress;
use crate::Result;

/// Distinct (prompt, text) pairs across tasks: a text embedded once per prompt it is read with.
#[derive(Debug, Default)]
pub(crate) struct TextIndex {
    ids: HashMap<(Option<String>, String), i64>,
    texts: Vec<(Option<String>, String)>,
}

impl TextIndex {
    fn id(&mut self, prompt: Option<&str>, s: &str) -> i64 {
        let key = (prompt.map(str::to_string), s.to_string());
        if let Some(&i) = self.ids.get(&key) {
            return i;
        }
        let i = self.texts.len() as i64;
        self.texts.push(key.clone());
        self.ids.insert(key, i);
        i
    }
    pub(crate) fn ids<'a>(
        &mut self,
        prompt: &Option<String>,
        it: impl Iterator<Item = &'a str>,
    ) -> Tensor {
        let v: Vec<i64> = it.map(|s| self.id(prompt.as_deref(), s)).collect();
        Tensor::from_slice(&v)
    }

    /// Every text's pooled vectors at each of `layers`, one pass per distinct prompt, rows in
    /// index order.
    pub(super) fn embed(
        &self,
        encoder: &ElasticEncoder,
        layers: &[usize],
        opts: EncodeOptions,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Vec<Tensor>> {
        let mut prompts: Vec<Option<&str>> = self.texts.iter().map(|t| t.0.as_deref()).collect();
        prompts.sort_unstable();
        prompts.dedup();
        let total = self.texts.len();
        let mut out: Vec<Option<Tensor>> = layers.iter().map(|_| None).collect();
        let mut done_before = 0;
        for prompt in prompts {
            let (rows, texts): (Vec<i64>, Vec<&str>) = (0..total as i64)
                .zip(&self.texts)
                .filter(|(_, t)| t.0.as_deref() == prompt)
                .map(|(i, t)| (i, t.1.as_str()))
                .unzip();
            let pooled = encoder.embed_prompted(&texts, layers, opts, prompt, &mut |done| {
                progress(Progress::Embed {
                    done: done_before + done,
                    total,
                })
            })?;
            done_before += texts.len();
            let rows = Tensor::from_slice(&rows);
            for (slot, p) in out.iter_mut().zip(pooled) {
                let all = slot.get_or_insert_with(|| {
                    Tensor::zeros([total as i64, p.size()[1]], (p.kind(), p.device()))
                });
                let _ = all.index_copy_(0, &rows, &p);
            }
        }
        Ok(out
            .into_iter()
            .map(|t| t.unwrap_or_else(|| Tensor::zeros([0, 0], tch::kind::FLOAT_CPU)))
            .collect())
    }
}
