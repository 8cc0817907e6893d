"""The Python package `nest`: parity with sentence-transformers and with `nest encode`, the
(layer, dim) point, prompts, threads, and errors as the right Python exceptions.

Run from the repository root (models/ from scripts/setup.sh), after installing the package:

    scripts/setup/python_test.sh    # or in a venv: scripts/setup/python_wheel.sh --install && HF_HUB_OFFLINE=1 python -m pytest python/tests -q
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import nest  # noqa: E402  (after HF_HUB_OFFLINE)
from support import ROOT, MODEL, model_with, need_model, need_module, nest_bin  # noqa: E402,F401

TEXTS = [
    "A man is playing a guitar.",
    "A woman is slicing an onion.",
    "The new movie is awesome, the best I have seen this year, with a plot that keeps you "
    "guessing until the very last scene and a cast that never puts a foot wrong.",
    "Stocks fell sharply on Monday.",
    "Dogs",
    "How do I reset my password if I no longer have access to the email address on the account?",
    "Le chat est sur la table.",
]

need_model()


@pytest.fixture(scope="module")
def enc():
    return nest.Encoder(str(MODEL), dtype="float32")


@pytest.fixture(scope="module")
def st_model():
    st = need_module("sentence_transformers", "pip install 'sentence-transformers>=3'")
    return st.SentenceTransformer(str(MODEL), device="cpu")


def cos_rows(a, b):
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return (a * b).sum(axis=1)


# -- (1) parity with sentence-transformers ----------------------------------------------------


def test_parity_with_sentence_transformers(enc, st_model):
    ours = enc.encode(TEXTS)
    theirs = st_model.encode(TEXTS, normalize_embeddings=True)
    assert ours.shape == theirs.shape == (len(TEXTS), 384)
    assert ours.dtype == np.float32
    diff = float(np.abs(ours - theirs).max())
    cos = float(cos_rows(ours, theirs).min())
    print(f"\nparity vs sentence-transformers: max |diff| {diff:.2e}, min cosine {cos:.8f}")
    assert diff < 1e-4
    assert 1 - cos < 1e-5


def test_similarity_and_max_seq_length_as_sentence_transformers(enc, st_model):
    import torch
    a, b = enc.encode(TEXTS[:3]), enc.encode(TEXTS[3:])
    theirs = st_model.similarity(a, b)  # the peer's own cosine, on the same vectors
    ours = enc.similarity(a, b)
    assert isinstance(ours, np.ndarray) and ours.shape == (3, len(TEXTS) - 3)
    assert np.abs(ours - theirs.numpy()).max() < 1e-6
    # torch in, torch out; a 1-D vector is one row; unnormalised and cut vectors compare as cosine
    t = enc.similarity(torch.from_numpy(a), b[0])
    assert isinstance(t, torch.Tensor) and t.shape == (3, 1)
    raw = enc.encode(TEXTS[:3], normalize_embeddings=False, dim=64)
    cut = enc.encode(TEXTS[:3], dim=64)
    assert np.abs(enc.similarity(raw, raw) - cut @ cut.T).max() < 1e-5
    with pytest.raises(ValueError, match="same dim"):
        enc.similarity(a, cut)
    assert enc.similarity_fn_name == st_model.similarity_fn_name == "cosine"
    # the other similarities, set on both, and a model whose config names one
    raw_b = enc.encode(TEXTS[3:], normalize_embeddings=False, dim=64)
    for name in ("dot", "euclidean", "manhattan"):
        st_model.similarity_fn_name = name
        mine = nest.Encoder(str(MODEL), dtype="float32")
        mine.similarity_fn_name = name
        theirs = st_model.similarity(raw, raw_b).numpy()
        assert np.abs(mine.similarity(raw, raw_b) - theirs).max() < 1e-4 * max(1, np.abs(theirs).max()), name
    st_model.similarity_fn_name = "cosine"
    with pytest.raises(ValueError, match="similarity_fn_name: 'dott'"):
        nest.Encoder(str(MODEL)).similarity_fn_name = "dott"
    assert enc.max_seq_length == st_model.max_seq_length == 256
    with pytest.raises(AttributeError, match="max_length=128"):
        enc.max_seq_length = 128


def test_a_models_own_similarity_is_used(tmp_path):
    dot = model_with(tmp_path / "dot", "config_sentence_transformers.json",
                     json.dumps({"similarity_fn_name": "dot"}))
    m = nest.Encoder(str(dot), dtype="float32")
    assert m.similarity_fn_name == "dot"
    v = m.encode(TEXTS[:2], normalize_embeddings=False)
    assert np.abs(m.similarity(2 * v, v) - 2 * (v @ v.T)).max() < 1e-3


def test_parity_with_a_prompt_text(enc, st_model):
    ours = enc.encode(TEXTS, prompt="query: ")
    theirs = st_model.encode(TEXTS, prompt="query: ", normalize_embeddings=True)
    assert float(np.abs(ours - theirs).max()) < 1e-4


def test_parity_at_a_truncated_dim(enc, st_model):
    ours = enc.encode(TEXTS, dim=128)
    st = need_module("sentence_transformers", "pip install 'sentence-transformers>=3'")
    theirs = st.SentenceTransformer(str(MODEL), device="cpu", truncate_dim=128).encode(
        TEXTS, normalize_embeddings=True
    )
    assert ours.shape == theirs.shape == (len(TEXTS), 128)
    assert float(np.abs(ours - theirs).max()) < 1e-4


def test_ctrl_c_stops_an_encode_between_batches(enc):
    # about a minute of embedding on 2 cores; Ctrl-C half a second in stops it after a batch
    texts = [f"sentence number {i} about a man who is playing a guitar " * 8 for i in range(3000)]
    handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    start = time.monotonic()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt, match="Ctrl-C"):
            enc.encode(texts, batch_size=8)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, handler)
    took = time.monotonic() - start
    assert took < 15, f"stopped after {took:.1f} s"
    assert enc.encode(["the encoder works on"]).shape == (1, 384)


# -- (2) the (layer, dim) point -----------------------------------------------------------------


def test_shapes_str_list_tensor(enc):
    import torch

    one = enc.encode("A man is playing a guitar.")
    assert one.shape == (384,)
    assert enc.encode(TEXTS[:2]).shape == (2, 384)
    assert enc.encode(TEXTS[:2], dim=32, layer=2).shape == (2, 32)
    t = enc.encode(TEXTS[:2], convert_to_tensor=True)
    assert isinstance(t, torch.Tensor) and tuple(t.shape) == (2, 384)
    lst = enc.encode(TEXTS[:2], convert_to_numpy=False)
    assert isinstance(lst, list) and len(lst) == 2 and isinstance(lst[0], torch.Tensor)
    assert enc.encode([]).shape == (0, 384)
    with pytest.raises(TypeError, match="got dict"):
        enc.encode({"a man": 1})
    np.testing.assert_array_equal(one, enc.encode(["A man is playing a guitar."])[0])


def test_dim_is_the_renormalised_prefix(enc):
    full = enc.encode(TEXTS)
    cut = enc.encode(TEXTS, dim=64)
    want = full[:, :64] / np.linalg.norm(full[:, :64], axis=1, keepdims=True)
    assert cut.shape == (len(TEXTS), 64)
    assert float(np.abs(cut - want).max()) < 1e-6
    np.testing.assert_allclose(np.linalg.norm(cut, axis=1), 1.0, atol=1e-6)


def test_not_normalised_is_the_pipelines_output_cut(enc):
    full = enc.encode(TEXTS)
    raw = enc.encode(TEXTS, dim=64, normalize_embeddings=False)
    # all-MiniLM-L6-v2 ends with Normalize: the full vector is unit, its prefix is not renormalised
    assert float(np.abs(raw - full[:, :64]).max()) < 1e-6


def test_batch_size_does_not_change_the_vectors(enc):
    a = enc.encode(TEXTS, batch_size=32)
    b = enc.encode(TEXTS, batch_size=2)
    assert float(np.abs(a - b).max()) < 1e-5


def test_layer_matches_the_cli(enc, tmp_path):
    NEST_BIN = nest_bin()
    inp = tmp_path / "in.txt"
    inp.write_text("\n".join(TEXTS) + "\n")
    out = tmp_path / "out.npy"
    subprocess.run(
        [str(NEST_BIN), "encode", "--model", str(MODEL), "--layer", "3", "--dtype", "float32",
         "--streams", "1", "--input", str(inp), "--output", str(out)],
        check=True, capture_output=True, env=dict(os.environ, HF_HUB_OFFLINE="1"),
    )
    cli = np.load(out)
    ours = enc.encode(TEXTS, layer=3)
    assert ours.shape == cli.shape == (len(TEXTS), 384)
    diff = float(np.abs(ours - cli).max())
    print(f"\nlayer 3 vs nest encode --layer 3: max |diff| {diff:.2e}, identical: "
          f"{np.array_equal(ours, cli)}")
    assert diff < 1e-6
    # and the point (layer 3, dim 64) too
    subprocess.run(
        [str(NEST_BIN), "encode", "--model", str(MODEL), "--layer", "3", "--dim", "64",
         "--dtype", "float32", "--streams", "1", "--input", str(inp), "--output", str(out)],
        check=True, capture_output=True, env=dict(os.environ, HF_HUB_OFFLINE="1"),
    )
    assert float(np.abs(enc.encode(TEXTS, layer=3, dim=64) - np.load(out)).max()) < 1e-6


def test_info(enc):
    info = enc.info()
    assert info["layers"] == 6 and info["output_dim"] == 384
    assert info["architecture"] == "bert"
    e = info["elastic"]
    assert e["trained_dims"] is None and e["trained_layers"] is None  # no nest.json
    assert e["offered_layers"] == [6] and e["offered_dims"] == [384]
    assert info["dtype"]["dtype"] == "float32"
    assert enc.num_layers == 6 and enc.get_sentence_embedding_dimension() == 384


def test_machine_names_this_machine():
    m = nest.machine()
    assert m["device"] == "cpu" and "gpu" not in m
    assert m["torch"] == torch_release()
    assert m["libtorch_threads"] == nest.get_num_threads()
    with open("/proc/cpuinfo") as f:
        model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), None)
    if model is not None:
        assert m["cpu"] == model


def torch_release():
    """The torch wheel's version without its local part (``2.13.0+cpu`` -> ``2.13.0``)."""
    import torch

    return torch.__version__.split("+")[0]


