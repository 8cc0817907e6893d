"""MTEB for Nest: run `mteb` at any (layer, dim) point, offline tasks from local files, and
`nest eval` reports exported to MTEB's results format (issue 38).

    import mteb, nest.mteb as nm
    model = nm.NestEncoder("models/all-MiniLM-L6-v2", layer=3, dim=64, dtype="float32")
    res = mteb.evaluate(model, nm.LocalSTSB(), cache=None)          # ../shared/datasets/stsb/test.tsv
    res.task_results[0].get_score()                                  # cosine Spearman, 0..1

    nm.export_results("reports/minilm/report.json", "mteb-results")  # one model entry per cell
    mteb.ResultCache("mteb-results").load_results(include_remote=False)

    model8 = nm.NestEncoder("models/all-MiniLM-L6-v2", precision="int8")  # the index's codes
    mteb.evaluate(model8, nm.local_pair_classification_task("../shared/datasets/mrpc/test.tsv", "MRPC"))

Local tasks (``_mteb_tasks``, re-exported here): STS (``local_sts_task``, ``LocalSTSB``),
retrieval (``local_retrieval_task``, ``LocalSciFact``), pair classification
(``local_pair_classification_task``) and classification (``local_classification_task``,
``LocalBanking77``), each read as ``nest eval`` reads the same file.

`mteb` (2.x) is imported on first use of anything here that needs it, so `import nest.mteb`
works without it; using `NestEncoder`, a local task or `export_results` then raises ImportError
with the install command.

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

import datetime
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from ._mteb_tasks import (
    LocalBanking77,
    LocalSciFact,
    LocalSTSB,
    _file_sha256,
    _mteb,
    local_classification_task,
    local_pair_classification_task,
    local_retrieval_task,
    local_sts_task,
)

__all__ = [
    "NestEncoder",
    "LocalSTSB",
    "local_sts_task",
    "LocalSciFact",
    "local_retrieval_task",
    "local_pair_classification_task",
    "local_classification_task",
    "LocalBanking77",
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



_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt")
_REVISION_CACHE: Dict[Tuple[str, Tuple[Tuple[str, int, int], ...]], str] = {}


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
        # int8: the index's estimate, the dot product of the dequantised codes (NestEncoder)
        similarity_fn_name="dot" if precision == "int8" else "cosine",
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

# The stored precisions NestEncoder gives MTEB, named as nest eval's grid names them.
_SCORED_PRECISIONS = ("float32", "int8", "binary")


def _scored_vectors(x, precision: str):
    """float32 rows ``x`` (normalised) as MTEB should score them at ``precision``: the
    dequantised int8 codes (``codes * scale``; their dot product is the index's estimate) or the
    sign bits as ±1 (cosine ``1 - 2 * hamming / dim``), from Nest's own quantiser."""
    import numpy as np  # noqa: PLC0415

    import nest  # noqa: PLC0415

    if precision == "int8":
        codes, scales = nest.quantize_embeddings(x, "int8", return_scales=True)
        return codes.astype(np.float32) * scales.reshape(-1, 1)
    if precision == "binary":
        bits = np.unpackbits(nest.quantize_embeddings(x, "ubinary"), axis=-1)[:, : x.shape[1]]
        return bits.astype(np.float32) * 2 - 1
    return x

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
            precision: the stored vectors MTEB scores: ``"float32"``; ``"int8"`` (Nest's per-row
                codes, what ``nest index`` stores, given to MTEB dequantised, ``codes * scale``,
                with the dot product as the model's similarity: the index's estimate, as
                ``nest eval --precision int8`` scores it); ``"binary"`` (the sign bits as ±1,
                whose cosine is ``1 - 2 * hamming / dim``, as ``nest eval`` scores binary).
                ``"uint8"`` and ``"ubinary"`` store the same codes and score the same: use
                ``"int8"`` and ``"binary"``.

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
            if precision not in _SCORED_PRECISIONS:
                raise ValueError(
                    f"precision: expected one of {', '.join(_SCORED_PRECISIONS)}, got {precision!r}"
                    + (" (it stores the same codes as int8 / binary: give those)" if precision in ("uint8", "ubinary") else "")
                )
            self.precision = precision
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
                name=point_model_name(name or path, self.layer, self.dim, precision, self.model.dtype),
                revision=revision or model_revision(path),
                model_path=path,
                layer=self.layer,
                dim=self.dim,
                dtype=self.model.dtype,
                precision=precision,
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
                raise ValueError(
                    f"precision: MTEB asked for {precision!r} vectors; give NestEncoder(precision=...) instead"
                )
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
            return _scored_vectors(np.asarray(out, dtype=np.float32).reshape(len(texts), self.dim), self.precision)

        def __repr__(self) -> str:
            return f"NestEncoder({self.mteb_model_meta.name!r}, revision={self.mteb_model_meta.revision!r})"

    _BUILT["NestEncoder"] = NestEncoder
    return NestEncoder


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
