"""The "how cost grows" part of the report: sweeps with fitted exponents, decoding, attention."""
from __future__ import annotations

from benchmarks import specs
from benchmarks.tables import MIB, NAMES, exponent, md_table, ms


def sweep_exponents(rows):
    """{worker: (exponent over all sizes, exponent between the last two sizes)}."""
    sizes = [r["size"] for r in rows]
    out = {}
    for name in rows[0]["median"]:
        times = [r["median"][name] for r in rows]
        out[name] = (exponent(sizes, times), exponent(sizes[-2:], times[-2:]))
    return out


def sweep_table(rows, size_label):
    names = list(rows[0]["median"])
    headers = [size_label] + [f"{NAMES[n]} ms" for n in names]
    has_torch = "torch" in names
    headers += (["fast / PyTorch"] if has_torch else []) + ["other load"]
    table = []
    for r in rows:
        med = r["median"]
        table.append([r["size"]] + [ms(med[n]) for n in names]
                     + ([f"{med['fast'] / med['torch']:.2f}x"] if has_torch else [])
                     + [f"{100 * r['other_load']:.0f}%"])
    fits = sweep_exponents(rows)
    blank = [""] * (2 if has_torch else 1)
    table.append(["exponent, fit over all sizes"] + [f"{fits[n][0]:.2f}" for n in names] + blank)
    table.append([f"exponent, {rows[-2]['size']} to {rows[-1]['size']}"]
                 + [f"{fits[n][1]:.2f}" for n in names] + blank)
    return md_table(headers, table)


def decode_section(rows):
    names = list(rows[0]["median"])
    table = [[r["context"]] + [ms(r["median"][n]) for n in names] + [f"{100 * r['other_load']:.0f}%"]
             for r in rows]
    first, last = rows[0], rows[-1]
    ratios = ", ".join(f"{NAMES[n]} {last['median'][n] / first['median'][n]:.2f}x" for n in names)
    cfg = rows[0]["cfg"]
    return [f"### KV-cached decoding, per token (d {cfg['d']}, {cfg['heads']} heads, "
            f"{cfg['layers']} layers; batch 1; 16 tokens per round after an untimed prefill)", "",
            md_table(["context"] + [f"{NAMES[n]} ms/token" for n in names] + ["other load"], table), "",
            f"Per-token time at context {last['context']} / at context {first['context']}: {ratios}.", ""]


def attention_section(rows):
    table = [[a["length"], ms(a["full_time"]), f"{a['full_bytes'] / MIB:.1f}",
              ms(a["blockwise_time"]), f"{a['blockwise_bytes'] / MIB:.1f}"] for a in rows]
    return ["### Attention alone (npformer fast track, in its worker): causal forward + backward, "
            "batch 1, 4 heads of width 64", "",
            "One call after an untimed one; MiB = tracemalloc peak of the numpy allocations "
            "(inputs excluded). The full version builds the [N, N] mask and [B, H, N, N] tables; "
            "the blockwise one keeps a block of scores and one log-sum-exp per row.", "",
            md_table(["N", "full ms", "full MiB", "blockwise ms", "blockwise MiB"], table), ""]


def growth_section(setting, plot):
    """Markdown for the sweeps, decoding and attention alone of one setting."""
    grown = setting["growth"]
    seq, width = grown["seq_sweep"][0]["cfg"], grown["width_sweep"][0]["cfg"]
    out = [f"## How cost grows (OpenBLAS {setting['label']})", "",
           "Training step (forward + cross-entropy + backward + AdamW), each library in its own "
           "process, rounds alternating. The exponent is the slope of log(time) against "
           "log(size).", ""]
    if plot:
        out += [plot, ""]
    out += [f"### Against the sequence length N (GPT-2 recipe: d {seq['d']}, {seq['layers']} layers, "
            f"{seq['heads']} heads, V {seq['vocab']}, batch {seq['batch']})", "",
            sweep_table(grown["seq_sweep"], "N"), "",
            f"### Against the width d (GPT-2 recipe: N {width['seq']}, batch {width['batch']}, "
            f"{width['layers']} layers, H = max(1, d / {specs.HEAD_WIDTH}), V {width['vocab']})", "",
            sweep_table(grown["width_sweep"], "d"), ""]
    return out + decode_section(grown["decode"]) + attention_section(grown["attention"])
