"""MTEB tasks read from local files instead of the Hugging Face hub, each read as ``nest eval``
reads the same file (nest-core's readers) and scored by MTEB's own evaluator: STS, retrieval
(BEIR folders), pair classification and classification. Re-exported by ``nest.mteb``, which
documents them; ``mteb`` (2.x) is imported on first use."""

from __future__ import annotations

import csv
import hashlib
import json
import os
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

__all__ = [
    "LocalSTSB",
    "local_sts_task",
    "LocalSciFact",
    "local_retrieval_task",
    "local_pair_classification_task",
    "local_classification_task",
    "LocalBanking77",
]


def _mteb():
    try:
        import mteb  # noqa: PLC0415  (lazy: nest does not depend on mteb)
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "nest.mteb needs the `mteb` package (2.x): pip install 'mteb>=2'"
        ) from e
    return mteb


def _default_data_root() -> Path:
    """``$NEST_DATA_ROOT``, else ``../shared/datasets`` (``nest eval``'s default, relative to the
    working directory), else the one beside this source tree."""
    env = os.environ.get("NEST_DATA_ROOT")
    if env:
        return Path(env)
    cwd_root = Path("..") / "shared" / "datasets"
    if cwd_root.is_dir():
        return cwd_root
    return Path(__file__).resolve().parents[2].parent / "shared" / "datasets"


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _local_task(base, kind: str, name: str, metadata, dataset, doc: str, **attrs):
    """An instance of a new subclass of MTEB's ``base`` task class (named ``Local<kind>_<name>``)
    with ``metadata``, whose ``load_data`` sets ``dataset()`` once, and ``attrs``."""

    def load_data(self, num_proc=None, *, timer=None, **kwargs):
        if self.data_loaded:
            return
        self.dataset = dataset()
        self.data_loaded = True

    cls_name = f"Local{kind}_{''.join(c if c.isalnum() else '_' for c in name)}"
    return type(cls_name, (base,), {"metadata": metadata, "load_data": load_data, "__doc__": doc, **attrs})()


def _tsv_rows(path: Path, layouts: Sequence[Sequence[str]]) -> Tuple[int, List[Tuple[int, List[str]]]]:
    """A tab-separated file with a header row and no quoting, as nest-core's ``TsvTable`` reads
    it: the header begins with one of ``layouts``' column names (extra trailing columns are
    allowed). Returns the layout's index and (line number, fields) per non-empty row."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    with open(path, encoding="utf-8", newline="") as f:
        rows = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = [h.lstrip("\ufeff") for h in next(rows, [])]
        for k, cols in enumerate(layouts):
            if header[: len(cols)] == list(cols):
                break
        else:
            want = " or ".join("<TAB>".join(cols) for cols in layouts)
            raise ValueError(f"{path}:1: expected a header {want}, got {'<TAB>'.join(header)!r}")
        out = []
        for i, row in enumerate(rows, start=2):
            if not row:
                continue
            if len(row) < len(layouts[k]):
                raise ValueError(f"{path}:{i}: expected {len(layouts[k])} tab-separated fields, got {len(row)}")
            out.append((i, row))
    if not out:
        raise ValueError(f"{path}: no rows after the header")
    return k, out


def _local_metadata(name, path, sha, description, kind, split, languages, category="t2t"):
    """A local task's ``TaskMetadata``: ``kind`` is (MTEB's task type, its main score); the
    revision ``sha256:<first 16 hex digits of sha>``; the fields MTEB asks for and a local file
    cannot say, None."""
    from mteb.abstasks.task_metadata import TaskMetadata  # noqa: PLC0415

    return TaskMetadata(
        name=name,
        dataset={"path": str(path), "revision": f"sha256:{sha[:16]}"},
        description=description,
        reference=None,
        type=kind[0],
        category=category,
        modalities=["text"],
        eval_splits=[split],
        eval_langs=list(languages),
        main_score=kind[1],
        date=None,
        domains=None,
        task_subtypes=None,
        license=None,
        annotations_creators=None,
        dialect=None,
        sample_creation=None,
        bibtex_citation=None,
    )


def _read_sts_tsv(path: Path) -> Dict[str, list]:
    """sentence1, sentence2, score (a float)."""
    _, rows = _tsv_rows(path, [("sentence1", "sentence2", "score")])
    out: Dict[str, list] = {"sentence1": [], "sentence2": [], "score": []}
    for i, row in rows:
        try:
            score = float(row[2])
        except ValueError:
            raise ValueError(f"{path}:{i}: score {row[2]!r} is not a number") from None
        out["sentence1"].append(row[0])
        out["sentence2"].append(row[1])
        out["score"].append(score)
    return out


def local_sts_task(
    path: Union[str, os.PathLike],
    name: str,
    *,
    split: str = "test",
    min_score: float = 0,
    max_score: float = 5,
    description: Optional[str] = None,
    languages: Sequence[str] = ("eng-Latn",),
):
    """An MTEB STS task (``AbsTaskSTS``) read from a local TSV (sentence1, sentence2, score with
    a header row, tab-separated, no quoting) instead of the Hugging Face hub.

    Main score ``cosine_spearman``; gold scores are normalised with ``min_score``/``max_score``
    as MTEB does (which does not change a Spearman). The dataset revision recorded in results is
    ``sha256:<first 16 hex digits of the file's sha256>``. Returns a task instance."""
    _mteb()
    from datasets import Dataset, DatasetDict  # noqa: PLC0415
    from mteb.abstasks.sts import AbsTaskSTS  # noqa: PLC0415

    path = Path(path)
    data = _read_sts_tsv(path)
    metadata = _local_metadata(
        name,
        path,
        _file_sha256(path),
        description or f"STS pairs read from the local file {path.name} (Nest).",
        ("STS", "cosine_spearman"),
        split,
        languages,
    )

    return _local_task(
        AbsTaskSTS,
        "STS",
        name,
        metadata,
        lambda: DatasetDict({split: Dataset.from_dict(data)}),
        f"Local STS task {name!r} from {path}.",
        min_score=min_score,
        max_score=max_score,
    )


