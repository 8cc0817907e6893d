"""MTEB for Nest: run `mteb` at any (layer, dim) point, offline tasks from local files, and
`nest eval` reports exported to MTEB's results format (issue 38).

    import mteb, nest.mteb as nm
    model = nm.NestEncoder("models/all-MiniLM-L6-v2", layer=3, dim=64, dtype="float32")
    res = mteb.evaluate(model, nm.LocalSTSB(), cache=None)          # ../shared/datasets/stsb/test.tsv
    res.task_results[0].get_score()                                  # cosine Spearman, 0..1

    nm.export_results("reports/minilm/report.json", "mteb-results")  # one model entry per cell
    mteb.ResultCache("mteb-results").load_results(include_remote=False)

`mteb` (2.x) is imported on first use of anything here that needs it, so `import nest.mteb`
works without it; using `NestEncoder`, `LocalSTSB`, `local_sts_task`, `LocalSciFact`,
`local_retrieval_task` or `export_results` then raises ImportError with the install command.

Names. MTEB keys results by model name (``org/name``) and revision. A point is a model of its
own here: ``nest/<model>@layer<L>-dim<D>`` (``<model>``: the last component of the model path),
``-<precision>`` appended for stored precisions other than float32 (``-int8``, ``-binary``) and
``+<dtype>`` for arithmetic other than float32 (``+bf16``). The revision is the first 12 hex
digits of a sha256 over the model folder's ``config.json`` and weight files (the same for a
live run and an export of the same folder), or ``unknown`` where the folder is not found.
``loader_kwargs`` in ``model_meta.json`` carries the point (model, layer, dim, dtype,
precision), so ``ModelMeta.load_model()`` rebuilds the encoder.
"""

from __future__ import annotations

import csv
import datetime
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

__all__ = [
    "NestEncoder",
    "LocalSTSB",
    "local_sts_task",
    "LocalSciFact",
    "local_retrieval_task",
    "export_results",
    "point_model_name",
    "model_revision",
    "TASK_NAMES",
]

# nest eval task id -> (MTEB task name, split). Only where the data and the protocol are MTEB's
# own: STS-B test is the SemEval-2017 file MTEB's STSBenchmark scores (1379 pairs; nest eval's
# 82.03 at the full point is MTEB's published all-MiniLM-L6-v2 figure), SciFact is BEIR's test
# split. Every other task gets a name of its own, "Nest-<family>", so that it is never mistaken
# for MTEB's task of a similar name: MTEB's SICK-R scores all 9927 pairs (here: the 4927 of the
# test split), its classification subsamples the train split over 10 runs (nest eval: the whole
# train split, once).
TASK_NAMES: Dict[str, Tuple[str, str]] = {
    "stsb/test": ("STSBenchmark", "test"),
    "scifact/test": ("SciFact", "test"),
}



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

_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt")
_REVISION_CACHE: Dict[Tuple[str, Tuple[Tuple[str, int, int], ...]], str] = {}


def _mteb():
    try:
        import mteb  # noqa: PLC0415  (lazy: nest does not depend on mteb)
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "nest.mteb needs the `mteb` package (2.x): pip install 'mteb>=2'"
        ) from e
    return mteb


# -- names and revisions ----------------------------------------------------------------------


def point_model_name(
    model: str, layer: int, dim: int, precision: str = "float32", dtype: str = "float32"
) -> str:
    """The MTEB model name of one point: ``nest/<model>@layer<L>-dim<D>[-<precision>][+<dtype>]``.

    ``model`` is a model path or name; its last component is used."""
    name = f"nest/{_model_base(model)}@layer{int(layer)}-dim{int(dim)}"
    if precision != "float32":
        name += f"-{precision}"
    if dtype not in ("float32", None):
        name += f"+{dtype}"
    return name


def _model_base(model: str) -> str:
    """The last component of a model path; a checkpoint's generic name (``final``, ``best``,
    ``checkpoint-500``, ...) is prefixed with its parent's (``mrl-seed1-final``)."""
    parts = [p for p in Path(str(model)).parts if p not in ("/", ".", "")]
    if not parts:
        return str(model)
    base = parts[-1]
    generic = base.lower() in ("final", "best", "last", "latest", "model") or re.fullmatch(
        r"(checkpoint|step|epoch)[-_]?\d+", base.lower()
    )
    if generic and len(parts) >= 2 and parts[-2] != "..":
        base = f"{parts[-2]}-{base}"
    return base


