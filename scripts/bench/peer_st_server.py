"""The serving peer for `nest bench serve`: sentence-transformers behind a minimal
OpenAI-compatible HTTP loop (standard library HTTP server, one thread per connection), with the
same dynamic batching as Nest: a worker takes whatever requests are queued, up to
--max-batch inputs, and runs one `model.encode` over them.

    python scripts/bench/peer_st_server.py --model models/all-MiniLM-L6-v2 --port 8081 [--max-batch 32] [--device cuda]

Only what the benchmark sends is implemented: POST /v1/embeddings with `input` (a string or a
list of strings), optional `dimensions` (prefix, re-normalised) and `layers` (refused: the peer
has no early exit). GET /health answers 200.
"""
import argparse
import json
import queue
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import torch
from sentence_transformers import SentenceTransformer

ap = argparse.ArgumentParser()
ap.add_argument("--model", required=True)
ap.add_argument("--port", type=int, default=8081)
ap.add_argument("--max-batch", type=int, default=32)
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--device", default="cpu", help="cpu (default), or cuda / cuda:N")
args = ap.parse_args()
torch.set_num_threads(args.threads)
model = SentenceTransformer(args.model, device=args.device)
jobs = queue.Queue()


def worker():
    while True:
        batch = [jobs.get()]
        n = len(batch[0][0])
        while n < args.max_batch:
            try:
                j = jobs.get_nowait()
            except queue.Empty:
                break
            batch.append(j)
            n += len(j[0])
        texts = [t for j in batch for t in j[0]]
        with torch.inference_mode():
            emb = model.encode(texts, batch_size=max(n, 1), convert_to_numpy=True, normalize_embeddings=False)
        k = 0
        for texts_j, done in batch:
            done.put(emb[k:k + len(texts_j)])
            k += len(texts_j)


threading.Thread(target=worker, daemon=True).start()


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def reply(self, code, obj):
        b = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)

    def do_GET(self):
        self.reply(200, {"status": "ok"})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        inp = body["input"]
        texts = [inp] if isinstance(inp, str) else inp
        if body.get("layers"):
            return self.reply(400, {"error": {"message": "no early exit", "type": "invalid_request_error", "param": "layers", "code": None}})
        done = queue.Queue(maxsize=1)
        jobs.put((texts, done))
        e = done.get()
        d = body.get("dimensions") or e.shape[1]
        e = e[:, :d]
        e = e / np.linalg.norm(e, axis=1, keepdims=True)
        self.reply(200, {"object": "list", "model": args.model,
                         "data": [{"object": "embedding", "index": i, "embedding": v.tolist()} for i, v in enumerate(e)],
                         "usage": {"prompt_tokens": 0, "total_tokens": 0}})


ThreadingHTTPServer(("127.0.0.1", args.port), H).serve_forever()
