"""Untrusted files are read in a child process with hard limits (issue 37.1).

A predictions file comes from anyone. A 12 kB parquet file can hold 320 MiB of zstd strings,
and a parquet data page or an Arrow record batch is decompressed whole before any count can
stop it. So every predictions file (the Space's upload, the files of an hf:// dataset, `rexrank
score` and `submit`, the backend reading a stored request) is read by `run` in a child process,
and the calling process (the Space, the backend, the command line) gets back only rows of
strings. It never holds what a file expands to.

The children are forked from a small server process (`python -m rexrank.sandbox`, one per
calling process, started at its first read). The server imports the readers once (pyarrow,
pandas; never torch), so a read costs a fork, not an interpreter start
(benchmarks/input_limits.py measures both). The server starts with an allow-listed environment
(INHERITED_ENV), never the caller's secrets (the store token, the LLM keys). Each child gets hard
limits, and each limit has a reason:

    address space (RLIMIT_AS)   what the child has at the fork plus `Limits.memory_bytes`. A
                                page, batch or JSON document that expands past it is a
                                MemoryError in the child (or its death), never growth of the
                                caller: the only bound on what one page may hold.
    CPU time (RLIMIT_CPU)       `Limits.cpu_seconds`. Decompressing gigabytes, a parser's worst
                                case or a loop ends in SIGXCPU (SIGKILL a second later).
    wall clock                  `Limits.wall_seconds`, enforced by the server with SIGKILL. A
                                read that waits without using CPU (a slow disk, a file swapped
                                for a FIFO) ends too.
    core dumps (RLIMIT_CORE 0)  a crash writes no core file to the server's disk.
    the answer                  at most `Limits.answer_bytes`, and the caller reads no more.

The answer comes over a pipe as a simple frame: rows of UTF-8 strings with 32-bit lengths, or
a refusal (a SubmissionError's text and details, as JSON). Nothing is pickled, so a child can
send back nothing but strings. A child stopped by a limit becomes a SubmissionError that names
the limit and the fix, never a traceback; one stopped by the machine (the wall clock, a SIGKILL
no limit explains) a ReaderKilled, which the backend gives back rather than blame the file.

Linux only: RLIMIT_AS, /proc/self/status, and file descriptors passed over a Unix socket.
"""
from __future__ import annotations

import atexit
import importlib
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Sequence

from rexrank.errors import ReaderKilled, RexrankError, SubmissionError, first_line

# what the readers import: loaded once in the server, so that each forked child has them
PRELOAD = ("rexrank.submissions", "pyarrow.parquet", "pyarrow.compute", "pyarrow.ipc", "pandas")
# then run once in the server: a first read of each format loads what the libraries load lazily
# (the first pandas.read_csv of a process costs ~100 times the next), once instead of per child
WARM_UP = "rexrank.submissions:warm_up"
# the server's environment: Arrow's system allocator and two malloc arenas keep the address
# space a child starts with small and the same from run to run (jemalloc and mimalloc reserve
# gigabytes of address space they never use, which RLIMIT_AS would count)
SERVER_ENV = {"ARROW_DEFAULT_MEMORY_POOL": "system", "MALLOC_ARENA_MAX": "2", "OMP_NUM_THREADS": "1"}
# all the server takes of the caller's environment: what finds programs, libraries, the home and
# temporary folders and the locale. Never the rest: the children parse hostile files, and the
# caller's environment holds the store token (HF_TOKEN) and the LLM judges' keys.
INHERITED_ENV = ("PATH", "HOME", "TMPDIR", "TEMP", "TMP", "LANG", "LANGUAGE", "TZ", "LD_LIBRARY_PATH", "PYTHONHOME",
                 "PYTHONUTF8", "PYTHONIOENCODING", "PYTHONNOUSERSITE", "PYTHONDONTWRITEBYTECODE")
_ROWS, _REFUSED, _MEMORY, _FAILED = b"R", b"E", b"M", b"F"
_U32 = struct.Struct("<I")
# the caller waits this much past the wall-clock limit for the server's own kill before it gives up
_GRACE_SECONDS = 60.0


