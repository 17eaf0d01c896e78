"""``npformer demo``, ``npformer train`` and ``npformer generate``.

demo      trains a small GPT-2-style decoder on the built-in after-sales questions,
          answers held-out ones, shows one question getting different answers in
          different contexts, and draws where the answer position looks.
train     the same loop on built-in data (after-sales, reverse, add) or on a UTF-8
          text file (char-level), with checkpoints, resume and Ctrl-C handling.
generate  continues prompts from a checkpoint, greedy or sampled.

User errors raise ``UsageError``: one line, exit code 2.
"""
from __future__ import annotations

import os
import time

import numpy as np

from .cli import UsageError
from .train import checkpoint_exists, limit_blas_threads

BUILTIN = ("aftersales", "reverse", "add")
DEMO_STEPS = 800


# -- shared helpers ------------------------------------------------------------------------
def _positive(name, value):
    if value is not None and value <= 0:
        raise UsageError(f"{name}: expected a positive number, got {value}")


def _check_plot(directory):
    """Fail before training (not after) when --plot cannot work."""
    if directory is None:
        return
    from .plot import PlotUnavailable, require_matplotlib
    try:
        require_matplotlib()
    except PlotUnavailable as error:
        raise UsageError(str(error)) from None
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise UsageError(f"--plot: {directory} exists and is not a directory")


def _model_config(args, vocab_size, max_len):
    from .model import DecoderConfig
    if args.vocab_size is not None and args.vocab_size < vocab_size:
        raise UsageError(f"--vocab-size: the model's vocabulary of {args.vocab_size} is too small "
                         f"for the data's {vocab_size} tokens (its characters plus 4 specials)")
    if args.max_len is not None and args.max_len < max_len:
        raise UsageError(f"--max-len: {args.max_len} positions are too few for sequences of "
                         f"{max_len} tokens")
    maker = DecoderConfig.llama if args.arch == "llama" else DecoderConfig.gpt2
    try:
        return maker(vocab_size=args.vocab_size or vocab_size, d_model=args.d_model,
                     n_heads=args.heads, n_layers=args.layers, max_len=args.max_len or max_len)
    except ValueError as error:
        raise UsageError(str(error)) from None


def _add_model_arguments(parser, d_model=64, layers=2, heads=4):
    group = parser.add_argument_group("model")
    group.add_argument("--arch", choices=("gpt2", "llama"), default="gpt2",
                       help="gpt2: learned positions, LayerNorm, GELU, tied head; "
                            "llama: RoPE, RMSNorm, SwiGLU (default gpt2)")
    group.add_argument("--d-model", type=int, default=d_model, help=f"width d (default {d_model})")
    group.add_argument("--layers", type=int, default=layers, help=f"blocks (default {layers})")
    group.add_argument("--heads", type=int, default=heads, help=f"attention heads (default {heads})")
    group.add_argument("--vocab-size", type=int, default=None,
                       help="model vocabulary (default: exactly the tokenizer's)")
    group.add_argument("--max-len", type=int, default=None,
                       help="position table length (default: the longest training sequence)")


def _add_run_arguments(parser, steps, lr, batch_size):
    group = parser.add_argument_group("training")
    group.add_argument("--steps", type=int, default=steps, help=f"optimizer steps (default {steps})")
    group.add_argument("--lr", type=float, default=lr, help=f"peak learning rate (default {lr})")
    group.add_argument("--batch-size", type=int, default=batch_size,
                       help=f"sequences per step (default {batch_size})")
    group.add_argument("--seed", type=int, default=0, help="seed of the weights and batches (default 0)")
    group.add_argument("--threads", type=int, default=1,
                       help="BLAS threads (default 1, fastest on a shared 2-core machine; 0: unchanged)")
    group.add_argument("--plot", metavar="DIR", default=None,
                       help="write loss.png and attention_*.png there (needs matplotlib)")
    group.add_argument("--no-progress", action="store_true", help="no progress bar")


