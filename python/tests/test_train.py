"""`nest.train` in-process: a run finishes and exports; Ctrl-C (a real SIGINT) stops it after a
step with a checkpoint and raises KeyboardInterrupt, and the resumed run logs what the
uninterrupted one logged, bit for bit; bad input comes back as the right exception.

    scripts/setup/python_test.sh    # or in a venv: scripts/setup/python_wheel.sh --install && HF_HUB_OFFLINE=1 python -m pytest python/tests -q
"""

import json
import os
import signal
import threading
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import nest  # noqa: E402
from support import ROOT, MODEL, cli_eval_sts, model_with, need_data, need_model, nest_bin  # noqa: E402

need_model()
SNLI = need_data("snli/triplets_dev.tsv")
STSB = need_data("stsb/test.tsv")


def pairs(tmp: Path, n: int) -> str:
    lines = SNLI.read_text().splitlines()
    out = tmp / "pairs.tsv"
    out.write_text("\n".join("\t".join(l.split("\t")[:2]) for l in lines[: n + 1]) + "\n")
    return f"{out}:pairs"


def overrides(data: str, steps: int) -> dict:
    return {
        "model": str(MODEL),
        "data": data,
        "loss": "mnrl",
        "matryoshka_dims": [64, 128, 384],
        "batch_size": 8,
        "max_length": 16,
        "max_steps": steps,
        "save_every": 1000,
        "seed": 3,
    }


def losses(run: str) -> list:
    rows = [json.loads(l) for l in Path(run, "metrics.jsonl").read_text().splitlines()]
    return [r["loss"] for r in rows if "lr" in r]


def test_a_run_finishes_and_exports(tmp_path):
    r = nest.train(overrides=overrides(pairs(tmp_path, 64), 3), run_dir=tmp_path / "run", progress=False)
    assert r.steps == 3 and not r.stopped
    assert Path(r.final, "model.safetensors").is_file()
    m = nest.Encoder(r.final)
    assert m.encode(["a cat"], dim=64).shape == (1, 64)


def sigint_after_steps(run: Path, steps: int, stop: threading.Event) -> threading.Thread:
    """A thread that sends this process SIGINT once `run` has logged `steps` steps (not after
    a fixed time: on a fast machine a whole run can end before any timer fires)."""

    def watch():
        log = run / "metrics.jsonl"
        while not stop.is_set():
            if log.is_file() and log.read_text().count('"lr"') >= steps:
                os.kill(os.getpid(), signal.SIGINT)
                return
            stop.wait(0.002)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    return t


def test_ctrl_c_checkpoints_and_the_resume_is_exact(tmp_path):
    n = 120
    data = pairs(tmp_path, 8 * n)
    full = nest.train(overrides=overrides(data, n), run_dir=tmp_path / "full", progress=False)
    run = tmp_path / "cut"
    stop = threading.Event()
    # Python's own Ctrl-C handler, as a user's process has it: an earlier test in the same
    # session (an asyncio runner's) can leave another one installed, and Nest runs whatever
    # handler the process has
    handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    watcher = sigint_after_steps(run, 3, stop)
    try:
        with pytest.raises(KeyboardInterrupt, match="resume=True"):
            nest.train(overrides=overrides(data, n), run_dir=run, progress=False)
    finally:
        stop.set()
        watcher.join()
        signal.signal(signal.SIGINT, handler)
    cut = losses(run)
    assert 3 <= len(cut) < n, f"{len(cut)} steps before the stop"
    assert Path(run, "checkpoints", f"step-{len(cut):08d}").is_dir()
    assert not Path(run, "final").exists()
    # the cut run's newest checkpoint as a model (as sentence-transformers' checkpoint-N loads)
    out = nest.export_checkpoint(run, tmp_path / "cut-model", progress=False)
    assert nest.Encoder(out).encode(["a cat"], dim=64).shape == (1, 64)
    with pytest.raises(ValueError, match="overwrite"):
        nest.export_checkpoint(run, out, progress=False)
    done = nest.train(run_dir=run, resume=True, progress=False)
    assert done.steps == n and done.final
    assert losses(run) == losses(full.run_dir)


def test_a_resume_on_changed_data_is_refused_unless_allowed(tmp_path):
    data = pairs(tmp_path, 32)
    run = tmp_path / "run"
    nest.train(overrides={**overrides(data, 2), "save_every": 1}, run_dir=run, progress=False)
    path = Path(data.rsplit(":", 1)[0])
    lines = path.read_text().splitlines()
    lines[2] = lines[2] + " again"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match="training data changed"):
        nest.train(run_dir=run, resume=True, progress=False)
    done = nest.train(run_dir=run, resume=True, progress=False, allow_data_change=True)
    assert done.steps == 2 and done.final


