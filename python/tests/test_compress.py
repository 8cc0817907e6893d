"""`nest.compress` in-process: an adaptor trained on embedding files is written and read back by
`nest.Encoder(..., adaptor=...)`-free checks (its record's per-dim scores), resumed with a
smaller dim, and bad input comes back as the right exception.

    scripts/setup/python_test.sh    # or in a venv: scripts/setup/python_wheel.sh --install && HF_HUB_OFFLINE=1 python -m pytest python/tests -q
"""

import json
from pathlib import Path

import numpy as np
import pytest

import nest
from support import MODEL, model_with, need_model


def retrieval_set(tmp: Path):
    rng = np.random.default_rng(7)
    docs = rng.standard_normal((64, 32)).astype(np.float32)
    queries = (docs + 0.3 * rng.standard_normal((64, 32))).astype(np.float32)
    np.save(tmp / "c.npy", docs)
    np.save(tmp / "q.npy", queries)
    head = "query-id\tcorpus-id\tscore\n"
    (tmp / "qrels.tsv").write_text(head + "".join(f"{i}\t{i}\t1\n" for i in range(48)))
    (tmp / "test.tsv").write_text(head + "".join(f"{i}\t{i}\t1\n" for i in range(48, 64)))
    return dict(embeddings=tmp / "c.npy", queries=tmp / "q.npy", qrels=tmp / "qrels.tsv",
                test_qrels=tmp / "test.tsv")


def test_compress_trains_writes_and_resumes(tmp_path):
    files = retrieval_set(tmp_path)
    r = nest.compress(tmp_path / "a", dims=[8, 16, 32], method="smec", epochs=2, batch_size=16,
                      progress=False, **files)
    assert r.method == "smec" and sorted(r.dims) == [8, 16, 32], r
    assert set(r.val_ndcg_at_10) == {8, 16, 32} and set(r.test_ndcg_at_10) == {8, 16, 32}
    assert all(0.0 <= v <= 1.0 for v in r.test_ndcg_at_10.values())
    saved = json.loads(Path(r.out, "adaptor.json").read_text())
    assert saved["method"] == "smec"
    # the CLI's record of its inputs is the same shape: a resume reads them back
    # in place only when asked: the new stage changes every dim's vectors
    with pytest.raises(ValueError, match="--out NEW"):
        nest.compress(dims=[4], resume=r.out, epochs=1, batch_size=16, progress=False)
    again = nest.compress(dims=[4], resume=r.out, epochs=1, batch_size=16, progress=False,
                          overwrite=True)
    assert sorted(again.dims) == [4, 8, 16, 32], again
    kept = nest.compress(tmp_path / "b", dims=[2], resume=r.out, epochs=1, batch_size=16,
                         progress=False)
    assert sorted(kept.dims) == [2, 4, 8, 16, 32], kept


def test_compress_errors_are_python_exceptions(tmp_path):
    files = retrieval_set(tmp_path)
    with pytest.raises(FileNotFoundError):
        nest.compress(tmp_path / "x", dims=[8, 16, 32], progress=False,
                      **{**files, "embeddings": tmp_path / "missing.npy"})
    with pytest.raises(ValueError, match="not an option"):
        nest.compress(tmp_path / "x", dims=[8, 16, 32], progress=False, warmup=3, **files)
    with pytest.raises(ValueError, match="halving"):
        nest.compress(tmp_path / "x", dims=[5, 16, 32], progress=False, **files)
    nest.compress(tmp_path / "b", dims=[8, 16, 32], epochs=1, progress=False, **files)
    with pytest.raises(ValueError, match="overwrite"):
        nest.compress(tmp_path / "b", dims=[8, 16, 32], epochs=1, progress=False, **files)


