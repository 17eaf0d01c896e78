"""Data: the built-in data sets (generated from our own templates, nothing is downloaded)
and the batches the training loop reads.

1. After-sales questions (in Chinese, or in English with ``lang="en"``) whose answer depends on
   the context, like the tutorial's running example, a question about who pays the return
   shipping: the answer depends on whether the goods were faulty or go back without a
   reason; our templates ask it as "退货运费谁出？". Each template has a *deciding* slot (reason, payment
   method, order status, days since delivery, cause of damage) and distractor
   slots (the item, the phrasing). The held-out split holds (item, deciding
   value) COMBINATIONS that never occur in training, while every single value
   still occurs there: to answer, the model must read the deciding words, not
   remember sentences.
2. Two algorithmic tasks with unambiguous answers: reverse a digit string, and
   add two numbers.

An ``Example`` is a prompt and its answer. ``encode_examples`` turns examples
into ``<bos> prompt answer <eos>`` id sequences plus the index where the answer
starts (the loss is counted from there on). ``ExampleSource`` draws padded
batches of them, ``TextSource`` random windows of one long text; both give a
``Batch``: inputs, targets (the inputs shifted by one) and a key mask.
"""
from __future__ import annotations

import itertools
from collections import Counter
from typing import NamedTuple

import numpy as np

from ..t11_loss import IGNORE_INDEX


class Example(NamedTuple):
    """One question and its answer; ``task`` and ``slots`` say how it was made."""

    prompt: str
    answer: str
    task: str = ""
    slots: tuple = ()


class Split(NamedTuple):
    """The training examples and the held-out ones."""

    train: list
    heldout: list


# -- after-sales templates ------------------------------------------------------------
ITEMS = ("手机", "耳机", "外套", "鞋子", "台灯", "水杯", "背包", "键盘", "手表", "毛衣", "电饭煲", "充电宝")

# Each template: phrasings (with {item} and {value}), and the deciding values grouped by answer.
TEMPLATES = {
    "shipping": {
        "phrasings": ("{item}{value}，退货运费谁出？", "我买的{item}{value}，要退回去，运费谁付？"),
        "answers": {
            "商家承担运费": ("有质量问题", "到货就是坏的", "发错了颜色", "少了配件"),
            "买家承担运费": ("不想要了", "七天无理由退", "拍错了", "买多了"),
        },
    },
    "refund": {
        "phrasings": ("{item}是用{value}付的，退款多久到账？", "退掉的{item}当时{value}支付，钱几天回来？"),
        "answers": {
            "原路即时到账": ("余额", "零钱"),
            "一到三个工作日": ("微信", "支付宝"),
            "三到七个工作日": ("银行卡", "信用卡", "花呗"),
        },
    },
    "cancel": {
        "phrasings": ("{item}的订单{value}，还能取消吗？", "刚下单的{item}{value}，我想取消怎么办？"),
        "answers": {
            "可以直接取消": ("还没发货", "在等待出库"),
            "拒收后自动退款": ("已经发货", "在派送途中"),
            "请申请退货退款": ("已经签收", "放在驿站里取了"),
        },
    },
    "days": {
        "phrasings": ("{item}收到{value}天了，还能无理由退吗？", "签收{item}已经{value}天，支持无理由退货吗？"),
        "answers": {
            "可以无理由退": tuple(str(n) for n in range(1, 8)),
            "已超过七天期限": tuple(str(n) for n in range(8, 16)),
        },
    },
    "warranty": {
        "phrasings": ("{item}坏了，原因是{value}，保修吗？", "我的{item}因为{value}出了故障，能免费修吗？"),
        "answers": {
            "可以免费保修": ("正常使用", "自然老化", "出厂缺陷"),
            "不在保修范围": ("人为摔坏", "进水", "私自拆机"),
        },
    },
}

# The same five rules in English, worded short: the model reads characters, so every
# character of a prompt costs time.
ITEMS_EN = ("phone", "headset", "coat", "shoes", "lamp", "mug", "backpack", "keyboard", "watch",
            "sweater", "kettle", "charger")

TEMPLATES_EN = {
    "shipping": {
        "phrasings": ("{item} {value}. who pays return post?", "return {item}, {value}: who pays?"),
        "answers": {
            "seller pays": ("is faulty", "came broken", "wrong colour", "lacks parts"),
            "buyer pays": ("not wanted", "no reason", "wrong size", "bought twice"),
        },
    },
    "refund": {
        "phrasings": ("{item} paid by {value}. refund when?", "refund {item} to {value}: how long?"),
        "answers": {
            "instantly": ("balance", "wallet"),
            "1-3 workdays": ("paypal", "alipay"),
            "3-7 workdays": ("bank card", "credit card", "pay later"),
        },
    },
    "cancel": {
        "phrasings": ("{item} order {value}. cancel?", "can i cancel {item}, {value}?"),
        "answers": {
            "cancel now": ("not shipped", "in packing"),
            "refuse parcel": ("shipped", "on the way"),
            "file a return": ("delivered", "picked up"),
        },
    },
    "days": {
        "phrasings": ("{item} here {value} days. free return?", "got {item} {value} days ago. return ok?"),
        "answers": {
            "yes, free return": tuple(str(n) for n in range(1, 8)),
            "no, past 7 days": tuple(str(n) for n in range(8, 16)),
        },
    },
    "warranty": {
        "phrasings": ("{item} broke by {value}. warranty?", "{item} failed, cause {value}. free fix?"),
        "answers": {
            "free repair": ("normal use", "old age", "factory flaw"),
            "not covered": ("a drop", "water", "self repair"),
        },
    },
}

