//! The `NEST_*` environment variables, in one table, so that one Nest does not read (a misspelt
//! `NEST_CUDA_GRAPH`, a name from an old release) is said when a command starts, instead of
//! changing nothing without a word. Each variable is read where it acts; this table only names
//! them, and a test (`crates/nest-cli/tests/architecture.rs`) keeps it equal to the names the
//! repository's code, scripts and tests use.

/// Every `NEST_*` name the repository uses: the knobs of the binary and the Python module (the
/// docs say each), and those of the build, the scripts and the tests, which may be set in the
/// same shell.
pub const KNOWN: &[&str] = &[
    "NEST_API_KEY",
    "NEST_ATTENTION",
    "NEST_BIN",
    "NEST_BUILT_ROOT",
    "NEST_CACHE",
    "NEST_CUDA_GRAPHS",
    "NEST_CUDA_INCLUDE",
    "NEST_CUDA_INFO",
    "NEST_DATA",
    "NEST_DATA_ROOT",
    "NEST_DIST_NCCL",
    "NEST_DIST_TIMEOUT_S",
    "NEST_DTYPE",
    "NEST_DTYPES",
    "NEST_FUZZ_EDITS",
    "NEST_FUZZ_SECONDS",
    "NEST_FUZZ_SEEDS_DIR",
    "NEST_GPU_BINS",
    "NEST_GPU_DIR",
    "NEST_GPU_DRY",
    "NEST_GRAPH_BUCKET",
    "NEST_GRAPH_MEMORY",
    "NEST_GRAPH_POOL",
    "NEST_LENGTH_RUNS",
    "NEST_MALLOC",
    "NEST_MRL",
    "NEST_OPS_TRACE",
    "NEST_PG_DSN",
    "NEST_PYTHON",
    "NEST_QAT",
    "NEST_REQUIRE_MODELS",
    "NEST_SIXTEEN_CHILD",
    "NEST_SKIP_PYTHON",
    "NEST_TEST_NCCL_END",
    "NEST_TOKENIZE_AHEAD",
    "NEST_WORD_CACHE",
    "NEST_WORD_CACHE_CHILD",
    "NEST_WORKERS",
];

/// One line per `NEST_*` variable set in `vars` that is not [`KNOWN`], with the known name it
/// most likely meant.
pub fn unknown<I: IntoIterator<Item = String>>(vars: I) -> Vec<String> {
    let mut lines: Vec<String> = vars
        .into_iter()
        .filter(|v| v.starts_with("NEST_") && !KNOWN.contains(&v.as_str()))
        .map(|v| {
            fn bare(k: &str) -> &str {
                &k["NEST_".len()..]
            }
            let meant = crate::spelling::closest(bare(&v), KNOWN.iter().map(|k| bare(k)))
                .map_or(String::new(), |k| format!(" (did you mean NEST_{k}?)"));
            format!("{v} is set, but Nest reads no such variable{meant}; it changes nothing")
        })
        .collect();
    lines.sort();
    lines
}

/// Says on standard error, as `prog`, each `NEST_*` variable of this process that Nest does not
/// read.
pub fn warn_unknown(prog: &str) {
    for line in unknown(std::env::vars_os().filter_map(|(k, _)| k.into_string().ok())) {
        eprintln!("{prog}: warning: {line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_misspelt_variable_is_named_with_the_one_meant() {
        let set = [
            "NEST_CUDA_GRAPH",
            "NEST_DTYPE",
            "PATH",
            "NEST_WHATEVER",
            "NEST_GRAPH_BUCKETS",
        ];
        let lines = unknown(set.map(String::from));
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(
            lines[0].starts_with("NEST_CUDA_GRAPH is set")
                && lines[0].contains("NEST_CUDA_GRAPHS?")
        );
        assert!(
            lines[1].contains("did you mean NEST_GRAPH_BUCKET?"),
            "{lines:?}"
        );
        assert!(lines[2].starts_with("NEST_WHATEVER") && !lines[2].contains("did you mean"));
    }

    #[test]
    fn the_table_is_sorted_and_has_no_repeats() {
        assert!(KNOWN.windows(2).all(|w| w[0] < w[1]));
    }
}
