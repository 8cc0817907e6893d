"""`nest.mteb`'s local pair-classification and classification tasks: read as `nest eval` reads
the same files, and scored by MTEB 2's own evaluators with `nest eval`'s figures.

- Pair classification (MRPC test, a SICK-E cut): MTEB's cosine AP, accuracy and F1 (for int8
  its model-similarity ones: the index's dot product) against nest eval's `ap`, `accuracy`,
  `f1` at float32, int8 and binary, within 0.01 points. Binary scores are tied by the hundred
  (at most 65 values at dim 64), so this also pins the threshold rule both share (MTEB 2's:
  never between two equal scores).
- Classification (TweetEval emotion): with nest eval's protocol (the whole train split, one
  fit, standardised vectors, `LogisticRegression(max_iter=100)`), MTEB's accuracy and macro-F1
  are nest eval's to less than one test example; with MTEB's (10 draws of 8 per label) the
  task runs the draws MTEB's defaults say.

Needs `mteb` (2.x), models/all-MiniLM-L6-v2, ../shared/datasets and the `nest` binary (as
test_mteb.py; skipped with the reason when missing, failing under CI). About 2 minutes on 2
cores: one `nest eval --tasks cls,pair` run at one point, and MTEB's runs.

    scripts/setup/python_test.sh python/tests/test_mteb_tasks.py
"""

import json
import os
import subprocess

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from support import ROOT, MODEL, DATA, need_model, need_data, need_module, nest_bin  # noqa: E402

mteb = need_module("mteb", "pip install 'mteb>=2'")

import nest  # noqa: E402

try:
    import nest.mteb as nm  # noqa: E402
except ModuleNotFoundError:  # an installed wheel older than nest/mteb.py: the source file
    nest.__path__.insert(0, str(ROOT / "python" / "nest"))
    import nest.mteb as nm  # noqa: E402

need_model()
for rel in ("mrpc/test.tsv", "sick-e/test.tsv", "tweeteval-emotion/train.tsv", "banking77/train.tsv"):
    need_data(rel)

LAYER, DIM = 3, 64


