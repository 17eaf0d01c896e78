"""The section pictures: ``npformer examples NN --plot DIR`` and ``npformer tour --plot DIR``
write valid PNGs, draw every Chinese label with a real glyph, and need matplotlib only
when asked for."""
import math
import subprocess
import sys
import warnings

from pathlib import Path

import numpy as np
import pytest

from npformer.cli import main
from npformer.pictures import PICTURES          # imports no matplotlib: drawing does

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
NEEDS_PLOT = "the pictures need the plot extra: pip install '.[plot]'"


def _check_png(path):
    from PIL import Image
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, f"{path.name}: not a PNG"
    with Image.open(path) as image:
        image.verify()                                    # a truncated file fails here
    with Image.open(path) as image:
        width, height = image.size
        extrema = image.convert("L").getextrema()
    assert width > 300 and height > 200, f"{path.name}: {width} x {height} pixels"
    assert extrema[0] < extrema[1], f"{path.name}: a blank picture"


def _draw_checked(draw, tmp_path):
    """Run ``draw(tmp_path)``, fail on any glyph the fonts lack, check every PNG; the names."""
    pytest.importorskip("matplotlib", reason=NEEDS_PLOT)
    pytest.importorskip("noto_cjk_sans_otc", reason=NEEDS_PLOT)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        written = draw(tmp_path)
    missing = sorted({str(w.message) for w in caught if "missing from font" in str(w.message)})
    assert missing == []
    names = sorted(p.name for p in tmp_path.iterdir())
    assert sorted(Path(p).name for p in written) == names
    for path in tmp_path.iterdir():
        _check_png(path)
    return names


@pytest.mark.parametrize("number", sorted(PICTURES))
def test_each_section_picture_is_a_png_with_every_glyph(number, tmp_path):
    from npformer import pictures
    names = _draw_checked(lambda folder: pictures.draw(number, folder), tmp_path)
    assert names == sorted(name for name, _ in PICTURES[number])


def test_the_tour_pictures_are_pngs_with_every_glyph(tmp_path):
    from npformer import pictures
    names = _draw_checked(pictures.draw_tour, tmp_path)
    assert names == sorted(name for name, _ in pictures.TOUR_PICTURES)


def test_examples_and_tour_plot_options_write_their_pictures(tmp_path, capsys):
    pytest.importorskip("matplotlib", reason=NEEDS_PLOT)
    assert main(["examples", "3", "--plot", str(tmp_path / "ex")]) == 0
    assert sorted(p.name for p in (tmp_path / "ex").iterdir()) == ["03_masks.png", "03_score_table.png"]
    assert main(["tour", "--heads", "4", "--plot", str(tmp_path / "tour")]) == 0
    assert sorted(p.name for p in (tmp_path / "tour").iterdir()) == ["tour_heads.png",
                                                                     "tour_next_token.png"]
    out = capsys.readouterr().out
    assert "picture: " in out and "03_masks.png" in out
    for path in [*(tmp_path / "ex").iterdir(), *(tmp_path / "tour").iterdir()]:
        _check_png(path)


