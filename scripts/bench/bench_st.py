"""sentence-transformers' encode throughput on the same sentences as `nest bench encode`.

Prints one JSON line {"layer": sentences_per_second}. Early exit is emulated by cutting the
HF encoder's layer list, which is what a sentence-transformers user would do.
Run by `nest bench encode --python PY`; also usable alone:
    python scripts/bench/bench_st.py --model models/all-MiniLM-L6-v2 --data ../shared/datasets/stsb/test.tsv

Lower-precision peers (all optional; the defaults are the plain float32 PyTorch run above):
  --dtype bf16             PyTorch weights and activations in bfloat16 (oneDNN's AVX512-BF16 kernels
                           where the CPU has them); with --backend openvino: OpenVINO's bf16
                           inference precision hint.
  --backend openvino       ST's own backend="openvino" (optimum-intel; exported in memory, offline).
  --backend onnx           ONNX Runtime, float32. ST's backend="onnx" needs optimum-onnx, whose
                           releases require transformers<4.58 while sentence-transformers 6 requires
                           transformers>=5, so it cannot be installed next to it; this does what
                           that backend does by hand: export the HF transformer to ONNX (into a temp
                           dir), run it in an onnxruntime session inside ST's own encode pipeline
                           (its tokenizer, batching, pooling, normalisation).
  --backend onnx-int8      as onnx, then dynamic int8 quantisation with the settings of ST's
                           export_dynamic_quantized_onnx_model(model, "avx512_vnni") (optimum's
                           AutoQuantizationConfig.avx512_vnni(is_static=False): QOperator/IntegerOps,
                           weights QInt8 symmetric per channel, activations QUInt8, no reduce_range).
  Non-torch backends run the full model only (layers cannot be cut out of an exported graph):
  other --layers values are skipped with a note on stderr.
  --score                  STS-B Spearman x 100 (cosine of the two columns against the gold score,
                           column 3) of the last timed run's embeddings, per layer, on stderr only.
  --threads N              torch / onnxruntime / OpenVINO threads (default: torch's default, and the
                           same number for onnxruntime and OpenVINO).
  --device cuda            the torch backend on the GPU (what `nest bench encode` passes when Nest
                           itself runs on a GPU); the other backends are CPU-only here.
"""
import argparse
import csv
import json
import os
import sys
import tempfile
import time

import numpy as np
import torch
from sentence_transformers import SentenceTransformer

ONNX_INPUTS = ["input_ids", "attention_mask", "token_type_ids"]


class _Encoder(torch.nn.Module):
    """The HF transformer as ST's Transformer module calls it, with the padding mask made explicit
    (transformers 5's mask helpers do not trace), returning last_hidden_state only."""

    def __init__(self, hf):
        super().__init__()
        self.hf = hf

    def forward(self, input_ids, attention_mask, token_type_ids):
        h = self.hf.embeddings(input_ids=input_ids, token_type_ids=token_type_ids)
        ext = (1.0 - attention_mask[:, None, None, :].to(h.dtype)) * torch.finfo(h.dtype).min
        return self.hf.encoder(h, attention_mask=ext).last_hidden_state


class _OrtModel(torch.nn.Module):
    """Stands in for the HF model inside ST's Transformer module: runs an onnxruntime session."""

    def __init__(self, session, config):
        super().__init__()
        self.session = session
        self.config = config
        self.names = [i.name for i in session.get_inputs()]
        self.register_buffer("_anchor", torch.zeros(1), persistent=False)  # for ST's device lookups

    @property
    def device(self):
        return torch.device("cpu")

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, **_):
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        feeds = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
        out = self.session.run(None, {n: feeds[n].cpu().numpy().astype(np.int64) for n in self.names})[0]
        from transformers.modeling_outputs import BaseModelOutput

        return BaseModelOutput(last_hidden_state=torch.from_numpy(out))


