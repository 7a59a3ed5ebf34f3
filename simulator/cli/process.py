"""How the ``servesim`` process starts (Arrow's allocator) and ends (its exit functions run,
then it leaves without the interpreter's teardown).

**Start.** Arrow's default memory pool in the pyarrow wheels is mimalloc, which maps its
segments as transparent huge pages: the kernel then zeroes 2 MiB for a fault on a region of
which a few kilobytes are used. On the Llama-3.1-8B / H100 hour (measured with ``perf`` on the
2-core development machine, Linux with THP ``madvise``) 9.4% of the process's samples were the
kernel's ``clear_page_erms`` with mimalloc and 0.2% with the C library's allocator; writing
``steps.parquet`` took 0.27-0.43 s of CPU instead of 0.08-0.12 s, and the whole process 3.27 s
instead of 2.89 s. :func:`start_process` selects the C library's allocator
(``ARROW_DEFAULT_MEMORY_POOL=system``, Arrow's documented environment variable, read when
Arrow first allocates) unless the user set that variable.

**End.**

A finished run still holds its objects (requests, tables, the performance model's memos,
pandas and pyarrow): the interpreter's normal shutdown deallocates all of them and tears
every module down, ~0.2 s after the last output was written on the Llama-3.1-8B / H100 hour
(measured on the 2-core development machine: 0.19-0.24 s between the command's return and
the end of the process, 0.03 s with this exit). :func:`exit_process` does what the shutdown
must do for the outputs and temporary files (flush ``stdout`` / ``stderr``, run the
:mod:`atexit` functions: :class:`weakref.finalize` callbacks that remove a step spool,
``logging.shutdown``, multiprocessing's pool finalizers, coverage's data file) and then ends
the process with :func:`os._exit`. Every file servesim writes is closed by the code that
wrote it before the command returns.

Only for the process's own command (the ``servesim`` script, ``python -m simulator.cli``):
``main(argv)`` called from a test or a script returns as before.
"""
from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import NoReturn

__all__ = ["EXIT_FLUSH_FAILED", "exit_process", "start_process"]

#: exit status when ``stdout`` or ``stderr`` cannot be flushed at the end (a closed pipe, a
#: full disk): the status CPython's own shutdown gives in that case (``Py_FinalizeEx``)
EXIT_FLUSH_FAILED = 120


def start_process() -> None:
    """Set up the process for the ``servesim`` command: Arrow's default memory pool is the C
    library's allocator (``ARROW_DEFAULT_MEMORY_POOL=system``) unless the environment names
    one. Called before anything imports pyarrow; a no-op on the variable when it is set."""
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")


def _flush() -> tuple[str, BaseException] | None:
    """Flush ``stdout`` and ``stderr``; the first that could not be flushed (its name and the
    error), or None."""
    failed = None
    for name, stream in (("standard output", sys.stdout), ("standard error", sys.stderr)):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError) as e:
            failed = failed or (name, e)
    return failed


def _say_unwritten(name: str, e: BaseException) -> None:
    """One line on ``stderr`` for output that could not be written at the end (a full disk);
    nothing for a reader that went away (``servesim trace F | head -1``: a broken pipe ends
    quietly, as the commands' own handler ends it) or when ``stderr`` is what failed."""
    if isinstance(e, BrokenPipeError) or name == "standard error":
        return
    reason = getattr(e, "strerror", None) or str(e) or type(e).__name__
    try:
        sys.stderr.write(f"servesim: error: cannot write to {name} ({reason})\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        pass


def exit_process(code: int) -> NoReturn:
    """End the process with status ``code``: flush the standard streams, run the
    :mod:`atexit` functions (``atexit._run_exitfuncs``: CPython's own call at shutdown, in
    the same last-registered-first order), flush again and leave with :func:`os._exit`,
    skipping the deallocation of every live object and the modules' teardown.

    When another thread is alive, the normal shutdown (which waits for non-daemon threads
    before the exit functions) is kept: :func:`sys.exit`.

    Parameters
    ----------
    code : int
        Exit status, 0-255. Output that cannot be flushed (a full disk, a closed pipe) turns a
        status of 0 into :data:`EXIT_FLUSH_FAILED` (as CPython's shutdown does) and is said
        in one line on ``stderr`` (:func:`_say_unwritten`; not for a closed pipe).
    """
    if threading.active_count() > 1:
        sys.exit(code)
    failed = _flush()
    atexit._run_exitfuncs()
    failed = _flush() or failed
    if failed is not None:
        _say_unwritten(*failed)
    os._exit(code if code or failed is None else EXIT_FLUSH_FAILED)
