"""Generation: turn next-token probabilities into text, one token at a time.

The article's loop: score the vocabulary at the last position, choose an id, turn it back
into text, append it and run again. Choosing the next id from the last position's logits
z [B, V], the plainest way first, then the sampling variants:
- greedy: argmax z (``temperature=0``);
- temperature T: sample from softmax(z / T) (T < 1 sharpens, T > 1 flattens);
- top-k: keep only the k most likely ids, renormalise;
- top-p (nucleus): keep the smallest set of most likely ids whose probability
  reaches p, renormalise.
Sampling draws from an explicit ``np.random.Generator``: same seed, same text.

Prompts of different lengths are batched with LEFT padding, so every
sequence's next token is written in the same column:
    <pad> <pad> 你 好 ？      key_mask F F T T T, positions 0 0 0 1 2
    我  买  的  手 机 ？      key_mask T T T T T, positions 0 1 2 3 4
Each row's first real token gets position 0, exactly as if it ran alone.
No model reads more than its ``max_len`` positions: the id chosen from the last
of them is the final one a row can get, so prompt + new ids hold at most
``max_len + 1`` ids, as long as the training sequences (with ``return_logits=True``
the result says which rows were cut there).
With ``use_cache`` the prompt runs once and each new token reads the stored
keys and values (KV cache); ``use_cache=False`` recomputes the whole sequence
at every step, which must give the same tokens (and is slower).

No fast twins: everything here runs as written on either track (a ``print`` in it shows).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .t11_loss import log_softmax_forward
from .t03_softmax import softmax
from .core.validate import check_positive


# -- choosing the next token -----------------------------------------------------------
def next_token_probs(logits, temperature=1.0, top_k=None, top_p=None):
    """logits [B, V] -> the distribution [B, V] (float64) sampling draws from.

    Ids removed by top-k / top-p get probability exactly 0. Ties at the k-th
    largest logit are all kept (so "k most likely" is never ambiguous).
    """
    if not np.isfinite(temperature) or temperature <= 0:
        raise ValueError(f"temperature: expected a finite number > 0 for sampling (use greedy "
                         f"for 0), got {temperature}")
    z = np.asarray(logits, dtype=np.float64) / temperature            # [B, V]
    keep = np.ones(z.shape, bool)
    if top_k is not None:
        k = min(check_positive("top_k", top_k), z.shape[-1])
        kth = np.partition(z, -k, axis=-1)[:, -k][:, None]           # k-th largest logit
        keep &= z >= kth
    probs = softmax(z, axis=-1, mask=keep)
    if top_p is not None:
        if not 0 < top_p <= 1:
            raise ValueError(f"top_p: expected a number in (0, 1], got {top_p}")
        order = np.argsort(-probs, axis=-1, kind="stable")           # most likely first
        sorted_probs = np.take_along_axis(probs, order, axis=-1)
        before = np.cumsum(sorted_probs, axis=-1) - sorted_probs      # mass of the ids ahead
        # keep an id while the ids ahead of it have not yet reached p
        keep_sorted = before < top_p - 1e-12
        nucleus = np.zeros_like(keep)
        np.put_along_axis(nucleus, order, keep_sorted, axis=-1)
        probs = np.where(nucleus, probs, 0.0)
        probs = probs / probs.sum(axis=-1, keepdims=True)
    return probs


def sample_from(probs, rng):
    """One id per row of ``probs`` [B, V] by inverting the cumulative distribution."""
    cumulative = np.cumsum(probs, axis=-1)                           # [B, V]
    u = rng.random(len(probs))[:, None] * cumulative[:, -1:]
    ids = (cumulative <= u).sum(axis=-1)
    return np.minimum(ids, probs.shape[-1] - 1)


def choose_next(logits, temperature=0.0, top_k=None, top_p=None, rng=None):
    """Next ids [B] from logits [B, V]: greedy when ``temperature == 0``, else sampled."""
    check_sampling(temperature, top_k, top_p)
    if temperature == 0:
        return np.argmax(logits, axis=-1)
    if rng is None:
        raise TypeError("rng: sampling needs a numpy.random.Generator (e.g. np.random.default_rng(0))")
    return sample_from(next_token_probs(logits, temperature, top_k, top_p), rng)


# -- left padding ---------------------------------------------------------------------
def left_pad(prompts, pad_id):
    """Prompts (lists of ids) -> ids [B, P], key_mask [B, P], positions [B, P].

    Padding goes on the left; each row's first real token is at position 0
    (padding slots get position 0 too, and are masked out).
    """
    lengths = np.array([len(p) for p in prompts])
    if len(prompts) == 0 or lengths.min() < 1:
        raise ValueError("prompts: expected one or more non-empty prompts")
    P = int(lengths.max())
    ids = np.full((len(prompts), P), pad_id, dtype=np.int64)
    for row, prompt in enumerate(prompts):
        ids[row, P - len(prompt):] = prompt
    pad = (P - lengths)[:, None]                                     # [B, 1]
    columns = np.arange(P)[None, :]
    key_mask = columns >= pad
    positions = np.maximum(columns - pad, 0)
    return ids, key_mask, positions


class Generation(NamedTuple):
    """What ``generate(..., return_logits=True)`` returns, one entry per prompt.

    ``ids``: the new ids (cut before the first ``eos_id``); ``logits``: a float array
    [len(ids), V], row t the logits id t was chosen from (before temperature, top-k
    or top-p); ``hit_max_len``: True where the row stopped because the model's
    ``max_len`` positions were used up before the row chose ``eos_id``.
    """

    ids: list
    logits: list
    hit_max_len: list

    def log_probs(self):
        """The rows of ``logits`` as log-probabilities (log-softmax), one array per prompt."""
        return [log_softmax_forward(z, axis=-1)[0] for z in self.logits]


def check_sampling(temperature, top_k, top_p):
    """ValueError naming the first sampling option that cannot be used."""
    if not isinstance(temperature, (int, float, np.integer, np.floating)) or \
            not np.isfinite(temperature) or temperature < 0:
        raise ValueError(f"temperature: expected a finite number >= 0 (0 = greedy), got {temperature!r}")
    if temperature == 0 and (top_k is not None or top_p is not None):
        raise ValueError("top_k, top_p: they shape sampling, but temperature=0 is greedy; "
                         "give a temperature > 0 (1.0 samples the model's own distribution)")
    if top_k is not None:
        check_positive("top_k", top_k)
    if top_p is not None and not 0 < top_p <= 1:
        raise ValueError(f"top_p: expected a number in (0, 1], got {top_p!r}")


def generate(model, prompts, max_new_tokens, eos_id=None, pad_id=0, temperature=0.0,
             top_k=None, top_p=None, rng=None, use_cache=True, return_logits=False):
    """Continue each prompt (a list of ids) by up to ``max_new_tokens`` ids.

    Returns one list of new ids per prompt, cut before the first ``eos_id``
    (which is not included). ``temperature=0`` is greedy; otherwise sampling
    (with optional ``top_k``/``top_p``) from ``rng``. ``use_cache=False`` recomputes
    the full sequence each step instead of reading the KV cache. A row stops after the id
    chosen from the model's last position (prompt + new ids = ``max_len + 1``). ``return_logits=True``
    returns a ``Generation``: the ids, each step's logits, which rows hit ``max_len``.
    """
    check_positive("max_new_tokens", max_new_tokens)
    check_sampling(temperature, top_k, top_p)
    ids, key_mask, positions = left_pad([list(p) for p in prompts], pad_id)
    B, P = ids.shape
    lengths = key_mask.sum(axis=1)                                    # real tokens per row
    room = model.config.max_len + 1 - lengths                         # new ids each row may add
    if lengths.max() > model.config.max_len:
        raise ValueError(f"prompts: prompt {int(room.argmin())} has {int(lengths.max())} ids but "
                         f"the model reads at most max_len={model.config.max_len} positions")
    steps = int(min(max_new_tokens, room.max()))
    out = np.full((B, steps), -1, dtype=np.int64)                     # -1: nothing generated
    scores = []                                                       # logits of each step [B, V]
    done = np.zeros(B, bool)
    cache = model.new_kv_cache(B, P + steps) if use_cache else None
    logits = model.forward(ids, key_mask=key_mask, positions=positions, kv_cache=cache)[0]
    for t in range(steps):
        scores.append(logits[:, -1])
        done |= t >= room                                             # this row's max_len is reached
        next_ids = choose_next(logits[:, -1], temperature, top_k, top_p, rng)     # [B]
        out[:, t] = np.where(done, -1, next_ids)
        if eos_id is not None:
            done |= next_ids == eos_id
        if done.all() or t == steps - 1:
            break
        next_ids = np.where(done, pad_id, next_ids)[:, None]          # [B, 1]
        # a finished row still runs (its output is ignored), kept inside the position table
        step_positions = np.minimum(lengths + t, model.config.max_len - 1)[:, None]
        if use_cache:
            logits = model.forward(next_ids, key_mask=np.ones((B, 1), bool),
                                   positions=step_positions, kv_cache=cache)[0]
        else:                                   # full recompute over prompt + tokens so far
            ids = np.concatenate([ids, next_ids], axis=1)
            key_mask = np.concatenate([key_mask, np.ones((B, 1), bool)], axis=1)
            positions = np.concatenate([positions, step_positions], axis=1)
            logits = model.forward(ids, key_mask=key_mask, positions=positions)[0]
    results = [_cut(row, eos_id) for row in out]
    if not return_logits:
        return results
    stacked = np.stack(scores, axis=1)                                 # [B, steps taken, V]
    hit = [len(r) == room[b] < max_new_tokens for b, r in enumerate(results)]
    return Generation(results, [stacked[b, :len(r)] for b, r in enumerate(results)], hit)


def _cut(row, eos_id):
    """The ids a row generated, up to (not including) the first ``eos_id``."""
    row = row[row >= 0].tolist()
    if eos_id is not None and eos_id in row:
        row = row[:row.index(eos_id)]
    return row


def generate_text(model, tokenizer, prompts, max_new_tokens=32, **options):
    """Strings in, strings out: encode with <bos>, generate until <eos>, decode."""
    if isinstance(prompts, str):
        raise TypeError("prompts: expected a list of str, got a single str (wrap it in a list)")
    for i, prompt in enumerate(prompts):
        if not isinstance(prompt, str) or not prompt:
            raise ValueError(f"prompts: expected non-empty strings, got {prompt!r} at index {i}")
    encoded = [tokenizer.encode(p, bos=True) for p in prompts]
    new = generate(model, encoded, max_new_tokens, eos_id=tokenizer.eos_id,
                   pad_id=tokenizer.pad_id, **options)
    return [tokenizer.decode(ids) for ids in new]
