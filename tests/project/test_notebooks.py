"""The two notebooks (notebooks/*.ipynb, one per article) run from scratch in a real Jupyter
kernel: a cell that raises (an asserted article number that moved, an API that changed)
fails this test. They are stored with their outputs; this runs a fresh copy."""
import pathlib
import time

import pytest

NOTEBOOKS = sorted((pathlib.Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))


def test_there_is_one_notebook_per_article():
    assert [p.name for p in NOTEBOOKS] == ["01_main_article.ipynb", "02_overview_article.ipynb"]


@pytest.mark.full
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_from_scratch(path):
    nbformat = pytest.importorskip("nbformat", reason="running the notebooks needs nbformat, "
                                   "nbclient and ipykernel (the test extra)")
    nbclient = pytest.importorskip("nbclient", reason="running the notebooks needs nbclient and "
                                   "ipykernel (the test extra)")
    pytest.importorskip("ipykernel", reason="running the notebooks needs a Python kernel: ipykernel")
    pytest.importorskip("matplotlib", reason="the notebooks draw the pictures: pip install '.[plot]'")
    notebook = nbformat.read(path, as_version=4)
    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    stored = sum(bool(cell.outputs) for cell in code_cells)
    assert stored > len(code_cells) // 2, f"{path.name}: stored without its outputs"
    for cell in code_cells:
        cell.outputs, cell.execution_count = [], None      # from scratch, not the stored run
    start = time.perf_counter()
    # the kernel starts in notebooks/, where a learner opens them; the first cell finds npformer
    nbclient.NotebookClient(notebook, timeout=180, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}}).execute()
    took = time.perf_counter() - start
    errors = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs
              if o.output_type == "error"]
    assert errors == []
    images = sum("image/png" in o.get("data", {}) for cell in code_cells for o in cell.outputs)
    assert images >= 10, f"{path.name}: {images} pictures shown"
    print(f"{path.name}: ran in {took:.1f} s")