def to_onnx(model, workdir, int8, threads):
    """Exports ST's transformer to ONNX (and quantises it), and swaps an onnxruntime session in."""
    import onnxruntime as ort

    st_tf = model[0]
    hf = st_tf.auto_model
    enc = st_tf.tokenizer(["a short sentence", "a somewhat longer sentence to pad against"], padding=True,
                          return_tensors="pt")
    if "token_type_ids" not in enc:
        enc["token_type_ids"] = torch.zeros_like(enc["input_ids"])
    wrapper = _Encoder(hf).eval()
    path = os.path.join(workdir, "model.onnx")
    t = time.perf_counter()
    with torch.no_grad():
        torch.onnx.export(
            wrapper, tuple(enc[k] for k in ONNX_INPUTS), path, dynamo=False, opset_version=17,
            input_names=ONNX_INPUTS, output_names=["last_hidden_state"],
            dynamic_axes={k: {0: "batch", 1: "seq"} for k in ONNX_INPUTS + ["last_hidden_state"]},
        )
    hf.eval()  # the exporter restores the wrapper's training flag onto the HF model
    msg = f"exported to ONNX in {time.perf_counter() - t:.1f} s"
    if int8:
        from onnxruntime.quantization import QuantType, quantize_dynamic
        from onnxruntime.quantization.registry import IntegerOpsRegistry

        t = time.perf_counter()
        qpath = os.path.join(workdir, "model_qint8_avx512_vnni.onnx")
        quantize_dynamic(
            path, qpath, op_types_to_quantize=list(IntegerOpsRegistry.keys()), per_channel=True,
            reduce_range=False, weight_type=QuantType.QInt8,
            extra_options={"WeightSymmetric": True, "ActivationSymmetric": False, "EnableSubgraph": False,
                           "ForceSymmetric": False},
        )
        path = qpath
        msg += f", quantised to int8 (avx512_vnni settings) in {time.perf_counter() - t:.1f} s"
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    session = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    # check the session against PyTorch on a padded batch before timing it
    ref_enc = st_tf.tokenizer(["x", "the quick brown fox jumps over the lazy dog, again and again"], padding=True,
                              return_tensors="pt")
    if "token_type_ids" not in ref_enc:
        ref_enc["token_type_ids"] = torch.zeros_like(ref_enc["input_ids"])
    with torch.no_grad():
        ref = hf(**{k: ref_enc[k] for k in ONNX_INPUTS}).last_hidden_state
    ort_model = _OrtModel(session, hf.config)
    got = ort_model(**{k: ref_enc[k] for k in ONNX_INPUTS}).last_hidden_state
    m = ref_enc["attention_mask"][..., None].bool()
    err = (got - ref).abs().masked_fill(~m, 0).max().item()
    print(f"  {msg}; onnxruntime {ort.__version__}, {threads} threads; max |onnx - torch| on a padded batch "
          f"{err:.2e}", file=sys.stderr)
    st_tf.model = ort_model


