//! The teacher's vectors of a set of texts through the teacher cache ([`super::cache`]): the
//! teacher is loaded, and encodes, only the texts the cache lacks.

use std::path::{Path, PathBuf};

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
    run_dir: &Path,
    events: &mut dyn FnMut(Event),
) -> Result<(TeacherTable, cache::CacheStats)> {
    let (cache_dir, recorded) = run_cache_dir(d, run_dir, events)?;
    let table = stage_texts_through(d, r, &cache_dir, events);
    if table.is_err() {
        if let Some(record) = recorded {
            let _ = std::fs::remove_file(record); // a failed start leaves no folder behind
        }
    }
    table
}

/// The file in a distillation run's folder that records where its teacher cache is.
const CACHE_RECORD: &str = "teacher-cache.json";

/// Where a run's teacher cache is: the recipe's `cache_dir` when it (or a flag) sets one;
/// else where the run's first start kept it (recorded in the run folder: the default,
/// `.nest-cache/teacher`, is relative to the current folder, and a resume from another folder
/// would encode every text again); else the default, made absolute and recorded. Returns the
/// record's path too when this call wrote it.
fn run_cache_dir(
    d: &DistillRecipe,
    run_dir: &Path,
    events: &mut dyn FnMut(Event),
) -> Result<(PathBuf, Option<PathBuf>)> {
    let record = run_dir.join(CACHE_RECORD);
    if d.cache_set {
        return Ok((d.cache_dir.clone(), None));
    }
    let recorded = std::fs::read_to_string(&record).ok().and_then(|t| {
        let v: serde_json::Value = serde_json::from_str(&t).ok()?;
        Some(PathBuf::from(v["cache_dir"].as_str()?))
    });
    if let Some(dir) = recorded {
        if std::path::absolute(&d.cache_dir).ok().as_ref() != Some(&dir) {
            events(Event::Message(format!(
                "teacher cache: {} (where this run's first start kept it; set cache_dir to \
                 choose another)",
                dir.display()
            )));
        }
        return Ok((dir, None));
    }
    let dir =
        std::path::absolute(&d.cache_dir).map_err(|e| nest_core::Error::io(&d.cache_dir, e))?;
    if !run_dir.is_dir() {
        return Ok((dir, None)); // another rank than the one that makes the folder, early
    }
    let text = serde_json::json!({"cache_dir": dir.display().to_string()}).to_string();
    nest_core::fsutil::write_atomic(&record, text.as_bytes())?;
    Ok((dir, Some(record)))
}

/// [`teacher_table`] with the cache at `cache_dir`.
fn stage_texts_through(
    d: &DistillRecipe,
    r: &Recipe,
    cache_dir: &Path,
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
        cache_dir,
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
    // what is wrong with a teacher that is no model folder, said as for the student (it was
    // "model.safetensors: No such file" from the cache's fingerprint; helper trial E)
    nest_model::ModelFiles::locate(&dir)?;
    let c = cache::TeacherCache::for_teacher(t.cache_dir, &dir, t.max_length)?;
    let mut teacher: Option<ElasticEncoder> = None;
    let mut encode = |chunk: &[&str]| -> Result<tch::Tensor> {
        if teacher.is_none() {
            let device = nest_model::default_device();
            let loaded = ElasticEncoder::load(&dir, device, Some(t.max_length));
            // the caller's max length is the recipe's teacher_max_length: named so
            teacher = Some(loaded.map_err(|e| {
                match e
                    .to_string()
                    .strip_prefix("max length: ")
                    .map(str::to_string)
                {
                    Some(m) => {
                        nest_model::Error::from(nest_core::Error::value("teacher_max_length", m))
                    }
                    None => e,
                }
            })?);
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