def test_only_the_pretrained_model_example_has_no_picture(tmp_path):
    pytest.importorskip("matplotlib", reason=NEEDS_PLOT)
    from npformer import pictures
    from npformer.worked import find_examples_dir, list_examples
    numbers = {example.number for example in list_examples(find_examples_dir())}
    assert numbers - set(pictures.PICTURES) == {90}     # its numbers are a real model's: printed
    assert pictures.draw(90, tmp_path) == []
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv", [["examples", "3"], ["tour"]])
def test_plot_without_matplotlib_is_one_line_naming_the_extra(argv, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)          # import matplotlib -> ImportError
    assert main([*argv, "--plot", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "pip install matplotlib noto-cjk-sans-otc==0.0.1" in err


def test_importing_npformer_does_not_import_matplotlib():
    code = "import sys, npformer, npformer.cli; print('matplotlib' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


# -- what the pictures of the examples 01, 06, 18, 19, 21 to 25 show ----------------------------
def _bars(container):
    return np.array([patch.get_height() for patch in container])


@pytest.fixture(scope="module")
def pictures_module():
    pytest.importorskip("matplotlib", reason=NEEDS_PLOT)
    from npformer import pictures
    yield pictures
    pictures._plt().close("all")


def test_token_vectors_picture_shows_one_table_row_then_context(pictures_module):
    from npformer import DecoderConfig, DecoderLM
    before, after = pictures_module.token_vectors().axes[:2]
    row_17 = DecoderLM(DecoderConfig(), np.random.default_rng(7)).tokens.weight.data[17]
    first, second = (_bars(c) for c in before.containers)
    np.testing.assert_array_equal(first, row_17)          # a lookup is row ``id`` of the table
    np.testing.assert_array_equal(second, row_17)
    first, second = (_bars(c) for c in after.containers)
    assert np.abs(first - second).max() > 0.1


def test_word_order_picture_is_zero_only_without_positions_and_mask(pictures_module):
    panels = [ax.images[0].get_array() for ax in pictures_module.word_order().axes[:3]]
    assert np.abs(panels[0]).max() < 1e-12               # attention alone is permutation-equivariant
    assert panels[1].max() > 1e-3 and panels[2].max() > 1e-3


def test_averaging_vs_attention_picture_weights(pictures_module):
    averaging, attention = pictures_module.averaging_vs_attention().axes[:2]
    for container in averaging.containers:
        np.testing.assert_allclose(_bars(container), 0.5)
    match = 1 / (1 + math.exp(-4 / math.sqrt(2)))          # softmax of [4/sqrt(2), 0]
    np.testing.assert_allclose(_bars(attention.containers[0]), [match, 1 - match])
    np.testing.assert_allclose(_bars(attention.containers[1]), [1 - match, match])


def test_separate_projections_picture(pictures_module):
    direct, shifted, outputs = pictures_module.separate_projections().axes[:3]
    scores = np.asarray(direct.images[0].get_array())
    np.testing.assert_allclose(scores, scores.T, atol=1e-12)
    assert list(scores.argmax(axis=1)) == list(range(5))
    e = math.exp(8 / math.sqrt(8))
    assert abs(shifted.images[0].get_array()[3, 2] - e / (e + 3)) < 1e-9
    match = 1 / (1 + math.exp(-4 / math.sqrt(2)))
    np.testing.assert_allclose(_bars(outputs.containers[1]), [match, 1 - match])


def test_rope_past_trained_length_picture_counts_the_slow_pairs(pictures_module):
    pairs, slowest = pictures_module.rotary_past_trained_length().axes[:2]
    for line, base in zip(pairs.lines, (10_000.0, 500_000.0)):
        reached = 4095 * base ** (-2 * np.arange(64) / 128)   # theta_i = base^(-2i/D) per position
        np.testing.assert_allclose(line.get_ydata(), reached, rtol=1e-9)
        assert (line.get_ydata() < 2 * math.pi).sum() == (18 if base == 10_000 else 32)
    extrapolated = slowest.lines[0].get_ydata()
    assert abs(extrapolated[-1] - 8191 * 10_000 ** (-126 / 128)) < 1e-9


def test_deep_stack_picture_residuals_keep_the_gradient(pictures_module):
    effect, spread, gradient = pictures_module.deep_stack_without_residuals().axes[:3]
    assert all(0.5 < g < 2 for g in gradient.lines[0].get_ydata())
    assert gradient.lines[1].get_ydata()[-1] < 0.01
    assert spread.lines[1].get_ydata()[-1] < 1e-10          # 64 layers: one vector everywhere


def test_one_head_picture_misses_by_the_bound(pictures_module):
    targets = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    for ax, error in zip(pictures_module.one_head_versus_two().axes[:2], (1 / 3, 0.0)):
        answers = np.stack([_bars(c) for c in ax.containers], axis=1)
        assert abs(((answers - targets) ** 2).sum() - error) < 1e-3


def test_weights_are_not_causes_picture(pictures_module):
    shares, effects = pictures_module.weights_are_not_causes().axes[:2]
    w = 1 / (1 + math.exp(-1 / math.sqrt(2)))                # the article's 0.670
    a_share, b_share = (_bars(c) for c in shares.containers)
    np.testing.assert_allclose(a_share + b_share, [2 * w, 4 * (1 - w)])
    np.testing.assert_allclose(np.round(a_share + b_share, 3), [1.340, 1.321])
    np.testing.assert_allclose(_bars(effects.containers[0]), [0.90, 0.08, 0.02])
    np.testing.assert_allclose(_bars(effects.containers[1]), [0.0, 0.08, 0.20], atol=1e-12)


def test_depth_picture_tents_double_their_pieces(pictures_module):
    tents, flat = pictures_module.depth_and_what_it_can_express().axes[:2]
    for k, line in enumerate(tents.lines, start=1):
        x, y = line.get_xdata(), line.get_ydata() - 1.3 * (k - 1)
        slopes = np.diff(y) / np.diff(x)
        assert 1 + (np.abs(np.diff(slopes)) > 1e-6).sum() == 2 ** k
        assert abs(y[np.searchsorted(x, 1 / 2 ** k)] - 1) < 1e-9 and abs(y[0]) < 1e-12
    line = flat.lines[0].get_ydata()
    assert np.abs(np.diff(line, 2)).max() < 1e-12          # eight linear layers: one line


def test_the_chinese_index_names_only_pictures_that_are_drawn():
    import re
    from pathlib import Path
    from npformer import pictures
    page = (Path(__file__).resolve().parents[2] / "README.zh-CN.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`(\w+\.png)`", page))
    drawn = {name for pairs in pictures.PICTURES.values() for name, _ in pairs}
    drawn |= {name for name, _ in pictures.TOUR_PICTURES}
    assert named - drawn == set()
    assert drawn - named == set()                          # every picture is reachable from the page


def test_the_word_order_picture_keeps_its_heading_titles_and_labels_apart_and_inside():
    """Once its heading ran over the panel titles and its axis labels fell off the bottom."""
    from npformer.pictures.tokens import word_order
    fig = word_order()
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    heading = fig._suptitle.get_window_extent(renderer)
    inside = fig.bbox
    for ax in fig.axes:
        title = ax.title.get_window_extent(renderer)
        assert not heading.overlaps(title), ax.get_title()
        for text in (ax.title, ax.xaxis.label, ax.yaxis.label):
            box = text.get_window_extent(renderer)
            assert inside.x0 <= box.x0 and box.x1 <= inside.x1, text.get_text()
            assert inside.y0 <= box.y0 and box.y1 <= inside.y1, text.get_text()
    fig.clf()
