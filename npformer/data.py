"""Built-in data, generated from our own templates (nothing is downloaded).

1. After-sales questions in Chinese whose answer depends on the context, like
   the tutorial's running example: the same question "退货运费谁出？" has a
   different answer when the goods had a quality problem than when they go back
   without a reason. Each template has a *deciding* slot (reason, payment
   method, order status, days since delivery, cause of damage) and distractor
   slots (the item, the phrasing). The held-out split holds (item, deciding
   value) COMBINATIONS that never occur in training, while every single value
   still occurs there: to answer, the model must read the deciding words, not
   remember sentences.
2. Two algorithmic tasks with unambiguous answers: reverse a digit string, and
   add two numbers.

An ``Example`` is a prompt and its answer. ``encode_examples`` turns examples
into ``<bos> prompt answer <eos>`` id sequences plus the index where the answer
starts (the loss is counted from there on).
"""
from __future__ import annotations

import itertools
from typing import NamedTuple

import numpy as np


class Example(NamedTuple):
    """One question and its answer; ``task`` and ``slots`` say how it was made."""

    prompt: str
    answer: str
    task: str = ""
    slots: tuple = ()


class Split(NamedTuple):
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


def aftersales_examples():
    """Every (template, phrasing, item, value) combination as an ``Example``."""
    examples = []
    for name, spec in TEMPLATES.items():
        for answer, values in spec["answers"].items():
            for value, item, (k, phrasing) in itertools.product(values, ITEMS,
                                                                enumerate(spec["phrasings"])):
                examples.append(Example(phrasing.format(item=item, value=value), answer, name,
                                        (item, value, k)))
    return examples


def aftersales(seed=0, heldout_fraction=0.15):
    """Split the after-sales examples by (template, item, value) combination.

    About ``heldout_fraction`` of the combinations go to the held-out split
    (with both phrasings), chosen with ``seed`` so that every item and every
    deciding value still appears in training.
    """
    if not 0 < heldout_fraction < 0.5:
        raise ValueError(f"heldout_fraction: expected a number in (0, 0.5), got {heldout_fraction}")
    rng = np.random.default_rng(seed)
    examples = aftersales_examples()
    combos = sorted({(e.task, e.slots[0], e.slots[1]) for e in examples})
    order = rng.permutation(len(combos))
    target = int(round(heldout_fraction * len(combos)))
    held = set()
    items_left, values_left = {}, {}
    for c in combos:
        items_left[c[0], c[1]] = items_left.get((c[0], c[1]), 0) + 1
        values_left[c[0], c[2]] = values_left.get((c[0], c[2]), 0) + 1
    for i in order:
        task, item, value = combos[i]
        if len(held) == target:
            break
        # keep at least two training combinations for every item and every value
        if items_left[task, item] > 2 and values_left[task, value] > 2:
            held.add(combos[i])
            items_left[task, item] -= 1
            values_left[task, value] -= 1
    train = [e for e in examples if (e.task, e.slots[0], e.slots[1]) not in held]
    heldout = [e for e in examples if (e.task, e.slots[0], e.slots[1]) in held]
    return Split(train, heldout)


def aftersales_corpus():
    """Every character the after-sales examples can contain (for the tokenizer)."""
    return "".join(e.prompt + e.answer for e in aftersales_examples())


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