# -- prompts ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def prompted(tmp_path_factory):
    """all-MiniLM-L6-v2 with `query` / `document` prompts (files linked, one config written)."""
    prompts = json.dumps({"prompts": {"query": "query: ", "document": "passage: "}})
    d = model_with(tmp_path_factory.mktemp("prompted"), "config_sentence_transformers.json", prompts)
    return nest.Encoder(str(d), dtype="float32")


def test_encode_query_and_document_use_the_prompts(prompted, enc):
    q = prompted.encode_query(TEXTS)
    d = prompted.encode_document(TEXTS)
    np.testing.assert_array_equal(q, enc.encode(TEXTS, prompt="query: "))
    np.testing.assert_array_equal(d, enc.encode(TEXTS, prompt="passage: "))
    np.testing.assert_array_equal(q, prompted.encode(TEXTS, prompt_name="query"))
    assert prompted.info()["prompts"] == {"query": "query: ", "document": "passage: "}
    # a model without the prompts: encode_query is plain encode, as in sentence-transformers
    np.testing.assert_array_equal(enc.encode_query(TEXTS), enc.encode(TEXTS))


def test_prompt_parity_with_sentence_transformers(prompted, st_model):
    st = need_module("sentence_transformers", "pip install 'sentence-transformers>=3'")
    m = st.SentenceTransformer(str(prompted._native.path), device="cpu")
    ours = prompted.encode_query(TEXTS)
    theirs = m.encode_query(TEXTS, normalize_embeddings=True)
    assert float(np.abs(ours - theirs).max()) < 1e-4


