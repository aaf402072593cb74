"""The readings' durable commits, made by a writer process (gateway/devices/reading_insert.py).

It is the readings table's one writer: the readings and the retention's prune batches (`prune`).
`insert_then(row, then)` queues a row; the rows queued in one loop pass, and those that arrive
while a batch is being committed, go as one batch (one statement, one fsync), one batch at a
time, and `then((row id, new), None)` or `then(None, StorageFailed)` is called for each in the
loop pass that reads the batch's result, in order. The process is started by `start` (or by the
first row) and stopped by `close`; when it dies, the rows of its batch fail with StorageFailed
(nothing is acknowledged, so the devices resend them: a row it had committed is then a
duplicate) and the next batch starts a new one.
"""

from __future__ import annotations

import asyncio
import logging
import marshal
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from gateway.devices.reading_insert import FRAME_LENGTH, ROWS_PER_STATEMENT, Row
from gateway.devices.reading_store import StorageFailed

log = logging.getLogger(__name__)

Then = Callable[[tuple[int, bool] | None, BaseException | None], None]
_CHILD = Path(__file__).with_name("reading_insert.py")


def writer_command(database: Path) -> list[str]:
    """The writer process's command line. -I -S: the standard library only, nothing from the
    working directory or the environment."""
    return [sys.executable, "-I", "-S", str(_CHILD), str(database)]


def commit_once(database: Path, rows: list[Row], timeout: float = 60) -> list[tuple[int, bool] | str]:
    """One batch through a writer process of its own, synchronously (`gateway doctor`)."""
    data = marshal.dumps(("insert", rows))
    done = subprocess.run(writer_command(database), input=FRAME_LENGTH.pack(len(data)) + data, capture_output=True,
                          timeout=timeout, check=False)
    reply = done.stdout
    if done.returncode != 0 or len(reply) < FRAME_LENGTH.size:
        raise RuntimeError(f"exit status {done.returncode}: {done.stderr.decode(errors='replace').strip()[-300:]}")
    return list(marshal.loads(reply[FRAME_LENGTH.size:]))


