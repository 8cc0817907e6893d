"""ONNX files for the Infinity peer's `optimum` engine (BENCHMARKS.md, server vs Infinity).

Infinity's optimum engine reads ONNX files from the model folder and, on CPU, prefers one whose
name contains "quantize". This exports the model with optimum (`model.onnx`) and writes ONNX
Runtime's dynamic int8 quantisation for AVX512-VNNI next to it (`model_quantized.onnx`, the
configuration sentence-transformers' ONNX int8 rows use), into a copy of the model folder so
that the original stays untouched. The files sit at the folder's top and Infinity is started
inside it with `--model-id .`: Infinity 0.0.78 hands optimum 2.1 the path it globbed as the
file name, which optimum matches against bare names only.

    PY=/work/venv-inf/bin/python   # infinity-emb[server,torch,optimum]==0.0.78, torch==2.13.0
    $PY scripts/bench/peer_onnx.py models/all-MiniLM-L6-v2 /tmp/peer-minilm
"""
import shutil
import sys
from pathlib import Path

from optimum.onnxruntime import ORTModelForFeatureExtraction, ORTQuantizer
from optimum.onnxruntime.configuration import AutoQuantizationConfig

src, out = Path(sys.argv[1]), Path(sys.argv[2])
if (out / "model_quantized.onnx").exists():
    print(f"{out}: already exported")
    sys.exit(0)
shutil.rmtree(out, ignore_errors=True)
shutil.copytree(src, out)
model = ORTModelForFeatureExtraction.from_pretrained(str(src), export=True)
model.save_pretrained(str(out))
quantizer = ORTQuantizer.from_pretrained(model)
config = AutoQuantizationConfig.avx512_vnni(is_static=False, per_channel=False)
quantizer.quantize(save_dir=str(out), quantization_config=config)
print(sorted(p.name for p in out.glob("*.onnx")))
