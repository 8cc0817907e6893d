//! A checkpoint written out as a model folder (`nest export checkpoint`): what `final/` would
//! hold had the run ended at that step, so that a cut or unfinished run's checkpoint loads in
//! `nest encode`, `nest eval` and `SentenceTransformer(path)` as sentence-transformers'
//! `checkpoint-N/` folders do.

use std::path::{Path, PathBuf};

use super::model::build_model;
use super::run::final_meta;
use super::types::{recipe_objective, Event};
use crate::checkpoint;
use crate::recipe::Recipe;
use crate::{Error, Result};

/// What [`export_checkpoint`] wrote.
#[derive(Debug, Clone)]
pub struct Exported {
    /// The checkpoint written out.
    pub checkpoint: PathBuf,
    /// Its step.
    pub step: u64,
}

/// The checkpoint `path` names: a checkpoint folder (`RUN/checkpoints/step-N`), or a run
/// folder, whose newest complete checkpoint is taken.
pub fn find_checkpoint(path: &Path) -> Result<PathBuf> {
    if path.join("state.json").is_file() {
        return Ok(path.to_path_buf());
    }
    let run_err = |message: String| Error::Run {
        path: path.to_path_buf(),
        message,
    };
    if !path.join("recipe.toml").is_file() {
        return Err(run_err(
            "neither a checkpoint (no state.json) nor a training run's folder (no recipe.toml): \
             pass RUN/checkpoints/step-N or RUN"
                .into(),
        ));
    }
    checkpoint::list(path)
        .pop()
        .map(|(_, p)| p)
        .ok_or_else(|| run_err("the run holds no complete checkpoint yet".into()))
}

/// Writes the model of checkpoint `ck` (see [`find_checkpoint`]) to `out` as `nest train`
/// writes `final/`: the run's recipe (its model, dtype, dropout, projection head, max length)
/// rebuilt on `device`, the checkpoint's weights loaded into it, and `nest.json` saying the
/// dims and layers its objective trains. The folder is written whole or not at all.
pub fn export_checkpoint(
    ck: &Path,
    out: &Path,
    device: tch::Device,
    events: &mut dyn FnMut(Event),
) -> Result<Exported> {
    let ck = find_checkpoint(ck)?;
    let run = ck
        .parent()
        .and_then(Path::parent)
        .filter(|r| r.join("recipe.toml").is_file())
        .ok_or_else(|| Error::Run {
            path: ck.clone(),
            message: "no recipe.toml two folders up: a checkpoint is read inside its run \
                      folder (RUN/checkpoints/step-N), whose recipe says how its model was built"
                .into(),
        })?;
    let own = |p: &Path| std::fs::canonicalize(p).ok();
    if own(out).is_some_and(|o| Some(o) == own(&run.join("final"))) {
        return Err(Error::Run {
            path: out.to_path_buf(),
            message: "is the run's own final/, which `nest train` writes at the run's end: \
                      write the checkpoint's model elsewhere"
                .into(),
        });
    }
    let (state, _) = checkpoint::load(&ck)?;
    let r = Recipe::load_verbatim(&run.join("recipe.toml"))?;
    let (mut enc, _, objective) = build_model(&r, device, &recipe_objective, events)?;
    enc.load_weights(&ck.join("model.safetensors"))?;
    nest_model::export::save(&enc, out, &final_meta(objective.as_ref(), &enc, r.seed))?;
    Ok(Exported {
        checkpoint: ck,
        step: state.step,
    })
}
