"""The mutation check of the fast track: seed one small change at a time into a copy of
npformer/fast (an operator, a comparison, an axis, a slice, a layout), run the track tests
on the copy, and count how many changes they notice. The work tree is never touched.

    python tests/support/twin_mutation_check.py                 # every change below, about 15 minutes
    python tests/support/twin_mutation_check.py 21 42           # some of them, by index

A change that survives is either harmless (it alters a speed decision, not a number) or a
hole in the draws, to be closed by a draw or a test. Of the 57 changes below the last full
run caught 52; #42 (the stride-0 check) survived it, and is caught since
``test_adamw_on_arrays_it_cannot_overwrite`` draws that case by hand. The four survivors,
each harmless:

- #1  ``map_rows`` reads a row's work from the wrong axis: only how many blocks the work is
  cut into changes (a speed decision); every row is still computed once;
- #26 attention cuts the key/value heads instead of the batch when B > 1: both cuts are
  valid (each block writes its own weights and outputs); only which is faster changes;
- #35 blockwise attention skips a tile when r0 > r1 instead of r0 >= r1: a tile with r0 == r1
  has no query rows, and computing it adds nothing;
- #49 softmax over ``axis=None`` of a 1-d array takes the general path instead of the row
  path: the same reductions, the same numbers.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TESTS = ["tests/fast/test_tracks.py", "tests/fast/test_twin_differential.py", "tests/fast/test_fast_cores.py"]

# (file in npformer/fast, the text, the change, what kind of change)
MUTANTS = [
    ('functional.py', 'math.prod(a.shape[:-1]), a.shape[-1])',
     'math.prod(a.shape[1:]), a.shape[-1])', 'slice'),
    ('functional.py', 'len(rows[0]), rows[0].shape[1])',
     'len(rows[0]), rows[0].shape[0])', 'axis'),
    ('functional.py', 'axes[0] in (-1, ndim - 1)',
     'axes[0] in (-1, ndim - 2)', 'axis'),
    ('functional.py', 'total[total == 0] = 1',
     'total[total < 0] = 1', 'comparison'),
    ('functional.py', 'peak[~np.isfinite(peak)] = 0',
     'peak[np.isnan(peak)] = 0', 'comparison'),
    ('functional.py', '        y = np.array(x, order="C")',
     '        y = np.array(x, order="K")', 'layout'),
    ('functional.py', 'rows[s] -= np.einsum',
     'rows[s] += np.einsum', 'operator'),
    ('functional.py', 'np.sum(d_out * y, axis=cache.axis, keepdims=True)',
     'np.sum(d_out * y, axis=-1, keepdims=True)', 'axis'),
    ('functional.py', '    t *= a\n',
     '    t += a\n', 'operator'),
    ('functional.py', 'inner *= 3 * a',
     'inner *= 2 * a', 'constant'),
    ('functional.py', 'np.negative(x, out=s)',
     'np.positive(x, out=s)', 'operator'),
    ('functional.py', 'np.subtract(1, s, out=slope)',
     'np.subtract(s, 1, out=slope)', 'operator'),
    ('functional.py', 'dtype=y.dtype, order="C")',
     'dtype=y.dtype, order="K")', 'layout'),
    ('norm.py', 'np.sqrt(square / width + eps',
     'np.sqrt(square / (width + 1) + eps', 'operator'),
    ('norm.py', 'd_x = np.empty(xhat.shape, xhat.dtype)',
     'd_x = np.empty_like(cache.xhat)', 'layout'),
    ('norm.py', '        if centre:\n            g -=',
     '        if not centre:\n            g -=', 'comparison'),
    ('norm.py', 'd_beta = np.ones(len(d_out_s), xhat.dtype) @ d_out_s',
     'd_beta = np.ones(len(d_out_s), xhat.dtype) @ (d_out_s * xhat_s)', 'operand'),
    ('norm.py', 'g *= rstd_s',
     'g /= rstd_s', 'operator'),
    ('linear.py', 'y[s] += bias',
     'y[s] -= bias', 'operator'),
    ('linear.py', 'out=d_x[s]), len(d_rows),',
     'out=d_x[s]), len(d_rows) - 1,', 'slice'),
    ('linear.py', 'if cache.has_bias else None',
     'if not cache.has_bias else None', 'comparison'),
    ('loss.py', 'np.subtract(rows[s], rows[s].max(axis=-1, keepdims=True), out=p)',
     'np.subtract(rows[s], rows[s].min(axis=-1, keepdims=True), out=p)', 'operand'),
    ('loss.py', '(np.log(total[:, 0]) - picked)',
     '(np.log(total[:, 0]) + picked)', 'operator'),
    ('loss.py', 'targets[s]] -= weight[s]',
     'targets[s]] += weight[s]', 'operator'),
    ('loss.py', 'sum(run_blocks(work, len(rows), V)) / max(count, 1)',
     'sum(run_blocks(work, len(rows), V)) / max(count, 0)', 'constant'),
    ('attention.py', '    mask = mask.reshape((1,) * (4 - mask.ndim) + mask.shape)',
     '    mask = mask', 'axis'),
    ('attention.py', 'if B > 1 or H_kv == 1:',
     'if B > 1 and H_kv == 1:', 'comparison'),
    ('attention.py', 'slice(s.start * G, s.stop * G)',
     'slice(s.start * G, s.stop * G - 1)', 'slice'),
    ('attention.py', 'd_scores -= np.einsum',
     'd_scores += np.einsum', 'operator'),
    ('attention.py', '@ q[batch, q_heads].reshape(nb, nh, G * N, D)) * scale',
     '@ q[batch, q_heads].reshape(nb, nh, G * N, D))', 'operand'),
    ('attention.py', 'np.matmul((qb * q.dtype.type(scale))',
     'np.matmul((qb * q.dtype.type(1.0))', 'operand'),
    ('flash_attention.py', 'r0 = max(0, j0 - offset)',
     'r0 = max(0, j0 - offset + 1)', 'slice'),
    ('flash_attention.py', 'r1 = min(N, j1 - 1 + c.window - offset)',
     'r1 = min(N, j1 - 2 + c.window - offset)', 'slice'),
    ('flash_attention.py', 'total[:, :, sl] *= rescale',
     'total[:, :, sl] += rescale', 'operator'),
    ('flash_attention.py', 'd_scores -= delta[:, :, sl]',
     'd_scores += delta[:, :, sl]', 'operator'),
    ('flash_attention.py', '        if r0 >= r1:\n            continue\n        sl = slice(r0 * G, r1 * G)\n        scores = rows[:, :, sl] @ k[:, :, j0:j1].swapaxes(-1, -2)   #',
     '        if r0 > r1:\n            continue\n        sl = slice(r0 * G, r1 * G)\n        scores = rows[:, :, sl] @ k[:, :, j0:j1].swapaxes(-1, -2)   #', 'comparison'),
    ('flash_attention.py', 'x.reshape(B, H_kv, G, N, F).swapaxes(2, 3)',
     'x.reshape(B, H_kv, G, N, F)', 'axis'),
    ('rope.py', 'out_a -= b * sin',
     'out_a += b * sin', 'operator'),
    ('rope.py', 'out[..., rotated:] = x[..., rotated:]',
     'out[..., rotated + 1:] = x[..., rotated + 1:]', 'slice'),
    ('rope.py', 'table.shape[0] > 1 else table',
     'table.shape[0] > 2 else table', 'comparison'),
    ('optim.py', 't(1 / math.sqrt(1 - b2 ** step))',
     't(1 / math.sqrt(1 - b2 ** (step + 1)))', 'operator'),
    ('optim.py', '    if weight_decay:',
     '    if not weight_decay:', 'comparison'),
    ('optim.py', 'st == 0 and n > 1',
     'st == 0 and n > 2', 'comparison'),
    ('optim.py', '    if not all(a.flags.c_contiguous for a in (data, m, v)):',
     '    if all(a.flags.c_contiguous for a in (data, m, v)):', 'comparison'),
    ('parallel.py', 'edges = [n_rows * i // parts for i in range(parts + 1)]',
     'edges = [n_rows * i // parts for i in range(parts)] + [n_rows - 1]', 'slice'),
    ('parallel.py', 'and blas_threads() != 1:',
     'and blas_threads() == 1:', 'comparison'),
    ('parallel.py', 'for rows in parts[1:]]',
     'for rows in parts[2:]]', 'slice'),
    ('ffn.py', 'np.multiply(gated, u, out=h)',
     'np.multiply(g, u, out=h)', 'operand'),
    ('ffn.py', '    d_g *= s\n    d_g *= u',
     '    d_g *= u', 'operator'),
    ('functional.py', '        return ndim == 1\n',
     '        return False\n', 'comparison'),
    ('attention.py', 'mask[batch if mask.shape[0] > 1 else slice(None)',
     'mask[batch if mask.shape[0] >= 1 else slice(None)', 'comparison'),
    ('functional.py', 'shape = np.broadcast_shapes(*(np.shape(a) for a in inputs))',
     'shape = np.shape(inputs[0])', 'operand'),
    ('optim.py', 'for b in arrays[i + 1:] + others):',
     'for b in arrays[i + 1:]):', 'slice'),
    ('optim.py', 'for b in arrays[i + 1:] + others):',
     'for b in others):', 'slice'),
    ('rope.py', '_rotate_into(x[s], rows_of(cos, s), rows_of(sin, s)',
     '_rotate_into(x[s], rows_of(cos, s), rows_of(cos, s)', 'operand'),
    ('norm.py', 'rstd = contiguous(np.broadcast_to(cache.rstd, xhat.shape[:-1] + (1,)))',
     'rstd = cache.rstd', 'layout'),
    ('loss.py', 'weight = (cache.counted * (d_loss / max(cache.count, 1)))',
     'weight = (cache.counted * (1.0 / max(cache.count, 1)))', 'operand'),
]


def copy_of_the_tree(target):
    """The committed files (git ls-files) plus the work tree's changes, copied to ``target``."""
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    for name in files:
        source = os.path.join(ROOT, name)
        if os.path.isfile(source):
            os.makedirs(os.path.dirname(os.path.join(target, name)) or target, exist_ok=True)
            shutil.copy2(source, os.path.join(target, name))


