"""Nest from Python: elastic text embeddings (any Matryoshka dim x any early-exit layer).

    import nest
    m = nest.Encoder("models/all-MiniLM-L6-v2")
    v = m.encode(["a sentence", "another"], layer=3, dim=64)   # numpy float32, shape (2, 64)

`Encoder.encode` follows `SentenceTransformer.encode` wherever the meaning is the same, so code
written for sentence-transformers runs unchanged; `layer` and `dim` choose the point. The work
runs in Nest's Rust core (the same code as `nest encode`), with the GIL released.
"""

from __future__ import annotations

import json
import os
import warnings
from typing import Any, Dict, List, Optional, Sequence, Union

# libtorch comes from the `torch` wheel: importing torch first loads its libraries
# (libtorch_cpu, libc10, ...), which the extension then uses; no second copy is loaded.
import torch  # noqa: F401  (side effect: loads libtorch)
import numpy as np

from . import _nest
from ._nest import get_num_threads, set_num_threads

__all__ = ["Encoder", "Index", "TrainResult", "train", "export_checkpoint", "distill", "compress", "evaluate", "quantize_embeddings", "get_num_threads", "set_num_threads", "machine", "__version__"]
__version__ = "0.1.0"

PRECISIONS = ("float32", "int8", "uint8", "binary", "ubinary")

# a misspelt NEST_* variable changes nothing: say so once, at import
for _line in _nest.unknown_env_native(list(os.environ)):
    warnings.warn(_line, RuntimeWarning, stacklevel=2)


def machine() -> Dict[str, Any]:
    """What Nest runs on here, to write next to a figure (as every ``nest bench`` prints it and
    ``evaluate``'s report keeps it): ``cpu`` (model name), ``cpu_flags`` (those that decide the
    precision: avx2, avx512_bf16, amx_bf16, ...), ``logical_cpus``, ``libtorch_threads``,
    ``torch`` (the libtorch version), ``device`` (``"cpu"`` or ``"cuda:N"``) and, on a GPU,
    ``gpu`` (name, memory, compute capability, CUDA runtime, driver)."""
    return json.loads(_nest.machine_native())