# -- threads ----------------------------------------------------------------------------------


def test_threads_share_one_encoder(enc):
    want = enc.encode(TEXTS, layer=4, dim=96)
    got, errors = [None] * 4, []

    def work(i):
        try:
            got[i] = enc.encode(TEXTS, layer=4, dim=96)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors
    for g in got:
        assert float(np.abs(g - want).max()) < 1e-6


# -- (3) errors as Python exceptions with Nest's message ---------------------------------------


def test_missing_model_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError) as e:
        nest.Encoder(str(tmp_path / "no-such-model"))
    assert "no-such-model" in str(e.value)


def test_missing_weights_is_file_not_found(tmp_path):
    d = tmp_path / "m"
    d.mkdir()
    for name in ("config.json", "tokenizer.json"):
        shutil.copy(MODEL / name, d / name)
    with pytest.raises(FileNotFoundError):
        nest.Encoder(str(d))


def test_bad_values_are_value_errors(enc):
    with pytest.raises(ValueError, match="dtype"):
        nest.Encoder(str(MODEL), dtype="float64")
    with pytest.raises(ValueError, match="layer"):
        enc.encode(TEXTS, layer=7)
    with pytest.raises(ValueError, match="dim"):
        enc.encode(TEXTS, dim=385)
    with pytest.raises(ValueError, match="dim"):
        enc.encode(TEXTS, dim=0)
    with pytest.raises(ValueError, match="batch_size"):
        enc.encode(TEXTS, batch_size=0)
    with pytest.raises(ValueError, match="no prompt 'nope'"):
        enc.encode(TEXTS, prompt_name="nope")
    with pytest.raises(ValueError, match="not both"):
        enc.encode(TEXTS, prompt_name="query", prompt="q: ")
    with pytest.raises(ValueError, match="precision"):
        enc.encode(TEXTS, precision="int4")
    with pytest.raises(TypeError):
        enc.encode([1, 2])


