"""Training and running a model: the data, the training loop and its settings, the progress
bar (the optimiser is ``t19_optim.py``, the tokenizers ``tokenizer.py``)."""
