"""npformer against PyTorch CPU eager on this machine: run with ``python -m benchmarks``.

What is measured (median of ``--repeats`` runs after warm-up, float32 everywhere):

- the matmul peak: numpy float32 GEMM of square matrices, GFLOP/s;
- per config, a training step (forward, cross-entropy, backward, AdamW) and a forward
  alone, in npformer and in the PyTorch reference (``benchmarks/torch_reference.py``),
  interleaved A B A B in the same process with the same thread count;
- per config, peak RSS of a fresh process running that config (npformer vs PyTorch) and
  the bytes npformer keeps in its forward caches for backward (``cache.nbytes``);
- decoding: per-token latency with and without the KV cache at several contexts;
- attention alone: time and memory (tracemalloc peak) of plain vs blockwise attention;
- GQA cache bytes and MoE active versus total parameters.

FLOP count (stated in every report): a matmul [m, k] x [k, n] is 2 m k n FLOPs.
forward = 2 * tokens * (weights of every Linear and the LM head)
        + 4 * B * N^2 * d * layers   (Q K^T and weights @ V over the full N x N table);
training step = 3 * forward (the backward does two matmuls per forward one).
Embedding lookups, norms, activations and the optimizer are not counted.

The results go to the terminal and, as Markdown, to ``benchmarks/results/``.
When OPENBLAS_CORETYPE or OPENBLAS_L2_SIZE is set, the whole run is repeated in a
subprocess with both unset (``env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE``).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
OPENBLAS_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")

# The configs of issue #6. "llama" is the Llama-style small config (RoPE, RMSNorm, SwiGLU, GQA 4/2).
CONFIGS = {
    "tiny": dict(vocab=256, d=64, layers=2, heads=2, seq=32, batch=8),
    "small": dict(vocab=512, d=256, layers=4, heads=4, seq=128, batch=8),
    "medium": dict(vocab=4096, d=512, layers=6, heads=8, seq=256, batch=4),
    "llama": dict(vocab=512, d=256, layers=4, heads=4, kv_heads=2, seq=128, batch=8, llama=True),
}


# -- machine ------------------------------------------------------------------------------
def blas_info():
    """(kernel, threads, description) from threadpoolctl if installed (optional)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return None, os.cpu_count() or 1, "threadpoolctl not installed: BLAS kernel unknown"
    blas = [i for i in threadpool_info() if i.get("user_api") == "blas"]
    if not blas:
        return None, os.cpu_count() or 1, "no BLAS library reported by threadpoolctl"
    b = blas[0]
    desc = f"{b.get('internal_api')} {b.get('version')}, kernel {b.get('architecture')}, " \
           f"{b.get('num_threads')} threads"
    return b.get("architecture"), int(b.get("num_threads") or 1), desc


def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine(settings_label):
    kernel, threads, desc = blas_info()
    env = ", ".join(f"{v}={os.environ[v]}" if v in os.environ else f"{v} unset" for v in OPENBLAS_VARS)
    return {"cpu": cpu_model(), "cores": os.cpu_count(), "python": platform.python_version(),
            "numpy": np.__version__, "blas": desc, "kernel": kernel, "threads": threads,
            "openblas_env": env, "settings": settings_label}


def keep_freed_memory():
    """Ask glibc to keep freed memory for reuse instead of returning it to the OS.

    By default large arrays are mmap-ed and unmapped on free, so every fresh
    temporary is page-faulted in again; on virtual machines a page fault costs
    microseconds. M_MMAP_THRESHOLD (-3) and M_TRIM_THRESHOLD (-1) set to 1 GiB make
    freed memory reusable. Process-wide (affects npformer and PyTorch alike); Linux only.
    """
    import ctypes
    import ctypes.util
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    return bool(libc.mallopt(-3, 1 << 30)) and bool(libc.mallopt(-1, 1 << 30))


def matmul_peak(quick):
    """Best median GFLOP/s of float32 square GEMMs (numpy)."""
    sizes = (256,) if quick else (768, 1024, 1536)
    best = 0.0
    rng = np.random.default_rng(0)
    for n in sizes:
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        c = np.empty_like(a)
        times = timed(lambda: np.matmul(a, b, out=c), repeats=3 if quick else 9, warmup=2)
        best = max(best, 2 * n ** 3 / np.median(times) / 1e9)
    return best