def _validate_run(args):
    _positive("--steps", args.steps)
    _positive("--lr", args.lr)
    _positive("--batch-size", args.batch_size)
    for name in ("d_model", "layers", "heads"):
        if hasattr(args, name):
            _positive("--" + name.replace("_", "-"), getattr(args, name))
    if args.threads < 0:
        raise UsageError(f"--threads: expected 0 or more, got {args.threads}")
    _check_plot(args.plot)


def _answer_attention(model, tokenizer, prompt):
    """(characters, weights [layers, P]): how the last prompt position (the one that
    predicts the first answer character) reads the prompt, mean over heads; and the
    full maps [layers, P, P] for plots."""
    ids = np.array([tokenizer.encode(prompt, bos=True)])
    _, cache = model.forward(ids)
    full = np.stack([cache.attention(i)[0].mean(axis=0) for i in range(model.config.n_layers)])
    chars = ["^"] + list(prompt)                       # ^ marks <bos>
    return chars, full[:, -1, :], full


# -- demo -----------------------------------------------------------------------------------
def demo_add_arguments(parser):
    """Options of ``npformer demo``."""
    _add_run_arguments(parser, DEMO_STEPS, 3e-3, 32)
    parser.add_argument("--out", metavar="DIR", default=None,
                        help="also save the trained model there (for npformer generate)")


def demo_run(args, out=print):
    """Train, answer, contrast contexts, draw attention; 0 on success, 130 on Ctrl-C."""
    try:
        return _demo(args, out)
    except KeyboardInterrupt:
        out("interrupted")
        return 130


def _demo(args, out):
    from .data import aftersales, aftersales_corpus, encode_examples
    from .model import DecoderConfig, DecoderLM
    from .plot import text_heatmap
    from .tokenizer import CharTokenizer
    from .train import ExampleSource, TrainConfig, answer_accuracy, train
    from .generate import generate_text

    _validate_run(args)
    began = time.perf_counter()
    tokenizer = CharTokenizer.from_corpus(aftersales_corpus())
    split = aftersales(seed=0)
    source = ExampleSource(encode_examples(tokenizer, split.train), tokenizer.pad_id)
    config = DecoderConfig.gpt2(vocab_size=tokenizer.vocab_size, d_model=64, n_heads=4, n_layers=2,
                                max_len=source.max_len)
    model = DecoderLM(config, np.random.default_rng(args.seed))
    n_templates = len({e.task for e in split.train})
    out(f"built-in after-sales data: {len(split.train)} training questions from {n_templates} "
        f"templates; {len(split.heldout)} held-out questions whose (item, context) combination "
        f"never occurs in training")
    out(f"char tokenizer: {tokenizer.vocab_size} ids ({len(tokenizer.chars)} characters + "
        f"<pad> <bos> <eos> <unk>)")
    out(f"model: GPT-2-style decoder, d={config.d_model}, {config.n_heads} heads, "
        f"{config.n_layers} layers, {model.num_parameters():,} parameters, float32, "
        f"every gradient from the hand-written backward")
    settings = TrainConfig(steps=args.steps, batch_size=args.batch_size, lr=args.lr, seed=args.seed)
    with limit_blas_threads(args.threads):
        result = train(model, source, settings, tokenizer, out_dir=args.out,
                       progress=not args.no_progress, extra_state={"data_spec": {"data": "aftersales"}})
        trained = time.perf_counter()
        if result.interrupted:
            out(f"interrupted at step {result.step}" +
                (f"; checkpoint saved to {args.out}" if args.out else ""))
            return 130
        history = result.history
        out(f"trained {result.step} steps in {trained - began:.1f} s: loss {np.mean(history.loss[:10]):.3g} "
            f"(mean of the first 10 steps) -> {np.mean(history.loss[-10:]):.3g} (last 10), "
            f"{history.tokens / history.seconds:,.0f} tokens/s")

        accuracy, predictions = answer_accuracy(model, tokenizer, split.heldout)
        correct = sum(p == e.answer for p, e in zip(predictions, split.heldout))
        out("")
        out(f"held-out questions (never seen in training): {correct}/{len(split.heldout)} exact "
            f"answers = {accuracy:.1%}")
        shown, seen_tasks = [], set()
        for e, p in zip(split.heldout, predictions):
            if e.task not in seen_tasks or p != e.answer:
                seen_tasks.add(e.task)
                shown.append((e, p))
        for e, p in shown[:8]:
            mark = "ok " if p == e.answer else f"WRONG (expected {e.answer})"
            out(f"  {e.prompt} -> {p}  {mark}")

        out("")
        out("the same question, different context, different answer:")
        contrasts = [
            ("耳机{}，退货运费谁出？", ("有质量问题", "不想要了")),
            ("台灯是用{}付的，退款多久到账？", ("余额", "支付宝", "信用卡")),
            ("手表的订单{}，还能取消吗？", ("还没发货", "已经发货", "已经签收")),
            ("键盘坏了，原因是{}，保修吗？", ("出厂缺陷", "进水")),
            ("鞋子收到{}天了，还能无理由退吗？", ("3", "12")),
        ]
        prompts = [template.format(value) for template, values in contrasts for value in values]
        answers = generate_text(model, tokenizer, prompts, max_new_tokens=12)
        for prompt, answer in zip(prompts, answers):
            out(f"  {prompt} -> {answer}")

        out("")
        out("where the answer position looks (attention of the last question character, which "
            "predicts the answer; mean over heads; darker = more; ^ = <bos>):")
        maps = []
        for prompt in (prompts[0], prompts[1]):
            chars, weights, full = _answer_attention(model, tokenizer, prompt)
            for layer in range(config.n_layers):
                out(text_heatmap(chars, weights[layer], label=f"  layer {layer}: "))
            maps.append((chars, full, "attention, mean over heads (query row: reading position)"))
    if args.plot:
        from .plot import plot_all
        paths = plot_all(args.plot, history, maps)
        out("")
        out("plots: " + ", ".join(paths))
    if args.out:
        out(f"model saved to {args.out} (try: npformer generate {args.out} --prompt '耳机坏了，原因是进水，保修吗？')")
    out("")
    out(f"done in {time.perf_counter() - began:.1f} s (held-out accuracy {accuracy:.1%})")
    return 0