def model_revision(model_dir: Union[str, os.PathLike, None]) -> str:
    """12 hex digits of a sha256 over ``config.json`` and the weight files of a model folder
    (names and contents), or ``"unknown"`` when it is not a folder."""
    if model_dir is None:
        return "unknown"
    p = Path(model_dir)
    if not p.is_dir():
        return "unknown"
    files = sorted(
        f
        for f in p.iterdir()
        if f.is_file() and (f.name == "config.json" or f.suffix in _WEIGHT_SUFFIXES)
    )
    if not files:
        return "unknown"
    key = (str(p.resolve()), tuple((f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in files))
    if key in _REVISION_CACHE:
        return _REVISION_CACHE[key]
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode() + b"\0")
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    rev = h.hexdigest()[:12]
    _REVISION_CACHE[key] = rev
    return rev


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _model_meta(
    *,
    name: str,
    revision: str,
    model_path: Optional[str],
    layer: int,
    dim: int,
    dtype: str,
    precision: str,
    n_parameters: Optional[int],
    max_tokens: Optional[int],
    use_instructions: bool,
):
    _mteb()
    from mteb.models.model_meta import ModelMeta  # noqa: PLC0415

    return ModelMeta(
        loader=nest_encoder_loader,
        loader_kwargs={
            "model": model_path,
            "layer": int(layer),
            "dim": int(dim),
            "dtype": dtype,
            "precision": precision,
        },
        name=name,
        revision=revision,
        release_date=None,
        languages=None,
        n_parameters=n_parameters,
        memory_usage_mb=None,
        max_tokens=max_tokens,
        embed_dim=int(dim),
        license=None,
        open_weights=None,
        public_training_code=None,
        public_training_data=None,
        # MTEB's list of frameworks has no "Nest"; Nest runs the model in libtorch.
        framework=["PyTorch"],
        reference=None,
        similarity_fn_name="cosine",
        use_instructions=use_instructions,
        training_datasets=None,
        modalities=["text"],
        model_type=["dense"],
    )


def nest_encoder_loader(model_name: str, revision: Optional[str] = None, device=None, **kwargs):
    """``ModelMeta.loader`` of the metas made here: ``kwargs`` are its ``loader_kwargs``
    (model, layer, dim, dtype, precision)."""
    model = kwargs.pop("model", None)
    if model is None:
        raise ValueError(f"{model_name}: model_meta.json records no model path (loader_kwargs.model)")
    return _build_encoder_class()(model, device=device, **kwargs)


# -- the encoder ------------------------------------------------------------------------------

_BUILT: Dict[str, Any] = {}