# -- helpers --------------------------------------------------------------------------------
def timed(fn, repeats, warmup=1):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return times


def interleaved(fns, repeats, warmup=1):
    """Time several functions as A B A B ...; returns one list of seconds per function."""
    for _ in range(warmup):
        for fn in fns:
            fn()
    times = [[] for _ in fns]
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            t = time.perf_counter()
            fn()
            times[i].append(time.perf_counter() - t)
    return times


def forward_flops(cfg):
    """Matmul FLOPs of one forward (see the module docstring)."""
    d, L, H = cfg["d"], cfg["layers"], cfg["heads"]
    H_kv = cfg.get("kv_heads", H)
    D = d // H
    B, N = cfg["batch"], cfg["seq"]
    per_layer = d * (H + 2 * H_kv) * D + d * d + (3 if cfg.get("llama") else 2) * d * 4 * d
    weights = L * per_layer + d * cfg["vocab"]
    return 2 * B * N * weights + 4 * B * N * N * d * L


def md_table(headers, rows):
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def torch_available():
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


# -- npformer side --------------------------------------------------------------------------
def npformer_model(cfg, max_len=None):
    from npformer import DecoderConfig, DecoderLM
    common = dict(vocab_size=cfg["vocab"], d_model=cfg["d"], n_layers=cfg["layers"],
                  n_heads=cfg["heads"], max_len=max_len or cfg["seq"])
    if cfg.get("llama"):
        config = DecoderConfig.llama(n_kv_heads=cfg.get("kv_heads"), **common)
    else:
        config = DecoderConfig.gpt2(**common)
    return DecoderLM(config, np.random.default_rng(0))


class NpformerRunner:
    """One training step (forward, cross-entropy, backward, AdamW) or a forward alone."""

    def __init__(self, cfg):
        from npformer.optim import AdamW
        self.model = npformer_model(cfg)
        self.opt = AdamW(self.model.named_parameters(), lr=1e-4, weight_decay=0.01)
        rng = np.random.default_rng(1)
        self.ids = rng.integers(0, cfg["vocab"], (cfg["batch"], cfg["seq"]))
        self.targets = rng.integers(0, cfg["vocab"], (cfg["batch"], cfg["seq"]))
        self.cache_bytes = 0

    def train_step(self):
        from npformer import cross_entropy_backward, cross_entropy_forward
        self.model.zero_grad()
        logits, cache = self.model.forward(self.ids)
        loss, loss_cache = cross_entropy_forward(logits, self.targets)
        self.cache_bytes = cache.nbytes + loss_cache.nbytes
        d_logits, _ = cross_entropy_backward(1.0, loss_cache)
        del logits, loss_cache
        self.model.backward(d_logits, cache)
        self.opt.step()
        return float(loss)

    def forward(self):
        return self.model.forward(self.ids)[0]


def bench_config(name, cfg, repeats, use_torch, threads):
    """Interleaved timings of npformer and (optionally) PyTorch for one config."""
    runners = [NpformerRunner(cfg)]
    if use_torch:
        from benchmarks.torch_reference import TorchRunner
        runners.append(TorchRunner(cfg, threads))
    # Short steps get more repeats (about 2 s per measurement) so one busy moment moves
    # the median less; never fewer than ``repeats``.
    first = timed(runners[0].train_step, 1, warmup=1)[0]
    train_repeats = int(np.clip(2.0 / max(first, 1e-4), repeats, 10 * repeats))
    train = interleaved([r.train_step for r in runners], train_repeats, warmup=1)
    fwd = interleaved([r.forward for r in runners], train_repeats, warmup=1)
    out = {"config": name, "tokens": cfg["batch"] * cfg["seq"], "flops_fwd": forward_flops(cfg),
           "params": runners[0].model.num_parameters(), "cache_bytes": runners[0].cache_bytes,
           "np_train": float(np.median(train[0])), "np_fwd": float(np.median(fwd[0]))}
    out["np_train_best"] = float(np.min(train[0]))
    if use_torch:
        out["pt_train"] = float(np.median(train[1]))
        out["pt_fwd"] = float(np.median(fwd[1]))
        out["pt_train_best"] = float(np.min(train[1]))
    return out


