"""The settings of a training run (``TrainConfig``) and what it records step by step
(``History``); both are saved in every checkpoint, and a resumed run must keep the settings."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from ..core.validate import check_eps, check_non_negative
from ..t19_optim import warmup_cosine


LONG_RUN = 200          # steps: from here on a run saves periodically unless told otherwise


def default_checkpoint_every(steps):
    """The checkpoint interval a run gets by default: none below ``LONG_RUN`` steps (the
    final save is soon), else every ``steps // 10`` steps, so that a disk that fills up,
    a crash or a kill costs at most a tenth of the run."""
    return 0 if steps < LONG_RUN else steps // 10


@dataclass
class TrainConfig:
    """Settings of a run; saved with each checkpoint (a resume must use the same).

    The learning rate warms up over ``warmup`` steps, then follows a cosine to
    ``min_lr`` at step ``decay_steps`` (default: ``steps``) and stays there.
    ``extended(n)`` gives the settings of the same run continued to ``n`` steps.
    """

    steps: int = 1000
    batch_size: int = 32
    micro_batches: int = 1
    lr: float = 3e-3
    min_lr: float | None = None        # None: lr / 10
    warmup: int | None = None          # None: 5% of decay_steps
    weight_decay: float = 0.01
    betas: tuple = (0.9, 0.98)
    clip: float | None = 1.0
    eval_every: int = 0                # 0: evaluate only at the end
    checkpoint_every: int | None = None   # 0: only at the end (and when stopped); None: auto, below
    seed: int = 0
    decay_steps: int | None = None     # None: = steps

    def __post_init__(self):
        self.betas = tuple(self.betas)
        for name in ("steps", "batch_size", "micro_batches"):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{name}: expected a positive integer, got {value!r}")
        if self.batch_size % self.micro_batches:
            raise ValueError(f"micro_batches: must divide batch_size={self.batch_size}, "
                             f"got {self.micro_batches}")
        if not (isinstance(self.lr, (int, float)) and math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"lr: expected a positive finite number, got {self.lr!r}")
        if not isinstance(self.seed, (int, np.integer)) or self.seed < 0:
            raise ValueError(f"seed: expected an integer >= 0, got {self.seed!r}")
        if self.checkpoint_every is not None and (isinstance(self.checkpoint_every, bool) or not
                                                  isinstance(self.checkpoint_every, (int, np.integer))
                                                  or self.checkpoint_every < 0):
            raise ValueError(f"checkpoint_every: expected an integer >= 0 or None, got "
                             f"{self.checkpoint_every!r}")
        if self.decay_steps is not None and self.decay_steps < 1:
            raise ValueError(f"decay_steps: expected a positive integer or None, got {self.decay_steps!r}")
        check_non_negative("weight_decay", self.weight_decay)
        if self.min_lr is not None:
            check_non_negative("min_lr", self.min_lr)
        if self.clip is not None:
            check_eps("clip", self.clip)
        if len(self.betas) != 2 or not all(isinstance(b, (int, float)) and 0 <= b < 1 for b in self.betas):
            raise ValueError(f"betas: expected two numbers in [0, 1), got {self.betas!r}")
        for name in ("warmup", "eval_every"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer))
                                      or value < 0):
                raise ValueError(f"{name}: expected an integer >= 0{' or None' * (name == 'warmup')}, "
                                 f"got {value!r}")

    @property
    def save_every(self):
        """Steps between checkpoints: ``checkpoint_every``, or when it is None
        ``default_checkpoint_every(steps)`` (every tenth of a run of 200 steps or more)."""
        if self.checkpoint_every is None:
            return default_checkpoint_every(self.steps)
        return self.checkpoint_every

    @property
    def schedule_steps(self):
        """The step at which the cosine reaches ``min_lr``."""
        return self.steps if self.decay_steps is None else self.decay_steps

    def lr_at(self, step):
        """The learning rate of optimizer step ``step`` (warmup, then cosine, then min_lr)."""
        total = self.schedule_steps
        warmup = max(1, total // 20) if self.warmup is None else self.warmup
        min_lr = self.lr / 10 if self.min_lr is None else self.min_lr
        return warmup_cosine(step, total, warmup, self.lr, min_lr)

    def extended(self, steps):
        """The same run continued to ``steps`` steps: the schedule is kept, the added steps
        run at ``min_lr``; what the first steps did is unchanged."""
        return dataclasses.replace(self, steps=steps, decay_steps=self.schedule_steps)

    def to_dict(self):
        """The settings as a JSON-ready dict."""
        data = dataclasses.asdict(self)
        data["betas"] = list(self.betas)
        return data


@dataclass
class History:
    """Per step: loss, learning rate, gradient norm; plus evaluations ``{"step": s, ...}``."""

    loss: list = dataclasses.field(default_factory=list)
    lr: list = dataclasses.field(default_factory=list)
    grad_norm: list = dataclasses.field(default_factory=list)
    evals: list = dataclasses.field(default_factory=list)
    seconds: float = 0.0
    tokens: int = 0

    def record(self, loss, lr, grad_norm):
        """Append one step's numbers."""
        self.loss.append(loss)
        self.lr.append(lr)
        self.grad_norm.append(grad_norm)

    def to_dict(self):
        """The loss history as a JSON-ready dict."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data):
        """The history saved by ``to_dict``."""
        return cls(**data)
