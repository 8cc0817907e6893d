"""What the tests of the Python package need, and what happens when it is missing.

A test that needs something this machine lacks (a model from scripts/setup.sh, the datasets in
../shared/datasets, sentence-transformers, mteb, the `nest` binary) is skipped with the reason;
under CI (`CI=true`) or with `NEST_REQUIRE_MODELS=1` (set by .ci/run), as the Rust tests do, it
fails instead, so that a CI run never passes with parts of the suite silently skipped.
"""

import importlib
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "models" / "all-MiniLM-L6-v2"
DATA = Path(os.environ.get("NEST_DATA_ROOT") or ROOT.parent / "shared" / "datasets")

REQUIRED = os.environ.get("NEST_REQUIRE_MODELS") == "1" or os.environ.get("CI") == "true"


def missing(reason: str) -> None:
    """Skips the test (or the module, at module level) with `reason`; fails under CI."""
    if REQUIRED:
        pytest.fail(f"{reason} (required under CI / NEST_REQUIRE_MODELS=1)", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


def need_path(path: Path, what: str) -> Path:
    if not path.exists():
        missing(f"{path} is missing: {what}")
    return path


def need_model() -> Path:
    return need_path(MODEL, "run scripts/setup.sh models")


def need_data(rel: str) -> Path:
    return need_path(DATA / rel, "the datasets of ../shared/datasets (or $NEST_DATA_ROOT)")


def need_module(name: str, hint: str):
    """The module `name`, imported; `hint` says how to install it."""
    try:
        return importlib.import_module(name)
    except ImportError as e:
        missing(f"{name} is not importable ({e}): {hint}")


def nest_bin(optional: bool = False):
    """The `nest` binary to compare with: $NEST_BIN, else target/release/nest, else
    target/debug/nest (what `cargo test --workspace` builds, as in CI). Missing: `optional`
    gives None (the test checks the rest) outside CI, else as `missing`."""
    env = os.environ.get("NEST_BIN")
    if env:
        return need_path(Path(env), "$NEST_BIN names no file")
    for profile in ("release", "debug"):
        p = ROOT / "target" / profile / "nest"
        if p.is_file():
            return p
    if optional and not REQUIRED:
        return None
    missing(f"{ROOT}/target/release/nest is not built (cargo build --release): the CLI parity is unchecked")


def model_with(folder: Path, name: str, text: str) -> Path:
    """all-MiniLM-L6-v2's files linked into `folder`, but `name` written with `text` (a broken
    config, prompts added): a changed model without copying its weights."""
    folder.mkdir(parents=True, exist_ok=True)
    for p in MODEL.iterdir():
        if p.name != name:
            (folder / p.name).symlink_to(p)
    (folder / name).write_text(text)
    return folder


def cli_eval_sts(cli, model, data: Path, out: Path, layers: str, dims: str) -> dict:
    """`nest eval sts` of `model` on `data` in float32 without latencies; its report.json."""
    import json
    import subprocess

    subprocess.run([str(cli), "eval", "sts", "--model", str(model), "--data", str(data),
                    "--layers", layers, "--dims", dims, "--dtype", "float32",
                    "--latency-texts", "0", "--out", str(out)], check=True, capture_output=True)
    return json.loads((out / "report.json").read_text())
