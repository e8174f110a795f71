"""Helpers shared by the test files."""

import gc
import signal
import subprocess
import warnings

import pytest
from amaranth.hdl import UnusedElaboratable

__all__ = ["assert_rejects"]


def assert_rejects(make, exc, match):
    """``make()`` raises ``exc`` matching ``match``. The component object that Amaranth created
    before ``__init__`` raised is collected here, so its "created but never used" warning
    (it never was elaborated) does not surface in a later test."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        with pytest.raises(exc, match=match):
            make()
        gc.collect()


def _sigint_default():
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def interruptible(args, **kw) -> subprocess.Popen:
    """``subprocess.Popen(args)`` in a new session (a process group the test can signal) with
    SIGINT's default action: a shell without job control starts background jobs with SIGINT
    ignored, and Python keeps an inherited ignore, so a test run from one would see Ctrl-C
    ignored for reasons of its own launch."""
    return subprocess.Popen(args, start_new_session=True, preexec_fn=_sigint_default, **kw)