def test_an_encoder_applies_a_compress_adaptor(tmp_path):
    need_model()
    texts = ["a cat sits on the mat", "a dog runs in the park", "music from a guitar", "rain on the road"]
    m = nest.Encoder(MODEL, dtype="float32")
    np.save(tmp_path / "c.npy", m.encode(texts, normalize_embeddings=False, dim=384))
    np.save(tmp_path / "q.npy", m.encode(texts, normalize_embeddings=False, dim=384))
    (tmp_path / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(f"{i}\t{i}\t1\n" for i in range(4)))
    a = nest.compress(tmp_path / "a", dims=[96, 192, 384], method="mrl", epochs=1, batch_size=2,
                      embeddings=tmp_path / "c.npy", queries=tmp_path / "q.npy",
                      qrels=tmp_path / "qrels.tsv", progress=False)
    ma = nest.Encoder(MODEL, dtype="float32", adaptor=a.out)
    v = ma.encode(texts, dim=96)
    assert v.shape == (4, 96)
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-4)
    # the adaptor's head, not the plain first 96 coordinates
    assert not np.allclose(v, m.encode(texts, dim=96), atol=1e-3)
    with pytest.raises(ValueError):
        ma.encode(texts, dim=100)
    # nest.evaluate takes the adaptor too (nest eval --adaptor): its dims are the grid's
    sts = tmp_path / "sts.tsv"
    sts.write_text("sentence1\tsentence2\tscore\n" + "".join(
        f"{texts[i]}\t{texts[j]}\t{float(i == j) * 5}\n" for i in range(4) for j in range(4)))
    r = nest.evaluate(MODEL, sts=[str(sts)], layers=[6], dtype="float32", adaptor=a.out)
    assert sorted(c["dim"] for c in r["tasks"][0]["cells"]) == [96, 192, 384]


TEXTS4 = ["a cat sits on the mat", "a dog runs in the park", "music from a guitar", "rain on the road"]


def tiny_beir(tmp_path: Path):
    """A BEIR folder of four documents and four queries (query i's text is document i's), with
    train qrels pairing them; the folder and the texts."""
    beir = tmp_path / "beir"
    (beir / "qrels").mkdir(parents=True)
    (beir / "corpus.jsonl").write_text("".join(
        json.dumps({"_id": f"d{i}", "title": "", "text": t}) + "\n" for i, t in enumerate(TEXTS4)))
    (beir / "queries.jsonl").write_text("".join(
        json.dumps({"_id": f"q{i}", "text": t}) + "\n" for i, t in enumerate(TEXTS4)))
    (beir / "qrels" / "train.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\td{i}\t1\n" for i in range(4)))
    return beir, TEXTS4


def test_an_adaptor_trained_on_another_models_vectors_warns(tmp_path):
    need_model()
    import warnings
    beir, _ = tiny_beir(tmp_path)
    a = nest.compress(tmp_path / "a", dims=[96, 192, 384], method="mrl", epochs=1, batch_size=2,
                      model=MODEL, beir=beir, cache=tmp_path / "cache", progress=False)
    # compress recorded the model's vector of the probe sentence: its own model says nothing
    path = Path(a.out, "adaptor.json")
    record = json.loads(path.read_text())
    assert len(record["info"]["source"]["probe"]["vector"]) == 384
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nest.Encoder(MODEL, dtype="float32", adaptor=a.out)
    # another model's vectors (here: the record as another model would have written it)
    record["info"]["source"]["probe"]["vector"] = [-x for x in record["info"]["source"]["probe"]["vector"]]
    path.write_text(json.dumps(record))
    with pytest.warns(UserWarning, match="trained on another model's vectors"):
        nest.Encoder(MODEL, dtype="float32", adaptor=a.out)


def _safetensors(path: Path) -> dict:
    """A safetensors file's float32 tensors, read by hand (numpy only)."""
    raw = path.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        assert t["dtype"] == "F32", t
        a, b = t["data_offsets"]
        out[name] = np.frombuffer(raw[8 + n + a:8 + n + b], dtype=np.float32).reshape(t["shape"])
    return out


def test_compress_embeds_queries_and_documents_with_their_prompts(tmp_path):
    """A model with query / passage prompts: `compress --model --beir` embeds the queries with
    the query prompt and the corpus with the passage prompt, as encode_query / encode_document
    (and as nest eval and the index do); it used the default prompt (here none) for both."""
    need_model()
    prompted = model_with(tmp_path / "prompted", "config_sentence_transformers.json",
                          json.dumps({"prompts": {"query": "query: ", "passage": "passage: "}}))
    beir, texts = tiny_beir(tmp_path)
    nest.compress(tmp_path / "a", dims=[192, 384], method="truncate", model=str(prompted),
                  beir=beir, cache=tmp_path / "cache", progress=False)
    [cached] = list((tmp_path / "cache").glob("*.safetensors"))
    t = _safetensors(cached)
    enc = nest.Encoder(str(prompted), dtype="float32")
    unit = lambda x: x / np.linalg.norm(x, axis=1, keepdims=True)  # noqa: E731
    for name, want, plain in [("queries", enc.encode_query(texts), enc.encode(texts)),
                              ("corpus", enc.encode_document(texts), enc.encode(texts))]:
        cos = (unit(t[name]) * want).sum(axis=1)
        assert cos.min() > 0.9999, (name, cos)
        assert (unit(t[name]) * plain).sum(axis=1).min() < 0.999, name

