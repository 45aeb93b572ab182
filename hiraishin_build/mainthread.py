"""Signals that stop the tool belong to its main thread, whatever thread it starts.

The kernel gives a signal sent to the process to any of its threads that does
not block it, and Python runs the handler in the main thread only when that
thread next runs Python code. A main thread blocked reading a command's output
(a ninja step compiling one large CUDA file, a smoke case) would then wait for
the command's next line, minutes, before it stopped. Threads started inside
``signals_left_to_main_thread()`` block these signals (a new thread inherits
the signal mask of the thread that starts it), so the kernel wakes the main
thread's read and the handler runs at once.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

# Ctrl-C, and the stops of proc.stopping_on_signals (a service manager's or CI runner's, a closed terminal).
MAIN_THREAD_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def signals_left_to_main_thread() -> Iterator[None]:
    """Start helper threads in this block: they will not take SIGINT, SIGTERM or SIGHUP.

    In the main thread the block itself holds them back too, and one that came meanwhile is delivered
    right after it: fsutil uses that for short steps that must not be cut in half (removing a scratch
    tree, swapping a directory in).
    """
    if threading.current_thread() is not threading.main_thread():
        yield  # a thread started from a helper inherits the helper's mask, which already blocks them
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, MAIN_THREAD_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