@pytest.fixture(scope="module")
def data_root(tmp_path_factory):
    """A data root for `nest eval --tasks cls,pair`: MRPC test and TweetEval emotion whole, the
    first 300 rows of the other default sets (nest eval reads every default set of a family)."""
    root = tmp_path_factory.mktemp("data")
    for name in ("mrpc", "tweeteval-emotion"):
        (root / name).symlink_to(DATA / name, target_is_directory=True)
    for name, files in (("banking77", ("train", "test")), ("wic", ("test",)), ("sick-e", ("test",))):
        (root / name).mkdir()
        for f in files:
            lines = (DATA / name / f"{f}.tsv").read_text(encoding="utf-8").splitlines()[:301]
            (root / name / f"{f}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def cells(data_root, tmp_path_factory):
    """(task, precision) -> metrics of one `nest eval --tasks cls,pair` run at (3, 64)."""
    out = tmp_path_factory.mktemp("nest-eval")
    cmd = [
        str(nest_bin()), "eval", "--model", str(MODEL), "--data-root", str(data_root),
        "--tasks", "cls,pair", "--layers", str(LAYER), "--dims", str(DIM),
        "--precision", "float32,int8,binary", "--dtype", "float32", "--latency-texts", "0",
        "--no-items", "--out", str(out),
    ]  # fmt: skip
    subprocess.run(cmd, check=True, cwd=ROOT, capture_output=True, timeout=600)
    report = json.loads((out / "report.json").read_text())
    return {(t["task"], c["precision"]): c["metrics"] for t in report["tasks"] for c in t["cells"]}


@pytest.fixture(scope="module")
def encoder():
    return nest.Encoder(str(MODEL), dtype="float32")


def run(model, task):
    res = mteb.evaluate(model, task, cache=None, show_progress_bar=False, co2_tracker=False)
    (entry,) = res.task_results[0].scores["test"]
    return entry


# -- pair classification ------------------------------------------------------------------------


def test_pair_task_reads_both_layouts_as_nest_eval():
    mrpc = nm.local_pair_classification_task(DATA / "mrpc" / "test.tsv", "MRPC")
    mrpc.load_data()
    ds = mrpc.dataset["test"]
    assert len(ds) == 1725 and sum(ds["labels"]) == 1147  # MRPC test: 1147 paraphrases
    assert mrpc.metadata.main_score == "max_ap" and mrpc.metadata.type == "PairClassification"
    sick = nm.local_pair_classification_task(DATA / "sick-e" / "test.tsv", "SICK-E")
    sick.load_data()
    rows = (DATA / "sick-e" / "test.tsv").read_text(encoding="utf-8").splitlines()[1:]
    entail = sum(r.split("\t")[2] == "entailment" for r in rows if r)
    assert len(sick.dataset["test"]) == 4927 and sum(sick.dataset["test"]["labels"]) == entail


def test_pair_task_errors_name_the_file_and_line(tmp_path):
    bad = tmp_path / "p.tsv"
    bad.write_text("sentence1\tsentence2\tlabel\na\tb\t1\nc\td\tyes\n")
    with pytest.raises(ValueError, match=r"p.tsv:3: label 'yes' is not 0 or 1"):
        nm.local_pair_classification_task(bad, "P")
    bad.write_text("s1\ts2\tlabel\na\tb\t1\n")
    with pytest.raises(ValueError, match=r"p.tsv:1: expected a header sentence1<TAB>sentence2<TAB>label or premise"):
        nm.local_pair_classification_task(bad, "P")
    bad.write_text("sentence1\tsentence2\tlabel\na\tb\n")
    with pytest.raises(ValueError, match=r"p.tsv:2: expected 3 tab-separated fields, got 2"):
        nm.local_pair_classification_task(bad, "P")


@pytest.mark.parametrize("precision", ["float32", "int8", "binary"])
@pytest.mark.parametrize("task", ["mrpc/test", "sick-e/test"])
def test_mteb_pair_classification_matches_nest_eval(task, precision, encoder, data_root, cells):
    folder = task.split("/")[0]
    model = nm.NestEncoder(encoder, layer=LAYER, dim=DIM, precision=precision)
    entry = run(model, nm.local_pair_classification_task(data_root / folder / "test.tsv", folder))
    key = "similarity" if precision == "int8" else "cosine"
    theirs = cells[(task, precision)]
    got = {m: 100 * entry[f"{key}_{m}"] for m in ("ap", "accuracy", "f1")}
    print(f"\n{task} {precision}: MTEB {got}, nest eval {[theirs[m] for m in got]}")
    for m, ours in got.items():
        assert abs(ours - theirs[m]) < 0.01, (m, ours, theirs[m])


# -- classification ---------------------------------------------------------------------------


def test_local_banking77_is_mteb_s_task_on_the_local_files():
    task = nm.LocalBanking77(DATA)
    task.load_data()
    assert {k: len(v) for k, v in task.dataset.items()} == {"train": 10003, "test": 3080}
    assert len(set(task.dataset["train"]["label"])) == 77
    assert task.metadata.name == "Banking77Classification"
    assert (task.samples_per_label, task.n_experiments) == (8, 10)
    assert task.metadata.main_score == "accuracy"


def test_classification_task_errors(tmp_path):
    f = tmp_path / "c.tsv"
    f.write_text("text\tlabel\nhello\tgreeting\nbye\t \n")
    with pytest.raises(ValueError, match=r"c.tsv:3: empty label"):
        nm.local_classification_task(f, f, "C")
    with pytest.raises(ValueError, match=r"samples_per_label: expected a positive integer, got 0"):
        nm.local_classification_task(f, f, "C", samples_per_label=0)
    with pytest.raises(ValueError, match=r"split: 'train' names the training file"):
        nm.local_classification_task(f, f, "C", split="train")


def test_mteb_classification_with_nest_eval_s_protocol_matches_it(encoder, cells):
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    folder = DATA / "tweeteval-emotion"
    task = nm.local_classification_task(
        folder / "train.tsv", folder / "test.tsv", "TweetEvalEmotion",
        samples_per_label=10**9, n_experiments=1,
        evaluator_model=make_pipeline(StandardScaler(), LogisticRegression(max_iter=100)),
    )  # fmt: skip
    entry = run(nm.NestEncoder(encoder, layer=LAYER, dim=DIM), task)
    theirs = cells[("tweeteval-emotion", "float32")]
    one_example = 100 / 1421
    print(f"\nTweetEval emotion: MTEB {100 * entry['accuracy']:.4f} / {100 * entry['f1']:.4f}, "
          f"nest eval {theirs['accuracy']:.4f} / {theirs['macro_f1']:.4f}")  # fmt: skip
    assert abs(100 * entry["accuracy"] - theirs["accuracy"]) < one_example
    assert abs(100 * entry["f1"] - theirs["macro_f1"]) < 0.5


def test_mteb_classification_protocol_draws_per_label(encoder):
    folder = DATA / "tweeteval-emotion"
    task = nm.local_classification_task(folder / "train.tsv", folder / "test.tsv", "TweetEvalEmotion",
                                        samples_per_label=8, n_experiments=3)  # fmt: skip
    entry = run(nm.NestEncoder(encoder, layer=LAYER, dim=DIM), task)
    runs = entry["scores_per_experiment"]
    assert len(runs) == 3
    assert entry["accuracy"] == pytest.approx(sum(r["accuracy"] for r in runs) / 3)
    # 32 training texts (8 for each of 4 emotions) reach less than the whole split's 62
    assert 0.25 < entry["accuracy"] < 0.62
