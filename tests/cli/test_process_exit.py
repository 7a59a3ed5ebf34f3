"""``servesim`` as the process's own command (``main()`` without arguments, as the console
script and ``python -m simulator.cli`` call it) freezes the garbage collector when its command
ends, so the interpreter's shutdown skips its collections; ``main(argv)`` (tests, scripts)
leaves the collector as it is. The output is the same either way. The console script then
ends the process with ``exit_process``: exit functions run, the interpreter's teardown is
skipped (``simulator.cli.process``)."""
import contextlib
import gc
import io
import os
import subprocess
import sys
import textwrap

import pytest

from simulator.cli.main import main

ARGV = ["spec", "--acceptance-rate", "0.7", "--num-speculative-tokens", "3",
        "--draft-cost", "0.05"]


@pytest.fixture(autouse=True)
def _unfrozen():
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_process_command_freezes_at_exit(monkeypatch, capsys):
    assert main(list(ARGV)) == 0
    as_library = capsys.readouterr().out
    assert gc.get_freeze_count() == 0  # main(argv): collector untouched
    monkeypatch.setattr(sys, "argv", ["servesim", *ARGV])
    assert main() == 0
    assert gc.get_freeze_count() > 0  # the process's command: frozen for the exit
    assert capsys.readouterr().out == as_library


def test_frozen_after_a_failed_command(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["servesim", "spec", "--acceptance-rate", "2",
                                      "--num-speculative-tokens", "3", "--draft-cost", "0"])
    assert main() == 2
    assert capsys.readouterr().err.startswith("servesim: error: ")
    assert gc.get_freeze_count() > 0


# ---------------------------------------------------------------- the process's end
# ``exit_process`` (the console script's end) runs the exit functions and leaves without the
# interpreter's teardown; each case runs in a child process of its own.


def _child(code: str, tmp_path, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], check=False,
                          capture_output=True, text=True, env=env, timeout=120, **kw)


def test_exit_functions_run_and_buffers_flush(tmp_path):
    marker = tmp_path / "atexit.txt"
    p = _child(f"""
        import atexit, sys
        from simulator.cli.process import exit_process
        atexit.register(lambda: open({str(marker)!r}, "w").write("ran"))
        sys.stdout.write("no newline yet")   # still in the buffer
        sys.stderr.write("err line")
        exit_process(3)
        print("never")
        """, tmp_path)
    assert p.returncode == 3
    assert p.stdout == "no newline yet"
    assert p.stderr == "err line"
    assert marker.read_text() == "ran"


def test_a_step_spool_is_removed_at_the_exit(tmp_path):
    # a spool's folder is removed by a weakref.finalize callback, an exit function
    p = _child("""
        import numpy as np
        from simulator.metrics.step_table import ColumnSpool
        from simulator.cli.process import exit_process
        spool = ColumnSpool(["a"], frozenset())
        spool.append({"a": np.arange(5)})
        print(spool.folder)
        exit_process(0)
        """, tmp_path)
    assert p.returncode == 0, p.stderr
    folder = p.stdout.strip()
    assert folder.startswith(str(tmp_path))
    assert not os.path.exists(folder)
    assert list(tmp_path.iterdir()) == []


def test_a_live_thread_keeps_the_normal_shutdown(tmp_path):
    # a non-daemon thread still working when the command ends finishes before the exit
    p = _child("""
        import threading, time, sys
        from simulator.cli.process import exit_process
        def late():
            time.sleep(0.3)
            print("thread done", flush=True)
        threading.Thread(target=late).start()
        exit_process(5)
        """, tmp_path)
    assert p.returncode == 5
    assert p.stdout == "thread done\n"


@pytest.mark.parametrize(("error", "code", "status", "stderr"), [
    # a reader that went away: status 120, quiet (as the commands end a closed pipe)
    ('BrokenPipeError(32, "Broken pipe")', 0, 120, ""),
    # a full disk: a failing command keeps its own status; one line says why
    ('OSError(28, "No space left on device")', 2, 2,
     "servesim: error: cannot write to standard output (No space left on device)\n"),
])
def test_an_unflushable_stdout_at_the_end(tmp_path, error, code, status, stderr):
    p = _child(f"""
        import sys
        from simulator.cli.process import exit_process
        class Broken:
            def write(self, s): return len(s)
            def flush(self): raise {error}
        sys.stdout = Broken()
        exit_process({code})
        """, tmp_path)
    assert p.returncode == status
    assert p.stderr == stderr


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
def test_a_full_disk_at_the_end_is_said_in_one_line(tmp_path):
    # the output still buffered when the command ends cannot be written: status 120 (as
    # CPython's own shutdown) and one line that says why (review: it ended silently)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_time_s,num_prompt_tokens,num_output_tokens\n0,10,5\n1,20,6\n")
    with open("/dev/full", "w") as full:
        p = subprocess.run([sys.executable, "-m", "simulator.cli", "trace", str(trace)],
                           check=False, stdout=full, stderr=subprocess.PIPE, text=True,
                           env=env, timeout=120)
    assert p.returncode == 120
    assert p.stderr == ("servesim: error: cannot write to standard output "
                        "(No space left on device)\n")


def test_the_module_command_exits_with_mains_status(tmp_path):
    ok = subprocess.run([sys.executable, "-m", "simulator.cli", *ARGV], check=False,
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0
    assert ok.stdout.split() == _as_library(ARGV).split()  # (wrapped to the terminal)
    bad = subprocess.run([sys.executable, "-m", "simulator.cli", "spec", "--acceptance-rate",
                          "2", "--num-speculative-tokens", "3", "--draft-cost", "0"],
                         check=False, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2
    assert bad.stderr.startswith("servesim: error: ") and bad.stderr.count("\n") == 1


def _as_library(argv):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(list(argv)) == 0
    return buf.getvalue()


def test_the_process_uses_the_c_librarys_allocator_for_arrow(tmp_path):
    code = """
        import os
        from simulator.cli.process import start_process
        start_process()
        import pyarrow as pa
        pa.array(range(1000))
        print(pa.default_memory_pool().backend_name, os.environ["ARROW_DEFAULT_MEMORY_POOL"])
        """
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], check=False,
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.stdout.split() == ["system", "system"], p.stderr
    # a pool the user names is kept
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], check=False,
                       capture_output=True, text=True, timeout=120,
                       env={**env, "ARROW_DEFAULT_MEMORY_POOL": "mimalloc"})
    assert p.stdout.split() == ["mimalloc", "mimalloc"], p.stderr