def _build_encoder_class():
    if "NestEncoder" in _BUILT:
        return _BUILT["NestEncoder"]
    _mteb()
    import numpy as np  # noqa: PLC0415
    from mteb.models.abs_encoder import AbsEncoder, get_prompt_name  # noqa: PLC0415
    from mteb.types import PromptType  # noqa: PLC0415

    import nest  # noqa: PLC0415

    class NestEncoder(AbsEncoder):
        """An MTEB 2 encoder (``EncoderProtocol``) running a Nest model at one (layer, dim).

        Args:
            model: a model folder (or ``org/name`` from the Hugging Face cache), or a loaded
                ``nest.Encoder``.
            layer, dim: the point (default: the full model).
            dtype: arithmetic, as ``nest.Encoder`` (``"float32"`` for figures to compare).
            max_length: tokens per text (default: the model's ``max_seq_length``).
            name: the model part of the MTEB name (default: the folder's name); the point is
                appended (``point_model_name``).
            revision: MTEB revision (default: ``model_revision`` of the folder).
            streams: batches encoded at once (default: ``nest.get_num_threads()``, the highest
                throughput).
            precision: only ``"float32"`` (stored precisions are ``nest eval``'s, exported with
                ``export_results``).

        Prompts: a prompt the model names for the task (MTEB's lookup: ``<task>-<query|document>``,
        ``<task>``, ``<type>-<query|document>``, ``<type>``, ``query``/``document``) is used;
        else queries take ``encode_query``, documents the model's ``document`` (else ``passage``,
        ``corpus``) prompt, as ``nest eval`` does; every other text ``encode`` (the model's
        default prompt, if any).
        """

        def __init__(
            self,
            model: Union[str, os.PathLike, "nest.Encoder"],
            layer: Optional[int] = None,
            dim: Optional[int] = None,
            *,
            dtype: str = "auto",
            max_length: Optional[int] = None,
            name: Optional[str] = None,
            revision: Optional[str] = None,
            streams: Optional[int] = None,
            precision: str = "float32",
            device: Optional[str] = None,
            **kwargs: Any,
        ) -> None:
            if precision != "float32":
                raise ValueError(
                    f"precision: NestEncoder gives float32 vectors, got {precision!r}; other "
                    "precisions are scored by `nest eval --precision` (export_results)"
                )
            if device not in (None, "cpu"):
                raise ValueError(f"device: only cpu is supported for now, got {device!r}")
            if isinstance(model, nest.Encoder):
                self.model = model
            else:
                self.model = nest.Encoder(str(model), dtype=dtype, max_length=max_length)
            native = self.model._native
            self.layer, self.dim = (int(x) for x in native.resolve_point(layer, dim))
            self.streams = streams
            info = self.model.info()
            path = str(native.path)
            self.model_prompts = {k: v for k, v in (info.get("prompts") or {}).items() if v}
            self.mteb_model_meta = _model_meta(
                name=point_model_name(name or path, self.layer, self.dim, "float32", self.model.dtype),
                revision=revision or model_revision(path),
                model_path=path,
                layer=self.layer,
                dim=self.dim,
                dtype=self.model.dtype,
                precision="float32",
                n_parameters=info.get("parameters"),
                max_tokens=info.get("max_seq_length"),
                use_instructions=bool(self.model_prompts),
            )

        def _prompt_for(self, task_metadata, prompt_type) -> Dict[str, Any]:
            prompts = self.model_prompts
            name = get_prompt_name(prompts or None, task_metadata, prompt_type)
            if name:
                return {"prompt_name": name}
            if prompt_type == PromptType.document:
                for n in ("document", "passage", "corpus"):
                    if n in prompts:
                        return {"prompt_name": n}
            return {}

        def encode(
            self,
            inputs,
            *,
            task_metadata,
            hf_split: str,
            hf_subset: str,
            prompt_type=None,
            **kwargs: Any,
        ):
            precision = kwargs.get("precision")
            if precision not in (None, "float32"):
                raise ValueError(f"precision: NestEncoder gives float32 vectors, got {precision!r}")
            texts: List[str] = []
            for batch in inputs:
                if "text" not in batch:
                    raise ValueError(
                        f"NestEncoder encodes text; got a batch with {sorted(batch)}"
                    )
                texts.extend(batch["text"])
            streams = self.streams if self.streams is not None else nest.get_num_threads()
            out = self.model.encode(
                texts,
                batch_size=int(kwargs.get("batch_size", 32)),
                layer=self.layer,
                dim=self.dim,
                streams=max(1, int(streams)),
                **self._prompt_for(task_metadata, prompt_type),
            )
            return np.asarray(out, dtype=np.float32).reshape(len(texts), self.dim)

        def __repr__(self) -> str:
            return f"NestEncoder({self.mteb_model_meta.name!r}, revision={self.mteb_model_meta.revision!r})"

    _BUILT["NestEncoder"] = NestEncoder
    return NestEncoder


# -- local tasks ------------------------------------------------------------------------------


