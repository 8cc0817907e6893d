//! The teacher's vectors of a set of texts through the teacher cache ([`super::cache`]): the
//! teacher is loaded, and encodes, only the texts the cache lacks.

use std::path::Path;

use nest_model::ElasticEncoder;

use super::cache;
use super::DistillRecipe;
use crate::objective::distill::TeacherTable;
use crate::recipe::Recipe;
use crate::trainer::Event;
use crate::Result;

/// The teacher's vectors of the first-column texts of `r`'s data, through the cache: every
/// one, or, when `max_steps` cuts the stage short, those of the batches it takes (a 3-step
/// trial waited for all 46,797 texts of recipes/ibkd.toml: 14 minutes on 2 cores).
pub(super) fn teacher_table(
    d: &DistillRecipe,
    r: &Recipe,
    events: &mut dyn FnMut(Event),
) -> Result<(TeacherTable, cache::CacheStats)> {
    let mut texts: Vec<String> = Vec::new();
    for spec in &r.data {
        let (rows, _) = crate::data::read_source(spec)?;
        texts.extend(rows.into_iter().flat_map(|row| row.into_iter().take(1)));
    }
    if let Some(taken) = crate::trainer::taken_texts(r)? {
        events(Event::Message(format!(
            "teacher: max_steps {} takes {} of the {} texts; the teacher encodes those (a longer \
             run encodes the rest then)",
            r.max_steps,
            taken.len(),
            texts.len()
        )));
        texts = taken;
    }
    let teacher = TeacherSpec {
        model: &d.teacher,
        cache_dir: &d.cache_dir,
        max_length: d.teacher_max_length,
        batch_size: d.teacher_batch_size,
    };
    teacher_vectors(&teacher, texts, events)
}

/// Which teacher encodes, and where its cache lives.
#[derive(Debug, Clone, Copy)]
pub struct TeacherSpec<'a> {
    /// Model directory or hub id.
    pub model: &'a str,
    pub cache_dir: &'a Path,
    pub max_length: usize,
    pub batch_size: usize,
}

/// The teacher's vectors of `texts` (deduplicated), through its cache: the teacher is loaded
/// only when some text is missing.
pub fn teacher_vectors(
    t: &TeacherSpec,
    mut texts: Vec<String>,
    events: &mut dyn FnMut(Event),
) -> Result<(TeacherTable, cache::CacheStats)> {
    texts.sort_unstable();
    texts.dedup();
    let dir = nest_model::hub::resolve(t.model)?;
    let c = cache::TeacherCache::for_teacher(t.cache_dir, &dir, t.max_length)?;
    let mut teacher: Option<ElasticEncoder> = None;
    let mut encode = |chunk: &[&str]| -> Result<tch::Tensor> {
        if teacher.is_none() {
            let device = nest_model::default_device();
            teacher = Some(ElasticEncoder::load(&dir, device, Some(t.max_length))?);
        }
        let t = teacher.as_ref().expect("loaded");
        let _g = tch::no_grad_guard();
        let layers = t.num_layers();
        let opts = nest_model::EncodeOptions::batch(chunk.len());
        let mut v = t.embed_layers(chunk, &[layers], opts, &mut |_| {})?;
        Ok(v.remove(0))
    };
    // the teacher can take minutes: a line every 10 s (and at the end), in logs as on terminals
    let started = std::time::Instant::now();
    let mut said = started;
    let mut progress = |done: usize, total: usize| {
        if done == total || said.elapsed().as_secs_f64() >= 10.0 {
            said = std::time::Instant::now();
            let s = started.elapsed().as_secs_f64();
            let rate = done as f64 / s.max(1e-9);
            events(Event::Message(format!(
                "teacher: {done}/{total} texts encoded ({:.0}%, {rate:.0}/s, {s:.0} s, eta {:.0} s)",
                100.0 * done as f64 / total.max(1) as f64,
                (total - done) as f64 / rate.max(1e-9),
            )));
        }
    };
    let (vectors, stats) = c.embed(&texts, t.batch_size, &mut encode, &mut progress)?;
    if let Some(why) = &stats.discarded {
        events(Event::Message(format!(
            "teacher cache discarded and rebuilt: {why}"
        )));
    }
    events(Event::Message(format!(
        "teacher cache {}: {} texts, {} cached, {} encoded now ({} entries)",
        c.path.display(),
        texts.len(),
        stats.hits,
        stats.misses,
        stats.entries
    )));
    Ok((TeacherTable::new(&texts, vectors), stats))
}
