"""Stopping on a signal: Ctrl-C (SIGINT) and SIGTERM stop the task in hand the same way.

Light on purpose: the CLI installs the handler before anything heavy is imported.
"""

from __future__ import annotations

STOP = {"signal": 0}


def request_stop(signum, frame) -> None:
    """Signal handler: stop the task in hand. The KeyboardInterrupt raised here can be swallowed
    (a ctypes callback, as eSpeak's, ignores it), so the session loop also calls :func:`check_stop`."""
    STOP["signal"] = signum
    raise KeyboardInterrupt


def check_stop() -> None:
    """Raise KeyboardInterrupt if a stop signal came (even one whose interrupt was swallowed)."""
    if STOP["signal"]:
        raise KeyboardInterrupt


def quiet_swallowed_interrupts() -> None:
    """A KeyboardInterrupt that a ctypes callback swallowed is not printed as 'Exception ignored
    ... Traceback' (the stop flag carries it to :func:`check_stop`); anything else still is."""
    import sys

    default = sys.unraisablehook

    def hook(unraisable) -> None:
        if not isinstance(unraisable.exc_value, KeyboardInterrupt):
            default(unraisable)

    sys.unraisablehook = hook
