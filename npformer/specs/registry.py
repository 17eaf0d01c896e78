"""The one registry the engines read, and ``Spec``, with which a concept's spec fills it.

A spec (``npformer/specs/t05_rope.py``) makes one ``Spec`` named after its concept file and
declares on it, once, everything an engine needs to know of that concept:

- ``component`` (a draw function): a component ``conform`` checks, with its signature, its
  float64 reference, what its backward returns and the npformer functions it runs; the draw
  function (``draw`` -> ``Example``, hypothesis's ``composite`` form) draws its inputs;
  ``layer``: the same for a layer of layers whose weights are arguments (what the grader judges
  blocks and models on);
- ``corners`` (a function of a numpy Generator): fixed inputs that reach every branch;
- ``prop``: a fact any implementation of a component obeys, ``check(subject, example)``;
- ``case``: a gradient-check problem, ``builder(rng, size) -> (target, inputs, options)``;
- ``convention``: a way correct code differs from npformer's choices (an option to pin, or a
  variant of the reference); ``capability``: what an example needs of code that lacks
  something (a scope word such as ``no_gqa``: "H_kv = H");
- ``exercise``: the exercise that hands the concept's bodies out; ``claim``: a fact that
  exercise is graded on, ``check(learner, reference)``.

Its mistakes are data beside it, ``specs/t05_rope.json`` (``npformer.testing.mistakes``).
The engines (conform, gradcheck, the grader, the command line, the docs' tables) read the
tables below once ``npformer.specs`` has imported every spec; nothing else names a component.
"""
from __future__ import annotations

import functools
import importlib
import inspect
import os
from dataclasses import dataclass, field

ROOT = __name__.split(".")[0]            # "npformer"
SPECS = []                               # every Spec, in the tutorial's order
COMPONENTS, LAYERS, CORNERS, PROPERTIES, CASES, CONVENTIONS, CLAIMS = {}, {}, {}, {}, {}, {}, {}
FAMILIES = {}                            # component -> [(axes {name: (values...)}, build(said) -> pair or None)]
MODULE_CONVENTIONS = []                  # ModuleConvention: how a whole block or model may differ
FACTORS = {}                             # component -> factors(example) -> {name: value}
CASE_DIAGNOSES = []                      # diagnose(target, options, upstream, theirs, ours) -> [text]
CAPABILITIES = {}                        # (component, scope word) -> in_scope(args, options)
FITS = {}                                # (component, scope word) -> fit(example): a corner brought into scope
ORACLES = []                             # functions that compute what another's code must give
EXERCISES = []


def lookup(path):
    """npformer's object at ``path`` ("t04_attention.attention_forward"), as it is now (a
    patched-in function, the learner's or a catalogued mistake's, is what it finds)."""
    module_name, _, name = path.rpartition(".")
    return getattr(importlib.import_module(f"{ROOT}.{module_name}"), name)


def original(path):
    """npformer's own function at ``path`` whatever is patched in now (a patch's dispatcher
    unwrapped, a fast twin's plain function): what a convention patched over it calls."""
    found = inspect.unwrap(lookup(path))
    return inspect.unwrap(getattr(found, "plain", found))


def original_pair(forward, backward):
    """(forward, backward) of npformer's own functions at two paths, unpatched."""
    return original(forward), original(backward)


def pair(forward, backward=None):
    """A reference (forward, backward) pair that looks both functions up at each call."""
    def forward_now(*args, **options):
        return lookup(forward)(*args, **options)

    def backward_now(d_out, cache):
        return lookup(backward)(d_out, cache)
    forward_now.__name__ = forward.rpartition(".")[2]
    forward_now.__wrapped__ = lookup(forward)       # inspect.signature sees the real parameters
    if backward is None:
        return forward_now, None
    backward_now.__name__ = backward.rpartition(".")[2]
    return forward_now, backward_now


