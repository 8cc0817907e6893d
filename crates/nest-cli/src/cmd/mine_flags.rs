//! The flags of `nest mine` as typed settings: the selection options, the output format, and
//! the output's name checked (`cmd/mine.rs` runs the job).

use anyhow::Result;
use nest_index::mine::{MineOptions, OutputFormat, Sampling};

use crate::args_mine::MineArgs;

/// The selection options and the output format; the output must be named `.jsonl`.
pub(super) fn settings(a: &MineArgs) -> Result<(MineOptions, OutputFormat)> {
    let (o, format) = (options(a)?, output_format(a)?);
    // the rows are JSON lines, which readers (`nest train --data`) know by the name
    anyhow::ensure!(
        a.output.extension().is_some_and(|e| e == "jsonl"),
        "--output {}: nest mine writes JSON lines; name it .jsonl (`nest train --data \
         NAME.jsonl:triplets` then reads it)",
        a.output.display()
    );
    Ok((o, format))
}

/// `--output-format`; n-tuple with `--include-positives` (as sentence-transformers).
fn output_format(a: &MineArgs) -> Result<OutputFormat> {
    let format = OutputFormat::parse(&a.output_format)?;
    if a.include_positives && format != OutputFormat::NTuple {
        eprintln!(
            "warning: --include-positives writes n-tuples (as sentence-transformers), not {}",
            format.name()
        );
        return Ok(OutputFormat::NTuple);
    }
    Ok(format)
}

/// The selection settings from the flags.
fn options(a: &MineArgs) -> Result<MineOptions> {
    Ok(MineOptions {
        num_negatives: a.num_negatives,
        range_min: a.range_min,
        range_max: a.range_max,
        min_score: a.min_score,
        max_score: a.max_score,
        absolute_margin: a.absolute_margin,
        relative_margin: a.relative_margin,
        sampling: Sampling::parse(&a.sampling)?,
        include_positives: a.include_positives,
        seed: a.seed,
    })
}