def run_one(tree, index):
    """True when the track tests fail with change ``index`` in place (it is caught)."""
    name, old, new, kind = MUTANTS[index]
    path = os.path.join(tree, "npformer", "fast", name)
    with open(path) as f:
        text = f.read()
    if text.count(old) != 1:
        raise SystemExit(f"#{index} {name}: the text to change occurs {text.count(old)} times")
    began = time.perf_counter()
    try:
        with open(path, "w") as f:
            f.write(text.replace(old, new))
        done = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
                               *TESTS], cwd=tree, env={**os.environ, "CI": "1"},
                              capture_output=True, text=True)
    finally:
        with open(path, "w") as f:
            f.write(text)
    first = next((line for line in done.stdout.splitlines() if line.startswith("FAILED")), "")
    print(f"#{index:2d} {kind:10s} {name:18s} {'caught' if done.returncode else 'SURVIVED':8s} "
          f"{time.perf_counter() - began:4.0f} s  {first[:110]}", flush=True)
    return done.returncode != 0


def main(argv):
    indices = [int(a) for a in argv] or list(range(len(MUTANTS)))
    with tempfile.TemporaryDirectory() as tree:
        copy_of_the_tree(tree)
        survivors = [i for i in indices if not run_one(tree, i)]
    print(f"tried {len(indices)}, caught {len(indices) - len(survivors)}, survived {len(survivors)}: "
          f"{survivors}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