LANGUAGES = {"zh": (ITEMS, TEMPLATES), "en": (ITEMS_EN, TEMPLATES_EN)}

# One question in several contexts, for the demo: (template, the deciding values to show).
CONTRASTS = {
    "zh": (("耳机{}，退货运费谁出？", ("有质量问题", "不想要了")),
           ("台灯是用{}付的，退款多久到账？", ("余额", "支付宝", "信用卡")),
           ("手表的订单{}，还能取消吗？", ("还没发货", "已经发货", "已经签收")),
           ("键盘坏了，原因是{}，保修吗？", ("出厂缺陷", "进水")),
           ("鞋子收到{}天了，还能无理由退吗？", ("3", "12"))),
    "en": (("headset {}. who pays return post?", ("is faulty", "not wanted")),
           ("lamp paid by {}. refund when?", ("balance", "paypal", "credit card")),
           ("watch order {}. cancel?", ("not shipped", "shipped", "delivered")),
           ("keyboard broke by {}. warranty?", ("factory flaw", "water")),
           ("shoes here {} days. free return?", ("3", "12"))),
}


def _language(lang):
    if lang not in LANGUAGES:
        raise ValueError(f"lang: expected one of {tuple(LANGUAGES)}, got {lang!r}")
    return LANGUAGES[lang]


def aftersales_examples(lang="zh"):
    """Every (template, phrasing, item, value) combination as an ``Example``."""
    items, templates = _language(lang)
    examples = []
    for name, spec in templates.items():
        for answer, values in spec["answers"].items():
            for value, item, (k, phrasing) in itertools.product(values, items,
                                                                enumerate(spec["phrasings"])):
                examples.append(Example(phrasing.format(item=item, value=value), answer, name,
                                        (item, value, k)))
    return examples


def aftersales(seed=0, heldout_fraction=0.15, lang="zh"):
    """Split the after-sales examples by (template, item, value) combination.

    About ``heldout_fraction`` of the combinations go to the held-out split
    (with both phrasings), chosen with ``seed`` so that every item and every
    deciding value still appears in training.
    """
    if not 0 < heldout_fraction < 0.5:
        raise ValueError(f"heldout_fraction: expected a number in (0, 0.5), got {heldout_fraction}")
    rng = np.random.default_rng(seed)
    examples = aftersales_examples(lang)
    combos = sorted({(e.task, e.slots[0], e.slots[1]) for e in examples})
    order = rng.permutation(len(combos))
    target = int(round(heldout_fraction * len(combos)))
    held = set()
    items_left = Counter((task, item) for task, item, _ in combos)      # training combinations left
    values_left = Counter((task, value) for task, _, value in combos)
    for i in order:
        task, item, value = combos[i]
        if len(held) == target:
            break
        # keep at least two training combinations for every item and every value
        if items_left[task, item] > 2 and values_left[task, value] > 2:
            held.add(combos[i])
            items_left.subtract([(task, item)])
            values_left.subtract([(task, value)])
    train = [e for e in examples if (e.task, e.slots[0], e.slots[1]) not in held]
    heldout = [e for e in examples if (e.task, e.slots[0], e.slots[1]) in held]
    return Split(train, heldout)


def aftersales_corpus(lang="zh"):
    """Every character the after-sales examples can contain (for the tokenizer)."""
    return "".join(e.prompt + e.answer for e in aftersales_examples(lang))


# -- algorithmic tasks -----------------------------------------------------------------
def _disjoint_split(make, n_train, n_heldout, rng, space):
    """Draw distinct examples with ``make(rng)`` until both splits are full (no overlap)."""
    if n_train + n_heldout > space // 2:
        raise ValueError(f"n_train + n_heldout: {n_train + n_heldout} is too many for a space of "
                         f"{space} distinct examples")
    seen, out = set(), []
    while len(out) < n_train + n_heldout:
        example = make(rng)
        if example.prompt not in seen:
            seen.add(example.prompt)
            out.append(example)
    return Split(out[:n_train], out[n_train:])


def reverse_task(n_train=4000, n_heldout=500, length=5, seed=0):
    """Prompt "31415>" -> answer "51413": the digits in reverse order (fixed length)."""
    def make(rng):
        digits = "".join(str(d) for d in rng.integers(0, 10, length))
        return Example(digits + ">", digits[::-1], "reverse")
    return _disjoint_split(make, n_train, n_heldout, np.random.default_rng(seed), 10 ** length)


