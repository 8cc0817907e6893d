"""Type stubs of the native module `nest._nest` (use `nest.Encoder`, not these, directly)."""

from os import PathLike
from typing import Any, Optional, Tuple

class NativeEncoder:
    def __init__(
        self, model: str, dtype: str = "auto", max_length: Optional[int] = None, adaptor: Optional[str] = None
    ) -> None: ...
    def resolve_point(self, layer: Optional[int] = None, dim: Optional[int] = None) -> Tuple[int, int]: ...
    def untrained_note(self, layer: Optional[int] = None, dim: Optional[int] = None) -> Optional[str]: ...
    @property
    def adaptor_note(self) -> Optional[str]: ...
    def resolve_prompt(self, prompt_name: Optional[str] = None, prompt: Optional[str] = None) -> Optional[str]: ...
    def encode_raw(
        self,
        texts: list[str],
        layer: Optional[int] = None,
        dim: Optional[int] = None,
        batch_size: int = 32,
        normalize: bool = True,
        prompt_name: Optional[str] = None,
        prompt: Optional[str] = None,
        streams: int = 1,
    ) -> Tuple[bytearray, int, int]: ...
    def info_json(self) -> str: ...
    @property
    def dtype(self) -> str: ...
    @property
    def num_layers(self) -> int: ...
    @property
    def output_dim(self) -> int: ...
    @property
    def path(self) -> PathLike[str]: ...

def get_num_threads() -> int: ...
def set_num_threads(n: int) -> None: ...
def machine_native() -> str: ...
def unknown_env_native(names: list[str]) -> list[str]: ...
def train_native(
    run_dir: str,
    recipe: str | None = None,
    overrides: list[tuple[str, Any]] = ...,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    allow_data_change: bool = False,
) -> tuple[str, str, int, float, bool]: ...
def export_checkpoint_native(
    checkpoint: str, out: str, overwrite: bool = False, progress: bool = True
) -> tuple[str, int]: ...
def distill_native(
    recipe: str,
    run_dir: str,
    overrides: list[tuple[str, Any]] = ...,
    stage: str = "all",
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
) -> tuple[str, list[tuple[int, float, str]]]: ...
def compress_native(
    out: str | None,
    method: str | None,
    dims: list[int],
    inputs: list[tuple[str, str]] = ...,
    options: list[tuple[str, float]] = ...,
    val_fraction: float = 0.2,
    ads_soft: bool = False,
    resume: str | None = None,
    overwrite: bool = False,
    progress: bool = True,
) -> tuple[str, str]: ...
def evaluate_native(
    model: str,
    tasks: str | None = None,
    sts: list[str] = ...,
    data_root: str = "../shared/datasets",
    layers: list[int] | None = None,
    dims: list[int] | None = None,
    precision: str = "float32",
    dtype: str = "auto",
    batch_size: int = 32,
    out: str | None = None,
    prompt_name: str | None = None,
    query_prompt_name: str | None = None,
    document_prompt_name: str | None = None,
    adaptor: str | None = None,
    overwrite: bool = False,
    rescore: int = 4,
) -> tuple[str, str | None]: ...
class NativeIndex:
    def __init__(self, path: str, model: str | None = None) -> None: ...
    @property
    def weights_note(self) -> str | None: ...
    def rows(self) -> int: ...
    def add(
        self,
        ids: list[str],
        texts: list[str],
        payloads: list[str | None],
        existing: str = "keep",
        prompt_name: str | None = None,
        prompt: str | None = None,
        batch_size: int = 32,
    ) -> str: ...
    def delete(self, ids: list[str]) -> str: ...
    def search(
        self,
        queries: list[str],
        k: int = 10,
        funnel: str | None = None,
        filter: str | None = None,
        prompt_name: str | None = None,
        prompt: str | None = None,
    ) -> str: ...

def index_build_native(
    out: str,
    model: str,
    ids: list[str],
    texts: list[str],
    payloads: list[str | None],
    dims: list[int] | None = None,
    precision: str = "float32",
    layer: int | None = None,
    overwrite: bool = False,
    batch_size: int = 32,
    store_text: bool = False,
    prompt_name: str | None = None,
    prompt: str | None = None,
    keep_added: bool | None = None,
) -> int: ...
def quantize_native(data: bytes, rows: int, dim: int, precision: str) -> tuple[bytearray, list[float]]: ...