@dataclass(eq=False)
class Component:
    """One checkable component: its signature, what it computes, its inputs and reference."""

    name: str
    title: str
    signature: str                  # how npformer's own version is called and what it returns
    draws: object                   # draw(draw) -> Example, hypothesis's composite form
    reference: tuple                # (forward, backward) of dotted names under npformer, or callables
    gradients: str = ""             # what backward returns
    functions: tuple = ()           # npformer functions it runs ("t03_softmax.softmax_backward")
    notes: tuple = ()
    concept: str = ""               # the concept file whose spec declares it
    adapt: object = None            # how a user's function becomes its forward, when it is not one already

    @property
    def draw(self):
        """The hypothesis strategy of its inputs (made once; hypothesis loads here)."""
        if not hasattr(self, "_strategy"):
            from hypothesis import strategies as st
            self._strategy = st.composite(self.draws)()
        return self._strategy

    def reference_pair(self):
        """npformer's (forward, backward), looked up now (a patch in place is what runs)."""
        forward, backward = self.reference
        if isinstance(forward, str):
            return pair(forward, backward)
        return forward, backward

    def option_defaults(self):
        """{name: default} of the reference forward's keyword parameters with a default."""
        forward = self.reference_pair()[0]
        return {p.name: p.default for p in inspect.signature(forward).parameters.values()
                if p.default is not p.empty}

    @property
    def forward_only(self):
        """True for a component without a backward (the AdamW update, KV-cached decoding)."""
        return self.reference[1] is None


@dataclass(frozen=True)
class ModuleConvention:
    """A way a whole block or model of published code differs from npformer's choices:
    ``said`` ({"residual": "parallel"}); ``applies(kind, config)``; ``patches(chosen)`` {path
    under npformer: function} for the reference to run with, given every convention chosen
    together (built on npformer's own functions as they are unpatched, ``original``);
    ``tweak(module, config)`` changes the reference module once built; ``gains_one_plus``: the
    norms' gains are stored as w and applied as 1 + w (a weight map's "1+", on every gain)."""

    said: dict
    applies: object
    patches: object = None
    tweak: object = None
    gains_one_plus: bool = False


@dataclass(frozen=True)
class Property:
    """One fact about a component; ``drawn``: checked on every drawn example, else once."""

    component: str
    text: str
    check: object
    drawn: bool = True
    needs_backward: bool = False
    needs_any: tuple = ()           # options of which one must be taken for the fact to say anything


@dataclass(frozen=True)
class Exercise:
    """One exercise: what to write, where, what it builds on and how it is graded."""

    number: int
    name: str
    title: str                  # what the learner builds, in a few words
    section: str                # where the tutorial explains it
    backward: tuple = ()        # "file.py:qualname" bodies stubbed by default
    forward: tuple = ()         # bodies stubbed only with --forward
    builds_on: tuple = ()       # the exercises whose code the training task runs with it
    checks: tuple = ()          # (case name, sizes) pairs of the gradient-check cases
    components: tuple = ()      # components checked on drawn inputs

    @property
    def label(self):
        """"04 attention": how reports name it."""
        return f"{self.number:02d} {self.name}"

    def functions(self, forward=False):
        """The "file.py:qualname" bodies a workspace asks for (backward, plus forward if asked)."""
        return self.backward + (self.forward if forward else ())

    def paths(self, forward=False):
        """The functions as paths under npformer ("t03_softmax.softmax_backward")."""
        return tuple(module_path(spec) for spec in self.functions(forward))

    def files(self, forward=False):
        """The workspace files holding this exercise's bodies, in order of first mention."""
        return tuple(dict.fromkeys(spec.split(":")[0] for spec in self.functions(forward)))


def module_path(spec):
    """ "t19_optim.py:adamw_update" -> "t19_optim.adamw_update"."""
    file, qualname = spec.split(":")
    return f"{file[:-3].replace('/', '.')}.{qualname}"