def addition_task(n_train=4000, n_heldout=500, digits=2, seed=0):
    """Prompt "27+58=" -> answer "58": the sum 85 written least significant digit first.

    Operands are zero-padded to ``digits`` and the sum to ``digits + 1`` digits
    ("07+05=210" means 012), so every position has one meaning and each answer
    digit depends only on operand digits and the carry from the digit before it,
    the order in which we add by hand.
    """
    def make(rng):
        a, b = (int(x) for x in rng.integers(0, 10 ** digits, 2))
        total = str(a + b).zfill(digits + 1)
        return Example(f"{a:0{digits}d}+{b:0{digits}d}=", total[::-1], "add", (a, b))
    return _disjoint_split(make, n_train, n_heldout, np.random.default_rng(seed), 10 ** (2 * digits))


def read_addition_answer(answer):
    """The integer an addition answer (reversed digits) stands for."""
    return int(answer[::-1])


# -- encoding --------------------------------------------------------------------------
class Encoded(NamedTuple):
    """ids: one list of ids per example (<bos> prompt answer <eos>); starts: answer index."""

    ids: list
    starts: list


def encode_examples(tokenizer, examples, eos=True):
    """Examples -> ``Encoded``: <bos> prompt answer [<eos>] and where each answer starts."""
    ids, starts = [], []
    for e in examples:
        prompt = tokenizer.encode(e.prompt, bos=True)
        ids.append(prompt + tokenizer.encode(e.answer, eos=eos))
        starts.append(len(prompt))
    return Encoded(ids, starts)


# -- batches -------------------------------------------------------------------------
class Batch(NamedTuple):
    """inputs [B, N] ids, targets [B, N] ids or IGNORE_INDEX, key_mask [B, N] (True = real)."""

    inputs: np.ndarray
    targets: np.ndarray
    key_mask: np.ndarray

    @property
    def counted(self):
        """How many targets count in the loss."""
        return int((self.targets != IGNORE_INDEX).sum())


def pad_batch(sequences, starts, pad_id):
    """Right-pad id sequences into a ``Batch`` for next-token prediction.

    inputs = seq[:-1], targets = seq[1:]; a target counts only from index
    ``start`` of its sequence on (the answer), padding never counts.
    """
    lengths = np.array([len(s) for s in sequences])
    N = int(lengths.max()) - 1
    B = len(sequences)
    ids = np.full((B, N + 1), pad_id, dtype=np.int64)
    for row, seq in enumerate(sequences):
        ids[row, :len(seq)] = seq
    columns = np.arange(N)[None, :]                                    # target j = ids[j + 1]
    counted = (columns + 1 >= np.asarray(starts)[:, None]) & (columns + 1 < lengths[:, None])
    targets = np.where(counted, ids[:, 1:], IGNORE_INDEX)
    return Batch(ids[:, :-1], targets, columns < (lengths - 1)[:, None])


class ExampleSource:
    """Draws batches of encoded examples (``encode_examples``), loss on the answers."""

    def __init__(self, encoded, pad_id):
        if not encoded.ids:
            raise ValueError("encoded: expected at least one example")
        self.ids, self.starts, self.pad_id = encoded.ids, encoded.starts, pad_id

    @property
    def max_len(self):
        """The longest input sequence (an example without its last id)."""
        return max(len(s) for s in self.ids) - 1

    def sample(self, rng, batch_size):
        """A Batch of ``batch_size`` examples drawn with ``rng``."""
        rows = rng.integers(0, len(self.ids), batch_size)
        return pad_batch([self.ids[r] for r in rows], [self.starts[r] for r in rows], self.pad_id)

    def batches(self, batch_size):
        """Every example once, in order (for evaluation)."""
        for i in range(0, len(self.ids), batch_size):
            yield pad_batch(self.ids[i:i + batch_size], self.starts[i:i + batch_size], self.pad_id)


class TextSource:
    """Random windows of ``seq_len + 1`` ids from one long encoded text; every target counts.

    A text shorter than ``seq_len + 1`` ids gives windows as long as it allows.
    """

    def __init__(self, ids, seq_len):
        self.ids = np.asarray(ids, dtype=np.int64)
        if len(self.ids) < 2:
            raise ValueError(f"ids: expected a text of at least 2 tokens, got {len(self.ids)}")
        self.seq_len = min(seq_len, len(self.ids) - 1)

    @property
    def max_len(self):
        """The window length."""
        return self.seq_len

    def sample(self, rng, batch_size):
        """A Batch of ``batch_size`` random windows drawn with ``rng``."""
        first = rng.integers(0, len(self.ids) - self.seq_len, batch_size)
        windows = self.ids[first[:, None] + np.arange(self.seq_len + 1)]     # [B, N + 1]
        return Batch(windows[:, :-1], windows[:, 1:], np.ones((batch_size, self.seq_len), bool))
