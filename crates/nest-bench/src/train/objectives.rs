//! What `nest bench train` steps: the `--objectives` names as recipe components, and the cached
//! teacher the `ibkd` and `distill` objectives read.

use std::time::Instant;

use super::TrainBench;
use crate::Result;

/// The `[[objective]]` list a name in `--objectives` stands for: the papers' compositions for
/// `mipic` (eq. 18: 0.4 MRL + 0.6 (SIA + PIC)), `mic` (MRL + 0.6 L_align) and `mipic+mic`; any
/// other name is that one component.
pub(super) fn objective_toml(kind: &str) -> String {
    match kind {
        "mipic" => r#"[{kind = "mrl", weight = 0.4}, {kind = "mipic", weight = 0.6}]"#.into(),
        "mic" => r#"[{kind = "mrl"}, {kind = "mic", weight = 0.6}]"#.into(),
        "mipic+mic" => r#"[{kind = "mrl", weight = 0.4}, {kind = "mipic", weight = 0.6}, {kind = "mic", weight = 0.6}]"#.into(),
        // IBKD's stage 2 with the teacher kept in (eq. 8-10): MNRL + InfoNCE(W s, t) + HSIC
        "ibkd" => r#"[{kind = "mrl"}, {kind = "distill", temperature = 0.1}, {kind = "hsic", weight = 0.5}]"#.into(),
        k => format!("[{{kind = \"{k}\"}}]"),
    }
}

/// The teacher's vectors of the benchmark's anchors through the teacher cache, saying what
/// building the cache cost (seconds and bytes per 1,000 texts).
pub(super) fn bench_teacher(
    a: &TrainBench,
    pairs: &[(String, String)],
    say: &mut dyn FnMut(String),
) -> Result<nest_train::objective::distill::TeacherTable> {
    let cache_dir = std::path::PathBuf::from(".nest-cache/teacher");
    let spec = nest_train::distill::TeacherSpec {
        model: &a.teacher,
        cache_dir: &cache_dir,
        max_length: a.max_length,
        batch_size: 64,
    };
    let texts: Vec<String> = pairs.iter().map(|p| p.0.clone()).collect();
    let start = Instant::now();
    let (table, stats) = nest_train::distill::teacher_vectors(&spec, texts, &mut |_| {})?;
    let secs = start.elapsed().as_secs_f64();
    let bytes = stats.file_bytes;
    // the build rate only means something when the teacher encoded texts in this call
    let rate = if stats.misses > 0 {
        format!(
            " ({:.1} s per 1,000 texts)",
            1000.0 * secs / stats.misses as f64
        )
    } else {
        String::new()
    };
    say(format!(
        "teacher cache {}: {} encoded now in {secs:.1} s{rate}, {} cached; \
         {} entries, {bytes} bytes ({:.0} bytes per 1,000 texts)",
        a.teacher,
        stats.misses,
        stats.hits,
        stats.entries,
        1000.0 * bytes as f64 / stats.entries.max(1) as f64
    ));
    Ok(table)
}