def LocalSTSB(data_root: Union[str, os.PathLike, None] = None, split: str = "test"):
    """MTEB's STSBenchmark read from ``<data_root>/stsb/<split>.tsv`` (default data root:
    ``$NEST_DATA_ROOT``, else ``../shared/datasets`` as ``nest eval``): the same 1379 test
    pairs, scored as MTEB scores them, with no download. Task name ``STSBenchmark``, as
    ``export_results`` names ``nest eval``'s ``stsb/test``."""
    root = Path(data_root) if data_root is not None else _default_data_root()
    return local_sts_task(
        root / "stsb" / f"{split}.tsv",
        "STSBenchmark",
        split=split,
        min_score=0,
        max_score=5,
        description="Semantic Textual Similarity Benchmark (STSbenchmark), read from a local "
        "file (SemEval-2017 sts-test.csv; the pairs MTEB's STSBenchmark scores).",
    )


def _read_jsonl(path: Path, what: str, fields: Sequence[str]) -> List[Dict[str, Any]]:
    """One JSON object per non-empty line, each with string ``_id`` (or a number) and ``text``."""
    rows: List[Dict[str, Any]] = []
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{i}: expected a JSON object per line ({what}): {e}") from None
            if not isinstance(obj, dict) or not isinstance(obj.get("_id", obj.get("id")), (str, int)):
                raise ValueError(f"{path}:{i}: expected {{\"_id\": string, {', '.join(fields)}}}")
            if not isinstance(obj.get("text"), str):
                raise ValueError(f"{path}:{i}: expected a string field \"text\"")
            obj["_id"] = str(obj.get("_id", obj.get("id")))
            rows.append(obj)
    return rows


def _read_beir(folder: Path, split: str) -> Dict[str, Any]:
    """A BEIR folder as ``nest eval`` reads it (nest-core's ``data/beir.rs``): the corpus and the
    queries in file order, the first of duplicate ids kept; the queries with a relevant document;
    qrels as ``{query: {doc: relevance > 0}}`` (query-id, corpus-id, score; a header row)."""
    files = [folder / "corpus.jsonl", folder / "queries.jsonl", folder / "qrels" / f"{split}.tsv"]
    for f in files:
        if not f.is_file():
            raise FileNotFoundError(f"{f}: no such file (a BEIR folder has corpus.jsonl, queries.jsonl, qrels/<split>.tsv)")
    qrels: Dict[str, Dict[str, int]] = {}
    with open(files[2], encoding="utf-8", newline="") as f:
        rows = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        next(rows, None)
        for i, row in enumerate(rows, start=2):
            if not row:
                continue
            try:
                score = int(float(row[2]))
            except (IndexError, ValueError):
                raise ValueError(f"{files[2]}:{i}: expected query-id<TAB>corpus-id<TAB>score, got {row}") from None
            if score > 0:
                qrels.setdefault(row[0], {})[row[1]] = score
    corpus: Dict[str, Tuple[str, str]] = {}
    for d in _read_jsonl(files[0], "corpus", ['"title"?: string', '"text": string']):
        corpus.setdefault(d["_id"], (d.get("title") or "", d["text"]))
    queries: Dict[str, str] = {}
    for q in _read_jsonl(files[1], "queries", ['"text": string']):
        queries.setdefault(q["_id"], q["text"])
    judged = [q for q in queries if q in qrels]
    if not judged:
        raise ValueError(f"{files[2]}: no query of {files[1]} has a relevant document")
    return {
        "corpus": corpus,
        "queries": {q: queries[q] for q in judged},
        "relevant_docs": {q: qrels[q] for q in judged},
        "sha": hashlib.sha256("".join(_file_sha256(f) for f in files).encode()).hexdigest(),
    }


