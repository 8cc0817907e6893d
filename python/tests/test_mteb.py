"""`nest.mteb`: MTEB 2 runs a Nest encoder at a (layer, dim) point on a local task, with the
score `nest eval` gives (within 0.01 points: STS-B's Spearman at float32, int8 and binary
precision, and nDCG@10 on a SciFact subset), and `nest eval` reports exported to MTEB's results format read back by mteb's own
loader (`ResultCache.load_results`).

Needs `mteb` (2.x), models/all-MiniLM-L6-v2, ../shared/datasets and, for the comparisons with
`nest eval`, the `nest` binary (target/release/nest, else target/debug/nest, or $NEST_BIN);
each is skipped with the reason when missing, and fails under CI (support.py). Run from the
repository root:

    scripts/setup/python_test.sh python/tests/test_mteb.py

About 3-4 minutes on 2 busy cores, most of it one `nest eval --tasks sts` run and one
`nest eval --tasks retrieval` run on a SciFact subset, each shared by its tests.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from support import ROOT, MODEL, DATA, need_model, need_data, need_module, nest_bin  # noqa: E402

mteb = need_module("mteb", "pip install 'mteb>=2'")
if int(mteb.__version__.split(".")[0]) < 2:
    from support import missing  # noqa: E402

    missing(f"nest.mteb needs mteb 2.x, found {mteb.__version__}")

import nest  # noqa: E402

SRC = ROOT / "python" / "nest"

# An installed wheel built before nest/mteb.py existed: test the source file (it is pure Python)
# with the installed extension, rather than rebuilding the wheel.
try:
    import nest.mteb as nm  # noqa: E402
except ModuleNotFoundError:
    nest.__path__.insert(0, str(SRC))
    import nest.mteb as nm  # noqa: E402

POINTS = [(6, 384), (3, 64)]

need_model()
need_data("stsb/test.tsv")
need_data("sick-r/test.tsv")


@pytest.fixture(scope="module")
def report_path(tmp_path_factory):
    """One `nest eval` run of the sts family (STS-B test, SICK-R test) at layers 3,6 x dims 64,384
    x precisions float32,int8,binary, in float32 arithmetic."""
    out = tmp_path_factory.mktemp("nest-eval")
    cmd = [
        str(nest_bin()), "eval", "--model", str(MODEL), "--data-root", str(DATA),
        "--tasks", "sts", "--layers", "3,6", "--dims", "64,384",
        "--precision", "float32,int8,binary", "--dtype", "float32", "--latency-texts", "0",
        "--no-items", "--out", str(out),
    ]  # fmt: skip
    subprocess.run(cmd, check=True, cwd=ROOT, capture_output=True, timeout=600)
    return out / "report.json"


@pytest.fixture(scope="module")
def report(report_path):
    return json.loads(report_path.read_text())


def cells(report):
    """(task, layer, dim, precision) -> metrics."""
    return {
        (t["task"], c["layer"], c["dim"], c["precision"]): c["metrics"]
        for t in report["tasks"]
        for c in t["cells"]
    }


@pytest.fixture(scope="module")
def encoder():
    return nest.Encoder(str(MODEL), dtype="float32")


# -- the local task ---------------------------------------------------------------------------


def test_local_stsb_reads_every_pair_unquoted():
    task = nm.LocalSTSB(DATA)
    task.load_data()
    ds = task.dataset["test"]
    assert len(ds) == 1379  # csv's default quoting would merge rows at the 50 '"'s: 1119
    assert sum('"' in s for s in list(ds["sentence1"]) + list(ds["sentence2"])) > 0
    assert min(ds["score"]) == 0 and max(ds["score"]) == 5
    assert task.metadata.name == "STSBenchmark"
    assert task.metadata.main_score == "cosine_spearman"
    assert task.metadata.revision.startswith("sha256:")


@pytest.mark.parametrize("layer,dim", POINTS)
def test_mteb_local_task_matches_nest_eval(layer, dim, encoder, report):
    model = nm.NestEncoder(encoder, layer=layer, dim=dim)
    assert isinstance(model, mteb.models.EncoderProtocol)
    meta = model.mteb_model_meta
    assert meta.name == f"nest/all-MiniLM-L6-v2@layer{layer}-dim{dim}"
    assert meta.embed_dim == dim

    res = mteb.evaluate(model, nm.LocalSTSB(DATA), cache=None, show_progress_bar=False,
                        co2_tracker=False)  # fmt: skip
    ours = 100 * res.task_results[0].get_score()
    theirs = cells(report)[("stsb/test", layer, dim, "float32")]["spearman"]
    print(f"\nSTS-B test at (layer {layer}, dim {dim}): MTEB {ours:.4f}, nest eval {theirs:.4f}")
    assert abs(ours - theirs) < 0.01


@pytest.mark.parametrize("precision", ["int8", "binary"])
def test_mteb_scores_stored_precisions_as_nest_eval(precision, encoder, report):
    """int8: MTEB's score with the model's own similarity (the dot product of the dequantised
    codes, the index's estimate) is nest eval's int8 cell; binary: the cosine of the ±1 vectors
    (MTEB's main score) is nest eval's Hamming-ranked binary cell."""
    model = nm.NestEncoder(encoder, layer=3, dim=64, precision=precision)
    meta = model.mteb_model_meta
    assert meta.name == f"nest/all-MiniLM-L6-v2@layer3-dim64-{precision}"
    assert meta.similarity_fn_name.value == ("dot" if precision == "int8" else "cosine")
    assert meta.loader_kwargs["precision"] == precision
    res = mteb.evaluate(model, nm.LocalSTSB(DATA), cache=None, show_progress_bar=False,
                        co2_tracker=False)  # fmt: skip
    (entry,) = res.task_results[0].scores["test"]
    ours = 100 * entry["spearman" if precision == "int8" else "cosine_spearman"]
    theirs = cells(report)[("stsb/test", 3, 64, precision)]["spearman"]
    float32 = cells(report)[("stsb/test", 3, 64, "float32")]["spearman"]
    print(f"\nSTS-B test at (3, 64) {precision}: MTEB {ours:.4f}, nest eval {theirs:.4f} (float32 {float32:.4f})")
    assert abs(ours - theirs) < 0.01
    if precision == "binary":
        assert abs(ours - float32) > 0.1  # the sign bits are scored, not the float vectors


def test_encoder_refuses_a_precision_it_does_not_score(encoder):
    with pytest.raises(ValueError, match=r"same codes as int8 / binary"):
        nm.NestEncoder(encoder, precision="ubinary")
    with pytest.raises(ValueError, match=r"expected one of float32, int8, binary, got 'int4'"):
        nm.NestEncoder(encoder, precision="int4")


# -- the local retrieval task -----------------------------------------------------------------


@pytest.fixture(scope="module")
def scifact_subset(tmp_path_factory):
    """A BEIR folder cut from SciFact, as ``<root>/scifact`` (``nest eval --data-root``): its
    first 30 judged test queries, their relevant abstracts and the corpus's first 150."""
    need_data("scifact/corpus.jsonl")
    src, root = DATA / "scifact", tmp_path_factory.mktemp("beir")
    dst = root / "scifact"
    (dst / "qrels").mkdir(parents=True)
    qrels = (src / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()
    qids = list(dict.fromkeys(r.split("\t")[0] for r in qrels[1:] if r))[:30]
    kept = [r for r in qrels[1:] if r and r.split("\t")[0] in qids]
    relevant = {r.split("\t")[1] for r in kept}
    (dst / "qrels" / "test.tsv").write_text("\n".join([qrels[0], *kept]) + "\n", encoding="utf-8")
    docs = (src / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    docs = [d for i, d in enumerate(docs) if i < 150 or json.loads(d)["_id"] in relevant]
    (dst / "corpus.jsonl").write_text("\n".join(docs) + "\n", encoding="utf-8")
    queries = (src / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    queries = [q for q in queries if q and json.loads(q)["_id"] in qids]
    (dst / "queries.jsonl").write_text("\n".join(queries) + "\n", encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def retrieval_report(scifact_subset, tmp_path_factory):
    """One `nest eval --tasks retrieval` run over the subset at layers 3,6 x dims 64,384."""
    out = tmp_path_factory.mktemp("nest-eval-retrieval")
    cmd = [
        str(nest_bin()), "eval", "--model", str(MODEL), "--data-root", str(scifact_subset),
        "--tasks", "retrieval", "--layers", "3,6", "--dims", "64,384", "--precision", "float32",
        "--dtype", "float32", "--latency-texts", "0", "--no-items", "--out", str(out),
    ]  # fmt: skip
    subprocess.run(cmd, check=True, cwd=ROOT, capture_output=True, timeout=600)
    return json.loads((out / "report.json").read_text())


def test_evaluate_reranks_binary_retrieval_as_the_cli(scifact_subset, tmp_path):
    """Helper trial E: `nest.evaluate(precision="binary")` did not re-rank binary retrieval (its
    ndcg_at_10 was the CLI's ndcg_at_10_no_rescore, under the CLI's name). Now the same default
    (rescore 4), recorded in the report, and the same numbers as `nest eval`."""
    kw = dict(tasks="retrieval", data_root=str(scifact_subset), layers=[6], dims=[64], dtype="float32")
    ours = nest.evaluate(str(MODEL), precision="binary", **kw)
    off = nest.evaluate(str(MODEL), precision=["binary"], rescore=0, **kw)  # a list, as layers
    with pytest.raises(ValueError, match="'ubinary' scores as binary does"):
        nest.evaluate(str(MODEL), precision="ubinary", **kw)
    assert (ours["rescore"], off["rescore"]) == (4, 0)
    m, m0 = ours["tasks"][0]["cells"][0]["metrics"], off["tasks"][0]["cells"][0]["metrics"]
    assert "ndcg_at_10_no_rescore" in m and "ndcg_at_10_no_rescore" not in m0
    assert abs(m["ndcg_at_10_no_rescore"] - m0["ndcg_at_10"]) < 1e-9
    out = tmp_path / "cli"
    cmd = [
        str(nest_bin()), "eval", "--model", str(MODEL), "--data-root", str(scifact_subset),
        "--tasks", "retrieval", "--layers", "6", "--dims", "64", "--precision", "binary",
        "--dtype", "float32", "--latency-texts", "0", "--out", str(out),
    ]  # fmt: skip
    subprocess.run(cmd, check=True, cwd=ROOT, capture_output=True, timeout=600)
    cli = json.loads((out / "report.json").read_text())
    assert cli["rescore"] == 4
    theirs = cli["tasks"][0]["cells"][0]["metrics"]
    for k in ("ndcg_at_10", "ndcg_at_10_no_rescore"):
        assert abs(theirs[k] - m[k]) < 1e-4, (k, theirs[k], m[k])


def test_local_scifact_reads_the_beir_folder():
    need_data("scifact/corpus.jsonl")
    task = nm.LocalSciFact(DATA)
    task.load_data()
    split = task.dataset["default"]["test"]
    assert len(split["corpus"]) == 5183
    assert len(split["queries"]) == len(split["relevant_docs"]) == 300
    assert all(v > 0 for docs in split["relevant_docs"].values() for v in docs.values())
    assert task.metadata.name == "SciFact"
    assert task.metadata.main_score == "ndcg_at_10"
    assert task.metadata.revision.startswith("sha256:")


def test_local_retrieval_errors_name_the_file_and_line(tmp_path):
    (tmp_path / "qrels").mkdir()
    (tmp_path / "corpus.jsonl").write_text('{"_id": "d1", "text": "a"}\n{"_id": "d2"}\n')
    (tmp_path / "queries.jsonl").write_text('{"_id": "q1", "text": "b"}\n')
    (tmp_path / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    with pytest.raises(ValueError, match=r"corpus.jsonl:2: expected a string field"):
        nm.local_retrieval_task(tmp_path, "T")
    with pytest.raises(FileNotFoundError, match=r"qrels/dev.tsv: no such file"):
        nm.local_retrieval_task(tmp_path, "T", split="dev")


@pytest.mark.parametrize("layer,dim", POINTS)
def test_mteb_local_retrieval_matches_nest_eval(layer, dim, encoder, scifact_subset, retrieval_report):
    model = nm.NestEncoder(encoder, layer=layer, dim=dim)
    res = mteb.evaluate(model, nm.LocalSciFact(scifact_subset), cache=None, show_progress_bar=False,
                        co2_tracker=False)  # fmt: skip
    ours = 100 * res.task_results[0].get_score()
    theirs = cells(retrieval_report)[("scifact/test", layer, dim, "float32")]["ndcg_at_10"]
    print(f"\nSciFact subset at (layer {layer}, dim {dim}): MTEB nDCG@10 {ours:.4f}, nest eval {theirs:.4f}")
    assert abs(ours - theirs) < 0.01


# -- the export -------------------------------------------------------------------------------


def test_export_read_back_by_mteb(report_path, report, encoder, tmp_path):
    written = nm.export_results(report_path, tmp_path)
    grid = cells(report)
    assert len(written) == len(grid)

    res = mteb.ResultCache(tmp_path).load_results(include_remote=False)
    by_name = {m.model_name: m for m in res.model_results}
    points = {(layer, dim, prec) for (_, layer, dim, prec) in grid}
    assert len(by_name) == len(points) == 2 * 2 * 3

    revision = nm.model_revision(MODEL)
    task_names = {"stsb/test": "STSBenchmark", "sick-r/test": "Nest-sick-r"}
    for (task, layer, dim, prec), metrics in grid.items():
        name = nm.point_model_name(MODEL, layer, dim, prec)
        mr = by_name[name]
        assert mr.model_revision == revision
        kwargs = mr.model_meta.loader_kwargs
        assert (kwargs["layer"], kwargs["dim"], kwargs["precision"]) == (layer, dim, prec)
        (tr,) = [t for t in mr.task_results if t.task_name == task_names[task]]
        (entry,) = tr.scores["test"]
        assert tr.get_score() == pytest.approx(metrics["spearman"] / 100, abs=1e-6)
        assert entry["cosine_spearman"] == pytest.approx(metrics["spearman"] / 100, abs=1e-6)
        assert entry["cosine_pearson"] == pytest.approx(metrics["pearson"] / 100, abs=1e-6)

    # a live run at a float32 point is the same MTEB model as the exported cell
    live = nm.NestEncoder(encoder, layer=3, dim=64).mteb_model_meta
    assert (live.name, live.revision) == (nm.point_model_name(MODEL, 3, 64), revision)


def test_export_other_families(tmp_path):
    """Retrieval, pair and classification cells (a hand-written report: no nest eval run)."""
    rep = {
        "model": {"path": "runs/x/final", "dtype": "bf16", "max_seq_length": 256, "prompts": {}},
        "tasks": [
            {"task": "scifact/test", "kind": "retrieval", "main_metric": "ndcg_at_10",
             "files": [{"path": "c.jsonl", "sha256": "ab" * 32}], "n_examples": 300,
             "cells": [{"layer": 6, "dim": 128, "precision": "binary",
                        "metrics": {"ndcg_at_10": 61.5, "map_at_100": 55.0, "mrr_at_10": 57.25}}]},
            {"task": "mrpc/test", "kind": "pair", "main_metric": "ap", "files": [],
             "cells": [{"layer": 6, "dim": 128, "precision": "binary",
                        "metrics": {"ap": 80.5, "accuracy": 70.0, "accuracy_threshold": 0.75,
                                    "f1": 81.0, "f1_threshold": 0.5}}]},
            {"task": "banking77", "kind": "cls", "main_metric": "accuracy", "files": [],
             "cells": [{"layer": 6, "dim": 128, "precision": "binary",
                        "metrics": {"accuracy": 90.0, "macro_f1": 89.0, "logreg_iterations": 78.0}}]},
        ],
    }  # fmt: skip
    path = tmp_path / "report.json"
    path.write_text(json.dumps(rep))
    nm.export_results(path, tmp_path / "out")
    res = mteb.ResultCache(tmp_path / "out").load_results(include_remote=False)
    (mr,) = res.model_results
    assert mr.model_name == "nest/x-final@layer6-dim128-binary+bf16"
    assert mr.model_revision == "unknown"
    got = {t.task_name: t for t in mr.task_results}
    assert got["SciFact"].get_score() == pytest.approx(0.615)
    assert got["SciFact"].dataset_revision == "sha256:" + "ab" * 8
    assert got["SciFact"].scores["test"][0]["mrr_at_10"] == pytest.approx(0.5725)
    pair = got["Nest-mrpc"].scores["test"][0]
    assert got["Nest-mrpc"].get_score() == pytest.approx(0.805)
    assert pair["cosine_f1_threshold"] == pytest.approx(0.5)
    assert pair["cosine_accuracy"] == pytest.approx(0.70)
    cls = got["Nest-banking77"].scores["test"][0]
    assert got["Nest-banking77"].get_score() == pytest.approx(0.90)
    assert cls["f1"] == pytest.approx(0.89)


def test_import_does_not_need_mteb():
    code = (
        "import sys, nest\n"
        f"nest.__path__.append({str(SRC)!r})\n"
        "import nest.mteb as nm\n"
        "assert 'mteb' not in sys.modules, 'nest.mteb imported mteb eagerly'\n"
        "print(nm.point_model_name('models/m', 6, 64))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "nest/m@layer6-dim64"