class ReadingWriter:
    def __init__(self, database: Path) -> None:
        self.database = database
        self._proc: subprocess.Popen[bytes] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queued: list[tuple[Row, Then]] = []
        self._batch: list[tuple[Row, Then]] | None = None  # on the writer process
        self._scheduled = False
        self._in = bytearray()  # the replies read so far
        self._out = b""  # what the process's stdin has not taken yet
        self._prunes: list[tuple[float, int, asyncio.Future[dict[str, int]]]] = []  # queued
        self._pruning: asyncio.Future[dict[str, int]] | None = None  # on the process
        self.commits = 0  # batches committed (the rows they held: `rows`)
        self.rows = 0

    # -- the process ---------------------------------------------------------------------------

    def start(self) -> None:
        """Start the writer process (on the running loop) unless it runs."""
        if self._proc is not None:
            return
        self._loop = asyncio.get_running_loop()
        proc = subprocess.Popen(writer_command(self.database), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                close_fds=True)
        assert proc.stdin is not None and proc.stdout is not None
        os.set_blocking(proc.stdin.fileno(), False)
        os.set_blocking(proc.stdout.fileno(), False)
        self._loop.add_reader(proc.stdout.fileno(), self._readable)
        self._proc = proc
        log.info("readings writer process %d started for %s", proc.pid, self.database)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def cpu_seconds(self) -> float:
        """The writer process's CPU time so far (Linux /proc: its scheduler's nanoseconds, else
        the 10 ms ticks of its stat; 0 when it is not running): the benchmarks count it with the
        gateway's own."""
        if self._proc is None:
            return 0.0
        try:
            with open(f"/proc/{self._proc.pid}/schedstat") as f:
                return int(f.read().split()[0]) / 1e9
        except (OSError, ValueError, IndexError):
            pass
        try:
            with open(f"/proc/{self._proc.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self) -> None:
        """Stop the writer process: it ends after the batch it is committing. Rows not yet
        answered fail with StorageFailed (a committed one is a duplicate when it is resent)."""
        self._stop("the gateway is closing the database", wait_s=0.5)
        self._fail_queued(StorageFailed("the gateway is closing the database; resend later"))

    def _stop(self, why: str, wait_s: float = 0.0) -> None:
        """Close its pipes, fail what it was answering, reap it (waiting `wait_s` at most)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        assert proc.stdin is not None and proc.stdout is not None
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(proc.stdout.fileno())
            self._loop.remove_writer(proc.stdin.fileno())
        proc.stdin.close()  # its stdin ends: it stops after the batch it is on
        proc.stdout.close()
        self._in.clear()
        self._out = b""
        batch, self._batch = self._batch, None
        pruning, self._pruning = self._pruning, None
        failed = StorageFailed(f"{why}: the readings writer (process {proc.pid}) stopped before saying "
                               f"the batch was committed; not acknowledged, the device resends")
        for _, then in batch or []:
            _tell(then, None, failed)
        if pruning is not None and not pruning.done():
            pruning.set_exception(failed)
        try:
            proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:  # left to finish its batch; reaped by subprocess later
            pass

    # -- rows in --------------------------------------------------------------------------------

    async def prune(self, cutoff: float, batch: int) -> dict[str, int]:
        """One batch of the retention's prune (reading_insert.prune_batch): the count deleted per
        device. The readings queued meanwhile go first: a long prune only ever holds a reading
        up for one of its batches. StorageFailed when the database refused it or the process died."""
        done: asyncio.Future[dict[str, int]] = asyncio.get_running_loop().create_future()
        self._prunes.append((cutoff, batch, done))
        self._send_soon()
        return await done

    def insert_then(self, row: Row, then: Then) -> None:
        self._queued.append((row, then))
        self._send_soon()

    def _send_soon(self) -> None:
        if not self._scheduled and not self._busy():
            self._scheduled = True  # at the end of this loop pass: the pass's rows in one batch
            asyncio.get_running_loop().call_soon(self._send)

    def _busy(self) -> bool:
        return self._batch is not None or self._pruning is not None

    def _send(self) -> None:
        self._scheduled = False
        if self._busy() or not (self._queued or self._prunes):
            return
        try:
            self.start()
        except OSError as exc:
            log.error("readings writer: cannot start %s: %s", _CHILD, exc)
            self._fail_queued(StorageFailed(f"cannot start the readings writer: {exc}"))
            return
        request: tuple[object, ...]
        if self._queued:  # the readings first, then one batch of the prune
            batch, self._queued = self._queued[:ROWS_PER_STATEMENT], self._queued[ROWS_PER_STATEMENT:]
            self._batch = batch
            request = ("insert", [row for row, _ in batch])
        else:
            cutoff, size, self._pruning = self._prunes.pop(0)
            request = ("prune", cutoff, size)
        data = marshal.dumps(request)
        self._out = FRAME_LENGTH.pack(len(data)) + data
        self._write()

    def _fail_queued(self, failed: StorageFailed) -> None:
        queued, self._queued = self._queued, []
        for _, then in queued:
            _tell(then, None, failed)
        prunes, self._prunes = self._prunes, []
        for *_, done in prunes:
            if not done.done():
                done.set_exception(failed)

    def _write(self) -> None:
        proc = self._proc
        assert proc is not None and proc.stdin is not None and self._loop is not None
        try:
            sent = os.write(proc.stdin.fileno(), self._out)
        except BlockingIOError:
            sent = 0
        except OSError as exc:  # BrokenPipeError: it died
            self._died(f"writing to it failed: {exc}")
            return
        self._out = self._out[sent:]
        if self._out:
            self._loop.add_writer(proc.stdin.fileno(), self._write)
        else:
            self._loop.remove_writer(proc.stdin.fileno())

    # -- results out ----------------------------------------------------------------------------

    def _readable(self) -> None:
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        try:
            chunk = os.read(proc.stdout.fileno(), 1 << 16)
        except BlockingIOError:
            return
        except OSError as exc:
            self._died(f"reading from it failed: {exc}")
            return
        if not chunk:
            self._died("it ended")
            return
        self._in += chunk
        while len(self._in) >= FRAME_LENGTH.size:
            size = FRAME_LENGTH.unpack_from(self._in)[0]
            if len(self._in) < FRAME_LENGTH.size + size:
                return
            answer = marshal.loads(bytes(self._in[FRAME_LENGTH.size:FRAME_LENGTH.size + size]))
            del self._in[:FRAME_LENGTH.size + size]
            self._settle(answer)

    def _settle(self, answer: object) -> None:
        pruning, self._pruning = self._pruning, None
        if pruning is not None:  # the count per device, or the error text
            if not pruning.done():
                if isinstance(answer, dict):
                    pruning.set_result(answer)
                else:
                    pruning.set_exception(StorageFailed(f"the prune failed: {answer}"))
        else:
            assert isinstance(answer, list)
            batch, self._batch = self._batch or [], None
            self.commits += 1
            self.rows += len(batch)
            for (_, then), outcome in zip(batch, answer, strict=True):
                if isinstance(outcome, str):
                    _tell(then, None, StorageFailed(outcome))
                else:
                    _tell(then, (outcome[0], outcome[1]), None)
        self._send()  # what came meanwhile: the next request, now

    def _died(self, why: str) -> None:
        proc = self._proc
        log.error("readings writer process %s stopped (%s; exit status %s): its batch is not acknowledged, "
                  "the next starts a new one", proc.pid if proc else "?", why, proc.poll() if proc else None)
        self._stop(why)
        self._send()


def _tell(then: Then, result: tuple[int, bool] | None, exc: BaseException | None) -> None:
    try:  # (a caller's bug must not keep the others waiting)
        then(result, exc)
    except Exception:
        log.exception("a reading's store callback failed")
