"""Stand-ins for the CUDA libraries that `import torch` links but a CPU-only machine never calls.

scripts/setup.sh unpacks the PyPI torch wheel into .deps/py with only the two CUDA libraries
libtorch_cpu needs at run time (libcudart, libcupti): enough for the Rust build and its
binaries, not for `import torch` in Python, whose torch._C links libtorch_cuda.so and through it
cuBLAS, cuDNN, cuFFT, cuSPARSE, NCCL, ... (about 2.6 GB of wheels on PyPI). The Python tests run
on CPU and call none of them, so this script writes, for each such library that the dynamic
loader cannot find, a small shared library with its soname and symbol versions that defines
every symbol torch imports from it and finds nowhere else: functions that print their name and
abort, should anything ever call one. With LD_LIBRARY_PATH naming the output folder, `import
torch` from .deps/py works and torch runs on CPU as usual (torch.cuda.is_available() is False:
the real libcudart finds no driver).

    python3 python/ci/torch_stubs.py .deps/py/torch .deps/torch-stubs    # needs gcc, readelf, ldd

Idempotent: prints the folder; writes nothing when no library is missing.
"""

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path


def run(*cmd: str, env=None) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout


def shared_objects(torch_dir: Path):
    return sorted(p for p in torch_dir.rglob("*.so*") if p.is_file() and ".so" in p.name)


def missing_libs(objs, env) -> set:
    """The sonames that the loader cannot resolve for any of `objs` (their RPATH included)."""
    out = set()
    for p in objs:
        try:
            text = run("ldd", str(p), env=env)
        except subprocess.CalledProcessError:
            continue
        out |= set(re.findall(r"^\s*(\S+) => not found", text, re.M))
    return out


def resolved_libs(objs, env) -> set:
    out = set()
    for p in objs:
        try:
            text = run("ldd", str(p), env=env)
        except subprocess.CalledProcessError:
            continue
        out |= {Path(x) for x in re.findall(r"=> (/\S+)", text)}
    return out


SYM = re.compile(
    r"^\s*\d+:\s+[0-9a-f]+\s+\d+\s+(\w+)\s+(\w+)\s+\w+\s+(\S+)\s+([^\s@]+)(?:@+([^\s(]+))?"
)


def symbols(path: Path):
    """(name, version, type, bind, defined) of the dynamic symbols of `path`."""
    for line in run("readelf", "--dyn-syms", "-W", str(path)).splitlines():
        m = SYM.match(line)
        if m:
            typ, bind, ndx, name, ver = m.groups()
            yield name, ver, typ, bind, ndx != "UND"


def version_needs(path: Path):
    """{soname: [version names]} from `path`'s .gnu.version_r."""
    needs, cur = {}, None
    for line in run("readelf", "-V", "-W", str(path)).splitlines():
        f = re.search(r"File: (\S+)", line)
        if f:
            cur = f.group(1)
            continue
        n = re.search(r"Name: (\S+)\s+Flags", line)
        if n and cur:
            needs.setdefault(cur, set()).add(n.group(1))
    return needs


def main() -> int:
    torch_dir, out = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    env = dict(os.environ)
    env.pop("LD_LIBRARY_PATH", None)  # what the loader finds without the stand-ins
    objs = shared_objects(torch_dir)
    # never the driver (libcuda.so.1, NVRTC's need): libcudart probes it to count GPUs, and
    # without it reports none, as a CPU-only machine should
    missing = {m for m in missing_libs(objs, env) if not m.startswith("libcuda.so")}
    if not missing:
        print(out)
        return 0
    stamp = out / ".stubs"
    want = "\n".join(sorted(missing) + [str(p.stat().st_mtime_ns) for p in objs]) + "\n"
    if stamp.is_file() and stamp.read_text() == want:
        print(out)
        return 0

    defined, undefined, versions = set(), {}, {}
    for p in objs + sorted(resolved_libs(objs, env)):
        for name, ver, typ, bind, is_def in symbols(p):
            if is_def:
                defined.add(name)
            elif bind != "WEAK" and name:
                undefined.setdefault(name, (typ, ver))
    for p in objs:
        for soname, vers in version_needs(p).items():
            if soname in missing:
                versions.setdefault(soname, set()).update(vers)
    # the Python C API comes from the interpreter, not a library
    stubs = {n: tv for n, tv in undefined.items()
             if n not in defined and not n.startswith(("Py", "_Py"))}

    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        c = Path(tmp, "stubs.c")
        lines = [
            "#include <stdio.h>",
            "#include <stdlib.h>",
            "static void nest_stub(const char *name) {",
            '  fprintf(stderr, "torch_stubs: %s was called, but its CUDA library is a CPU-only '
            'stand-in (python/ci/torch_stubs.py)\\n", name);',
            "  abort();",
            "}",
        ]
        for i, (name, (typ, _)) in enumerate(sorted(stubs.items())):
            if typ == "OBJECT":
                lines.append(f'extern char o{i}[4096] __asm__("{name}"); char o{i}[4096];')
            else:
                lines.append(f'void f{i}(void) __asm__("{name}"); void f{i}(void) {{ nest_stub("{name}"); }}')
        c.write_text("\n".join(lines) + "\n")
        obj = Path(tmp, "stubs.o")
        run("gcc", "-O0", "-fPIC", "-w", "-c", str(c), "-o", str(obj))
        for soname in sorted(missing):
            cmd = ["gcc", "-shared", "-o", str(out / soname), str(obj), f"-Wl,-soname,{soname}"]
            vers = sorted(versions.get(soname, ()))
            if vers:
                # each version node lists the symbols referenced with it; the rest stay unversioned
                script = Path(tmp, soname + ".map")
                nodes = []
                for v in vers:
                    names = sorted(n for n, (_, ver) in stubs.items() if ver == v)
                    body = "".join(f" {n};" for n in names)
                    nodes.append(f"{v} {{ global:{body} }};" if names else f"{v} {{ }};")
                script.write_text("\n".join(nodes) + "\n")
                cmd.append(f"-Wl,--version-script={script}")
            run(*cmd)
    stamp.write_text(want)
    print(f"torch_stubs: {len(missing)} stand-in libraries ({', '.join(sorted(missing))}), "
          f"{len(stubs)} symbols, in {out}", file=sys.stderr)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
