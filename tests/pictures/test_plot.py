"""The terminal attention map lines up in any terminal; the PNGs say what they show."""
import unicodedata

import numpy as np
import pytest

from npformer.pictures.plot import text_heatmap

RAMP = " .:=#"                # light to dark


def _width(text):
    """Terminal cells of ``text`` by the Unicode East Asian Width table: W and F take two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


@pytest.mark.parametrize("prompt", ["^耳机有质量问题，退货运费谁出？", "^鞋子收到12天了，还能无理由退吗？",
                                    "^headset is faulty. who pays?", "31415>"])
def test_each_mark_sits_under_its_character(prompt):
    weights = np.random.default_rng(0).random(len(prompt))
    label = "  layer 0: "
    top, bottom = text_heatmap(list(prompt), weights, label=label).split("\n")
    # the marks are plain ASCII, one cell wide whatever width a terminal gives "ambiguous" characters
    assert all(ord(c) < 128 for c in bottom)
    bottom = bottom.ljust(_width(top))
    position = len(label)
    for i, char in enumerate(prompt):
        while top[position] != char:                     # padding between characters (no spaces
            assert top[position] == " "                  # in the prompts that need padding)
            position += 1
        start = _width(top[:position])                   # the first cell of this character
        under = bottom[start:start + _width(char)]       # the cells right below it
        darkest = RAMP[int(round(weights[i] / weights.max() * 4))]
        assert under == darkest * _width(char), (i, char, under)
        position += 1


def test_the_most_read_character_gets_the_darkest_mark():
    top, bottom = text_heatmap(list("退货运费"), [0.1, 0.7, 0.1, 0.1]).split("\n")
    assert bottom.index("##") == 2                        # under 货, which starts at cell 2


def test_attention_png_stores_the_question(tmp_path):
    pytest.importorskip("matplotlib")
    from PIL import Image
    from npformer.pictures.plot import plot_attention
    weights = np.random.default_rng(0).dirichlet(np.ones(4), size=(2, 4))
    path = plot_attention(list("^退货？"), weights, tmp_path / "a.png", question="退货？")
    assert Image.open(path).info["Description"] == "退货？"


def test_attention_png_shows_the_characters_of_the_question(tmp_path):
    pytest.importorskip("matplotlib", reason="the PNGs need the plot extra: pip install '.[plot]'")
    pytest.importorskip("noto_cjk_sans_otc", reason="the PNGs need the plot extra: pip install '.[plot]'")
    import warnings
    import matplotlib.pyplot as plt
    from npformer.pictures.plot import attention_figure
    chars = list("^耳机有质量问题，退货运费谁出？")
    weights = np.random.default_rng(0).dirichlet(np.ones(len(chars)), size=(2, len(chars)))
    fig = attention_figure(chars, weights, question="".join(chars[1:]))
    for ax in fig.axes[:2]:                              # one map per layer (then the colour bar)
        assert [t.get_text() for t in ax.get_xticklabels()] == chars
        assert [t.get_text() for t in ax.get_yticklabels()] == chars
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig.savefig(tmp_path / "a.png", dpi=120)         # drawing the labels needs every glyph
    plt.close(fig)
    missing = [str(w.message) for w in caught if "missing from font" in str(w.message)]
    assert missing == []


# -- without a font that has Chinese glyphs ---------------------------------------------------
@pytest.mark.parametrize("argv", [["examples", "2"], ["tour"]])
def test_section_pictures_without_a_cjk_font_are_one_line_naming_how_to_get_one(capsys, monkeypatch,
                                                                               tmp_path, argv):
    """Pictures labelled in Chinese are refused before any work, not drawn as empty boxes."""
    import npformer.pictures.plot as plot
    from npformer.cli import main
    monkeypatch.setattr(plot, "_cjk_font", lambda: None)        # a machine without one
    code = main(argv + ["--plot", str(tmp_path / "pictures")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert err[0] == (f"npformer {argv[0]}: error: --plot: no font with Chinese characters found, "
                      f"and the pictures are labelled in Chinese: pip install noto-cjk-sans-otc==0.0.1 "
                      f"(Noto Sans CJK, in npformer's [plot] extra), or a CJK font for the whole system "
                      f"(e.g. apt install fonts-noto-cjk)")
    assert not (tmp_path / "pictures").exists()


def test_the_library_refuses_too(monkeypatch, tmp_path):
    import npformer.pictures.plot as plot
    from npformer import pictures
    monkeypatch.setattr(plot, "_cjk_font", lambda: None)
    with pytest.raises(pictures.PlotUnavailable, match=r"^no font with Chinese characters found"):
        pictures.draw(2, str(tmp_path))