def test_errors_are_python_exceptions(tmp_path):
    with pytest.raises(FileNotFoundError):
        nest.train(run_dir=tmp_path / "missing", resume=True, progress=False)
    with pytest.raises(ValueError, match="no_such_key|no-such-key"):
        nest.train(overrides={**overrides(pairs(tmp_path, 16), 1), "no_such_key": 1},
                   run_dir=tmp_path / "bad", progress=False)


def test_overrides_are_typed_values_and_errors_name_the_key(tmp_path):
    import numpy as np

    base = overrides(pairs(tmp_path, 16), 1)
    # a wrong-typed value: a ValueError naming the key as the user wrote it
    with pytest.raises(ValueError, match=r'overrides\["lr"\]'):
        nest.train(overrides={**base, "lr": "fast"}, run_dir=tmp_path / "lr", progress=False)
    # a value that is no TOML value at all
    with pytest.raises(ValueError, match=r'overrides\["seed"\]: expected a number.*got object'):
        nest.train(overrides={**base, "seed": object()}, run_dir=tmp_path / "obj", progress=False)
    # numpy integers, paths and lists pass as what they are
    r = nest.train(overrides={**base, "seed": np.int64(5), "model": Path(MODEL), "matryoshka_dims": (64, 384)},
                   run_dir=tmp_path / "typed", progress=False)
    assert r.steps == 1 and not r.stopped
    saved = Path(r.run_dir, "recipe.toml").read_text()
    assert "seed = 5" in saved and "matryoshka_dims = [\n    64,\n    384,\n]" in saved, saved


def test_evaluate_matches_the_cli(tmp_path):
    report = nest.evaluate(str(MODEL), sts=[str(STSB)], layers=[3, 6], dims=[64, 384], dtype="float32")
    cells = {(c["layer"], c["dim"]): c["metrics"] for c in report["tasks"][0]["cells"]}
    assert set(cells) == {(3, 64), (3, 384), (6, 64), (6, 384)}
    cli = nest_bin(optional=True)
    if cli:
        theirs = cli_eval_sts(cli, MODEL, STSB, tmp_path / "cli", "3,6", "64,384")
        # the same code; float reordering between two processes' thread teams only
        for c in theirs["tasks"][0]["cells"]:
            mine = cells[(c["layer"], c["dim"])]
            assert set(mine) == set(c["metrics"])
            for k, v in c["metrics"].items():
                assert abs(v - mine[k]) < 1e-4, (c["layer"], c["dim"], k, v, mine[k])
    with pytest.raises(FileNotFoundError):
        nest.evaluate(str(MODEL), sts=[str(tmp_path / "missing.tsv")])
    with pytest.raises(ValueError):
        nest.evaluate(str(MODEL))


def test_evaluate_uses_the_models_prompts_as_the_cli(tmp_path):
    # all-MiniLM-L6-v2 with a default prompt (files linked, one config written)
    prompts = json.dumps({"prompts": {"query": "query: "}, "default_prompt_name": "query"})
    prompted = model_with(tmp_path / "prompted", "config_sentence_transformers.json", prompts)
    small = tmp_path / "small.tsv"
    small.write_text("".join(STSB.read_text().splitlines(keepends=True)[:41]))

    def spearman(model, **kw):
        r = nest.evaluate(str(model), sts=[str(small)], layers=[6], dims=[384], dtype="float32", **kw)
        return r["tasks"][0]["cells"][0]["metrics"]["spearman"]

    own = spearman(prompted)
    assert own != spearman(MODEL), "the model's default prompt was not applied"
    assert spearman(prompted, prompt_name="query") == own, "named = the default here"
    cli = nest_bin(optional=True)
    if cli:
        theirs = cli_eval_sts(cli, prompted, small, tmp_path / "cli", "6", "384")
        theirs = theirs["tasks"][0]["cells"][0]["metrics"]
        assert abs(theirs["spearman"] - own) < 1e-4, (theirs, own)
    with pytest.raises(ValueError, match="prompt_name"):
        spearman(prompted, prompt_name="nope")
    # one path and the CLI's list forms, never a string's characters (dims="128" was 1, 2, 8)
    r = nest.evaluate(str(prompted), sts=str(small), layers="5-6", dims="64,384", dtype="float32")
    assert {(c["layer"], c["dim"]) for c in r["tasks"][0]["cells"]} == {(5, 64), (5, 384), (6, 64), (6, 384)}
    r = nest.evaluate(str(prompted), sts=small, layers=6, dims="384", dtype="float32")
    assert [(c["layer"], c["dim"]) for c in r["tasks"][0]["cells"]] == [(6, 384)]
    assert r["tasks"][0]["cells"][0]["metrics"]["spearman"] == own
    with pytest.raises(ValueError, match="dims: 'x' is not a list of ints"):
        nest.evaluate(str(prompted), sts=small, dims="x")
    with pytest.raises(TypeError, match="dims: expected ints"):
        nest.evaluate(str(prompted), sts=small, dims=[64.0])
    # another model's report in `out` is kept unless overwrite=True, as `nest eval --out`
    rep = tmp_path / "rep"
    spearman(prompted, out=str(rep))
    before = (rep / "report.json").read_bytes()
    with pytest.raises(ValueError, match=r"^out: .*holds the report of another model.*overwrite=True"):
        spearman(MODEL, out=str(rep))
    assert (rep / "report.json").read_bytes() == before
    assert spearman(MODEL, out=str(rep), overwrite=True) != own
    assert json.loads((rep / "report.json").read_text())["model"]["path"] == str(MODEL)