@dataclass(frozen=True)
class Limits:
    memory_bytes: int = 1024 * 1024 * 1024  # address space a child may add to what it has at the fork
    cpu_seconds: int = 60
    wall_seconds: float = 300.0
    answer_bytes: int = 64 * 1024 * 1024  # rows of strings: a file within the input limits sends < 40 MB


LIMITS = Limits()  # what `run` uses unless told otherwise


@dataclass(frozen=True)
class Cost:
    """What a child's run cost, as the server saw it end (benchmarks/input_limits.py)."""

    peak_bytes: int  # the child's peak resident memory, the server's pages it shares included
    cpu_seconds: float
    wall_seconds: float  # from the request to the child's end, as the caller waited


_costs = threading.local()


def last_cost() -> Cost | None:
    """The cost of this thread's last `run`, whether it answered or refused."""
    return getattr(_costs, "last", None)


def run(function: Callable, args: Sequence, *, source: str, limits: Limits | None = None) -> list[tuple[str, ...]]:
    """`function(*args)` in a limited child: it must be a module-level function that returns
    rows of strings (a list of tuples of str) or raises SubmissionError, and `args` plain JSON
    values. `source`: what a refusal names (the file as the user gave it).

    The child starts in this process's working folder. Raises SubmissionError for a refusal,
    including a child stopped by a limit; RexrankError when the server cannot run at all."""
    limits = limits or LIMITS
    try:
        cwd = os.getcwd()
    except FileNotFoundError:  # (a folder removed meanwhile: only absolute paths can be read)
        cwd = "/"
    request = json.dumps({"target": f"{function.__module__}:{function.__qualname__}", "args": list(args),
                          "cwd": cwd, "limits": asdict(limits)}).encode()
    started = time.perf_counter()
    answer_r, answer_w = os.pipe()
    status_r, status_w = os.pipe()
    try:
        _send(request, (answer_w, status_w))
    except BaseException:
        os.close(answer_r)
        os.close(status_r)
        raise
    finally:
        os.close(answer_w)
        os.close(status_w)
    deadline = time.monotonic() + limits.wall_seconds + _GRACE_SECONDS
    with os.fdopen(answer_r, "rb", buffering=0) as answer, os.fdopen(status_r, "rb", buffering=0) as status:
        data, too_long = _read_capped(answer, limits.answer_bytes, deadline)
        if too_long:  # (closing the pipe ends the child's writing: EPIPE)
            answer.close()
        ended = _read_status(status, deadline)
    _costs.last = Cost(int(ended.get("maxrss_kb", 0)) * 1024, float(ended.get("cpu_seconds", 0.0)),
                       time.perf_counter() - started)
    return _outcome(data, too_long, ended, limits, source)


def _read_capped(fh, cap: int, deadline: float) -> tuple[bytes, bool]:
    """Up to cap + 1 bytes until EOF; (data, more than cap). Past `deadline`: RexrankError."""
    chunks, size = [], 0
    while True:
        _wait_readable(fh, deadline)
        chunk = fh.read(min(1 << 20, cap + 1 - size))
        if not chunk:
            return b"".join(chunks), False
        chunks.append(chunk)
        size += len(chunk)
        if size > cap:
            return b"", True


def _read_status(fh, deadline: float) -> dict:
    """The server's report on the child: its pid, then how it ended; {} when the server died
    before it (the child, if any, was not seen to end)."""
    data = b""
    while True:
        _wait_readable(fh, deadline)
        chunk = fh.read(4096)
        if not chunk:
            break
        data += chunk
    lines = data.decode("ascii", "replace").splitlines()
    return json.loads(lines[1]) if len(lines) >= 2 else {}


def _wait_readable(fh, deadline: float) -> None:
    left = deadline - time.monotonic()
    if left <= 0 or not select.select([fh], [], [], left)[0]:
        raise RexrankError("the predictions reader did not answer in time, and its server did not stop it: "
                           "the server is stuck or overloaded; try again, and report it if it persists")


