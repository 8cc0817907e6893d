"""Peak GPU memory per process while it runs (issue 41; scripts/gpu/gpu_issue41.sh).

    python3 scripts/gpu/gpu_mem_poll.py OUT.json [--interval 0.1]   # until SIGTERM / SIGINT

Runs `nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits` every
`--interval` seconds (nvidia-smi's own loop, `-lms`) and `--query-gpu=memory.used` beside it, and
keeps, per pid, the peak MiB and the process's command line (read from /proc at first sight, so
that a Nest process and its Python peer can be told apart). OUT.json is rewritten every second and
at exit: {"pids": {pid: {"peak_mib", "cmd", "samples"}}, "gpu_used_peak_mib",
"gpu_used_first_mib", "samples"}. In a container whose pids nvidia-smi cannot see (pid namespace)
the per-pid map stays empty or has cmd "?"; the whole GPU's peak is still there. Without
nvidia-smi it writes {"skipped": "..."} and exits 0.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

out = sys.argv[1]
interval = float(sys.argv[sys.argv.index("--interval") + 1]) if "--interval" in sys.argv else 0.1
state = {"pids": {}, "gpu_used_peak_mib": None, "gpu_used_first_mib": None, "samples": 0}
lock = threading.Lock()


def write():
    with lock:
        tmp = out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(state, f, indent=1)
        os.replace(tmp, out)


if shutil.which("nvidia-smi") is None:
    state = {"skipped": "no nvidia-smi on this machine"}
    write()
    sys.exit(0)

ms = str(max(int(interval * 1000), 50))
apps = subprocess.Popen(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits",
                         "-lms", ms], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
gpu = subprocess.Popen(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-lms", ms],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return " ".join(x.decode(errors="replace") for x in f.read().split(b"\0") if x)[:300]
    except OSError:
        return "?"


def read_apps():
    for line in apps.stdout:
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 2 or not parts[0].isdigit():
            continue
        try:
            mib = float(parts[1])
        except ValueError:
            continue
        with lock:
            p = state["pids"].setdefault(parts[0], {"peak_mib": 0.0, "cmd": cmdline(parts[0]), "samples": 0})
            p["peak_mib"] = max(p["peak_mib"], mib)
            p["samples"] += 1
            state["samples"] += 1


def read_gpu():
    for line in gpu.stdout:
        try:
            mib = float(line.strip().split(",")[0])
        except ValueError:
            continue
        with lock:
            if state["gpu_used_first_mib"] is None:
                state["gpu_used_first_mib"] = mib
            state["gpu_used_peak_mib"] = max(state["gpu_used_peak_mib"] or 0.0, mib)


def stop(*_):
    for p in (apps, gpu):
        p.terminate()
    write()
    os._exit(0)


signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGINT, stop)
threading.Thread(target=read_apps, daemon=True).start()
threading.Thread(target=read_gpu, daemon=True).start()
while True:
    time.sleep(1.0)
    write()
