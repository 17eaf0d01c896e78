"""The section pictures: ``npformer examples NN --plot DIR`` and ``npformer tour --plot DIR``
write valid PNGs, draw every Chinese label with a real glyph, and need matplotlib only
when asked for."""
import subprocess
import sys
import warnings

import pytest

from npformer.cli import main

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
NEEDS_PLOT = "the pictures need the plot extra: pip install 'npformer[plot]'"


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


def test_every_section_picture_is_a_png_with_every_glyph(tmp_path):
    pytest.importorskip("matplotlib", reason=NEEDS_PLOT)
    pytest.importorskip("noto_cjk_sans_otc", reason=NEEDS_PLOT)
    from npformer import pictures
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        written = [p for number in pictures.PICTURES for p in pictures.draw(number, tmp_path)]
        written += pictures.draw_tour(tmp_path)
    missing = sorted({str(w.message) for w in caught if "missing from font" in str(w.message)})
    assert missing == []
    names = sorted(p.name for p in tmp_path.iterdir())
    expected = sorted(name for pairs in pictures.PICTURES.values() for name, _ in pairs)
    assert names == sorted(expected + [name for name, _ in pictures.TOUR_PICTURES])
    assert len(written) == len(names)
    for path in tmp_path.iterdir():
        _check_png(path)


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


def test_an_example_without_pictures_writes_none(tmp_path):
    pytest.importorskip("matplotlib", reason=NEEDS_PLOT)
    assert main(["examples", "word_order", "--plot", str(tmp_path)]) == 0
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv", [["examples", "3"], ["tour"]])
def test_plot_without_matplotlib_is_one_line_naming_the_extra(argv, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)          # import matplotlib -> ImportError
    assert main([*argv, "--plot", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "pip install 'npformer[plot]'" in err


def test_importing_npformer_does_not_import_matplotlib():
    code = "import sys, npformer, npformer.cli; print('matplotlib' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"