def spearman_x100(emb, n_pairs, gold):
    from scipy.stats import spearmanr

    e = np.asarray(emb, dtype=np.float32)
    a, b = e[0::2][:n_pairs], e[1::2][:n_pairs]
    cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1) + 1e-12)
    return 100.0 * spearmanr(cos, gold).statistic


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--layers", default="2,3,6")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--dtype", choices=["float32", "bf16"], default="float32")
    ap.add_argument("--backend", choices=["torch", "onnx", "onnx-int8", "openvino"], default="torch")
    ap.add_argument("--score", action="store_true", help="STS-B Spearman x100 per layer, on stderr")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--device", default="cpu", help="cpu, or cuda (torch backend only)")
    a = ap.parse_args()
    if a.device != "cpu" and a.backend != "torch":
        ap.error(f"--backend {a.backend} runs on the CPU only; --device {a.device} is for --backend torch")
    if a.threads:
        torch.set_num_threads(a.threads)
    threads = torch.get_num_threads()
    if a.backend.startswith("onnx") and a.dtype != "float32":
        ap.error(f"--backend {a.backend} runs float32 (int8 for onnx-int8) only; bf16 is --backend torch or openvino")
    with open(a.data, encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1:]
    texts = [s for r in rows for s in (r[0], r[1])]
    gold = None
    if a.score:
        try:
            gold = np.array([float(r[2]) for r in rows])
        except (IndexError, ValueError):
            ap.error(f"--score needs a gold score in column 3 of {a.data}")

    kwargs = {}
    if a.backend == "torch" and a.dtype == "bf16":
        kwargs["model_kwargs"] = {"dtype": torch.bfloat16}
    elif a.backend == "openvino":
        ov_config = {"INFERENCE_NUM_THREADS": str(threads),
                     "INFERENCE_PRECISION_HINT": "bf16" if a.dtype == "bf16" else "f32"}
        kwargs["backend"] = "openvino"
        kwargs["model_kwargs"] = {"ov_config": ov_config}
    t = time.perf_counter()
    model = SentenceTransformer(a.model, device=a.device, **kwargs)
    model.eval()
    load_s = time.perf_counter() - t
    where = torch.cuda.get_device_name() if a.device.startswith("cuda") else f"threads {torch.get_num_threads()}"
    print(f"torch {torch.__version__}, {where}, {len(texts)} sentences", file=sys.stderr)

    workdir = None
    if a.backend.startswith("onnx"):
        workdir = tempfile.TemporaryDirectory(prefix="nest-bench-st-onnx-")
        to_onnx(model, workdir.name, a.backend == "onnx-int8", threads)
    if a.backend == "torch":
        # BERT-family models keep their layers in encoder.layer; ModernBERT, Qwen3 and Gemma 3
        # in layers
        am = model[0].auto_model
        if hasattr(am, "encoder") and hasattr(am.encoder, "layer"):
            enc, attr = am.encoder, "layer"
        else:
            enc, attr = am, "layers"
        all_layers = list(getattr(enc, attr))
        full = len(all_layers)
        p = next(model[0].auto_model.parameters())
        if a.dtype != "float32":
            print(f"  backend torch, weights {p.dtype}", file=sys.stderr)
    else:
        full = model[0].auto_model.config.num_hidden_layers
        if a.backend == "openvino":
            import openvino as ov

            try:
                ov_model = model[0].auto_model
                if ov_model.request is None:
                    ov_model.compile()
                prec = ov_model.request.get_property("INFERENCE_PRECISION_HINT")  # a CompiledModel
            except Exception as e:  # noqa: BLE001 - informational only
                prec = f"? ({type(e).__name__})"
            print(f"  backend openvino {ov.__version__} (loaded + exported in {load_s:.1f} s), "
                  f"inference precision {prec}, {threads} threads", file=sys.stderr)

    layers = [int(x) for x in a.layers.split(",")]
    if a.backend != "torch":
        skipped = [n for n in layers if n != full]
        layers = [n for n in layers if n == full]
        if skipped:
            print(f"  backend {a.backend}: early exit cannot cut layers out of an exported graph; "
                  f"only the full model (layer {full}) is measured, skipping layers {skipped}", file=sys.stderr)
        if not layers:
            ap.error(f"--backend {a.backend} measures the full model only: pass --layers {full}")

    out = {}
    for n in layers:
        if a.backend == "torch":
            setattr(enc, attr, torch.nn.ModuleList(all_layers[:n]))
        model.encode(texts, batch_size=a.batch_size)  # warm-up
        best = float("inf")
        for _ in range(a.repeats):
            t = time.perf_counter()
            emb = model.encode(texts, batch_size=a.batch_size)
            best = min(best, time.perf_counter() - t)
        out[str(n)] = len(texts) / best
        print(f"  st layer {n}: {out[str(n)]:.1f} sentences/s", file=sys.stderr)
        if gold is not None:
            sp = spearman_x100(emb, len(rows), gold)
            print(f"  st layer {n}: STS-B Spearman x100 {sp:.2f} ({a.backend}, {a.dtype})", file=sys.stderr)
    if a.backend == "torch":
        setattr(enc, attr, torch.nn.ModuleList(all_layers))
    if a.device.startswith("cuda"):
        # torch's caching allocator since the start (weights, activations; not the CUDA
        # context), what `nest bench encode` prints from libtorch's for its side
        mib = lambda b: b / 2**20  # noqa: E731
        print(f"  st: peak GPU memory (torch's allocator): {mib(torch.cuda.max_memory_allocated()):.0f} MiB "
              f"allocated, {mib(torch.cuda.max_memory_reserved()):.0f} MiB reserved", file=sys.stderr)
    if workdir is not None:
        workdir.cleanup()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