def local_retrieval_task(
    folder: Union[str, os.PathLike],
    name: str,
    *,
    split: str = "test",
    description: Optional[str] = None,
    languages: Sequence[str] = ("eng-Latn",),
):
    """An MTEB retrieval task (``AbsTaskRetrieval``) read from a local BEIR folder
    (``corpus.jsonl`` with ``_id``, ``title``, ``text``; ``queries.jsonl``; ``qrels/<split>.tsv``)
    instead of the Hugging Face hub: the corpus and queries ``nest eval`` reads from it (a
    document is its title and text joined by a space, in both), scored by MTEB's own evaluator.

    Main score ``ndcg_at_10``. The dataset revision recorded in results is ``sha256:<first 16 hex
    digits>`` of the three files' digests. Returns a task instance."""
    _mteb()
    from datasets import Dataset  # noqa: PLC0415
    from mteb.abstasks.retrieval import AbsTaskRetrieval  # noqa: PLC0415

    folder = Path(folder)
    data = _read_beir(folder, split)
    metadata = _local_metadata(
        name,
        folder,
        data["sha"],
        description or f"Retrieval read from the local BEIR folder {folder.name} (Nest).",
        ("Retrieval", "ndcg_at_10"),
        split,
        languages,
    )

    def dataset():
        corpus = data["corpus"]
        return {
            "default": {
                split: {
                    "corpus": Dataset.from_dict({
                        "id": list(corpus),
                        "title": [t for t, _ in corpus.values()],
                        "text": [x for _, x in corpus.values()],
                    }),
                    "queries": Dataset.from_dict({"id": list(data["queries"]), "text": list(data["queries"].values())}),
                    "relevant_docs": data["relevant_docs"],
                    "top_ranked": None,
                }
            }
        }  # fmt: skip

    return _local_task(
        AbsTaskRetrieval, "Retrieval", name, metadata, dataset, f"Local retrieval task {name!r} from {folder}."
    )


def LocalSciFact(data_root: Union[str, os.PathLike, None] = None, split: str = "test"):
    """MTEB's SciFact read from ``<data_root>/scifact`` (default data root: ``$NEST_DATA_ROOT``,
    else ``../shared/datasets`` as ``nest eval``): BEIR's corpus (5183 abstracts) and the 300
    judged test queries, scored as MTEB scores them, with no download. Task name ``SciFact``, as
    ``export_results`` names ``nest eval``'s ``scifact/test``."""
    root = Path(data_root) if data_root is not None else _default_data_root()
    return local_retrieval_task(
        root / "scifact",
        "SciFact",
        split=split,
        description="SciFact (BEIR): scientific claims against paper abstracts, read from a local "
        "BEIR folder (the corpus, queries and qrels MTEB's SciFact scores).",
    )


def _read_pair_tsv(path: Path) -> Dict[str, list]:
    """sentence1, sentence2, label (0 or 1; MRPC, WiC, extra columns allowed), or premise,
    hypothesis, label (entailment vs neutral or contradiction: SICK-E), as nest eval reads it."""
    nli, rows = _tsv_rows(path, [("sentence1", "sentence2", "label"), ("premise", "hypothesis", "label")])
    names = {"entailment": 1, "neutral": 0, "contradiction": 0} if nli else {"0": 0, "1": 1}
    out: Dict[str, list] = {"sentence1": [], "sentence2": [], "labels": []}
    for i, row in rows:
        label = names.get(row[2].strip())
        if label is None:
            raise ValueError(f"{path}:{i}: label {row[2]!r} is not {' or '.join(names)}")
        out["sentence1"].append(row[0])
        out["sentence2"].append(row[1])
        out["labels"].append(label)
    return out


