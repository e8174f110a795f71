"""The one error of the importer: a model it cannot run exactly (a one-line message naming the
op and the reason)."""

__all__ = ["UnsupportedModel"]


class UnsupportedModel(ValueError):
    """The model holds an op, a type or an option that tpugen does not run."""
