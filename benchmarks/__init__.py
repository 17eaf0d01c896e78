"""Benchmarks of npformer against PyTorch CPU eager: ``python -m benchmarks`` (see run.py)."""
