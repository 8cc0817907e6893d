//! What `nest index build` shares between its single-process path (`index.rs`) and its
//! multi-process one (`index_parts.rs`): the stored levels, the builder and the closing report.
//! A leaf, so that the two need not import each other.

use anyhow::{Context, Result};
use nest_index::{IndexBuilder, Level, Precision};

use crate::args_search::IndexBuildArgs;

/// The documents' prompt for `a` (`--prompt-name` / `--prompt`, else the model's document
/// prompt, else its default) and the source record's entry for it.
pub(super) fn document_prompt<'m>(
    a: &'m IndexBuildArgs,
    model: &'m nest_model::ElasticEncoder,
) -> Result<Option<&'m str>> {
    let p = a
        .prompt
        .resolve_side(model, nest_model::prompt::Side::Document)?;
    Ok(p.filter(|p| !p.is_empty()))
}

/// The builder for `a`, its source record noting `--store-text` (`store_text`), so that a
/// server adding documents later stores their texts as the build did.
pub(super) fn builder(
    a: &IndexBuildArgs,
    d: usize,
    levels: &[Level],
    mut source: serde_json::Value,
) -> Result<IndexBuilder> {
    if a.store_text {
        source[nest_core::data::STORE_TEXT] = true.into();
    }
    let mut b = IndexBuilder::create(&a.out, d, levels, a.stores(), source, a.overwrite)?;
    if let Some(keep) = added_choice(a)? {
        b.keep_added(keep)?;
    }
    Ok(b)
}

/// What `--overwrite` does with the documents a server added to the index it replaces:
/// `--keep-added` / `--drop-added`; refused before any work when there are some and neither
/// was passed (`nest_index::rebuild`).
pub(super) fn added_choice(a: &IndexBuildArgs) -> Result<Option<bool>> {
    let added = nest_index::rebuild::added_rows(&a.out);
    match (a.keep_added, a.drop_added) {
        (false, false) if a.overwrite && added > 0 => {
            Err(nest_index::rebuild::refusal(&a.out, added).into())
        }
        (false, false) => Ok(None),
        (keep, _) => Ok(Some(keep)),
    }
}

/// The line after a rebuild that kept the documents added through a server.
fn say_kept(a: &IndexBuildArgs) {
    let n = nest_index::rebuild::added_rows(&a.out);
    if a.keep_added && n > 0 {
        eprintln!("kept {n} documents added or replaced through `nest serve` (--keep-added)");
    }
}

pub(super) fn levels(
    dims: Option<&str>,
    precisions: &[Precision],
    full: usize,
) -> Result<Vec<Level>> {
    let dims = match dims {
        Some(s) => nest_core::spec::parse_dims(s)?,
        None => vec![full],
    };
    nest_core::spec::check_dims("--dims", &dims, full)?;
    Ok(dims
        .iter()
        .flat_map(|&dim| {
            precisions
                .iter()
                .map(move |&precision| Level { precision, dim })
        })
        .collect())
}

pub(super) fn finish(b: IndexBuilder, a: &IndexBuildArgs) -> Result<()> {
    let out = &a.out;
    let m = b
        .finish()
        .with_context(|| format!("writing {}", out.display()))?;
    let lv: Vec<String> = m.levels.iter().map(|l| l.level().to_string()).collect();
    eprintln!(
        "indexed {} vectors of dim {} at levels {} into {}",
        m.count,
        m.full_dim,
        lv.join(", "),
        out.display()
    );
    say_kept(a);
    Ok(())
}