@dataclass
class Spec:
    """What the engines know of one concept file (``concept``: "t05_rope.py"), as its spec
    declares it; each declaration also goes into the registry's tables."""

    concept: str
    components: list = field(default_factory=list)
    layers: list = field(default_factory=list)
    cases: list = field(default_factory=list)
    exercises: list = field(default_factory=list)

    def __post_init__(self):
        SPECS.append(self)

    @property
    def mistakes(self):
        """The file of its catalogued mistakes, beside its spec."""
        return os.path.join(os.path.dirname(__file__), self.concept.replace("/", ".")[:-3] + ".json")

    def component(self, name, title, signature, reference, gradients="", functions=(), notes=(), adapt=None):
        """Decorator: a component whose inputs the decorated function draws; ``adapt(function)``
        makes a user's function its forward when the signature asks for another form (a
        decoding step, looped over the positions)."""
        def register(draws):
            COMPONENTS[name] = Component(name, title, signature, draws, reference, gradients, tuple(functions),
                                         tuple(notes), self.concept, adapt)
            self.components.append(name)
            return draws
        return register

    def layer(self, name, title, signature, reference, gradients="", functions=()):
        """Decorator: a layer of layers (its weights as arguments) whose inputs the function draws."""
        def register(draws):
            LAYERS[name] = Component(name, title, signature, draws, reference, gradients, tuple(functions), (),
                                     self.concept)
            self.layers.append(name)
            return draws
        return register

    def corners(self, component):
        """Decorator: ``corners(rng) -> [Example]`` of ``component``."""
        def register(build):
            CORNERS[component] = build
            return build
        return register

    def prop(self, component, text, drawn=True, needs_backward=False, needs_any=()):
        """Decorator: ``check(subject, example)`` is a fact of ``component``; ``needs_any``:
        options (``mask``, ``causal``) without which it holds vacuously."""
        def register(check):
            PROPERTIES.setdefault(component, []).append(
                Property(component, text, check, drawn, needs_backward, tuple(needs_any)))
            return check
        return register

    def case(self, name):
        """Decorator: ``builder(rng, size) -> (target, inputs, options)``, a gradient-check case."""
        def register(builder):
            CASES[name] = builder
            self.cases.append(name)
            return builder
        return register

    def convention(self, component, said, variant=None):
        """A convention of ``component``: ``said`` (how a report names it: {"layout": "interleaved"})
        and ``variant`` (a function returning the reference's (forward, backward) under it), or
        None when ``said`` is an option of the reference itself."""
        CONVENTIONS.setdefault(component, []).append((dict(said), variant))

    def conventions(self, component, axes, build):
        """Conventions of ``component`` that combine: ``axes`` {name: (values...)} (each value a way
        published code differs from npformer's choice), ``build(said)`` the reference's
        (forward, backward) under any choice of values, one per axis at most ({"variance":
        "unbiased", "eps": "outside sqrt"}), or None for a choice that means nothing. Each value
        alone is also a ``convention``."""
        FAMILIES.setdefault(component, []).append((dict(axes), build))
        for axis, values in axes.items():
            for value in values:
                self.convention(component, {axis: value}, functools.partial(build, {axis: value}))

    def factors(self, component):
        """Decorator: ``factors(example) -> {name: value}``, the constant factors a gradient of
        ``component`` must not lose on ``example`` ("1/count (the mean over counted targets)")."""
        def register(found):
            FACTORS[component] = found
            return found
        return register

    def case_diagnosis(self, diagnose):
        """Decorator: ``diagnose(target, options, upstream, theirs, ours) -> [text]``, what a
        failing fixed case of this concept says when no mistake is named; ``theirs(upstream)``
        and ``ours(upstream)`` run the case with another upstream gradient (``problem.Result``)."""
        CASE_DIAGNOSES.append(diagnose)
        return diagnose

    def module_convention(self, said, applies, patches=None, tweak=None, gains_one_plus=False):
        """A convention of whole blocks and models (``ModuleConvention``'s fields)."""
        MODULE_CONVENTIONS.append(ModuleConvention(dict(said), applies, patches, tweak, gains_one_plus))

    def capability(self, component, word):
        """Decorator: ``in_scope(args, options)`` says whether an example of ``component`` is one
        that code lacking ``word`` (``npformer.testing.scope.CAPABILITIES``) can compute."""
        def register(in_scope):
            CAPABILITIES[(component, word)] = in_scope
            return in_scope
        return register

    def oracle(self, function):
        """Decorator: ``function`` computes what code under test must give (the keys a query may
        read): the judge's alone, never in a learner's process (``grading_build`` cuts it)."""
        ORACLES.append(function)
        return function

    def fit(self, component, word):
        """Decorator: ``fit(example) -> example`` brings a corner of ``component`` into the scope
        of code lacking ``word`` where it can (its other purposes then still run)."""
        def register(fit):
            FITS[(component, word)] = fit
            return fit
        return register

    def exercise(self, number, name, title, section, **parts):
        """The exercise handing out this concept's bodies (``Exercise``'s fields)."""
        found = Exercise(number, name, title, section, **parts)
        EXERCISES.append(found)
        self.exercises.append(found)
        return found

    def claim(self, exercise, text):
        """Decorator: ``check(learner, reference)`` is a claim of ``exercise``."""
        def register(check):
            CLAIMS.setdefault(exercise, []).append((text, check))
            return check
        return register