# -- train ---------------------------------------------------------------------------------
def train_add_arguments(parser):
    """Options of ``npformer train``."""
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--data", choices=BUILTIN, default=None,
                        help="built-in data: aftersales (default), reverse (digit strings), add (sums)")
    source.add_argument("--text", metavar="FILE", default=None,
                        help="train a char-level model on this UTF-8 text file instead")
    parser.add_argument("--out", metavar="DIR", default="npformer-run",
                        help="checkpoint directory (default ./npformer-run)")
    parser.add_argument("--resume", action="store_true",
                        help="continue the run saved in --out (its settings are reused)")
    parser.add_argument("--seq-len", type=int, default=64, help="window length for --text (default 64)")
    parser.add_argument("--micro-batches", type=int, default=1,
                        help="split each batch into N micro-batches, gradients accumulated (default 1)")
    parser.add_argument("--eval-every", type=int, default=0, help="evaluate every N steps (default: at the end)")
    parser.add_argument("--checkpoint-every", type=int, default=0,
                        help="save every N steps (default: at the end, and on Ctrl-C)")
    _add_model_arguments(parser)
    _add_run_arguments(parser, 1000, 3e-3, 32)


def read_text_file(path):
    """The contents of a UTF-8 text file, or a UsageError naming the problem."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raise UsageError(f"--text: file {path} does not exist") from None
    except IsADirectoryError:
        raise UsageError(f"--text: {path} is a directory, expected a UTF-8 text file") from None
    except OSError as error:
        raise UsageError(f"--text: cannot read {path} ({error.strerror})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise UsageError(f"--text: {path} is not UTF-8 text (byte 0x{raw[error.start]:02x} at "
                         f"offset {error.start})") from None
    if not text.strip():
        raise UsageError(f"--text: {path} is empty")
    return text


def _builtin(name, tokenizer=None):
    """(train examples, held-out examples, tokenizer) of a built-in data set."""
    from .data import addition_task, aftersales, aftersales_corpus, reverse_task
    from .tokenizer import CharTokenizer
    if name == "aftersales":
        split, corpus = aftersales(), aftersales_corpus()
    elif name == "reverse":
        split, corpus = reverse_task(), "0123456789>"
    else:
        split, corpus = addition_task(), "0123456789+="
    return split.train, split.heldout, tokenizer or CharTokenizer.from_corpus(corpus)


def _prepare(spec, tokenizer=None):
    """(source, tokenizer, evaluate, heldout) for a data spec saved in the checkpoint state."""
    from .data import encode_examples
    from .tokenizer import CharTokenizer
    from .train import ExampleSource, TextSource, answer_accuracy, evaluate_loss
    if spec["data"] == "text":
        text = read_text_file(spec["path"])
        tokenizer = tokenizer or CharTokenizer.from_corpus(text)
        missing = tokenizer.unknown_chars(text)
        if missing:
            raise UsageError(f"--text: {spec['path']} has characters the checkpoint's tokenizer "
                             f"cannot encode: {''.join(missing[:10])!r}")
        ids = tokenizer.encode(text)
        if len(ids) < 2:
            raise UsageError(f"--text: {spec['path']} is too short to train on (one character)")
        cut = max(1, int(len(ids) * 0.95)) if len(ids) > 40 else len(ids)
        source = TextSource(ids[:cut], spec["seq_len"])
        held = TextSource(ids[cut - 1:], spec["seq_len"]) if len(ids) - cut > 2 else None

        def evaluate(model):
            if held is None:
                return {}
            batch = held.sample(np.random.default_rng(0), 16)
            return {"heldout_loss": evaluate_loss(model, [batch])}
        return source, tokenizer, evaluate, None
    train_set, heldout, tokenizer = _builtin(spec["data"], tokenizer)
    source = ExampleSource(encode_examples(tokenizer, train_set), tokenizer.pad_id)
    held_source = ExampleSource(encode_examples(tokenizer, heldout), tokenizer.pad_id)

    def evaluate(model):
        accuracy, _ = answer_accuracy(model, tokenizer, heldout)
        return {"heldout_loss": evaluate_loss(model, held_source.batches(256)),
                "heldout_accuracy": accuracy}
    return source, tokenizer, evaluate, heldout


def train_run(args, out=print):
    """Train (or resume); 0 when done, 130 after Ctrl-C (a checkpoint is saved)."""
    try:
        return _train(args, out)
    except KeyboardInterrupt:          # before the loop, or a second Ctrl-C inside it
        out("interrupted; nothing saved after the last checkpoint")
        return 130


def _train(args, out):
    from .checkpoint import CheckpointError, load_config, load_state, load_tokenizer
    from .model import DecoderLM
    from .train import TrainConfig, TrainingDiverged, train

    _validate_run(args)
    _positive("--seq-len", args.seq_len)
    _positive("--micro-batches", args.micro_batches)
    if args.batch_size % args.micro_batches:
        raise UsageError(f"--micro-batches: {args.micro_batches} does not divide --batch-size "
                         f"{args.batch_size}")
    if args.eval_every < 0 or args.checkpoint_every < 0:
        raise UsageError("--eval-every, --checkpoint-every: expected 0 or more")
    try:
        if args.resume:
            state = load_state(args.out)
            spec, settings = state["data_spec"], TrainConfig(**state["train_config"])
            tokenizer = load_tokenizer(args.out)
            config, dtype = load_config(args.out)
            source, tokenizer, evaluate, heldout = _prepare(spec, tokenizer)
            out(f"resuming {args.out} at step {state['step']} of {settings.steps}")
        else:
            if args.text is not None:
                spec = {"data": "text", "path": os.path.abspath(args.text), "seq_len": args.seq_len}
            else:
                spec = {"data": args.data or "aftersales"}
            source, tokenizer, evaluate, heldout = _prepare(spec)
            config = _model_config(args, tokenizer.vocab_size, source.max_len)
            settings = TrainConfig(steps=args.steps, batch_size=args.batch_size, lr=args.lr,
                                   seed=args.seed, eval_every=args.eval_every,
                                   micro_batches=args.micro_batches,
                                   checkpoint_every=args.checkpoint_every)
            if checkpoint_exists(args.out):
                raise UsageError(f"--out: {args.out} already holds a checkpoint; add --resume to "
                                 f"continue it or choose another directory")
        model = DecoderLM(config, np.random.default_rng(settings.seed))
        out(f"data: {spec['data']}" + (f" ({spec['path']})" if spec["data"] == "text" else "") +
            f"; vocabulary {tokenizer.vocab_size}; model {model.num_parameters():,} parameters "
            f"(d={config.d_model}, {config.n_heads} heads, {config.n_layers} layers)")
        with limit_blas_threads(args.threads):
            result = train(model, source, settings, tokenizer, out_dir=args.out, resume=args.resume,
                           evaluate=evaluate, progress=not args.no_progress,
                           extra_state={"data_spec": spec})
    except CheckpointError as error:
        raise UsageError(str(error)) from None
    except TrainingDiverged as error:
        raise UsageError(str(error)) from None
    history = result.history
    if result.interrupted:
        out(f"interrupted at step {result.step} of {settings.steps}: checkpoint saved to {args.out}; "
            f"continue with: npformer train --out {args.out} --resume")
        return 130
    last = history.evals[-1] if history.evals else {}
    out(f"trained {result.step} steps: loss {history.loss[-1]:.4g}" +
        "".join(f", {k} {v:.4g}" for k, v in last.items() if k != "step") +
        f"; checkpoint in {args.out}")
    if args.plot:
        from .plot import plot_all
        maps = []
        if heldout:
            chars, _, full = _answer_attention(model, tokenizer, heldout[0].prompt)
            maps.append((chars, full, "attention, mean over heads"))
        out("plots: " + ", ".join(plot_all(args.plot, history, maps)))
    return 0


# -- generate ------------------------------------------------------------------------------
def generate_add_arguments(parser):
    """Options of ``npformer generate``."""
    parser.add_argument("checkpoint", help="checkpoint directory written by npformer train/demo")
    parser.add_argument("--prompt", action="append", required=True,
                        help="text to continue (repeat for a batch)")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--temperature", type=float, default=0.0, help="0: greedy (default)")
    parser.add_argument("--top-k", type=int, default=None)
    parser.add_argument("--top-p", type=float, default=None)
    parser.add_argument("--seed", type=int, default=0, help="seed of the sampling")
    parser.add_argument("--no-cache", action="store_true", help="recompute everything each step")


def generate_run(args, out=print):
    """Run ``npformer generate``; exit code."""
    from .checkpoint import CheckpointError, load_checkpoint
    from .generate import generate

    _positive("--max-new-tokens", args.max_new_tokens)
    if args.temperature < 0:
        raise UsageError(f"--temperature: expected 0 or more, got {args.temperature}")
    if args.top_k is not None and args.top_k < 1:
        raise UsageError(f"--top-k: expected 1 or more, got {args.top_k}")
    if args.top_p is not None and not 0 < args.top_p <= 1:
        raise UsageError(f"--top-p: expected a number in (0, 1], got {args.top_p}")
    try:
        model, tokenizer, state = load_checkpoint(args.checkpoint)
    except CheckpointError as error:
        raise UsageError(str(error)) from None
    with_bos = state.get("data_spec", {}).get("data") != "text"
    prompts = []
    for text in args.prompt:
        if not text:
            raise UsageError("--prompt: expected a non-empty prompt")
        try:
            prompts.append(tokenizer.encode(text, bos=with_bos))
        except ValueError as error:
            raise UsageError(f"--prompt: {error}") from None
    room = model.config.max_len - max(len(p) for p in prompts)
    if model.positions is not None and room < 1:
        raise UsageError(f"--prompt: {max(len(p) for p in prompts)} tokens leave no room in the "
                         f"model's {model.config.max_len} positions")
    rng = np.random.default_rng(args.seed)
    new = generate(model, prompts, args.max_new_tokens, eos_id=tokenizer.eos_id, pad_id=tokenizer.pad_id,
                   temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, rng=rng,
                   use_cache=not args.no_cache)
    for text, ids in zip(args.prompt, new):
        out(f"{text}{tokenizer.decode(ids)}" if not with_bos else f"{text} -> {tokenizer.decode(ids)}")
    return 0
