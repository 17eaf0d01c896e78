"""The Chinese reader's page and notebooks: a heading pasted from either article finds its row,
every sentence quoted as the articles' is the articles' own, and the words are plain Chinese.

The headings and sentences below are copied from the two articles (shared/seeds/, not in the
repository): they are quotations, the expected values an independent reader can check
against the articles."""
import json
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGE = (REPO / "README.zh-CN.md").read_text(encoding="utf-8")
CLAIMS = (REPO / "worked_examples" / "CLAIMS.md").read_text(encoding="utf-8")
NOTEBOOKS = [REPO / "notebooks" / "01_main_article.ipynb", REPO / "notebooks" / "02_overview_article.ipynb"]

MAIN_TITLE = "Transformer 怎样处理一句话：从 Attention 到完整计算过程"
OVERVIEW_TITLE = "Transformer 到底在算什么？一文看懂 Attention"

# The main article's headings, in its order, with the CLAIMS.md section of each (it numbers none).
MAIN_HEADINGS = {
    "先看位置之间为什么需要交换信息": "T1",
    "Q、K、V 从同一个输入出来，为什么却不同": "T2",
    "手算一次 Attention，看看它输出了什么": "T3",
    "训练时答案已经在后面，模型怎样避免偷看": "T4",
    "多头不是多算几遍同样的东西": "T5",
    "位置编码怎样让顺序进入匹配": "T6",
    "Attention 后面为什么还需要 FFN、残差和归一化": "T7",
    "多层之后，怎样变成下一个 Token 的分数": "T8",
    "把整条链写成一个小型前向程序": "T9",
    "再看 GQA 和 MoE：它们修改了哪一部分": "T10",
}
OVERVIEW_HEADINGS = {
    "一、一张图看懂 Transformer 的分工": "O1",
    "二、从 Token ID 到向量": "O2",
    "三、为什么需要位置信息？": "O3",
    "四、Self-Attention 解决什么问题？": "O4",
    "五、Query、Key 和 Value": "O5",
    "六、Attention 的计算过程": "O6",
    "七、为什么要除以 \\sqrt{d_k}？": "O7",
    "八、什么是多头注意力？": "O8",
    "九、为什么需要因果遮罩？": "O9",
    "十、MLP 在做什么？": "O10",
    "十一、残差连接": "O11",
    "十二、LayerNorm 与 RMSNorm": "O12",
    "十三、Logits 是什么？": "O13",
    "十四、Transformer 是否真的存储知识？": "O14",
    "十五、KV Cache 为什么能加速生成？": "O15",
    "十六、上下文越长，计算为何越贵？": "O16",
    "本篇总结": "OS",
}
HEADINGS = {**MAIN_HEADINGS, **OVERVIEW_HEADINGS}

# Sentences the articles use as example data, exactly as they write them.
ARTICLE_SENTENCES = {
    "商品有质量问题，运费谁承担？", "商家 承担 运费", "客户退款给商家", "商家退款给客户",
    "狗追猫", "猫追狗", "小明把杯子放到桌子上，因为它很稳。",
}
# Sentences once quoted as the articles' that neither article contains.
NOT_THE_ARTICLES = ["货有质量问题时，运费由谁出？", "买家付钱给商家", "小红把书塞进箱子，因为它很大。"]
# Word-for-word renderings of English that a Chinese technical writer would not use.
CALQUES = ["朴素轨道", "快速轨道", "文章印三位小数", "逐节走的笔记本", "（副标题讲 Attention）"]


def notebook_text(path):
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return cells, "\n".join("".join(cell["source"]) for cell in cells)


def rows_with(text, needle):
    return [line for line in text.splitlines() if line.startswith("|") and needle in line]


@pytest.mark.parametrize("heading", list(HEADINGS))
def test_a_heading_pasted_from_the_article_finds_its_row_and_its_claims(heading):
    rows = rows_with(PAGE, f"| {heading}")
    assert len(rows) == 1, heading
    section = HEADINGS[heading]
    assert f"| {section} |" in rows[0]
    assert re.search(rf"^### {section} ", CLAIMS, flags=re.M), f"CLAIMS.md has no section {section}"


def test_the_index_invents_no_numbering_and_gives_both_full_titles():
    assert "第一节" not in PAGE and "第九节" not in PAGE
    assert f"《{MAIN_TITLE}》" in PAGE and f"《{OVERVIEW_TITLE}》" in PAGE
    # the overview's diagram is drawn Post-Norm, as CLAIMS.md's O1.1 says
    assert "PostNormBlock" in rows_with(PAGE, "| 一、一张图看懂 Transformer 的分工")[0]
    assert "PostNormBlock" in CLAIMS.split("| O1.1 |")[1].split("\n")[0]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_each_notebook_section_is_headed_by_the_article_heading(path):
    cells, _ = notebook_text(path)
    headings = [line[3:] for cell in cells if cell["cell_type"] == "markdown"
                for line in "".join(cell["source"]).splitlines() if line.startswith("## ")]
    expected = MAIN_HEADINGS if path.name.startswith("01") else OVERVIEW_HEADINGS
    opening = headings[0]
    assert "开篇" in opening                        # the paragraphs before the first heading
    assert headings[1:] == list(expected), headings


def _quoted_as_the_articles(text):
    """The “...” inside each passage that says it quotes the article (原样引用 / 照抄文章)."""
    quoted = []
    for passage in re.split(r"\n\s*\n", text):
        if "原样引用" in passage or "照抄文章" in passage:
            quoted += re.findall(r"“([^”]+)”", passage)
    return quoted


@pytest.mark.parametrize("name", ["README.zh-CN.md"] + [p.name for p in NOTEBOOKS])
def test_every_sentence_quoted_as_the_articles_is_theirs_and_ours_are_called_ours(name):
    text = PAGE if name.endswith(".md") else notebook_text(REPO / "notebooks" / name)[1]
    quoted = [q for q in _quoted_as_the_articles(text) if q not in ("原样引用", "我们的例句")]
    assert quoted, "no passage quotes the articles"
    assert set(quoted) <= ARTICLE_SENTENCES, set(quoted) - ARTICLE_SENTENCES
    for wrong in NOT_THE_ARTICLES:
        assert wrong not in text, wrong
    if name.endswith(".ipynb"):
        # a sentence of our own, used beside the article's, says so
        ours = re.findall(r"我们的例句[^“\n]*“([^”]+)”", text)
        assert ours and not set(ours) & ARTICLE_SENTENCES


@pytest.mark.parametrize("name", ["README.zh-CN.md"] + [p.name for p in NOTEBOOKS])
def test_plain_chinese_without_calques(name):
    text = PAGE if name.endswith(".md") else notebook_text(REPO / "notebooks" / name)[1]
    for calque in CALQUES:
        assert calque not in text, calque


def test_the_page_says_commands_print_english_and_notebooks_need_the_plot_extra():
    assert "命令输出" in PAGE and "英文" in PAGE
    for path in NOTEBOOKS:
        cells, _ = notebook_text(path)
        first = "".join(cells[0]["source"])
        assert "'.[plot]'" in first, path.name
