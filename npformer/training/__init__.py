"""Training and running a model: tokenizers, data, the optimizers, the training loop,
the progress bar."""