# -- a fresh process per config for peak RSS ------------------------------------------------
def rss(field="VmRSS"):
    """Current RSS (VmRSS) or its high-water mark since exec (VmHWM), in bytes.

    (``getrusage``'s ru_maxrss is not used: Linux carries it across exec, so a
    child would inherit the parent's peak.)
    """
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def memory_worker(impl, name, steps, threads=None):
    """Run in a fresh process: RSS after imports, then peak RSS over ``steps`` training steps."""
    with thread_limit(threads):
        return _memory_worker(impl, name, steps)


def _memory_worker(impl, name, steps):
    cfg = CONFIGS[name]
    if impl == "torch":
        import torch  # noqa: F401
        from benchmarks.torch_reference import TorchRunner
        _, threads, _ = blas_info()
        base = rss()
        runner = TorchRunner(cfg, threads)
    else:
        import npformer  # noqa: F401
        import npformer.optim  # noqa: F401
        base = rss()
        runner = NpformerRunner(cfg)
    for _ in range(steps):
        runner.train_step()
    peak = rss("VmHWM")
    return {"impl": impl, "config": name, "base": base, "peak": peak,
            "cache_bytes": getattr(runner, "cache_bytes", None)}


def measure_memory(name, impl, steps=2, malloc_reuse=False, threads=None):
    cmd = [sys.executable, "-m", "benchmarks.run", "--worker", "memory", "--impl", impl,
           "--configs", name, "--repeats", str(steps)] + (["--malloc-reuse"] if malloc_reuse else []) \
        + (["--threads", str(threads)] if threads else [])
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=HERE.parent, env=os.environ.copy())
    if done.returncode:
        raise RuntimeError(f"memory worker failed for {impl} {name}:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# -- decoding ---------------------------------------------------------------------------------
def bench_decode(contexts, steps, recompute_repeats):
    """Per-token latency of the "small" GPT-2 config, batch 1, with and without the KV cache."""
    cfg = CONFIGS["small"]
    model = npformer_model(cfg, max_len=max(contexts) + steps + 1)
    rng = np.random.default_rng(2)
    ids = rng.integers(0, cfg["vocab"], (1, max(contexts) + steps + 1))
    rows = []
    for ctx in contexts:
        cache = model.new_kv_cache(1, ctx + steps + 1)
        model.forward(ids[:, :ctx], kv_cache=cache)                    # prefill the context
        per_token = []
        for i in range(steps):
            t = time.perf_counter()
            model.forward(ids[:, ctx + i: ctx + i + 1], kv_cache=cache)
            per_token.append(time.perf_counter() - t)
        cached = float(np.median(per_token[1:] if steps > 1 else per_token))
        recompute = float(np.median(timed(lambda: model.forward(ids[:, :ctx + 1]),
                                          recompute_repeats, warmup=1)))
        rows.append({"context": ctx, "cached": cached, "recompute": recompute})
    return rows


# -- attention alone --------------------------------------------------------------------------
def bench_attention(lengths, heads=4, head_dim=64, quick=False):
    """Forward + backward of causal attention, plain (full mask and score table) vs blockwise."""
    from npformer import attention_backward, attention_forward, causal_mask
    try:
        from npformer.flash_attention import flash_attention_backward, flash_attention_forward
    except ImportError:
        flash_attention_forward = None
    rng = np.random.default_rng(3)
    rows = []
    for n in lengths:
        q, k, v, d_out = (rng.standard_normal((1, heads, n, head_dim), dtype=np.float32)
                          for _ in range(4))

        def plain():
            out, cache = attention_forward(q, k, v, causal_mask(n)[None, None])
            return attention_backward(d_out, cache)

        def flash():
            out, cache = flash_attention_forward(q, k, v, causal=True)
            return flash_attention_backward(d_out, cache)

        repeats = 1 if (n >= 2048 or quick) else 3
        row = {"length": n}
        impls = [("plain", plain)] + ([("flash", flash)] if flash_attention_forward else [])
        for label, fn in impls:
            row[label + "_time"] = float(np.median(timed(fn, repeats, warmup=0 if n >= 2048 else 1)))
            tracemalloc.start()
            fn()
            row[label + "_bytes"] = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
        rows.append(row)
    return rows


# -- GQA and MoE -------------------------------------------------------------------------------
def bench_gqa(capacity):
    """KV cache bytes of the Llama-style config for H_kv = H, H/2, 1 at ``capacity`` positions."""
    cfg = dict(CONFIGS["llama"])
    rows = []
    for kv in (cfg["heads"], cfg["heads"] // 2, 1):
        model = npformer_model({**cfg, "kv_heads": kv}, max_len=capacity)
        cache = model.new_kv_cache(1, capacity)
        formula = 2 * cfg["layers"] * 1 * kv * capacity * (cfg["d"] // cfg["heads"]) * 4
        rows.append({"kv_heads": kv, "bytes": cache.nbytes, "formula": formula})
    return rows


def bench_moe(quick):
    """MoE (npformer.moe, another issue) active vs total parameters, and its time vs a dense FFN.

    Counts are measured by walking the parameters; the time of forward + backward on
    the tokens of the "small" config shows the compute following the active count.
    """
    try:
        from npformer.moe import MoE
    except ImportError:
        return {"status": "npformer/moe.py not present: MoE not measured"}
    from npformer import SwiGLU
    d, experts, top_k = (64, 4, 2) if quick else (256, 8, 2)
    rng = np.random.default_rng(4)
    tokens = 256 if quick else CONFIGS["small"]["batch"] * CONFIGS["small"]["seq"]
    x = rng.standard_normal((tokens, d), dtype=np.float32)
    moe = MoE(d, experts, top_k, rng=rng)
    dense = SwiGLU(d, rng=rng)
    times = {}
    for label, layer in (("moe", moe), ("dense", dense)):
        def step(layer=layer):
            y, cache = layer.forward(x)
            layer.backward(y, cache)
        times[label] = float(np.median(timed(step, 3, warmup=1)))
    return {"status": "measured", "d": d, "experts": experts, "top_k": top_k, "tokens": tokens,
            "total": moe.num_parameters(), "active": moe.active_parameters(),
            "dense": dense.num_parameters(), "moe_time": times["moe"], "dense_time": times["dense"]}


# -- report -------------------------------------------------------------------------------------
def fmt_ms(s):
    return f"{s * 1e3:.1f}" if s >= 0.01 else f"{s * 1e3:.2f}"


def report(results):
    m = results["machine"]
    peak = results["peak"]
    out = [f"## OPENBLAS settings: {m['settings']}", "",
           f"- CPU: {m['cpu']}, {m['cores']} cores; Python {m['python']}, numpy {m['numpy']}",
           f"- BLAS: {m['blas']}", f"- environment: {m['openblas_env']}",
           f"- allocator: {m.get('malloc', 'glibc defaults')}",
           f"- torch: {results.get('torch', 'not importable')}, threads {m['threads']}",
           f"- matmul peak (numpy float32 square GEMM, best of the measurements in this run): "
           f"{peak:.0f} GFLOP/s",
           f"- repeats: at least {results['repeats']} (median; up to 10x more for short steps), "
           f"interleaved npformer / PyTorch", ""]
    out += ["### Training step (forward + backward + AdamW) and forward alone", "",
            "FLOPs: forward = 2 * tokens * (Linear and head weights) + 4 * B * N^2 * d * layers; "
            "train = 3 x forward. ms = median; \"ratio of best\" = fastest npformer step / "
            "fastest PyTorch step (less sensitive to other processes on a shared machine).", ""]
    has_torch = any("pt_train" in r for r in results["configs"])
    headers = ["config", "params", "tokens", "train ms", "tok/s", "GFLOP/s", "% peak"]
    if has_torch:
        headers += ["PyTorch ms", "ratio", "ratio of best"]
    headers += ["fwd ms", "fwd % peak"] + (["PyTorch fwd ms", "fwd ratio"] if has_torch else [])
    rows = []
    for r in results["configs"]:
        gflops = 3 * r["flops_fwd"] / r["np_train"] / 1e9
        row = [r["config"], f"{r['params'] / 1e6:.2f}M", r["tokens"], fmt_ms(r["np_train"]),
               f"{r['tokens'] / r['np_train']:.0f}", f"{gflops:.0f}", f"{100 * gflops / peak:.0f}%"]
        if has_torch:
            row += [fmt_ms(r["pt_train"]), f"{r['np_train'] / r['pt_train']:.2f}x",
                    f"{r['np_train_best'] / r['pt_train_best']:.2f}x"]
        fwd_gflops = r["flops_fwd"] / r["np_fwd"] / 1e9
        row += [fmt_ms(r["np_fwd"]), f"{100 * fwd_gflops / peak:.0f}%"]
        if has_torch:
            row += [fmt_ms(r["pt_fwd"]), f"{r['np_fwd'] / r['pt_fwd']:.2f}x"]
        rows.append(row)
    out += [md_table(headers, rows), ""]
    if results.get("memory"):
        out += ["### Peak memory (a fresh process per config, 2 training steps)", "",
                "RSS above baseline = peak RSS minus the RSS after imports (numpy/scipy or torch).", ""]
        rows = []
        for name, mem in results["memory"].items():
            npm, ptm = mem["npformer"], mem.get("torch")
            row = [name, f"{npm['peak'] / 2**20:.0f}", f"{(npm['peak'] - npm['base']) / 2**20:.0f}",
                   f"{npm['cache_bytes'] / 2**20:.1f}"]
            row += ([f"{ptm['peak'] / 2**20:.0f}", f"{(ptm['peak'] - ptm['base']) / 2**20:.0f}",
                     f"{npm['peak'] / ptm['peak']:.2f}x"] if ptm else ["-", "-", "-"])
            rows.append(row)
        out += [md_table(["config", "npformer peak RSS MiB", "above baseline MiB",
                          "npformer cache.nbytes MiB", "PyTorch peak RSS MiB",
                          "above baseline MiB", "RSS ratio"], rows), ""]
    if results.get("decode"):
        out += ["### Decoding, per token (config small, batch 1)", ""]
        rows = [[d["context"], fmt_ms(d["cached"]), fmt_ms(d["recompute"]),
                 f"{d['recompute'] / d['cached']:.0f}x"] for d in results["decode"]]
        out += [md_table(["context", "KV cache ms/token", "recompute ms/token", "speed-up"], rows)]
        first, last = results["decode"][0], results["decode"][-1]
        out += ["", f"KV-cached per-token time at context {last['context']} is "
                f"{last['cached'] / first['cached']:.2f}x that at context {first['context']}.", ""]
    if results.get("attention"):
        out += ["### Attention alone: causal forward + backward, batch 1, 4 heads of width 64", "",
                "Memory: tracemalloc peak of numpy allocations during forward + backward "
                "(inputs excluded). Plain builds the [N, N] mask and the [B, H, N, N] tables; "
                "blockwise keeps one block of scores and the log-sum-exp per row.", ""]
        rows = []
        for a in results["attention"]:
            row = [a["length"], fmt_ms(a["plain_time"]), f"{a['plain_bytes'] / 2**20:.1f}"]
            if "flash_time" in a:
                row += [fmt_ms(a["flash_time"]), f"{a['flash_bytes'] / 2**20:.1f}",
                        f"{a['plain_bytes'] / a['flash_bytes']:.1f}x"]
            rows.append(row)
        out += [md_table(["N", "plain ms", "plain MiB", "blockwise ms", "blockwise MiB",
                          "memory saved"], rows), ""]
    if results.get("gqa"):
        out += ["### GQA: KV cache bytes (Llama-style config, batch 1, capacity "
                f"{results['gqa_capacity']})", ""]
        rows = [[g["kv_heads"], f"{g['bytes'] / 2**20:.2f}", f"{g['formula'] / 2**20:.2f}"]
                for g in results["gqa"]]
        out += [md_table(["H_kv (H = 4)", "KVCache.nbytes MiB", "2 L B H_kv T D x 4 bytes MiB"],
                         rows), ""]
    moe = results.get("moe")
    if moe:
        out += ["### MoE", ""]
        if moe.get("status") == "measured":
            out += [f"MoE(d={moe['d']}, {moe['experts']} SwiGLU experts, top-{moe['top_k']}): "
                    f"{moe['total']:,} parameters stored, {moe['active']:,} active per token "
                    f"({100 * moe['active'] / moe['total']:.0f}%). Forward + backward on "
                    f"{moe['tokens']} tokens: {fmt_ms(moe['moe_time'])} ms, vs "
                    f"{fmt_ms(moe['dense_time'])} ms for one dense SwiGLU of the same width "
                    f"({moe['dense']:,} parameters): {moe['moe_time'] / moe['dense_time']:.1f}x "
                    f"for top-{moe['top_k']}.", ""]
        else:
            out += [moe["status"], ""]
    out += [f"Total time of this run: {results['seconds']:.0f} s.", ""]
    return "\n".join(out)


def targets_summary(results):
    """The issue's targets, each met or its gap (meaningful with the OPENBLAS settings unset)."""
    lines = ["### Targets (issue #6)", ""]
    peak = results["peak"]
    goals = {"tiny": 1.0, "small": 0.70, "medium": 0.70, "llama": 0.85}
    for r in results["configs"]:
        if "pt_train" in r and r["config"] in goals:
            ratio = r["np_train"] / r["pt_train"]
            lines.append(f"- train step {r['config']}: {ratio:.2f}x PyTorch (target <= "
                         f"{goals[r['config']]:.2f}x) {'met' if ratio <= goals[r['config']] else 'NOT met'}")
        if r["config"] == "medium":
            share = 3 * r["flops_fwd"] / r["np_train"] / 1e9 / peak
            lines.append(f"- medium share of matmul peak: {100 * share:.0f}% (target >= 70%) "
                         f"{'met' if share >= 0.7 else 'NOT met'}")
    dec = results.get("decode") or []
    if len(dec) >= 2:
        growth = dec[-1]["cached"] / dec[0]["cached"]
        speedup = dec[-1]["recompute"] / dec[-1]["cached"]
        lines.append(f"- KV decode: context {dec[-1]['context']} / {dec[0]['context']} = {growth:.2f}x "
                     f"(target < 2x) {'met' if growth < 2 else 'NOT met'}; "
                     f"{speedup:.0f}x faster than recomputing (target >= 10x) "
                     f"{'met' if speedup >= 10 else 'NOT met'}")
    for name, mem in (results.get("memory") or {}).items():
        if mem.get("torch"):
            ok = mem["npformer"]["peak"] <= mem["torch"]["peak"]
            lines.append(f"- peak RSS {name}: {mem['npformer']['peak'] / 2**20:.0f} MiB vs PyTorch "
                         f"{mem['torch']['peak'] / 2**20:.0f} MiB {'met' if ok else 'NOT met'}")
    return "\n".join(lines) + "\n"


# -- main ---------------------------------------------------------------------------------------
def thread_limit(threads):
    """A context limiting numpy's BLAS to ``threads`` (threadpoolctl, optional); None: no limit."""
    if threads is None:
        return contextlib.nullcontext()
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        raise SystemExit("--threads needs threadpoolctl (pip install threadpoolctl)")
    return threadpool_limits(threads, user_api="blas")


def run_all(args, settings_label):
    with thread_limit(args.threads):
        return _run_all(args, settings_label)


def _run_all(args, settings_label):
    start = time.perf_counter()
    quick = args.quick
    names = args.configs or (["tiny"] if quick else list(CONFIGS))
    repeats = args.repeats or (2 if quick else 5)
    m = machine(settings_label)
    if args.malloc_reuse:
        m["malloc"] = "glibc keeps freed memory (--malloc-reuse: M_MMAP_THRESHOLD = M_TRIM_THRESHOLD = 1 GiB)" \
            if keep_freed_memory() else "--malloc-reuse requested but mallopt failed"
    else:
        m["malloc"] = "glibc defaults (freed large arrays go back to the OS)"
    use_torch = torch_available() and not args.no_torch
    results = {"machine": m, "repeats": repeats, "configs": []}
    if use_torch:
        import torch
        results["torch"] = torch.__version__
    print(f"# npformer benchmarks ({settings_label}): {m['cpu']}, {m['blas']}", flush=True)
    results["peak"] = matmul_peak(quick)
    print(f"matmul peak {results['peak']:.0f} GFLOP/s", flush=True)
    for name in names:
        results["configs"].append(bench_config(name, CONFIGS[name], repeats, use_torch, m["threads"]))
        # The peak is re-measured between configs and the best kept: on a shared machine
        # a single measurement can land in a busy moment.
        results["peak"] = max(results["peak"], matmul_peak(quick))
        r = results["configs"][-1]
        print(f"{name}: train {fmt_ms(r['np_train'])} ms"
              + (f" (PyTorch {fmt_ms(r['pt_train'])} ms)" if use_torch else ""), flush=True)
    results["memory"] = {}
    for name in names:
        mem = {"npformer": measure_memory(name, "npformer", malloc_reuse=args.malloc_reuse,
                                            threads=args.threads)}
        if use_torch:
            mem["torch"] = measure_memory(name, "torch", malloc_reuse=args.malloc_reuse,
                                         threads=args.threads)
        results["memory"][name] = mem
    print("memory done", flush=True)
    results["decode"] = bench_decode((8, 16, 32) if quick else (64, 256, 1024),
                                     steps=4 if quick else 12, recompute_repeats=2 if quick else 3)
    print("decode done", flush=True)
    results["attention"] = bench_attention((32, 64) if quick else (128, 256, 512, 1024, 2048, 4096),
                                           quick=quick)
    results["gqa_capacity"] = 64 if quick else 1024
    results["gqa"] = bench_gqa(results["gqa_capacity"])
    results["moe"] = bench_moe(quick)
    results["seconds"] = time.perf_counter() - start
    return results


def parse(argv):
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="tiny setting (seconds; used by the test)")
    p.add_argument("--configs", nargs="+", choices=list(CONFIGS), help="configs to run (default all)")
    p.add_argument("--repeats", type=int, help="timed runs per measurement (median reported)")
    p.add_argument("--output", type=Path, default=HERE / "results", help="directory for the Markdown")
    p.add_argument("--no-torch", action="store_true", help="skip the PyTorch comparison")
    p.add_argument("--threads", type=int, help="BLAS / torch threads (default: numpy's BLAS setting)")
    p.add_argument("--malloc-reuse", action="store_true",
                   help="let glibc keep freed memory (fewer page faults; both libraries)")
    p.add_argument("--no-rerun", action="store_true",
                   help="do not repeat the run with the OPENBLAS settings unset")
    p.add_argument("--settings-label", help=argparse.SUPPRESS)
    p.add_argument("--worker", choices=["memory"], help=argparse.SUPPRESS)
    p.add_argument("--impl", choices=["npformer", "torch"], help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv=None):
    args = parse(argv)
    if args.worker == "memory":
        if args.malloc_reuse:
            keep_freed_memory()
        print(json.dumps(memory_worker(args.impl, args.configs[0], args.repeats or 2, args.threads)))
        return 0
    settings_set = [v for v in OPENBLAS_VARS if v in os.environ]
    label = args.settings_label or ("as set in the environment" if settings_set
                                    else "unset (neither variable is set in this environment)")
    results = run_all(args, label)
    text = report(results)
    text += "\n" + targets_summary(results)
    print("\n" + text, flush=True)
    args.output.mkdir(parents=True, exist_ok=True)
    stem = ("quick-" if args.quick else "") + ("openblas-env" if settings_set else "openblas-unset")
    stem += "-malloc-reuse" if args.malloc_reuse else ""
    (args.output / f"{stem}.md").write_text(f"# npformer benchmarks\n\n{text}")
    (args.output / f"{stem}.json").write_text(json.dumps(results, indent=1, default=str))
    print(f"wrote {args.output / (stem + '.md')}", flush=True)
    if settings_set and not args.no_rerun:
        # The same run with both OPENBLAS variables unset, as on a user's own machine.
        cmd = ["env"] + [a for v in OPENBLAS_VARS for a in ("-u", v)] + \
              [sys.executable, "-m", "benchmarks", "--no-rerun", "--output", str(args.output),
               "--settings-label", "unset (env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE)"]
        cmd += (["--quick"] if args.quick else []) + (["--no-torch"] if args.no_torch else [])
        cmd += (["--configs", *args.configs] if args.configs else [])
        cmd += (["--repeats", str(args.repeats)] if args.repeats else [])
        cmd += (["--malloc-reuse"] if args.malloc_reuse else [])
        cmd += (["--threads", str(args.threads)] if args.threads else [])
        print("\nre-running with", " ".join(cmd[:5]), flush=True)
        code = subprocess.run(cmd, cwd=HERE.parent).returncode
        if code:
            return code
    if not args.quick:
        stems = ("openblas-env", "openblas-unset") if settings_set else ("openblas-unset",)
        stems = tuple(s + ("-malloc-reuse" if args.malloc_reuse else "") for s in stems)
        parts = [args.output / f"{s}.md" for s in stems]
        combined = "\n\n".join(p.read_text() for p in parts if p.exists())
        (args.output / ("latest-malloc-reuse.md" if args.malloc_reuse else "latest.md")).write_text(combined)
    return 0


if __name__ == "__main__":
    sys.exit(main())
