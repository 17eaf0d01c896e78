"""Training in one picture: next-token targets, a loss of ln 50 at the start, and AdamW steps lowering it.

Each position is trained to predict the token after it: inputs are the ids
without the last one, targets the ids without the first. A freshly initialised
tiny decoder gives every one of the 50 words about the same probability, so
its cross-entropy starts near ln 50 = 3.912. Backward fills every gradient
and AdamW updates the parameters; on this one sequence the loss falls and the
greedy predictions become the targets. (The tutorial leaves training to its
next article; this is the smallest honest version of it.)
"""
import numpy as np

from npformer import AdamW, DecoderConfig, DecoderLM, cross_entropy

IDS = np.array([[3, 8, 12, 5, 17, 42, 23, 6]])          # the tutorial's ids


def run(out=print, steps=40):
    model = DecoderLM(DecoderConfig(), np.random.default_rng(7))
    inputs, targets = IDS[:, :-1], IDS[:, 1:]            # predict the next id at each position
    out(f"inputs  {inputs[0].tolist()}")
    out(f"targets {targets[0].tolist()} (the same ids shifted by one)")
    optimizer = AdamW(model.named_parameters(), lr=0.05, weight_decay=0.0)
    losses = []
    for step in range(steps):
        optimizer.zero_grad()
        logits, cache = model.forward(inputs)            # [1, 7, 50]
        loss, d_logits = cross_entropy(logits, targets)
        model.backward(d_logits, cache)                  # every Parameter.grad filled
        optimizer.step()
        losses.append(float(loss))
        if step in (0, 1, 5, 10, 20) or step == steps - 1:
            out(f"   step {step:2d}: loss {float(loss):.3f}")
    out(f"the first loss {losses[0]:.3f} is close to ln 50 = {np.log(50):.3f}: "
        f"an untrained model spreads its probability evenly")
    predicted = np.argmax(model(inputs), axis=-1)[0]
    out(f"after {steps} steps the greedy predictions are {predicted.tolist()} "
        f"(targets {targets[0].tolist()})")
    return {"losses": losses, "predicted": predicted, "targets": targets[0]}


if __name__ == "__main__":
    run()