def local_pair_classification_task(
    path: Union[str, os.PathLike],
    name: str,
    *,
    split: str = "test",
    description: Optional[str] = None,
    languages: Sequence[str] = ("eng-Latn",),
):
    """An MTEB pair-classification task (``AbsTaskPairClassification``) read from a local TSV:
    ``sentence1, sentence2, label`` with labels 0/1 (MRPC, WiC; extra columns allowed), or
    ``premise, hypothesis, label`` read as entailment (1) against neutral and contradiction (0)
    (SICK-E), the pairs ``nest eval --tasks pair`` scores.

    Main score ``max_ap`` (MTEB's: the best average precision over cosine, dot, Euclidean,
    Manhattan and the model's similarity); ``cosine_ap``, ``cosine_accuracy`` and
    ``cosine_f1`` are ``nest eval``'s ``ap``, ``accuracy`` and ``f1``. Returns a task instance."""
    _mteb()
    from datasets import Dataset, DatasetDict  # noqa: PLC0415
    from mteb.abstasks.pair_classification import AbsTaskPairClassification  # noqa: PLC0415

    path = Path(path)
    data = _read_pair_tsv(path)
    metadata = _local_metadata(
        name,
        path,
        _file_sha256(path),
        description or f"Sentence pairs with binary labels read from the local file {path.name} (Nest).",
        ("PairClassification", "max_ap"),
        split,
        languages,
    )

    return _local_task(
        AbsTaskPairClassification,
        "PairClassification",
        name,
        metadata,
        lambda: DatasetDict({split: Dataset.from_dict(data)}),
        f"Local pair classification {name!r} from {path}.",
    )


def _read_classification_tsv(path: Path) -> Dict[str, list]:
    """text, label (the class name, not empty), as nest eval reads it."""
    _, rows = _tsv_rows(path, [("text", "label")])
    out: Dict[str, list] = {"text": [], "label": []}
    for i, row in rows:
        if not row[1].strip():
            raise ValueError(f"{path}:{i}: empty label")
        out["text"].append(row[0])
        out["label"].append(row[1])
    return out


def local_classification_task(
    train: Union[str, os.PathLike],
    test: Union[str, os.PathLike],
    name: str,
    *,
    split: str = "test",
    samples_per_label: int = 8,
    n_experiments: int = 10,
    evaluator_model: Any = None,
    description: Optional[str] = None,
    languages: Sequence[str] = ("eng-Latn",),
):
    """An MTEB classification task (``AbsTaskClassification``) read from two local TSVs (``text,
    label``, the label a class name): a classifier fitted on vectors of the ``train`` file
    scores the ``test`` file (its split named ``split``).

    The protocol is MTEB's unless changed: ``n_experiments`` draws of ``samples_per_label``
    training texts per class (MTEB's seeded draw over the file's row order), scikit-learn's
    ``LogisticRegression(max_iter=100)`` on the raw vectors (``evaluator_model``: any
    scikit-learn classifier), accuracy averaged over the draws (main score). ``nest eval --tasks
    cls`` fits once on the whole train split, on standardised vectors: ``samples_per_label``
    above the largest class, ``n_experiments=1`` and ``make_pipeline(StandardScaler(),
    LogisticRegression(max_iter=100))`` give its protocol. Returns a task instance."""
    _mteb()
    from datasets import Dataset, DatasetDict  # noqa: PLC0415
    from mteb.abstasks.classification import AbsTaskClassification  # noqa: PLC0415

    if split == "train":
        raise ValueError("split: 'train' names the training file; give the test split another name")
    for key, v in (("samples_per_label", samples_per_label), ("n_experiments", n_experiments)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{key}: expected a positive integer, got {v!r}")
    train, test = Path(train), Path(test)
    data = {"train": _read_classification_tsv(train), split: _read_classification_tsv(test)}
    sha = hashlib.sha256((_file_sha256(train) + _file_sha256(test)).encode()).hexdigest()
    metadata = _local_metadata(
        name,
        test.parent,
        sha,
        description or f"Texts with class names read from the local files {train.name} and {test.name} (Nest).",
        ("Classification", "accuracy"),
        split,
        languages,
        category="t2c",
    )

    attrs: Dict[str, Any] = {"samples_per_label": samples_per_label, "n_experiments": n_experiments}
    if evaluator_model is not None:
        attrs["evaluator_model"] = evaluator_model
    return _local_task(
        AbsTaskClassification,
        "Classification",
        name,
        metadata,
        lambda: DatasetDict({k: Dataset.from_dict(v) for k, v in data.items()}),
        f"Local classification {name!r} from {train} and {test}.",
        **attrs,
    )


def LocalBanking77(data_root: Union[str, os.PathLike, None] = None):
    """MTEB's Banking77Classification read from ``<data_root>/banking77`` (default data root:
    ``$NEST_DATA_ROOT``, else ``../shared/datasets``): the same 10,003 training and 3,080 test
    queries with their 77 intents, scored with MTEB's protocol for it (10 draws of 8 queries per
    intent, logistic regression), with no download. The draws follow this file's row order, so
    one run's figure can differ from a run on the hub's copy by the spread between draws."""
    root = Path(data_root) if data_root is not None else _default_data_root()
    return local_classification_task(
        root / "banking77" / "train.tsv",
        root / "banking77" / "test.tsv",
        "Banking77Classification",
        description="Online banking queries annotated with their intents (Banking77), read from "
        "local files (the train and test splits MTEB's Banking77Classification scores).",
    )