def test_malformed_file_is_runtime_error(tmp_path):
    d = model_with(tmp_path / "m", "config.json", "{ not json")
    with pytest.raises(RuntimeError) as e:
        nest.Encoder(str(d))
    assert "config.json" in str(e.value)


def test_out_of_memory_is_memory_error(tmp_path):
    """A pass libtorch cannot allocate raises MemoryError saying what lowers it, with no panic
    report (issue 41): `encode`, and `train` (a step's error, `nest_train::Error::StepFailed`). Real: a one-layer model with 16 heads of one dimension and 131,072
    positions, under explicit attention, asks for a [1, 16, L, L] score matrix of 1.1 TB,
    refused under a 256 GiB address-space limit whatever the machine's overcommit setting."""
    transformers = need_module("transformers", "pip install transformers")
    import torch

    long = 131072
    d = tmp_path / "long"
    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=30522, hidden_size=16, num_hidden_layers=1,
                                  num_attention_heads=16, intermediate_size=16,
                                  max_position_embeddings=long)
    transformers.BertModel(cfg, add_pooling_layer=False).save_pretrained(d)
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "modules.json",
                 "special_tokens_map.json"):
        shutil.copy(MODEL / name, d / name)
    (d / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": long}))
    (d / "1_Pooling").mkdir()
    pool = json.loads((MODEL / "1_Pooling" / "config.json").read_text())
    (d / "1_Pooling" / "config.json").write_text(json.dumps({**pool, "word_embedding_dimension": 16}))
    text = lambda w: " ".join([w] * long)  # noqa: E731
    data = tmp_path / "pairs.tsv"
    data.write_text(f"anchor\tpositive\n{text('cat')}\t{text('dog')}\n{text('mat')}\t{text('man')}\n")
    code = (
        "import resource, sys, nest\n"
        "m = nest.Encoder(sys.argv[1], dtype='float32')\n"
        "resource.setrlimit(resource.RLIMIT_AS, (1 << 38, 1 << 38))\n"
        "try:\n"
        "    m.encode(['cat ' * int(sys.argv[2])])\n"
        "except MemoryError as e:\n"
        "    print('MemoryError:', e)\n"
        "o = {'model': sys.argv[1], 'data': sys.argv[3] + ':pairs', 'loss': 'mnrl', 'batch_size': 2,\n"
        "     'dtype': 'float32', 'save_every': 0}\n"
        "try:\n"
        "    nest.train(overrides=o, run_dir=sys.argv[4], progress=False)\n"
        "except MemoryError as e:\n"
        "    print('train MemoryError:', e)\n"
    )
    env = {**os.environ, "NEST_ATTENTION": "explicit"}
    env.pop("RUST_BACKTRACE", None)
    run = subprocess.run([sys.executable, "-c", code, str(d), str(long), str(data), str(tmp_path / "run")],
                         env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    said = run.stdout.splitlines()
    assert said[0].startswith("MemoryError: out of memory: DefaultCPUAllocator: can't allocate"), run.stdout + run.stderr
    assert "smaller batch_size" in said[0]
    assert said[1].startswith("train MemoryError: step 1 failed: DefaultCPUAllocator: can't allocate"), run.stdout + run.stderr
    assert "lower `batch_size` (2)" in said[1]
    assert "panicked" not in run.stderr and "frame #" not in run.stderr, run.stderr


# -- precision= -------------------------------------------------------------------------------


def st_quantize():
    st = need_module("sentence_transformers", "pip install 'sentence-transformers>=3'")
    return st.quantize_embeddings


def nest_int8_rule(x):
    """Nest's int8 (nest_core::vector::quantize_int8) in NumPy: codes round(x / s), halves away
    from zero, within -127..127, s = max|x| / 127 in float32; an all-zero row: codes 0, s 0."""
    x = np.asarray(x, dtype=np.float32)
    m = np.abs(x).max(axis=1)
    s = m / np.float32(127)
    safe = np.where(m == 0, np.float32(1), s).astype(np.float32)
    y = (x / safe[:, None]).astype(np.float64)  # the float32 quotient, exactly
    codes = np.clip(np.sign(y) * np.floor(np.abs(y) + 0.5), -127, 127)
    codes[m == 0] = 0
    return codes.astype(np.int8), np.where(m == 0, np.float32(0), s).astype(np.float32)


@pytest.mark.parametrize("layer,dim,normalize", [(6, 384, True), (3, 64, True), (6, 20, True), (6, 100, False)])
def test_binary_precisions_are_sentence_transformers_bit_for_bit(enc, layer, dim, normalize):
    quantize = st_quantize()
    v = enc.encode(TEXTS, layer=layer, dim=dim, normalize_embeddings=normalize)
    for precision, kind in (("ubinary", np.uint8), ("binary", np.int8)):
        ours = enc.encode(TEXTS, layer=layer, dim=dim, normalize_embeddings=normalize,
                          precision=precision)
        theirs = quantize(v, precision=precision)
        assert ours.dtype == theirs.dtype == kind
        assert ours.shape == theirs.shape == (len(TEXTS), (dim + 7) // 8)
        np.testing.assert_array_equal(ours, theirs)
        np.testing.assert_array_equal(nest.quantize_embeddings(v, precision), theirs)


def test_binary_edge_values_match_sentence_transformers():
    """Signs at 0, -0, the smallest subnormal, inf and NaN, and every width from 1 to 17."""
    quantize = st_quantize()
    rng = np.random.default_rng(5)
    special = np.array([0.0, -0.0, 1e-45, -1e-45, np.inf, -np.inf, np.nan, 1.0], dtype=np.float32)
    for dim in range(1, 18):
        x = rng.standard_normal((9, dim)).astype(np.float32)
        x[:, : min(dim, 8)] = special[: min(dim, 8)]
        x[1] = 0.0
        for precision in ("ubinary", "binary"):
            np.testing.assert_array_equal(nest.quantize_embeddings(x, precision), quantize(x, precision=precision))
            np.testing.assert_array_equal(nest.quantize_embeddings(x[0], precision), quantize(x[:1], precision=precision)[0])


def test_sentence_transformers_own_binary_encode_agrees(enc, st_model):
    """sentence-transformers' `encode(precision="ubinary")` of its own vectors: the same bits,
    except where a coordinate is within float noise (1e-5) of zero."""
    theirs_f = st_model.encode(TEXTS, normalize_embeddings=True)
    theirs = st_model.encode(TEXTS, normalize_embeddings=True, precision="ubinary")
    ours = enc.encode(TEXTS, precision="ubinary")
    sure = np.abs(theirs_f) > 1e-5
    assert sure.mean() > 0.99
    np.testing.assert_array_equal(np.unpackbits(ours, axis=1)[sure], np.unpackbits(theirs, axis=1)[sure])


@pytest.mark.parametrize("layer,dim,normalize", [(6, 384, True), (3, 64, True), (6, 100, False)])
def test_int8_is_nests_per_row_rule(enc, layer, dim, normalize):
    v = enc.encode(TEXTS, layer=layer, dim=dim, normalize_embeddings=normalize)
    codes = enc.encode(TEXTS, layer=layer, dim=dim, normalize_embeddings=normalize, precision="int8")
    want, want_s = nest_int8_rule(v)
    assert codes.dtype == np.int8 and codes.shape == (len(TEXTS), dim)
    np.testing.assert_array_equal(codes, want)
    got, scales = nest.quantize_embeddings(v, "int8", return_scales=True)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(scales, want_s)
    assert np.abs(codes).max(axis=1).tolist() == [127] * len(TEXTS)
    # uint8: the same codes + 128
    u = enc.encode(TEXTS, layer=layer, dim=dim, normalize_embeddings=normalize, precision="uint8")
    assert u.dtype == np.uint8
    np.testing.assert_array_equal(u.astype(np.int16), want.astype(np.int16) + 128)
    # dot(codes) * s_a * s_b estimates the float dot product
    est = (codes.astype(np.float32) * scales[:, None]) @ (codes.astype(np.float32) * scales[:, None]).T
    assert float(np.abs(est - v @ v.T).max()) < 0.02


def test_int8_edge_rows():
    rng = np.random.default_rng(9)
    x = rng.standard_normal((6, 33)).astype(np.float32)
    x[0] = 0.0                                   # all zero: codes 0, scale 0
    x[1, :] = 0.5
    x[1, 3] = -1.0                               # the max |x| is negative
    x[2] *= 1e-30                                # tiny values
    x[3] = np.arange(33, dtype=np.float32) - 16  # halves: x / s lands on .5
    x[4, 5] = np.inf                             # non-finite: codes 0, scale 0
    codes, scales = nest.quantize_embeddings(x, "int8", return_scales=True)
    want, want_s = nest_int8_rule(x[[0, 1, 2, 3, 5]])
    np.testing.assert_array_equal(codes[[0, 1, 2, 3, 5]], want)
    np.testing.assert_array_equal(scales[[0, 1, 2, 3, 5]], want_s)
    assert scales[0] == 0 and not codes[0].any()
    assert scales[4] == 0 and not codes[4].any()
    one, s = nest.quantize_embeddings(x[1], "int8", return_scales=True)
    np.testing.assert_array_equal(one, want[1])
    assert s == want_s[1]


def test_precision_shapes_and_types(enc):
    import torch

    assert enc.encode("A man is playing a guitar.", precision="ubinary").shape == (48,)
    assert enc.encode("A man is playing a guitar.", dim=20, precision="binary").shape == (3,)
    assert enc.encode([], precision="int8").shape == (0, 384)
    t = enc.encode(TEXTS[:2], precision="int8", convert_to_tensor=True)
    assert t.dtype == torch.int8 and tuple(t.shape) == (2, 384)
    lst = enc.encode(TEXTS[:2], precision="ubinary", convert_to_numpy=False)
    assert len(lst) == 2 and lst[0].dtype == torch.uint8
    f = enc.encode(TEXTS[:2], precision="float32")
    np.testing.assert_array_equal(f, enc.encode(TEXTS[:2]))
    np.testing.assert_array_equal(nest.quantize_embeddings(torch.from_numpy(f), "ubinary"),
                                  nest.quantize_embeddings(f, "ubinary"))
    with pytest.raises(ValueError, match="precision"):
        nest.quantize_embeddings(f, "float16")
    with pytest.raises(ValueError, match="dimensions"):
        nest.quantize_embeddings(np.zeros((2, 2, 2)), "int8")


def test_a_misspelt_environment_variable_warns_at_import():
    typo = "NEST_" + "CUDA_GRAPH"  # built, so that the scan of the names in use skips it
    env = {**os.environ, typo: "0", "NEST_WORD_CACHE": "1"}
    run = subprocess.run([sys.executable, "-c", "import nest"], env=env, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    said = [l for l in run.stderr.splitlines() if "RuntimeWarning" in l]
    assert len(said) == 1, run.stderr
    assert f"{typo} is set, but Nest reads no such variable" in said[0], run.stderr
    assert "did you mean NEST_CUDA_GRAPHS?" in said[0], run.stderr


def test_an_untrained_point_warns_and_the_default_does_not(enc):
    import warnings

    with pytest.warns(UserWarning, match=r"layer 3 is not a trained exit \(trained: 6\)"):
        enc.encode("A man is playing a guitar.", layer=3)
    with pytest.warns(UserWarning, match=r"dim 64 is not a trained dim \(trained: 384\)"):
        enc.encode(["A man is playing a guitar."], dim=64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        enc.encode("A man is playing a guitar.")