def test_index_build_takes_the_lock_and_refuses_documents_it_cannot_serve(tmp_path):
    """Helper trial D: a build under a server of the index (its lock held) is refused, as the
    CLI's; an empty text or an id with a NUL is a ValueError naming the document."""
    import fcntl

    out = tmp_path / "idx"
    with open(tmp_path / ".idx.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(Exception, match="in use"):
            nest.Index.build(out, str(MODEL), ["a cat"])
    assert not out.exists()
    with pytest.raises(ValueError, match=r"documents\[1\]: text is empty"):
        nest.Index.build(out, str(MODEL), ["a cat", {"id": "e", "text": ""}])
    with pytest.raises(ValueError, match="NUL"):
        nest.Index.build(out, str(MODEL), [{"id": "a\0b", "text": "x"}])
    idx = nest.Index.build(out, str(MODEL), ["a cat", "a dog"])
    assert idx.search("cat", k=1)[0]["id"] == "0"
    with pytest.raises(ValueError, match="k must be at least 1"):
        idx.search("cat", k=-1)


def test_index_adds_replaces_and_deletes_durably(tmp_path):
    """Trial D U4 in Python: documents added, replaced and deleted in-process are searched at
    once, by a new reader and by `nest search`, as a server's /v1/documents routes change them;
    under a server of the index (its lock held) a change is refused, the journal untouched."""
    import fcntl
    import subprocess

    path = tmp_path / "idx"
    docs = [{"id": "d1", "text": "the cat sat"}, {"id": "d2", "text": "a dog ran"},
            {"id": "d3", "text": "a bird flew"}]
    idx = nest.Index.build(path, str(MODEL), docs, store_text=True)
    assert idx.add([{"id": "d1", "text": "a purple giraffe"}]) == {
        "added": [], "replaced": [], "existing": ["d1"], "count": 3}
    r = idx.add([{"id": "d1", "text": "a purple giraffe"}, {"id": "n1", "text": "an orange whale", "lang": "fr"}],
                existing="replace")
    assert (r["added"], r["replaced"], r["count"]) == (["n1"], ["d1"], 4), r
    assert idx.delete(["d2", "nope"]) == {"deleted": ["d2"], "missing": ["nope"], "count": 3}
    assert len(idx) == 3
    with pytest.raises(ValueError, match="existing"):
        idx.add(["x"], existing="upsert")
    want = {"d1": "a purple giraffe", "d3": "a bird flew", "n1": "an orange whale"}
    for reader in (idx, nest.Index(path)):
        hits = reader.search("a dog ran", k=10)
        assert {h["id"]: h["payload"]["text"] for h in hits} == want
    assert idx.search("a purple giraffe", k=1)[0]["id"] == "d1"
    cli = nest_bin(optional=True)
    if cli:
        out = subprocess.run([str(cli), "search", "--index", str(path), "--query", "a dog ran", "--k", "10"],
                             check=True, capture_output=True, text=True).stdout
        assert {h["id"] for h in json.loads(out.splitlines()[0])["hits"]} == set(want)
    journal = (path / "added.jsonl").read_bytes()
    with open(tmp_path / ".idx.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(Exception, match="in use"):
            idx.delete("d1")
    assert (path / "added.jsonl").read_bytes() == journal
    # a second reader's change after the first changed the index: refused until reopened
    other = nest.Index(path)
    idx.delete("d3")
    with pytest.raises(ValueError, match="open the index again"):
        other.delete("d1")
    assert nest.Index(path).delete("d1")["deleted"] == ["d1"]


def test_index_builds_and_searches_as_the_cli(tmp_path):
    import subprocess

    docs = [
        {"id": "d1", "text": "A man is playing a guitar.", "lang": "en"},
        {"id": "d2", "text": "A woman is slicing an onion.", "lang": "en"},
        {"id": "d3", "text": "Le chat est sur la table.", "lang": "fr"},
        {"id": "d4", "text": "Stocks fell sharply on Monday.", "lang": "en"},
    ]
    idx = nest.Index.build(tmp_path / "idx", str(MODEL), docs, dims=[64, 384], precision="float32,binary")
    assert len(idx) == 4
    hits = idx.search("someone plays music on a guitar", k=2)
    assert hits[0]["id"] == "d1" and hits[0]["payload"]["lang"] == "en"
    assert [h["id"] for h in idx.search("a cat", k=4, filter={"lang": "fr"})] == ["d3"]
    # the model's own folder as the index's path: refused, overwrite or not (a linked copy)
    linked = model_with(tmp_path / "linked", "note.txt", "kept")
    with pytest.raises(ValueError, match=r"^path: .* is the model .*would destroy the input"):
        nest.Index.build(linked, str(linked), docs, overwrite=True)
    assert (linked / "note.txt").read_text() == "kept" and (linked / "config.json").exists()
    funnel = "binary:384@4>float32:384"
    ours = idx.search(["a guitar", "onions"], k=3, funnel=funnel)
    cli = nest_bin(optional=True)
    if cli:
        out = subprocess.run([str(cli), "search", "--index", str(tmp_path / "idx"), "--query", "a guitar",
                              "--query", "onions", "--k", "3", "--funnel", funnel],
                             check=True, capture_output=True, text=True).stdout
        theirs = [json.loads(l)["hits"] for l in out.splitlines()]
        for a, b in zip(ours, theirs):
            assert [h["id"] for h in a] == [h["id"] for h in b]
            assert all(abs(x["score"] - y["score"]) < 1e-5 for x, y in zip(a, b))
    # the texts beside the vectors, for hits that show them (--store-text)
    plain = nest.Index.build(tmp_path / "plain", str(MODEL), ["a guitar", "an onion"], store_text=True)
    hit = plain.search("guitar", k=1)[0]
    assert hit["id"] == "0" and hit["payload"] == {"text": "a guitar"}, hit
    # BEIR's corpus rows (`_id`, `title`): the ids, texts and payloads `nest index build` reads
    rows = [{"_id": "d1", "title": "Guitars", "text": "A man plays.", "url": "u"},
            {"_id": "d2", "title": "", "text": "An onion."}]
    beir = nest.Index.build(tmp_path / "beir", str(MODEL), rows)
    cli = nest_bin(optional=True)
    if cli:
        (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        subprocess.run([str(cli), "index", "build", "--model", str(MODEL), "--input",
                        str(tmp_path / "rows.jsonl"), "--payload", "--out", str(tmp_path / "beir-cli")],
                       check=True, capture_output=True)
        theirs = nest.Index(tmp_path / "beir-cli").search("guitar music", k=2)
        ours = beir.search("guitar music", k=2)
        assert [h["id"] for h in ours] == [h["id"] for h in theirs] == ["d1", "d2"]
        assert all(abs(a["score"] - b["score"]) < 1e-5 for a, b in zip(ours, theirs))
        assert ours[0]["payload"] == theirs[0]["payload"] == {"title": "Guitars", "url": "u"}
    # recorded, so that a server adding documents to it stores their texts too
    assert json.loads((tmp_path / "plain" / "index.json").read_text())["source"]["store_text"] is True
    # a rebuild over documents a server added (its journal) drops none of them without a choice
    z = nest.Encoder(str(MODEL)).encode_document(["a zebra on the savanna"], normalize_embeddings=True)[0]
    row = {"id": "z", "payload": {"text": "a zebra"}, "vector": [float(x) for x in z]}
    (tmp_path / "plain" / "added.jsonl").write_text(json.dumps(row) + "\n")
    again = dict(store_text=True, overwrite=True)
    with pytest.raises(ValueError, match=r"holds 1 documents added, replaced or deleted .*keep_added=True"):
        nest.Index.build(tmp_path / "plain", str(MODEL), ["a guitar", "an onion"], **again)
    kept = nest.Index.build(tmp_path / "plain", str(MODEL), ["a guitar", "an onion"], keep_added=True, **again)
    assert kept.search("zebra", k=1)[0]["id"] == "z"
    dropped = nest.Index.build(tmp_path / "plain", str(MODEL), ["a guitar"], keep_added=False, **again)
    assert [h["id"] for h in dropped.search("zebra", k=5)] == ["0"]
    # a model with query / document prompts: documents take its document prompt (recorded),
    # queries its query prompt, as encode_document / encode_query; the same scores as the CLI
    prompted = model_with(tmp_path / "prompted", "config_sentence_transformers.json",
                          json.dumps({"prompts": {"query": "query: ", "passage": "passage: "}}))
    docs = ["a guitar", "an onion", "a violin"]
    pidx = nest.Index.build(tmp_path / "pidx", str(prompted), docs)
    source = json.loads((tmp_path / "pidx" / "index.json").read_text())["source"]
    assert source["document_prompt"] == "passage: "
    ours = pidx.search("music", k=3)
    assert ours == pidx.search("music", k=3, prompt_name="query")
    assert [h["score"] for h in ours] != [h["score"] for h in pidx.search("music", k=3, prompt="")]
    enc = nest.Encoder(str(prompted))
    q = enc.encode_query(["music"], normalize_embeddings=True)[0]
    d = enc.encode_document(docs, normalize_embeddings=True)
    best = max(range(3), key=lambda i: float(d[i] @ q))
    assert ours[0]["id"] == str(best) and abs(ours[0]["score"] - float(d[best] @ q)) < 1e-5
    with pytest.raises(FileNotFoundError):
        nest.Index(tmp_path / "nothing")
    with pytest.raises(ValueError, match=r"documents\[2\]: duplicate id 'x' \(first at documents\[0\]\)"):
        nest.Index.build(tmp_path / "dup", str(MODEL), [{"id": "x", "text": "a"}, "b", {"_id": "x", "text": "c"}])
    assert not (tmp_path / "dup").exists()
    assert pidx.search([], k=3) == []
    with pytest.raises(ValueError):
        idx.search("x", funnel="nonsense")


def distill_recipe(tmp: Path) -> Path:
    lines = SNLI.read_text().splitlines()[1:33]
    single = tmp / "single.tsv"
    single.write_text("text\n" + "\n".join(l.split("\t")[0] for l in lines) + "\n")
    pairs_file = tmp / "pairs2.tsv"
    pairs_file.write_text("anchor\tpositive\n" + "\n".join("\t".join(l.split("\t")[:2]) for l in lines) + "\n")
    common = 'batch_size = 8\nmax_length = 16\nmax_steps = 2\nsave_every = 1000\nseed = 3\nmatryoshka_dims = [64, 384]\n'
    recipe = tmp / "ibkd.toml"
    recipe.write_text(
        f'teacher = "{MODEL}"\nstudent = "{MODEL}"\nteacher_max_length = 16\n\n'
        f'[stage1]\nloss = "none"\nlr = 1e-4\n{common}'
        f'data = [{{ path = "{single}", format = "single" }}]\n'
        'objective = [{ kind = "distill", loss = "infonce", temperature = 0.1 }]\n\n'
        f'[stage2]\nloss = "mnrl"\nlr = 2e-5\n{common}'
        f'data = [{{ path = "{pairs_file}", format = "pairs" }}]\n'
    )
    return recipe


def test_distill_runs_both_stages_and_takes_stage_keys(tmp_path):
    recipe = distill_recipe(tmp_path)
    r = nest.distill(recipe, run_dir=tmp_path / "d", overrides={"stage2.max_steps": 3}, progress=False)
    assert [s["steps"] for s in r.stages] == [2, 3], r
    assert not r.stopped and Path(r.final, "model.safetensors").is_file()
    assert r.final.endswith(os.path.join("stage2", "final"))
    assert nest.Encoder(r.final).encode(["a dog runs"], dim=64).shape == (1, 64)
    # done stages are skipped on a second call with the same keys
    again = nest.distill(recipe, run_dir=tmp_path / "d", overrides={"stage2.max_steps": 3}, progress=False)
    assert again.stages == [] and again.final == r.final


def test_distill_errors_are_python_exceptions(tmp_path):
    with pytest.raises(FileNotFoundError):
        nest.distill(tmp_path / "missing.toml", run_dir=tmp_path / "x", progress=False)
    recipe = distill_recipe(tmp_path)
    with pytest.raises(ValueError, match="stage"):
        nest.distill(recipe, stage="3", run_dir=tmp_path / "x", progress=False)
    with pytest.raises(ValueError, match="not a key of a distillation recipe"):
        nest.distill(recipe, overrides={"lr": 1e-4}, run_dir=tmp_path / "x", progress=False)