def _outcome(data: bytes, too_long: bool, ended: dict, limits: Limits, source: str) -> list[tuple[str, ...]]:
    cpu = float(ended.get("cpu_seconds", 0.0))
    signum = ended.get("signal")
    # a child stopped by a limit may have written part of an answer: how it ended comes first
    if ended.get("timed_out"):  # a regular file is read without waiting: the machine was stuck or overloaded
        raise ReaderKilled(f"reading it took longer than {limits.wall_seconds:g} s, the wall-clock limit of the "
                              "reader: a predictions file within the input limits is read in seconds; check that it "
                              "is an ordinary file of one of the accepted formats", source=source)
    if signum == signal.SIGXCPU or (signum == signal.SIGKILL and cpu >= limits.cpu_seconds):
        raise SubmissionError(f"reading it used more than {limits.cpu_seconds} s of CPU time, the CPU time limit of "
                              "the reader (RLIMIT_CPU): a predictions file within the input limits takes about a "
                              "second; this one expands to far more than it holds", source=source)
    if signum == signal.SIGKILL:  # the kernel's out-of-memory killer, or someone else: the machine's doing
        raise ReaderKilled("the reader was killed (SIGKILL) while reading it: most likely the machine ran out "
                              f"of memory below the memory limit of the reader ({_mib(limits.memory_bytes)}); try "
                              "again later, and report it if it persists", source=source)
    if signum:
        raise SubmissionError(f"the reader stopped with {signal.Signals(signum).name} while reading it: the file "
                              "is damaged, or reading it reached the memory limit of the reader "
                              f"({_mib(limits.memory_bytes)}) inside a library; check the file", source=source)
    if too_long:
        raise SubmissionError(f"the reader's answer is over {limits.answer_bytes:,} bytes, the answer limit of the "
                              "reader: a file within the input limits never gives so much; keep to them", source=source)
    kind, body = data[:1], data[1:]
    if kind == _ROWS:
        return _decode_rows(body, source)
    if kind == _REFUSED:
        refusal = json.loads(body)
        error = SubmissionError(refusal["text"], details=refusal.get("details") or None)
        error.source = refusal.get("source")
        raise error
    if kind == _MEMORY:
        raise SubmissionError(_memory_message(limits), source=source)
    if kind == _FAILED:
        raise SubmissionError(f"cannot read it: {body.decode('utf-8', 'replace')}", source=source)
    raise RexrankError(f"{source}: the predictions reader ended without an answer "
                       f"({ended or 'its server stopped'}): report this with the file")


def _memory_message(limits: Limits) -> str:
    return (f"reading it needs more than {_mib(limits.memory_bytes)}, the memory limit of the reader (RLIMIT_AS): "
            "the file expands to far more than it holds (a page, batch or value larger than any predictions "
            "file needs); write the id and prediction columns as plain text within the input limits")


def _mib(n: int) -> str:
    return f"{n / 2**20:,.0f} MiB"


# ---- the frame -----------------------------------------------------------------------------

def _encode_rows(rows) -> list[bytes]:
    rows = list(rows)
    width = len(rows[0]) if rows else 0
    parts = [_ROWS, _U32.pack(len(rows)), _U32.pack(width)]
    for row in rows:
        if len(row) != width or not all(isinstance(value, str) for value in row):
            raise TypeError("a sandboxed function returns rows of strings, all of one width")
        for value in row:
            data = value.encode("utf-8")
            parts += (_U32.pack(len(data)), data)
    return parts


def _decode_rows(data: bytes, source: str) -> list[tuple[str, ...]]:
    view = memoryview(data)
    try:
        (count,), (width,) = _U32.unpack_from(view, 0), _U32.unpack_from(view, 4)
        at, rows = 8, []
        for _ in range(count):
            row = []
            for _ in range(width):
                (size,) = _U32.unpack_from(view, at)
                at += 4
                if at + size > len(view):
                    raise ValueError("a string runs past the end")
                row.append(str(view[at:at + size], "utf-8"))
                at += size
            rows.append(tuple(row))
        if at != len(view):
            raise ValueError("bytes left over")
    except (struct.error, ValueError) as exc:  # UnicodeDecodeError is a ValueError
        raise RexrankError(f"{source}: the predictions reader's answer is malformed ({exc}): report this") from None
    return rows