def quantize_embeddings(embeddings, precision: str, return_scales: bool = False):
    """Quantizes float rows as ``Encoder.encode(..., precision=...)`` does (Nest's rules, the
    bytes ``nest index`` stores and ``nest serve`` returns):

    - ``"int8"``: per-row symmetric codes ``round(x / s)`` (halves away from zero, within
      -127..127), ``s = max|x| / 127``; ``dot(a, b) * s_a * s_b`` estimates ``a . b``.
      Not sentence-transformers' int8, whose per-dimension ranges are calibrated on a set of
      vectors (by default the batch), so that a vector changes with its batch.
    - ``"uint8"``: those codes + 128 (uint8, 1..255), same scale.
    - ``"ubinary"``: ``numpy.packbits(x > 0, axis=-1)``: the sign bits, first coordinate in the
      most significant bit, uint8 of ``ceil(dim / 8)`` per row; sentence-transformers'
      ``ubinary`` bit for bit.
    - ``"binary"``: those bytes - 128 as int8: sentence-transformers' ``binary`` bit for bit.
    - ``"float32"``: the rows as float32.

    ``embeddings``: a 1-D or 2-D array (numpy, torch or nested lists); the result has the same
    number of dimensions. ``return_scales=True`` returns ``(codes, scales)``: float32 scales,
    one per row (a scalar for 1-D input) for int8 / uint8, None for the other precisions.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision: {precision!r} is not one of {', '.join(PRECISIONS)}")
    if isinstance(embeddings, torch.Tensor):
        embeddings = embeddings.detach().to("cpu", torch.float32).numpy()
    x = np.asarray(embeddings, dtype=np.float32)
    if x.ndim not in (1, 2):
        raise ValueError(f"embeddings: expected 1 or 2 dimensions, got shape {x.shape}")
    single = x.ndim == 1
    x = np.ascontiguousarray(x.reshape(1, -1) if single else x)
    scales = None
    if precision == "float32":
        out = x.copy()
    else:
        rows, dim = x.shape
        buf, sc = _nest.quantize_native(x.tobytes(), rows, dim, precision)
        width = dim if precision.endswith("int8") else (dim + 7) // 8
        kind = np.int8 if precision in ("int8", "binary") else np.uint8
        out = np.frombuffer(buf, dtype=kind).reshape(rows, width)
        if precision.endswith("int8"):
            scales = np.asarray(sc, dtype=np.float32)
    if single:
        out = out[0]
        scales = None if scales is None else scales[0]
    return (out, scales) if return_scales else out


class Encoder:
    """A Nest model loaded for inference.

    Args:
        model: a local model folder in Hugging Face / sentence-transformers layout, or
            ``org/name`` from the Hugging Face cache (downloaded from the hub when online).
        dtype: ``"auto"`` (bf16 where this machine measured it faster, else float32),
            ``"float32"``, ``"bf16"`` or ``"int8"``; as ``nest --dtype``.
        max_length: tokens per text (default: the model's ``max_seq_length``).
        adaptor: an adaptor folder from ``nest.compress`` / ``nest compress`` (as ``nest encode
            --adaptor``): ``dim`` then takes the adaptor's dims, through its heads.

    Raises:
        FileNotFoundError: the folder or one of its files is missing.
        ValueError: a bad value (dtype, max_length).
        RuntimeError: anything else (a malformed file, libtorch).
    """

    def __init__(self, model: str, dtype: str = "auto", max_length: Optional[int] = None,
                 adaptor: Optional[str] = None):
        self._native = _nest.NativeEncoder(str(model), dtype, max_length,
                                           None if adaptor is None else str(adaptor))
        if self._native.adaptor_note:  # an adaptor trained on another model's vectors
            warnings.warn(self._native.adaptor_note, UserWarning, stacklevel=2)

    # -- what the model is -------------------------------------------------------------------

    @property
    def dtype(self) -> str:
        """The dtype the model runs in (``auto`` resolved): float32, bf16 or int8."""
        return self._native.dtype

    @property
    def num_layers(self) -> int:
        """Transformer layers: ``layer`` takes 1..num_layers."""
        return self._native.num_layers

    def get_sentence_embedding_dimension(self) -> int:
        """The full output width (sentence-transformers' name): ``dim`` takes 1..this."""
        return self._native.output_dim

    @property
    def max_seq_length(self) -> int:
        """Tokens per text, as sentence-transformers names it: longer texts are truncated. Set
        when the model loads (``nest.Encoder(model, max_length=N)``)."""
        return int(self.info()["max_seq_length"])

    @max_seq_length.setter
    def max_seq_length(self, value: int) -> None:
        raise AttributeError(
            f"max_seq_length is set when the model loads: nest.Encoder(model, max_length={value!r})")

    @property
    def similarity_fn_name(self) -> str:
        """The similarity :meth:`similarity` computes, as sentence-transformers names it:
        ``cosine`` (the default), ``dot``, ``euclidean`` or ``manhattan``; the model's own
        (``config_sentence_transformers.json``'s ``similarity_fn_name``) until set."""
        name = self.__dict__.get("_similarity")
        if name is None:
            name = "cosine"
            cfg = os.path.join(str(self._native.path), "config_sentence_transformers.json")
            try:
                with open(cfg) as f:
                    name = json.load(f).get("similarity_fn_name") or "cosine"
            except (OSError, ValueError):
                pass
            self.__dict__["_similarity"] = name
        return name

    @similarity_fn_name.setter
    def similarity_fn_name(self, value) -> None:
        value = getattr(value, "value", value)  # sentence-transformers' SimilarityFunction
        if value not in _SIMILARITIES:
            raise ValueError(f"similarity_fn_name: {value!r} is not one of {', '.join(_SIMILARITIES)}")
        self.__dict__["_similarity"] = value

    def similarity(self, embeddings1, embeddings2):
        """The similarity (:attr:`similarity_fn_name`, cosine by default) of every row of
        ``embeddings1`` with every row of ``embeddings2``: a ``[n1, n2]`` matrix, as
        sentence-transformers' ``model.similarity`` (``dot``: the raw product; ``euclidean`` /
        ``manhattan``: the negated distance). numpy arrays or torch tensors (the result is a
        torch.Tensor when either is one, else numpy float32); a 1-D input is one row. For
        cosine, rows are normalised here, so vectors from ``normalize_embeddings=False`` or a
        cut ``dim`` compare the same way."""
        torch_in = any(isinstance(x, torch.Tensor) for x in (embeddings1, embeddings2))
        name = self.similarity_fn_name
        if name not in _SIMILARITIES:
            raise ValueError(f"similarity_fn_name: the model names {name!r}, which is not one of "
                             f"{', '.join(_SIMILARITIES)}; set model.similarity_fn_name")

        def rows(x):
            if isinstance(x, torch.Tensor):
                x = x.detach().cpu().float().numpy()
            a = np.atleast_2d(np.asarray(x, dtype=np.float32))
            if a.ndim != 2:
                raise ValueError(f"similarity: expected 1-D or 2-D embeddings, got shape {a.shape}")
            return a

        a, b = rows(embeddings1), rows(embeddings2)
        if a.shape[1] != b.shape[1]:
            raise ValueError(f"similarity: {a.shape[1]} dims against {b.shape[1]}: compare "
                             "vectors of the same dim (encode both with the same dim=)")
        if name == "cosine":
            a = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
            b = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
        if name in ("cosine", "dot"):
            s = a @ b.T
        else:  # the negated distance, as torch.cdist gives it (sentence-transformers' own)
            p = 2.0 if name == "euclidean" else 1.0
            s = (-torch.cdist(torch.from_numpy(a), torch.from_numpy(b), p=p)).numpy()
        return torch.from_numpy(s) if torch_in else s

    def info(self) -> Dict[str, Any]:
        """What ``nest info --json`` prints: architecture, layers, output_dim, pooling,
        ``elastic`` (``trained_dims`` and ``trained_layers`` from a Nest training run, ``None``
        when not recorded; ``offered_layers`` / ``offered_dims``: those plus the full point),
        prompts, and the dtype with why it was chosen."""
        return json.loads(self._native.info_json())

    @property
    def prompts(self) -> Dict[str, str]:
        """The model's named prompts (``config_sentence_transformers.json``)."""
        return dict(self.info()["prompts"])

    # -- encoding ----------------------------------------------------------------------------

    def encode(
        self,
        sentences: Union[str, Sequence[str]],
        prompt_name: Optional[str] = None,
        prompt: Optional[str] = None,
        batch_size: int = 32,
        show_progress_bar: Optional[bool] = None,
        output_value: Optional[str] = "sentence_embedding",
        precision: str = "float32",
        convert_to_numpy: bool = True,
        convert_to_tensor: bool = False,
        device: Optional[str] = None,
        normalize_embeddings: bool = True,
        *,
        layer: Optional[int] = None,
        dim: Optional[int] = None,
        truncate_dim: Optional[int] = None,
        streams: int = 1,
    ):
        """Embeds ``sentences`` at the point ``(layer, dim)``.

        As ``SentenceTransformer.encode``: a ``str`` gives a 1-D array, a list a 2-D array
        ``(len, dim)`` of float32; ``convert_to_tensor=True`` gives a ``torch.Tensor``,
        ``convert_to_numpy=False`` a list of 1-D tensors. ``prompt_name`` picks one of the
        model's prompts, ``prompt`` gives its text (not both); with neither, the model's default
        prompt applies if it names one.

        Args:
            layer: exit after this many layers (default: all, the full model).
            dim: keep the first ``dim`` dimensions (default: the model's default dim, its full
                width unless ``nest slim`` chose one); ``truncate_dim`` is sentence-transformers'
                name for the same thing.
            normalize_embeddings: L2-normalise after the cut (default True, unlike
                sentence-transformers: a Matryoshka prefix is only comparable renormalised).
                False gives the pipeline's own output cut to ``dim`` (normalised at full width
                when the model ends with a Normalize module), as sentence-transformers' does.
            batch_size: texts per forward pass (texts are sorted by length first).
            streams: batches encoded at once, each on its share of libtorch's threads (1: lowest
                latency; ``get_num_threads()``: highest throughput on many texts).
            precision: ``"float32"``, or the vectors (after ``normalize_embeddings``) quantized
                as :func:`quantize_embeddings` does: ``"int8"`` (Nest's per-row codes, the
                index's; int8), ``"uint8"`` (those + 128), ``"binary"`` / ``"ubinary"``
                (sentence-transformers' packed sign bits, bit for bit; int8 / uint8 of
                ``ceil(dim / 8)`` bytes). The int8 scales: ``quantize_embeddings(encode(...),
                "int8", return_scales=True)``.

        Not supported yet: ``output_value`` other than ``sentence_embedding``, ``device`` other
        than cpu; progress bars are not shown.
        """
        if precision not in PRECISIONS:
            raise ValueError(f"precision: {precision!r} is not one of {', '.join(PRECISIONS)}")
        if output_value not in (None, "sentence_embedding"):
            raise ValueError(
                f"output_value: only 'sentence_embedding' is supported, got {output_value!r}"
            )
        if device not in (None, "cpu"):
            raise ValueError(f"device: only cpu is supported for now, got {device!r}")
        if dim is not None and truncate_dim is not None and dim != truncate_dim:
            raise ValueError(f"dim={dim} and truncate_dim={truncate_dim}: give one")
        dim = dim if dim is not None else truncate_dim
        single = isinstance(sentences, str)
        if isinstance(sentences, (dict, set, bytes)):  # a dict's keys, a set's order: not texts
            raise TypeError(f"sentences: expected a str or a list of str, got {type(sentences).__name__}")
        if single:
            texts: List[str] = [sentences]
        else:
            texts = list(sentences)
            for i, t in enumerate(texts):
                if not isinstance(t, str):
                    raise TypeError(f"sentences[{i}]: expected str, got {type(t).__name__}")
        _check_int("layer", layer)
        _check_int("dim", dim)
        _check_int("batch_size", batch_size)
        note = self._native.untrained_note(layer, dim)
        if note is not None:
            # shown once per call site and point (Python's default warning filter)
            warnings.warn(note, UserWarning, stacklevel=2)
        buf, rows, width = self._native.encode_raw(
            texts, layer, dim, batch_size, bool(normalize_embeddings), prompt_name, prompt, streams
        )
        out = np.frombuffer(buf, dtype=np.float32).reshape(rows, width)
        if precision != "float32":
            out = quantize_embeddings(out, precision)
        if single:
            out = out[0]
        if convert_to_tensor:
            return torch.from_numpy(out)
        if not convert_to_numpy:
            t = torch.from_numpy(out)
            return t if single else list(t)
        return out

    def encode_query(self, sentences: Union[str, Sequence[str]], **kwargs):
        """``encode`` with the model's ``query`` prompt (when it has one), as
        sentence-transformers' ``encode_query``."""
        return self.encode(sentences, **self._with_prompt(("query",), kwargs))

    def encode_document(self, sentences: Union[str, Sequence[str]], **kwargs):
        """``encode`` with the model's ``document`` prompt, else its ``passage`` or ``corpus``
        prompt (when it has one), as sentence-transformers' ``encode_document``."""
        return self.encode(sentences, **self._with_prompt(("document", "passage", "corpus"), kwargs))

    def _with_prompt(self, names: Sequence[str], kwargs: Dict[str, Any]) -> Dict[str, Any]:
        if kwargs.get("prompt_name") is None and kwargs.get("prompt") is None:
            name = next((n for n in names if n in self.prompts), None)
            if name is not None:
                kwargs = dict(kwargs, prompt_name=name)
        return kwargs

    def __repr__(self) -> str:
        return (
            f"nest.Encoder({str(self._native.path)!r}, dtype={self.dtype!r}, "
            f"layers={self.num_layers}, dim={self.get_sentence_embedding_dimension()})"
        )


_SIMILARITIES = ("cosine", "dot", "euclidean", "manhattan")


def _check_int(key: str, v: Any) -> None:
    if v is None:
        return
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{key}: expected an int, got {type(v).__name__}")
    if v < 1:
        raise ValueError(f"{key}: must be at least 1, got {v}")


def _ints(key: str, v: Any) -> Optional[List[int]]:
    """A list of layers or dims as the CLI takes them: an int, ``"64,128"`` / ``"1-6"``, or a
    sequence of ints (a string is never taken character by character: ``"128"`` is [128])."""
    if v is None:
        return None
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return [int(v)]
    if isinstance(v, str):
        out: List[int] = []
        for part in v.replace(" ", "").split(","):
            a, dash, b = part.partition("-")
            try:
                lo, hi = int(a), int(b) if dash else int(a)
            except ValueError:
                raise ValueError(
                    f"{key}: {v!r} is not a list of ints (write 128, \"64,128\", \"1-6\" or [64, 128])"
                ) from None
            out.extend(range(lo, hi + 1))
        return out
    try:
        items = list(v)
    except TypeError:
        raise TypeError(f"{key}: expected an int, a string such as \"64,128\" or a list of ints, "
                        f"got {type(v).__name__}") from None
    for x in items:
        if isinstance(x, bool) or not isinstance(x, (int, np.integer)):
            raise TypeError(f"{key}: expected ints, got {x!r} ({type(x).__name__})")
    return [int(x) for x in items]


def _paths(key: str, v: Any) -> List[str]:
    """One path (a string or ``os.PathLike``) or a sequence of them: never a string's characters."""
    if v is None:
        return []
    if isinstance(v, (str, os.PathLike)):
        return [os.fspath(v)]
    try:
        return [os.fspath(p) for p in v]
    except TypeError:
        raise TypeError(f"{key}: expected a path or a list of paths, got {type(v).__name__}") from None


class TrainResult(dict):
    """What ``nest.train`` returns: ``run_dir``, ``final`` (the exported model folder, or None
    for a run stopped early), ``steps``, ``last_loss``, ``stopped``; keys and attributes."""

    __getattr__ = dict.__getitem__


def train(
    recipe: Optional[str] = None,
    overrides: Optional[Dict[str, Any]] = None,
    run_dir: Optional[str] = None,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    allow_data_change: bool = False,
) -> TrainResult:
    """Trains in this process, as ``nest train`` does (the same Rust trainer; the GIL released).

    Args:
        recipe: a recipe TOML file (see ``recipes/``), or None to give every key in
            ``overrides``.
        overrides: recipe keys to set, e.g. ``{"max_steps": 50, "lr": 2e-5,
            "matryoshka_dims": [64, 128, 384], "data": "pairs.tsv:pairs"}`` (as
            ``nest train --max-steps 50 ...``).
        run_dir: the run folder (default: ``runs/<recipe name>``).
        resume: continue the run in ``run_dir`` exactly (its own recipe when ``recipe`` is None).
        overwrite: replace the run in ``run_dir`` once the new one has finished.
        progress: print each step, checkpoint and evaluation to stderr.
        allow_data_change: with ``resume``, continue although the training data differ from
            the data the checkpoint was trained on (refused otherwise, with a ValueError).

    Ctrl-C stops the run after the current step with a checkpoint of it, then raises
    ``KeyboardInterrupt``; ``nest.train(run_dir=..., resume=True)`` continues it bit for bit.

    Raises:
        FileNotFoundError: a missing model, data file or run folder to resume.
        ValueError: a bad recipe key or value, or a run folder that holds another run.
        RuntimeError: anything else (a non-finite loss, libtorch).
    """
    if run_dir is None:
        stem = os.path.splitext(os.path.basename(recipe))[0] if recipe else "run"
        run_dir = os.path.join("runs", stem)
    done, final, steps, loss, stopped = _nest.train_native(
        str(run_dir), None if recipe is None else str(recipe), list((overrides or {}).items()),
        resume, overwrite, progress, allow_data_change
    )
    return TrainResult(
        run_dir=str(done),
        final=None if stopped else str(final),
        steps=steps,
        last_loss=loss,
        stopped=stopped,
    )


def export_checkpoint(checkpoint: str, out: str, overwrite: bool = False,
                      progress: bool = True) -> str:
    """Writes a training checkpoint's model as a model folder, as ``nest export checkpoint``
    does: what ``final/`` would hold had the run ended at that step (a run stopped early, or
    one still going), loadable by ``nest.Encoder(out)`` and ``SentenceTransformer(out)``.

    Args:
        checkpoint: ``RUN/checkpoints/step-N``, or a run folder (its newest checkpoint).
        out: the model folder to write (new or empty).
        overwrite: replace a model already at ``out`` (never a folder without one).
        progress: print what it does to stderr.

    Returns ``out``.

    Raises:
        FileNotFoundError: no such checkpoint or run, or the run's model is missing.
        ValueError: ``out`` holds files (without ``overwrite``), or no model; not a checkpoint.
    """
    _nest.export_checkpoint_native(str(checkpoint), str(out), overwrite, progress)
    return str(out)


def distill(
    recipe: str,
    run_dir: Optional[str] = None,
    teacher: Optional[str] = None,
    student: Optional[str] = None,
    stage: str = "all",
    overrides: Optional[Dict[str, Any]] = None,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
) -> TrainResult:
    """Distils in this process, as ``nest distill`` does: IBKD's two stages (distillation on
    unlabeled texts against a cached teacher, then fine-tuning), one resumable run.

    Args:
        recipe: an IBKD recipe TOML (see ``recipes/ibkd.toml``).
        run_dir: the run folder (default: ``runs/<recipe name>``); stages go to ``stage1/`` and
            ``stage2/`` in it.
        teacher, student: model folders (or hub ids) that replace the recipe's.
        stage: ``"all"``, ``"1"`` or ``"2"``.
        overrides: stage keys as ``{"stage1.lr": 1e-4, "stage2.max_steps": 50}``.
        resume, overwrite, progress: as in :func:`train`.

    Returns a :class:`TrainResult` with ``run_dir``, ``final`` (the student to use: the last
    stage's model folder) and ``stages`` (each stage's ``steps``, ``last_loss``, ``final``).
    Ctrl-C stops after the current step with a checkpoint and raises ``KeyboardInterrupt``.

    Raises:
        FileNotFoundError: a missing recipe, model or data file.
        ValueError: a bad recipe key, stage or value.
    """
    if stage not in ("all", "1", "2"):
        raise ValueError(f"stage: '{stage}' is not one of 'all', '1', '2'")
    if resume and overwrite:
        raise ValueError("resume and overwrite contradict each other: pass one")
    items = [(k, str(v)) for k, v in (("teacher", teacher), ("student", student)) if v is not None]
    items += list((overrides or {}).items())
    if run_dir is None:
        run_dir = os.path.join("runs", os.path.splitext(os.path.basename(str(recipe)))[0])
    final, ran = _nest.distill_native(str(recipe), str(run_dir), items, stage, resume, overwrite, progress)
    stages = [dict(steps=s, last_loss=l, final=str(f) if str(f) else None) for s, l, f in ran]
    done = bool(str(final)) and os.path.exists(os.path.join(str(final), "nest.json"))
    return TrainResult(run_dir=str(run_dir), final=str(final) if done else None, stages=stages,
                       steps=sum(s["steps"] for s in stages), stopped=not done)


def compress(
    out: Optional[str] = None,
    dims: Sequence[int] = (96, 192, 384),
    method: Optional[str] = None,
    *,
    embeddings: Optional[str] = None,
    queries: Optional[str] = None,
    qrels: Optional[str] = None,
    corpus_ids: Optional[str] = None,
    query_ids: Optional[str] = None,
    test_qrels: Optional[str] = None,
    model: Optional[str] = None,
    beir: Optional[str] = None,
    split: str = "train",
    cache: str = ".nest-cache/embeddings",
    resume: Optional[str] = None,
    overwrite: bool = False,
    val_fraction: float = 0.2,
    ads_gradient: str = "straight-through",
    progress: bool = True,
    **options: float,
) -> TrainResult:
    """Trains an adaptor on frozen embeddings in this process, as ``nest compress`` does (SMEC,
    MRL+SMRL, Search-Adaptor, Matryoshka-Adaptor, PCA, truncation; docs/COMPRESSION.md).

    Inputs: ``embeddings`` / ``queries`` (``.npy`` or ``.safetensors`` matrices; ids from
    ``corpus_ids`` / ``query_ids``, else the row numbers) with ``qrels`` (and ``test_qrels``), or
    ``model`` with ``beir`` (a BEIR folder; its embeddings cached in ``cache``). ``method``:
    default ``"smec"``. ``resume`` continues a smec or mrl+smrl adaptor with smaller ``dims``
    (its own inputs and method: another ``method`` is a ValueError).
    ``options``: ``alpha``, ``scale``, ``lr``, ``tau``, ``batch_size``, ``epochs``,
    ``patience`` (a sequential stage's early stop; 0 or absent: none, every stage gets ``epochs``),
    ``hard_negatives``, ``neighbours``, ``memory_size``, ``seed``.

    Returns a :class:`TrainResult` with ``out``, ``method``, ``dims``, ``val_ndcg_at_10`` and
    ``test_ndcg_at_10`` (by dim) and ``info`` (the adaptor's whole record; its
    ``truncated_val_ndcg_at_10`` and ``truncated_test_ndcg_at_10`` score the original vectors
    cut to each dim, the baseline the adaptor has to beat). Apply the adaptor with
    ``nest.Encoder(model, adaptor=out)``.

    Raises:
        FileNotFoundError: a missing input file, model or adaptor to resume.
        ValueError: a bad option, dims, or an output folder that holds files (pass
            ``overwrite=True``).
    """
    if ads_gradient not in ("straight-through", "soft"):
        raise ValueError(f"ads_gradient: '{ads_gradient}' is not 'straight-through' or 'soft'")
    given = dict(embeddings=embeddings, queries=queries, qrels=qrels, corpus_ids=corpus_ids,
                 query_ids=query_ids, test_qrels=test_qrels, model=model, beir=beir)
    inputs = [(k, str(v)) for k, v in given.items() if v is not None]
    if model is not None:
        inputs += [("split", split), ("cache", str(cache))]
    opts = []
    for k, v in options.items():
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
            raise TypeError(f"{k}: expected a number, got {type(v).__name__}")
        opts.append((k, float(v)))
    done, info = _nest.compress_native(
        None if out is None else str(out), method, _ints("dims", dims), inputs, opts,
        float(val_fraction), ads_gradient == "soft", None if resume is None else str(resume),
        overwrite, progress,
    )
    info = json.loads(info)
    per_dim = lambda key: {int(d): v for d, v in (info.get(key) or {}).items()}  # noqa: E731
    return TrainResult(out=str(done), method=info.get("method"), dims=info.get("dims"),
                       val_ndcg_at_10=per_dim("val_ndcg_at_10"),
                       test_ndcg_at_10=per_dim("test_ndcg_at_10"), info=info)


def evaluate(
    model: str,
    tasks: Optional[str] = None,
    sts: Union[str, os.PathLike, Sequence[str], None] = None,
    data_root: str = "../shared/datasets",
    layers: Union[int, str, Sequence[int], None] = None,
    dims: Union[int, str, Sequence[int], None] = None,
    precision: Union[str, Sequence[str]] = "float32",
    dtype: str = "auto",
    batch_size: int = 32,
    out: Optional[str] = None,
    as_frame: bool = False,
    prompt_name: Optional[str] = None,
    query_prompt_name: Optional[str] = None,
    document_prompt_name: Optional[str] = None,
    adaptor: Optional[str] = None,
    overwrite: bool = False,
    rescore: int = 4,
):
    """Evaluates ``model`` over the (layer x dim x precision) grid, as ``nest eval`` does (the
    same Rust code, the same defaults; the GIL released).

    Args:
        model: a model folder (or hub id, as ``nest.Encoder``).
        tasks: task families, e.g. ``"sts,retrieval"`` (``nest eval --tasks``), read from
            ``data_root`` (the layout of shared/datasets).
        sts: STS files (sentence1, sentence2, score) to evaluate beside, or instead of, ``tasks``.
        layers, dims: the grid (default: every layer, the model's Matryoshka dims): a list, an
            int, or the CLI's ``"64,128"`` / ``"1-6"``.
        precision: ``"float32"``, ``"int8"``, ``"int8-calibrated"``, ``"binary"``, a
            comma-separated list or a list.
        dtype: the arithmetic, as ``nest.Encoder``.
        out: also write ``report.json``, ``report.md`` and the plots there. A folder holding
            another model's report is refused (a ``ValueError`` before anything loads) unless
            ``overwrite=True``, as ``nest eval --out`` without ``--overwrite``.
        as_frame: return a pandas DataFrame, one row per (task, layer, dim, precision) with each
            metric a column, instead of the report.
        prompt_name, query_prompt_name, document_prompt_name: prompts the model names, for
            every text and for retrieval's queries and documents (``nest eval
            --prompt-name`` ...); by default the model's own, as ``nest eval``: its default
            prompt, and its ``query`` / ``document`` prompts for retrieval.
        adaptor: an adaptor folder (``nest.compress``): ``dims`` are then its dims
            (``nest eval --adaptor``).
        rescore: binary retrieval re-ranks the top ``10 x rescore`` Hamming candidates with
            the float query (``nest eval --rescore``, default 4; 0: off, its score then being
            ``ndcg_at_10``'s unrescored value). The report records it.

    Returns:
        The report as a dict (``report.json``'s content: ``tasks[i]["cells"]`` hold each cell's
        ``metrics``), or a DataFrame with ``as_frame=True``.
    """
    text, note = _nest.evaluate_native(
        str(model),
        tasks,
        _paths("sts", sts),
        str(data_root),
        _ints("layers", layers),
        _ints("dims", dims),
        precision if isinstance(precision, str) else ",".join(precision),
        dtype,
        int(batch_size),
        None if out is None else str(out),
        prompt_name,
        query_prompt_name,
        document_prompt_name,
        None if adaptor is None else str(adaptor),
        bool(overwrite),
        int(rescore),
    )
    if note:  # an adaptor trained on another model's vectors
        warnings.warn(note, UserWarning, stacklevel=2)
    report = json.loads(text)
    if not as_frame:
        return report
    import pandas as pd  # only for as_frame

    rows = []
    for t in report["tasks"]:
        for c in t["cells"]:
            row = {"task": t["task"], "layer": c["layer"], "dim": c["dim"], "precision": c["precision"]}
            row.update(c["metrics"])
            rows.append(row)
    return pd.DataFrame(rows)


def _documents(documents):
    """``documents`` as ``Index.build`` and ``Index.add`` take them: ids, texts (a title before
    its text) and payloads (JSON text, or None); a ValueError names a document without text or
    an id twice."""
    ids, texts, payloads = [], [], []
    for i, d in enumerate(documents):
        if isinstance(d, str):
            d = {"text": d}
        if "text" not in d:
            raise ValueError(f"documents[{i}]: no 'text' field")
        ids.append(str(d.get("id", d.get("_id", i))))
        title = d.get("title")
        # as nest index build reads a .jsonl (BEIR's corpus.jsonl): the title before the text
        texts.append(f"{title} {d['text']}" if isinstance(title, str) and title else d["text"])
        rest = {k: v for k, v in d.items() if k not in ("id", "_id", "text")}
        payloads.append(json.dumps(rest) if rest else None)
    first: Dict[str, int] = {}
    for i, id_ in enumerate(ids):  # as nest index build refuses them: a search would return both
        if first.setdefault(id_, i) != i:
            raise ValueError(f"documents[{i}]: duplicate id {id_!r} (first at documents[{first[id_]}])")
    return ids, texts, payloads


class Index:
    """A Nest index (``nest index build``'s folder, and the documents added to it since),
    searched in-process through a funnel, with payload filters.

        idx = nest.Index.build("runs/idx", "models/all-MiniLM-L6-v2", docs,
                               dims=[64, 384], precision="float32,binary")
        idx.search("a cat", k=5, funnel="binary:384@100>float32:384", filter={"lang": "en"})

    ``docs``: strings (ids are their positions) or dicts with ``id`` (or BEIR's ``_id``),
    ``text``, an optional ``title`` (embedded before the text, as ``nest index build`` reads a
    ``.jsonl``) and any other fields, which are the payload. Queries are embedded by the model and layer the index
    records (or ``model=``). ``idx.add(docs, existing="replace")`` and ``idx.delete(ids)``
    change it durably, as a server's ``/v1/documents`` routes do.
    """

    def __init__(self, path: str, model: Optional[str] = None):
        self._native = _nest.NativeIndex(str(path), model)
        if self._native.weights_note:
            warnings.warn(self._native.weights_note, UserWarning, stacklevel=2)
        self.path = str(path)

    @classmethod
    def build(
        cls,
        path: str,
        model: str,
        documents: Sequence[Union[str, Dict[str, Any]]],
        dims: Optional[Sequence[int]] = None,
        precision: str = "float32",
        layer: Optional[int] = None,
        overwrite: bool = False,
        batch_size: int = 32,
        store_text: bool = False,
        prompt_name: Optional[str] = None,
        prompt: Optional[str] = None,
        keep_added: Optional[bool] = None,
    ) -> "Index":
        """Embeds ``documents`` with ``model`` at ``layer`` (default: the last) and writes an
        index with one level per (dim, precision) at ``path`` (``nest index build``).
        ``store_text=True`` keeps each text in its payload (``text``), so that hits show it
        (``--store-text``). Documents take ``prompt_name`` / ``prompt``, else the model's
        ``document`` (``passage``, ``corpus``) prompt, as ``encode_document``; the index records
        it. ``overwrite=True`` over an index a server has added documents to needs
        ``keep_added=True`` (carry them into the new index, ``--keep-added``) or ``False``
        (drop them, ``--drop-added``); without it, ``ValueError`` before anything is embedded."""
        ids, texts, payloads = _documents(documents)
        _nest.index_build_native(
            str(path), str(model), ids, texts, payloads,
            _ints("dims", dims),
            precision, layer, overwrite, int(batch_size), bool(store_text), prompt_name, prompt,
            keep_added,
        )
        return cls(path)

    def __len__(self) -> int:
        """Documents searched: the built ones and those added since, but the deleted."""
        return self._native.rows()

    def add(
        self,
        documents: Sequence[Union[str, Dict[str, Any]]],
        existing: str = "keep",
        prompt_name: Optional[str] = None,
        prompt: Optional[str] = None,
        batch_size: int = 32,
    ) -> Dict[str, Any]:
        """Adds ``documents`` (as ``build`` takes them; give dicts with ``id``: a string's id is
        its position in this call) to the index, embedded as its documents were (the document
        prompt it records, unless ``prompt_name`` / ``prompt``), durably, as a server's
        ``POST /v1/documents`` adds them; searched at once, and by every later reader.
        ``existing="keep"`` leaves an id already present as it is (a retry is safe);
        ``"replace"`` replaces it (an upsert). Refused while a server of the index runs (add
        through it) or another process changed the index since it was opened (open it again).
        Returns ``{"added", "replaced", "existing", "count"}``."""
        ids, texts, payloads = _documents(documents)
        out = self._native.add(ids, texts, payloads, existing, prompt_name, prompt, int(batch_size))
        return json.loads(out)

    def delete(self, ids: Union[str, Sequence[str]]) -> Dict[str, Any]:
        """Deletes the documents of ``ids`` durably, as a server's ``POST
        /v1/documents/delete``. Returns ``{"deleted", "missing", "count"}`` (ids not present are
        missing)."""
        ids = [ids] if isinstance(ids, str) else [str(i) for i in ids]
        return json.loads(self._native.delete(ids))

    def search(
        self,
        queries: Union[str, Sequence[str]],
        k: int = 10,
        funnel: Optional[str] = None,
        filter: Optional[Dict[str, Any]] = None,
        prompt_name: Optional[str] = None,
        prompt: Optional[str] = None,
    ):
        """The ``k`` best documents of each query: a list of ``{"id", "score", "payload"?}``
        (one list per query when ``queries`` is a list). ``funnel`` as ``nest search --funnel``
        (default: exact float32); ``filter`` as ``--filter`` (``{"k": v}``, ``{"k": {"$in": [..]}}``).
        Queries take ``prompt_name`` / ``prompt``, else the model's ``query`` prompt, as
        ``encode_query``."""
        single = isinstance(queries, str)
        if int(k) < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        if not single and len(queries) == 0:
            return []
        text = self._native.search(
            [queries] if single else list(queries), int(k), funnel,
            None if filter is None else json.dumps(filter), prompt_name, prompt,
        )
        hits = json.loads(text)
        return hits[0] if single else hits

    def __repr__(self) -> str:
        return f"nest.Index({self.path!r}, rows={len(self)})"
