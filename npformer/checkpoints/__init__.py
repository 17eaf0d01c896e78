"""Checkpoints: a trained model saved and loaded again (``checkpoint``), the manifest that says
which files are whole (``manifest``), the writer's lock (``lock``) and the memory and disk a
model needs (``budget``). Atomic writes are ``npformer.core.fileio``'s."""
