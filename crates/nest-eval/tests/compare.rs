//! `nest eval compare` on reports with and without per-item scores, runs of one method as a
//! side, Holm's correction, and the seed spread, on small reports made here.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use nest_eval::compare::{compare, correct, DimPairing, Group};
use nest_eval::items::{statistic, Items};
use nest_eval::quantize::Precision;
use nest_eval::report::{Cell, Costs, FileRef, ModelInfo, Report, TaskResult};
use nest_eval::significance::Bootstrap;
use nest_eval::tasks::TaskKind;

const N: usize = 400;

/// A deterministic pseudo-random stream (a linear congruential generator), so that the
/// reports need no fixture.
fn noise(seed: u64) -> impl FnMut() -> f32 {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    move || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((s >> 40) as f32 / (1u64 << 24) as f32) - 0.5
    }
}

fn gold() -> Vec<f32> {
    let mut r = noise(1);
    (0..N).map(|_| (r() + 0.5) * 5.0).collect()
}

/// An STS report whose similarities are gold plus noise of the given size; layers 1 and 2
/// (layer 2 is what `quality` says, layer 1 is pure noise for every report).
fn report(seed: u64, quality: f32, items: bool) -> Report {
    let g = gold();
    let mut r = noise(seed);
    let mut cells = Vec::new();
    for layer in [1usize, 2] {
        let sims: Vec<f32> = g
            .iter()
            .map(|x| {
                if layer == 2 {
                    x / 5.0 + r() / quality
                } else {
                    r()
                }
            })
            .collect();
        let all: Vec<usize> = (0..N).collect();
        let main = statistic(TaskKind::Sts, &g, &sims, &all);
        cells.push(Cell {
            layer,
            dim: 8,
            precision: Precision::Float32,
            metrics: BTreeMap::from([("spearman".to_string(), main)]),
            items: items.then_some(Items(sims)),
        });
    }
    Report {
        nest_version: "test".into(),
        command: "test".into(),
        model: ModelInfo {
            path: "m".into(),
            architecture: "bert".into(),
            num_layers: 2,
            hidden_size: 8,
            pooling: "mean".into(),
            max_seq_length: 8,
            dtype: "float32".into(),
            prompts: Default::default(),
            objective: None,
            seed: None,
        },
        layers: vec![1, 2],
        dims: vec![8],
        precisions: vec![Precision::Float32],
        rescore: None,
        costs: Costs::default(),
        tasks: vec![TaskResult {
            task: "toy/test".into(),
            kind: TaskKind::Sts,
            main_metric: "spearman".into(),
            files: vec![FileRef {
                path: "toy/test.tsv".into(),
                sha256: "abc".into(),
            }],
            n_examples: N,
            warnings: vec![],
            seconds: 0.0,
            cells,
            gold: items.then_some(Items(g)),
        }],
        seconds: 0.0,
    }
}

fn save(dir: &Path, name: &str, r: &Report) -> PathBuf {
    let p = dir.join(name).join("report.json");
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, serde_json::to_string(r).unwrap()).unwrap();
    p
}

fn group(dir: &Path, name: &str, runs: &[Report]) -> Group {
    let paths = runs
        .iter()
        .enumerate()
        .map(|(i, r)| save(dir, &format!("{name}-{i}"), r))
        .collect();
    Group::read(name.into(), paths).unwrap()
}

const BOOT: Bootstrap = Bootstrap {
    resamples: 500,
    seed: 3,
};