def _local_metadata(name, path, sha, description, kind, split, languages):
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
        category="t2t",
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
    """sentence1, sentence2, score; a header row; tab-separated, no quoting."""
    s1: List[str] = []
    s2: List[str] = []
    score: List[float] = []
    with open(path, encoding="utf-8", newline="") as f:
        rows = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = next(rows, None)
        if header is None or [h.strip().lower() for h in header[:3]] != [
            "sentence1",
            "sentence2",
            "score",
        ]:
            raise ValueError(f"{path}: expected a header sentence1<TAB>sentence2<TAB>score, got {header}")
        for i, row in enumerate(rows, start=2):
            if not row:
                continue
            if len(row) < 3:
                raise ValueError(f"{path}:{i}: expected 3 tab-separated fields, got {len(row)}")
            s1.append(row[0])
            s2.append(row[1])
            score.append(float(row[2]))
    if not score:
        raise ValueError(f"{path}: no pairs")
    return {"sentence1": s1, "sentence2": s2, "score": score}


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
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    metadata = _local_metadata(
        name,
        path,
        _file_sha256(path),
        description or f"STS pairs read from the local file {path.name} (Nest).",
        ("STS", "cosine_spearman"),
        split,
        languages,
    )

    def load_data(self, num_proc=None, *, timer=None, **kwargs):
        if self.data_loaded:
            return
        self.dataset = DatasetDict({split: Dataset.from_dict(_read_sts_tsv(path))})
        self.data_loaded = True

    cls = type(
        f"LocalSTS_{''.join(c if c.isalnum() else '_' for c in name)}",
        (AbsTaskSTS,),
        {
            "metadata": metadata,
            "min_score": min_score,
            "max_score": max_score,
            "load_data": load_data,
            "__doc__": f"Local STS task {name!r} from {path}.",
        },
    )
    return cls()


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

    def load_data(self, num_proc=None, *, timer=None, **kwargs):
        if self.data_loaded:
            return
        corpus = data["corpus"]
        self.dataset = {
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
        self.data_loaded = True

    cls = type(
        f"LocalRetrieval_{''.join(c if c.isalnum() else '_' for c in name)}",
        (AbsTaskRetrieval,),
        {"metadata": metadata, "load_data": load_data, "__doc__": f"Local retrieval task {name!r} from {folder}."},
    )
    return cls()


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


# -- export of nest eval reports --------------------------------------------------------------


def _mteb_task_and_split(task_id: str) -> Tuple[str, str]:
    if task_id in TASK_NAMES:
        return TASK_NAMES[task_id]
    family, _, split = task_id.partition("/")
    return f"Nest-{family}", split or "test"


def _scores_for(kind: str, metrics: Dict[str, float]) -> Dict[str, Any]:
    """nest eval metrics (x100) -> MTEB score keys (0..1)."""

    def pct(k: str) -> Optional[float]:
        v = metrics.get(k)
        return None if v is None else float(v) / 100.0

    out: Dict[str, Any] = {}
    if kind == "sts":
        # nest eval: Pearson / Spearman of the cosine (Hamming for binary) against the gold.
        for k in ("pearson", "spearman"):
            if k in metrics:
                out[k] = pct(k)
                out[f"cosine_{k}"] = pct(k)
        out["main_score"] = out.get("cosine_spearman")
    elif kind == "retrieval":
        for k in metrics:
            out[k] = pct(k)
        out["main_score"] = out.get("ndcg_at_10")
    elif kind == "pair":
        for k, v in metrics.items():
            if k.endswith("_threshold"):
                out[f"cosine_{k}"] = float(v)
            else:
                out[f"cosine_{k}"] = pct(k)
        if "ap" in metrics:
            out["max_ap"] = pct("ap")
        out["main_score"] = out.get("max_ap")
    elif kind == "cls":
        for k, v in metrics.items():
            if k == "logreg_iterations":
                out[k] = float(v)
            elif k == "macro_f1":
                out["f1"] = pct(k)
            else:
                out[k] = pct(k)
        out["main_score"] = out.get("accuracy")
    else:
        for k, v in metrics.items():
            out[k] = float(v)
        out["main_score"] = None
    return out


def _find_model_dir(model_path: Optional[str], report_path: Path) -> Optional[Path]:
    if not model_path:
        return None
    p = Path(model_path)
    if p.is_absolute():
        return p if p.is_dir() else None
    for base in [Path.cwd(), *report_path.resolve().parents]:
        if (base / p).is_dir():
            return base / p
    return None


def export_results(
    report: Union[str, os.PathLike],
    out_dir: Union[str, os.PathLike],
    *,
    name: Optional[str] = None,
    revision: Optional[str] = None,
    tasks: Optional[Sequence[str]] = None,
) -> List[Path]:
    """Writes a ``nest eval`` ``report.json`` in MTEB's results format, one model entry per
    (layer, dim, precision) cell: ``<out_dir>/results/<model as path>/<revision>/<Task>.json``
    (a ``TaskResult``) and ``model_meta.json`` beside it, written by mteb's own
    ``ResultCache.save_to_cache``, so that ``mteb.ResultCache(out_dir).load_results()`` reads
    it back.

    Tasks: every task of the report (or those in ``tasks``, nest eval ids such as
    ``"stsb/test"``), named by ``TASK_NAMES`` or ``Nest-<family>``. Scores are MTEB's keys on
    MTEB's 0..1 scale (nest eval's / 100): STS ``cosine_spearman`` (main), ``cosine_pearson``
    (and ``spearman``/``pearson``); retrieval ``ndcg_at_10`` (main), ``map_at_100``, ...;
    pair ``max_ap`` (main), ``cosine_ap``, ``cosine_accuracy``, ``cosine_f1`` (thresholds as
    they are); classification ``accuracy`` (main), ``f1`` (macro). ``dataset_revision`` is
    ``sha256:`` and 16 hex digits of the task's first data file (``local_sts_task``'s).

    Args:
        report: path of a ``report.json``.
        out_dir: the MTEB cache folder to write (created).
        name: the model part of the names (default: the last component of the report's model
            path).
        revision: MTEB revision (default: ``model_revision`` of the model folder where it is
            found relative to the working directory or the report's folders, else ``unknown``).
        tasks: nest eval task ids to export (default: all).

    Returns: the paths of the TaskResult files written.
    """
    _mteb()
    import mteb  # noqa: PLC0415
    from mteb.results import TaskResult  # noqa: PLC0415

    report_path = Path(report)
    with open(report_path, encoding="utf-8") as f:
        rep = json.load(f)
    model = rep.get("model") or {}
    model_path = model.get("path")
    dtype = model.get("dtype") or "float32"
    if revision is None:
        revision = model_revision(_find_model_dir(model_path, report_path))
    base = name or model_path or "model"
    mteb_version = getattr(mteb, "__version__", None)
    date = datetime.datetime.fromtimestamp(report_path.stat().st_mtime, tz=datetime.timezone.utc)

    cache = mteb.ResultCache(cache_path=str(out_dir))
    metas: Dict[Tuple[int, int, str], Any] = {}
    written: List[Path] = []
    for task in rep.get("tasks", []):
        task_id = task["task"]
        if tasks is not None and task_id not in tasks:
            continue
        task_name, split = _mteb_task_and_split(task_id)
        files = task.get("files") or []
        dataset_revision = (
            f"sha256:{files[0]['sha256'][:16]}" if files and files[0].get("sha256") else "unknown"
        )
        seconds = task.get("seconds")
        for cell in task.get("cells", []):
            layer, dim, precision = int(cell["layer"]), int(cell["dim"]), cell.get("precision", "float32")
            key = (layer, dim, precision)
            if key not in metas:
                metas[key] = _model_meta(
                    name=point_model_name(base, layer, dim, precision, dtype),
                    revision=revision,
                    model_path=model_path,
                    layer=layer,
                    dim=dim,
                    dtype=dtype,
                    precision=precision,
                    n_parameters=model.get("parameters"),
                    max_tokens=model.get("max_seq_length"),
                    use_instructions=any((model.get("prompts") or {}).values()),
                )
            scores = _scores_for(task.get("kind", ""), cell.get("metrics", {}))
            if scores.get("main_score") is None:
                continue
            scores.update(
                {
                    "hf_subset": "default",
                    "languages": ["eng-Latn"],
                    "n_examples": task.get("n_examples"),
                }
            )
            if scores["n_examples"] is None:
                del scores["n_examples"]
            result = TaskResult(
                dataset_revision=dataset_revision,
                task_name=task_name,
                mteb_version=mteb_version,
                scores={split: [scores]},
                evaluation_time=float(seconds) if seconds is not None else None,
                date=date,
            )
            cache.save_to_cache(result, metas[key])
            written.append(cache.get_task_result_path(task_name, metas[key]))
    return written


def __getattr__(attr: str):
    if attr == "NestEncoder":
        return _build_encoder_class()
    raise AttributeError(f"module 'nest.mteb' has no attribute {attr!r}")
