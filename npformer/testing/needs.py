"""The package that drawing inputs needs: hypothesis, installed with npformer's ``verify`` extra.

``import npformer``, training, generation, ``gradcheck`` and the worked examples never load
it; ``conform``, ``strategies`` and the grader do, and say in one line how to install it.
"""
EXTRA = "verify"
INSTALL = "pip install 'hypothesis>=6'"      # works wherever npformer came from (a clone, a wheel)


class MissingExtra(ModuleNotFoundError):
    """A package of one of npformer's extras is not installed; the message names the extra."""


def require_hypothesis(what):
    """Import hypothesis, or raise ``MissingExtra`` naming ``what`` needs it and the extra."""
    try:
        import hypothesis  # noqa: F401
    except ModuleNotFoundError as error:
        if error.name != "hypothesis":
            raise
        raise MissingExtra(f"{what} needs hypothesis (npformer's [{EXTRA}] extra), which is not "
                           f"installed: {INSTALL}", name="hypothesis") from None