#[test]
fn a_clear_gain_survives_and_noise_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let a = group(dir.path(), "a", &[report(10, 1.0, true)]);
    let b = group(dir.path(), "b", &[report(20, 4.0, true)]);
    let mut all = vec![compare(&a, &b, Some(BOOT), DimPairing::Shared).unwrap()];
    assert_eq!(correct(&mut all), 2);
    let t = &all[0][0];
    let gain = t.cell(2, 8).unwrap();
    assert!(gain.delta() > 5.0 && gain.significant(0.05), "{gain:?}");
    let test = gain.test.unwrap();
    assert!(test.lo > 0.0 && test.lo < gain.delta() && gain.delta() < test.hi);
    let noise = t.cell(1, 8).unwrap();
    assert!(!noise.significant(0.05), "{noise:?}");
    // Holm over 2 cells: the adjusted p-value is at least the raw one
    assert!(gain.p_holm.unwrap() >= test.p);
}

#[test]
fn missing_items_are_a_clear_error_unless_no_test_is_asked() {
    let dir = tempfile::tempdir().unwrap();
    let a = group(dir.path(), "a", &[report(10, 1.0, true)]);
    let bare = group(dir.path(), "bare", &[report(20, 4.0, false)]);
    let e = compare(&a, &bare, Some(BOOT), DimPairing::Shared)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("bare-0") && e.contains("per-item") && e.contains("--resamples 0"),
        "{e}"
    );
    let d = compare(&a, &bare, None, DimPairing::Shared).unwrap();
    let c = d[0].cell(2, 8).unwrap();
    assert!(c.test.is_none() && c.delta() > 5.0);
    // old reports, written before per-item scores existed, still read
    let text = std::fs::read_to_string(&bare.paths[0]).unwrap();
    assert!(!text.contains("\"items\"") && !text.contains("\"gold\""));
}

#[test]
fn other_test_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let a = group(dir.path(), "a", &[report(10, 1.0, true)]);
    let mut r = report(20, 4.0, true);
    r.tasks[0].files[0].sha256 = "def".into();
    let b = group(dir.path(), "other", &[r]);
    let e = compare(&a, &b, Some(BOOT), DimPairing::Shared)
        .unwrap_err()
        .to_string();
    assert!(e.contains("other-0") && e.contains("other files"), "{e}");
}

#[test]
fn runs_of_one_method_make_one_side() {
    let dir = tempfile::tempdir().unwrap();
    let a = group(
        dir.path(),
        "a",
        &[report(10, 1.0, true), report(11, 1.0, true)],
    );
    let b = group(
        dir.path(),
        "b",
        &[
            report(20, 4.0, true),
            report(21, 4.0, true),
            report(22, 4.0, true),
        ],
    );
    let mut all = vec![compare(&a, &b, Some(BOOT), DimPairing::Shared).unwrap()];
    correct(&mut all);
    let c = all[0][0].cell(2, 8).unwrap();
    let mean = |g: &Group| {
        g.reports
            .iter()
            .map(|r| r.tasks[0].main(2, 8, Precision::Float32).unwrap())
            .sum::<f64>()
            / g.reports.len() as f64
    };
    assert!((c.base - mean(&a)).abs() < 1e-9 && (c.other - mean(&b)).abs() < 1e-9);
    assert!(c.base_sd.is_finite() && c.other_sd > 0.0);
    assert!((c.test.unwrap().delta - c.delta()).abs() < 1e-3, "{c:?}");
    assert!(c.significant(0.05));

    let mut runs = b.reports.clone();
    for (i, r) in runs.iter_mut().enumerate() {
        r.model.path = format!("runs/seed{i}/final");
    }
    let s = nest_eval::seeds::summarise(&runs).unwrap();
    let cell = s[0].cell(2, 8).unwrap();
    assert_eq!(cell.n, 3);
    assert!((cell.mean - c.other).abs() < 1e-9 && cell.lo < cell.mean && cell.mean < cell.hi);
    assert!(nest_eval::seeds::summarise(&runs[..1]).is_err());
    // one model twice is no spread over seeds, nor are models of other shapes
    let e = nest_eval::seeds::summarise(&b.reports)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("two reports are of one model (m, float32)"),
        "{e}"
    );
    // runs whose nest.json record another objective, or one seed, are no seeds of one method
    // (helper trial E: three methods, all seed 42, summarised as seeds)
    for (i, r) in runs.iter_mut().enumerate() {
        r.model.objective = Some("mrl(cosent) dims [8]".into());
        r.model.seed = Some(40 + i as u64);
    }
    assert!(nest_eval::seeds::summarise(&runs).is_ok());
    let mut other = runs.clone();
    other[1].model.objective = Some("mipic(cosent) dims [8]".into());
    let e = nest_eval::seeds::summarise(&other).unwrap_err().to_string();
    assert!(
        e.contains("was trained with mrl(cosent) dims [8] and runs/seed1/final with mipic"),
        "{e}"
    );
    let mut same = runs.clone();
    same[2].model.seed = Some(40);
    let e = nest_eval::seeds::summarise(&same).unwrap_err().to_string();
    assert!(e.contains("were both trained with seed 40"), "{e}");
    runs[2].model.num_layers = 4;
    let e = nest_eval::seeds::summarise(&runs).unwrap_err().to_string();
    assert!(
        e.contains("bert of 4 layers") && e.contains("nest eval compare"),
        "{e}"
    );
}

