"""The built-in data: answers follow the templates' rules; held-out combinations are new."""
import re

from npformer.training.data import (TEMPLATES, addition_task, aftersales, aftersales_examples,
                                    encode_examples, read_addition_answer, reverse_task)
from npformer.tokenizer import CharTokenizer


def test_shipping_rule_quality_merchant_no_reason_buyer():
    for e in aftersales_examples():
        if e.task != "shipping":
            continue
        quality = any(word in e.prompt for word in ("质量", "坏", "发错", "少了"))
        assert e.answer == ("商家承担运费" if quality else "买家承担运费"), e.prompt


def test_refund_time_depends_on_payment_method():
    expected = {"余额": "原路即时到账", "零钱": "原路即时到账", "微信": "一到三个工作日",
                "支付宝": "一到三个工作日", "银行卡": "三到七个工作日", "信用卡": "三到七个工作日",
                "花呗": "三到七个工作日"}
    for e in aftersales_examples():
        if e.task == "refund":
            method = next(m for m in expected if m in e.prompt)
            assert e.answer == expected[method]


def test_days_rule_seven_day_window():
    for e in aftersales_examples():
        if e.task == "days":
            days = int(re.search(r"\d+", e.prompt).group())
            assert (e.answer == "可以无理由退") == (days <= 7)


def test_heldout_combinations_never_in_training_but_every_value_is():
    split = aftersales()
    combo = lambda e: (e.task, e.slots[0], e.slots[1])          # noqa: E731
    train_combos = {combo(e) for e in split.train}
    assert split.heldout and not {combo(e) for e in split.heldout} & train_combos
    assert not {e.prompt for e in split.heldout} & {e.prompt for e in split.train}
    for e in split.heldout:
        assert any(c[0] == e.task and c[1] == e.slots[0] for c in train_combos)
        assert any(c[0] == e.task and c[2] == e.slots[1] for c in train_combos)
    assert {e.task for e in split.heldout} == set(TEMPLATES)
    assert len(split.train) + len(split.heldout) == len(aftersales_examples())


def test_split_is_seeded():
    assert aftersales(seed=3) == aftersales(seed=3)
    assert aftersales(seed=3).heldout != aftersales(seed=4).heldout


def test_reverse_task():
    split = reverse_task(n_train=200, n_heldout=50, length=4, seed=1)
    assert not {e.prompt for e in split.train} & {e.prompt for e in split.heldout}
    for e in split.train + split.heldout:
        assert e.prompt[-1] == ">" and e.answer == e.prompt[:-1][::-1] and len(e.answer) == 4


def test_addition_task_answers_are_sums():
    split = addition_task(n_train=200, n_heldout=50, digits=2, seed=1)
    assert not {e.prompt for e in split.train} & {e.prompt for e in split.heldout}
    for e in split.train + split.heldout:
        a, b = (int(x) for x in e.prompt[:-1].split("+"))
        assert read_addition_answer(e.answer) == a + b and len(e.answer) == 3


def test_encode_examples_layout():
    examples = aftersales_examples()[:3]
    tok = CharTokenizer.from_corpus("".join(e.prompt + e.answer for e in examples))
    encoded = encode_examples(tok, examples)
    for ids, start, e in zip(encoded.ids, encoded.starts, examples):
        assert ids[0] == tok.bos_id and ids[-1] == tok.eos_id
        assert tok.decode(ids[1:start]) == e.prompt and tok.decode(ids[start:]) == e.answer


# -- the English after-sales set: the same five rules ---------------------------------------------
def test_english_rules_follow_the_deciding_words():
    rules = {
        "shipping": lambda p: "seller pays" if any(w in p for w in ("faulty", "broken", "colour", "lacks"))
        else "buyer pays",
        "refund": lambda p: "instantly" if any(w in p for w in ("balance", "wallet")) else
        "1-3 workdays" if any(w in p for w in ("paypal", "alipay")) else "3-7 workdays",
        "cancel": lambda p: "cancel now" if any(w in p for w in ("not shipped", "packing")) else
        "refuse parcel" if any(w in p for w in ("shipped", "on the way")) else "file a return",
        "days": lambda p: "yes, free return" if int(re.search(r"\d+", p).group()) <= 7 else "no, past 7 days",
        "warranty": lambda p: "free repair" if any(w in p for w in ("normal use", "old age", "flaw"))
        else "not covered",
    }
    examples = aftersales_examples("en")
    assert {e.task for e in examples} == set(rules) and len(examples) == len(aftersales_examples())
    for e in examples:
        assert e.answer == rules[e.task](e.prompt), e.prompt


def test_english_split_holds_out_new_combinations_of_known_words():
    split = aftersales(lang="en")
    combo = lambda e: (e.task, e.slots[0], e.slots[1])          # noqa: E731
    train_combos = {combo(e) for e in split.train}
    assert split.heldout and not {combo(e) for e in split.heldout} & train_combos
    train_chars = set("".join(e.prompt + e.answer for e in split.train))
    assert set("".join(e.prompt + e.answer for e in split.heldout)) <= train_chars
    assert all(ord(c) < 128 for e in split.train for c in e.prompt + e.answer)
