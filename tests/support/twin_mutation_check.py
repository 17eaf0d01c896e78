"""The mutation check of the fast track: seed one small change at a time into a copy of
npformer/fast (an operator, a comparison, an axis, a slice, a layout), run the track tests
on the copy, and count how many changes they notice. The work tree is never touched.

    python tests/support/twin_mutation_check.py                 # every change below, about 15 minutes
    python tests/support/twin_mutation_check.py 21 42           # some of them, by index

A change that survives is either harmless (it alters a speed decision, not a number) or a
hole in the draws, to be closed by a draw or a test. Of the 70 changes below the last full
run caught 65; #42 (the odd key left out of the folded maximum) survived it, and is caught
since ``test_the_largest_score_may_sit_at_any_key`` puts a dominant score at every key. The
four survivors, each harmless:

- #1  ``map_rows`` reads a row's work from the wrong axis: only how many blocks the work is
  cut into changes (a speed decision); every row is still computed once;
- #32 attention cuts the key/value heads instead of the batch when B > 1: both cuts are
  valid (each block writes its own weights and outputs); only which is faster changes;
- #48 blockwise attention skips a tile when r0 > r1 instead of r0 >= r1: a tile with r0 == r1
  has no query rows, and computing it adds nothing;
- #65 softmax over ``axis=None`` of a 1-d array takes the general path instead of the row
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
TESTS = ["tests/fast/test_tracks.py", "tests/fast/test_twin_differential.py", "tests/fast/test_fast_cores.py",
         "tests/fast/test_attention_tiles.py", "tests/fast/test_chunks.py"]

# (file in npformer/fast, the text, the change, what kind of change)
MUTANTS = [
    ('functional.py', 'math.prod(a.shape[:-1]), a.shape[-1])',
     'math.prod(a.shape[1:]), a.shape[-1])', 'slice'),
    ('functional.py', 'n_rows, width = (math.prod(shape[:-1]), shape[-1])',
     'n_rows, width = (math.prod(shape[:-1]), shape[0])', 'axis'),
    ('functional.py', 'axes[0] in (-1, ndim - 1)',
     'axes[0] in (-1, ndim - 2)', 'axis'),
    ('functional.py', 'total[~(total > 0)] = 1                                     # fully masked rows stay 0\n    scores',
     'total[total < 0] = 1                                     # fully masked rows stay 0\n    scores', 'comparison'),
    ('functional.py', 'peak[np.isinf(peak)] = 0                                    # fully masked rows (a NaN stays)\n    rows',
     'peak[np.isnan(peak)] = 0                                    # fully masked rows (a NaN stays)\n    rows', 'comparison'),
    ('functional.py', '        y = np.array(x, order="C")',
     '        y = np.array(x, order="K")', 'layout'),
    ('functional.py', 'd_x -= np.vecdot(d_x, y)[:, None]',
     'd_x += np.vecdot(d_x, y)[:, None]', 'operator'),
    ('functional.py', 'np.sum(d_out * y, axis=cache.axis, keepdims=True)',
     'np.sum(d_out * y, axis=-1, keepdims=True)', 'axis'),
    ('functional.py', '    t *= a * c\n',
     '    t *= a\n', 'operand'),
    ('functional.py', 'slope *= 3 * a * c',
     'slope *= 2 * a * c', 'constant'),
    ('functional.py', 'np.subtract(1, t, out=factor)',
     'np.subtract(t, 1, out=factor)', 'operator'),
    ('functional.py', 'np.negative(x, out=s)',
     'np.positive(x, out=s)', 'operator'),
    ('functional.py', 'np.subtract(1, s, out=slope)',
     'np.subtract(s, 1, out=slope)', 'operator'),
    ('functional.py', 'dtype=y.dtype, order="C")',
     'dtype=y.dtype, order="K")', 'layout'),
    ('functional.py', 'for start in range(0, n_rows, step):',
     'for start in range(0, n_rows - 1, step):', 'slice'),
    ('norm.py', 'np.true_divide(mean, x.shape[-1], out=mean)',
     'np.true_divide(mean, x.shape[-1] + 1, out=mean)', 'operator'),
    ('norm.py', 'd_x = np.empty(xhat.shape, xhat.dtype)',
     'd_x = np.empty_like(cache.xhat)', 'layout'),
    ('norm.py', '    if centre:\n        g_mean',
     '    if not centre:\n        g_mean', 'comparison'),
    ('norm.py', 'd_beta = by_row @ d_out if centre else None',
     'd_beta = by_row @ scratch if centre else None', 'operand'),
    ('norm.py', '    d_x *= rstd\n',
     '    d_x /= rstd\n', 'operator'),
    ('norm.py', 'np.reciprocal(var, out=rstd[..., 0])',
     'np.sqrt(var, out=rstd[..., 0])', 'operator'),
    ('norm.py', '    if rstd.shape != xhat.shape[:-1] + (1,) or not rstd.flags.c_contiguous:',
     '    if False:', 'layout'),
    ('linear.py', 'y[s] += bias',
     'y[s] -= bias', 'operator'),
    ('linear.py', '            y += bias',
     '            y -= bias', 'operator'),
    ('linear.py', 'out=d_x[s]), len(d_rows),',
     'out=d_x[s]), len(d_rows) - 1,', 'slice'),
    ('linear.py', 'if cache.has_bias else None',
     'if not cache.has_bias else None', 'comparison'),
    ('linear.py', 'np.matmul(d_rows[:, s].T, x_rows, out=d_weight_t[s])',
     'np.matmul(d_rows[:, s].T, -x_rows, out=d_weight_t[s])', 'operator'),
    ('loss.py', 'np.subtract(rows[s], rows[s].max(axis=-1, keepdims=True), out=p)',
     'np.subtract(rows[s], rows[s].min(axis=-1, keepdims=True), out=p)', 'operand'),
    ('loss.py', 'log_total -= picked',
     'log_total += picked', 'operator'),
    ('loss.py', 'targets[s]] -= weight[s]',
     'targets[s]] += weight[s]', 'operator'),
    ('loss.py', 'sum(run_blocks(work, len(rows), V)) / max(count, 1)',
     'sum(run_blocks(work, len(rows), V)) / max(count, 0)', 'constant'),
    ('attention.py', 'forbidden = forbidden.reshape((1,) * (4 - forbidden.ndim) + forbidden.shape)',
     'forbidden = forbidden', 'axis'),
    ('attention.py', 'if B > 1 or H_kv == 1:',
     'if B > 1 and H_kv == 1:', 'comparison'),
    ('attention.py', 'slice(s.start * G, s.stop * G)',
     'slice(s.start * G, s.stop * G - 1)', 'slice'),
    ('attention.py', 'part -= dot[..., None, :]',
     'part += dot[..., None, :]', 'operator'),
    ('attention.py', '        d_keys *= scale\n',
     '\n', 'operand'),
    ('attention.py', 'np.multiply(q[batch, q_heads], q.dtype.type(scale), out=scaled)',
     'np.multiply(q[batch, q_heads], q.dtype.type(1.0), out=scaled)', 'operand'),
    ('attention.py', 'index.append(part if size > 1 else slice(None))',
     'index.append(part if size >= 1 else slice(None))', 'comparison'),
    ('attention.py', 'return tuple((r0, r1, max(0, M - N + r1)) for',
     'return tuple((r0, r1, max(0, M - N + r1 - 1)) for', 'slice'),
    ('attention.py', 'block[..., hi:, r0:r1] = 0',
     'block[..., hi + 1:, r0:r1] = 0', 'slice'),
    ('attention.py', 'diagonal = min(max(0, M - N + r0 + 1), hi)',
     'diagonal = min(max(0, M - N + r0 + 2), hi)', 'slice'),
    ('attention.py', 'starts = (0,) + tuple(hi for _, _, hi in tiles[:-1])',
     'starts = (0,) + tuple(max(0, hi - 1) for _, _, hi in tiles[:-1])', 'slice'),
    ('attention.py', 'np.maximum(peak[..., :1, :], scores[..., n - 1:, :], out=peak[..., :1, :])',
     'np.maximum(peak[..., :1, :], scores[..., n - 2:n - 1, :], out=peak[..., :1, :])', 'slice'),
    ('attention.py', '            np.add.reduce(product, axis=2, out=out)',
     '            out[...] = product[:, :, -1]', 'operand'),
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
    ('rope.py', 'both_sin = np.concatenate([-sin, sin], -1)',
     'both_sin = np.concatenate([sin, -sin], -1)', 'operator'),
    ('rope.py', '        swapped[..., half:] = x[..., :half]',
     '        swapped[..., half:] = x[..., half:rotated]', 'operand'),
    ('rope.py', 'swapped[..., 0::2] = x[..., 1:rotated:2]',
     'swapped[..., 0::2] = x[..., 0:rotated:2]', 'operand'),
    ('rope.py', 'out[..., rotated:] = x[..., rotated:]',
     'out[..., rotated + 1:] = x[..., rotated + 1:]', 'slice'),
    ('rope.py', 'table.shape[0] > 1 else table',
     'table.shape[0] > 2 else table', 'comparison'),
    ('rope.py', '_rotate_into(x[s], rows_of(cos_wide, s), rows_of(sin_wide, s)',
     '_rotate_into(x[s], rows_of(cos_wide, s), rows_of(cos_wide, s)', 'operand'),
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
    ('functional.py', 'shape = np.broadcast_shapes(*(np.shape(a) for a in inputs))',
     'shape = np.shape(inputs[0])', 'operand'),
    ('optim.py', 'for b in arrays[i + 1:] + others):',
     'for b in arrays[i + 1:]):', 'slice'),
    ('optim.py', 'for b in arrays[i + 1:] + others):',
     'for b in others):', 'slice'),
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