/// `DimPairing::Full` pairs each side's widest vector: a 16-dim model against an 8-dim one,
/// where the shared pairing finds no common dim.
#[test]
fn full_vectors_of_different_widths_are_paired() {
    let dir = tempfile::tempdir().unwrap();
    let a = group(dir.path(), "a", &[report(10, 1.0, true)]);
    let mut wide = report(20, 4.0, true);
    wide.dims = vec![4, 16];
    for c in &mut wide.tasks[0].cells {
        c.dim = 16;
    }
    let b = group(dir.path(), "wide", &[wide]);
    let shared = compare(&a, &b, Some(BOOT), DimPairing::Shared).unwrap();
    assert!(shared[0].dims.is_empty(), "{:?}", shared[0].dims);
    let mut all = vec![compare(&a, &b, Some(BOOT), DimPairing::Full).unwrap()];
    correct(&mut all);
    let c = all[0][0].cell(2, 8).unwrap();
    assert_eq!((c.dim, c.other_dim), (8, 16));
    let want = b.reports[0].tasks[0]
        .main(2, 16, Precision::Float32)
        .unwrap();
    assert!(
        (c.other - want).abs() < 1e-9 && c.significant(0.05),
        "{c:?}"
    );
    let md = nest_eval::compare::markdown(
        &a,
        &b,
        &all[0],
        nest_eval::compare::Legend {
            boot: Some(BOOT),
            alpha: 0.05,
            family: 2,
        },
    );
    assert!(md.contains("full vectors: dim 8 against 16"), "{md}");
}

/// Reports whose binary cells were re-ranked otherwise (`--rescore`; Python's `evaluate` did
/// not re-rank at all: helper trial E) are compared with a warning naming both settings, read
/// back from `report.json`; the same setting, reports without binary cells, or reports from
/// before it was recorded, without one.
#[test]
fn a_rescore_that_differs_is_said() {
    let t = tempfile::tempdir().unwrap();
    let with = |rescore: Option<usize>, p: Precision| Report {
        rescore,
        precisions: vec![Precision::Float32, p],
        ..report(1, 0.5, true)
    };
    let b = Precision::Binary;
    let g = |name: &str, r: Report| group(t.path(), name, &[r]);
    let notes = |x: Report, y: Report| nest_eval::compare::setting_notes(&g("a", x), &g("b", y));
    let n = notes(with(Some(4), b), with(Some(0), b));
    assert_eq!(n.len(), 1);
    assert!(n[0].contains("a with rescore [4], b with [0]"), "{n:?}");
    assert!(notes(with(Some(4), b), with(Some(4), b)).is_empty());
    assert!(notes(with(None, b), with(Some(0), b)).is_empty());
    assert!(notes(
        with(Some(4), Precision::Int8),
        with(Some(0), Precision::Int8)
    )
    .is_empty());
}