# ---- the caller's side: one server per process ---------------------------------------------

class _Server:
    def __init__(self) -> None:
        here, there = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        paths = [os.path.abspath(p or os.curdir) for p in sys.path]
        env = {k: v for k, v in os.environ.items() if k in INHERITED_ENV or k.startswith("LC_")}
        env.update({**SERVER_ENV, "PYTHONPATH": os.pathsep.join(dict.fromkeys(paths))})
        try:
            # its own session: a Ctrl-C in the terminal stops the caller, which closes the socket
            self.process = subprocess.Popen([sys.executable, "-m", "rexrank.sandbox", str(there.fileno())],
                                            pass_fds=(there.fileno(),), stdin=subprocess.DEVNULL,
                                            stdout=subprocess.DEVNULL, env=env, cwd="/", start_new_session=True)
        except OSError as exc:
            here.close()
            raise RexrankError(f"cannot start the predictions reader ({sys.executable}): {exc}") from None
        finally:
            there.close()
        self.socket, self.owner = here, os.getpid()

    def alive(self) -> bool:
        return self.owner == os.getpid() and self.process.poll() is None

    def send(self, request: bytes, fds: tuple[int, int]) -> None:
        socket.send_fds(self.socket, [request], list(fds))

    def close(self) -> None:
        if self.owner != os.getpid():  # a fork's copy: the server belongs to the parent
            return
        self.socket.close()  # the server ends at the socket's end, and kills its children
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()


_server_lock = threading.Lock()
_current: _Server | None = None


def _send(request: bytes, fds: tuple[int, int]) -> None:
    """Send a request to this process's server, starting it (again, once, if it died)."""
    global _current
    with _server_lock:
        for _ in range(2):
            if _current is None or not _current.alive():
                _discard()
                _current = _Server()
            try:
                return _current.send(request, fds)
            except OSError:
                _discard()
        raise RexrankError("the predictions reader's server does not take requests: report this")


def _discard() -> None:
    """Forget a server that died or stopped taking requests (or that a forked parent started)."""
    global _current
    if _current is not None:
        _current.socket.close()  # (a fork's copy of the socket: the parent's stays open)
        if _current.owner == os.getpid() and _current.process.poll() is None:
            _current.process.kill()
            _current.process.wait()
        _current = None


def stop() -> None:
    """Stop this process's server (a later read starts a new one)."""
    global _current
    with _server_lock:
        if _current is not None:
            _current.close()
            _current = None


atexit.register(stop)


# ---- the server ----------------------------------------------------------------------------

def serve(control_fd: int) -> None:
    """Fork a limited child for each request on the socket `control_fd`; report how each
    ended; end, killing the children, when the socket closes."""
    import gc
    import selectors

    control = socket.socket(fileno=control_fd)
    for name in PRELOAD:
        importlib.import_module(name)
    module, _, name = WARM_UP.partition(":")
    getattr(importlib.import_module(module), name)()
    gc.freeze()  # the children's collections leave the server's objects alone: no copy of their pages
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # (a handler: the wakeup fd is written only then)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    children: dict[int, dict] = {}  # pid -> {"status": fd, "deadline": monotonic, "timed_out": bool}
    selector = selectors.DefaultSelector()
    selector.register(control, selectors.EVENT_READ)
    selector.register(wake_r, selectors.EVENT_READ)
    while True:
        now = time.monotonic()
        running = [c["deadline"] for c in children.values() if not c["timed_out"]]
        timeout = max(0.0, min(running) - now) if running else None
        for key, _ in selector.select(timeout):
            if key.fileobj is control:
                try:
                    message, fds, _, _ = socket.recv_fds(control, 1 << 20, 2)
                except OSError:
                    message, fds = b"", []
                if not message:  # the caller closed the socket (or died): end
                    for pid in children:
                        _kill(pid)
                    return
                _start(message, fds, children, close_in_child=(control.fileno(), wake_r, wake_w))
            else:
                while True:
                    try:
                        if not os.read(wake_r, 4096):
                            break
                    except BlockingIOError:
                        break
        _reap(children)
        now = time.monotonic()
        for pid, child in children.items():
            if not child["timed_out"] and now >= child["deadline"]:
                child["timed_out"] = True
                _kill(pid)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _start(message: bytes, fds: list[int], children: dict, *, close_in_child: tuple[int, ...]) -> None:
    if len(fds) != 2:  # (never sent so by `run`)
        for fd in fds:
            os.close(fd)
        return
    answer_fd, status_fd = fds
    request = json.loads(message)
    pid = os.fork()
    if pid == 0:
        try:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            for fd in (*close_in_child, status_fd, *(c["status"] for c in children.values())):
                os.close(fd)
            _child(request, answer_fd)
        finally:
            os._exit(0)
    os.close(answer_fd)
    try:
        os.write(status_fd, f"{pid}\n".encode())
    except OSError:  # the caller stopped waiting already: its child ends by its limits all the same
        pass
    children[pid] = {"status": status_fd, "deadline": time.monotonic() + request["limits"]["wall_seconds"],
                     "timed_out": False}


