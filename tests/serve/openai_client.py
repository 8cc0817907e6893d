"""Drives a running `nest serve` with the official `openai` Python client (used by
crates/nest-cli/tests/serve.rs). Exits non-zero with a message on the first failed check.

    python tests/serve/openai_client.py http://127.0.0.1:PORT MODEL_NAME
"""
import base64
import math
import struct
import sys

import openai

base, model = sys.argv[1], sys.argv[2]
key = sys.argv[3] if len(sys.argv) > 3 else "unused"
client = openai.OpenAI(base_url=base + "/v1", api_key=key, max_retries=0)
if len(sys.argv) > 3:
    # the server has keys: a wrong one is the client's typed 401
    wrong = openai.OpenAI(base_url=base + "/v1", api_key=key + "x", max_retries=0)
    try:
        wrong.embeddings.create(model=model, input="x")
        raise AssertionError("a wrong key should be refused")
    except openai.AuthenticationError as e:
        assert e.status_code == 401 and e.body["code"] == "invalid_api_key", e.body


def norm(v):
    return math.sqrt(sum(x * x for x in v))


texts = ["the cat sat on the mat", "a man is playing music"]
# floats
r = client.embeddings.create(model=model, input=texts, encoding_format="float")
assert r.object == "list" and len(r.data) == 2, r
assert [d.index for d in r.data] == [0, 1]
full = [d.embedding for d in r.data]
assert all(abs(norm(v) - 1) < 1e-5 for v in full), [norm(v) for v in full]
assert r.usage.prompt_tokens > 0 and r.usage.total_tokens == r.usage.prompt_tokens
assert r.model == model
# the client's default asks for base64 and decodes it: same vectors
r64 = client.embeddings.create(model=model, input=texts)
for a, b in zip(full, [d.embedding for d in r64.data]):
    assert max(abs(x - y) for x, y in zip(a, b)) < 1e-7
# raw base64 is little-endian float32
raw = client.embeddings.with_raw_response.create(model=model, input=texts[0], encoding_format="base64")
b64 = raw.http_response.json()["data"][0]["embedding"]
dec = struct.unpack("<%df" % (len(base64.b64decode(b64)) // 4), base64.b64decode(b64))
assert max(abs(x - y) for x, y in zip(dec, full[0])) < 1e-7
# dimensions: the re-normalised prefix
r16 = client.embeddings.create(model=model, input=texts[0], dimensions=16, encoding_format="float")
v16 = r16.data[0].embedding
assert len(v16) == 16 and abs(norm(v16) - 1) < 1e-5
n = norm(full[0][:16])
assert max(abs(x - y / n) for x, y in zip(v16, full[0][:16])) < 1e-5
# Nest's layers extension
r1 = client.embeddings.create(model=model, input=texts[0], encoding_format="float", extra_body={"layers": 1})
assert len(r1.data[0].embedding) == len(full[0])
assert max(abs(x - y) for x, y in zip(r1.data[0].embedding, full[0])) > 1e-3, "layer 1 should differ from the last"
# quantized types through extra_body (docs/SERVING.md): the codes and Nest's scale come back
# as the item's fields, undecoded
rq = client.embeddings.create(model=model, input=texts[0], encoding_format="base64",
                              extra_body={"embed_dtype": "int8", "dimensions": 16})
codes = base64.b64decode(rq.data[0].embedding)
scale = rq.data[0].model_extra["scale"]
assert len(codes) == 16 and scale > 0, (codes, scale)
est = [(c - 256 if c > 127 else c) * scale for c in codes]
assert max(abs(x - y) for x, y in zip(est, v16)) <= scale / 2 + 1e-6, "codes * scale ~ the vector"
rt = client.embeddings.create(model=model, input=texts[0], extra_body={"embedding_types": ["ubinary", "int8"]})
e = rt.data[0].model_extra["embeddings"]
assert len(e["ubinary"]) == len(full[0]) // 8 and len(e["int8"]) == len(full[0]), e
# errors come back as the client's typed exceptions, with OpenAI's error body
try:
    client.embeddings.create(model=model, input="x", dimensions=12)
    raise AssertionError("dimensions=12 should be refused")
except openai.BadRequestError as e:
    assert e.status_code == 400 and "8, 16, 32" in e.message and e.body["param"] == "dimensions", e.body
try:
    client.embeddings.create(model=model, input=["a"] * 5)
    raise AssertionError("5 inputs should be refused")
except openai.APIStatusError as e:
    assert e.status_code == 413, e
try:
    client.embeddings.create(model="other-model", input="x")
    raise AssertionError("an unknown model should be refused")
except openai.BadRequestError as e:
    assert "other-model" in e.message
print("openai client: ok")
