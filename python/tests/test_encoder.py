"""The Python package `nest`: parity with sentence-transformers and with `nest encode`, the
(layer, dim) point, prompts, threads, and errors as the right Python exceptions.

Run from the repository root (models/ from scripts/setup.sh), after installing the package:

    scripts/python_wheel.sh --install && HF_HUB_OFFLINE=1 python -m pytest python/tests -q
"""

import json
import os
import shutil
import subprocess
import threading
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import nest  # noqa: E402  (after HF_HUB_OFFLINE)

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "models" / "all-MiniLM-L6-v2"
NEST_BIN = ROOT / "target" / "release" / "nest"

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

if not MODEL.is_dir():
    pytest.skip(f"{MODEL} is missing: run scripts/setup.sh models", allow_module_level=True)


@pytest.fixture(scope="module")
def enc():
    return nest.Encoder(str(MODEL), dtype="float32")


@pytest.fixture(scope="module")
def st_model():
    st = pytest.importorskip("sentence_transformers")
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


def test_parity_with_a_prompt_text(enc, st_model):
    ours = enc.encode(TEXTS, prompt="query: ")
    theirs = st_model.encode(TEXTS, prompt="query: ", normalize_embeddings=True)
    assert float(np.abs(ours - theirs).max()) < 1e-4


def test_parity_at_a_truncated_dim(enc, st_model):
    ours = enc.encode(TEXTS, dim=128)
    st = pytest.importorskip("sentence_transformers")
    theirs = st.SentenceTransformer(str(MODEL), device="cpu", truncate_dim=128).encode(
        TEXTS, normalize_embeddings=True
    )
    assert ours.shape == theirs.shape == (len(TEXTS), 128)
    assert float(np.abs(ours - theirs).max()) < 1e-4


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
    if not NEST_BIN.exists():
        pytest.skip(f"{NEST_BIN} is not built (cargo build --release): the CLI parity is unchecked")
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


# -- prompts ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def prompted(tmp_path_factory):
    """all-MiniLM-L6-v2 with `query` / `document` prompts (files linked, one config written)."""
    d = tmp_path_factory.mktemp("prompted")
    for p in MODEL.iterdir():
        if p.name != "config_sentence_transformers.json":
            (d / p.name).symlink_to(p)
    (d / "config_sentence_transformers.json").write_text(
        json.dumps({"prompts": {"query": "query: ", "document": "passage: "}})
    )
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
    st = pytest.importorskip("sentence_transformers")
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
        enc.encode(TEXTS, precision="int8")
    with pytest.raises(TypeError):
        enc.encode([1, 2])


def test_malformed_file_is_runtime_error(tmp_path):
    d = tmp_path / "m"
    d.mkdir()
    for p in MODEL.iterdir():
        if p.name != "config.json":
            (d / p.name).symlink_to(p)
    (d / "config.json").write_text("{ not json")
    with pytest.raises(RuntimeError) as e:
        nest.Encoder(str(d))
    assert "config.json" in str(e.value)