def _reap(children: dict) -> None:
    while children:
        try:
            pid, status, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        child = children.pop(pid, None)
        if child is None:
            continue
        ended = {"exit": os.waitstatus_to_exitcode(status), "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0,
                 "maxrss_kb": usage.ru_maxrss, "cpu_seconds": usage.ru_utime + usage.ru_stime,
                 "timed_out": child["timed_out"]}
        try:
            os.write(child["status"], (json.dumps(ended) + "\n").encode())
        except OSError:  # the caller gave up waiting
            pass
        os.close(child["status"])


def _child(request: dict, answer_fd: int) -> None:
    """In the forked child: limits, the function, the frame. Never returns an exception."""
    module, _, name = request["target"].partition(":")
    kind, payload = _FAILED, b""
    try:
        os.chdir(request["cwd"])
        _set_limits(request["limits"])
        function = getattr(importlib.import_module(module), name)
        parts = _encode_rows(function(*request["args"]))
        kind = _ROWS
    except SubmissionError as exc:
        kind = _REFUSED
        payload = json.dumps({"text": str(exc), "source": exc.source, "details": exc.details}, default=str).encode()
        if len(payload) > request["limits"]["answer_bytes"] // 2:  # details of megabytes: the text alone
            payload = json.dumps({"text": str(exc), "source": exc.source}).encode()
    except MemoryError:
        kind = _MEMORY  # (after the except block, whatever the failed read held is freed)
    except Exception as exc:  # a library's error no reader expected: one line, never a traceback
        payload = f"{type(exc).__name__}: {first_line(exc)}".encode("utf-8", "replace")
    if kind != _ROWS:
        parts = [kind, payload]
    try:
        with os.fdopen(answer_fd, "wb", buffering=1 << 20) as out:
            for part in parts:
                out.write(part)
    except BrokenPipeError:  # the caller stopped reading (an answer over its limit)
        pass


def _set_limits(limits: dict) -> None:
    import resource

    start = _vm_size_bytes()
    _lower(resource.RLIMIT_AS, start + int(limits["memory_bytes"]))
    cpu = int(limits["cpu_seconds"])
    _lower(resource.RLIMIT_CPU, cpu, hard=cpu + 1)
    _lower(resource.RLIMIT_CORE, 0)


def _lower(which: int, soft: int, *, hard: int | None = None) -> None:
    import resource

    _, current_hard = resource.getrlimit(which)
    hard = soft if hard is None else hard
    if current_hard != resource.RLIM_INFINITY:  # a limit already set (a container's) stays the lower one
        soft, hard = min(soft, current_hard), min(hard, current_hard)
    resource.setrlimit(which, (soft, hard))


def _vm_size_bytes() -> int:
    text = Path("/proc/self/status").read_text()
    return next(int(line.split()[1]) for line in text.splitlines() if line.startswith("VmSize:")) * 1024


if __name__ == "__main__":
    serve(int(sys.argv[1]))
