"""The serve log handler: INFO lines from the event loop leave in one batched write, in order;
warnings, other threads and code outside a loop write at once; nothing kept is lost at close."""

from __future__ import annotations

import asyncio
import io
import logging
import threading

from gateway.observe.batched_log import BatchingStreamHandler


class CountingStream(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, text: str) -> int:
        self.writes += 1
        return super().write(text)


def make_logger(name: str, **kw: float) -> tuple[logging.Logger, BatchingStreamHandler, CountingStream]:
    stream = CountingStream()
    handler = BatchingStreamHandler(stream, **kw)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    logger = logging.getLogger(f"test_batched_log.{name}")
    logger.handlers[:] = [handler]
    logger.propagate = False
    logger.setLevel(logging.INFO)
    return logger, handler, stream


async def test_info_lines_on_the_loop_leave_together_after_the_delay():
    logger, handler, stream = make_logger("batch", delay=0.05)
    for i in range(3):
        logger.info("line %d", i)
    assert stream.getvalue() == ""
    await asyncio.sleep(0.12)
    assert stream.getvalue() == "INFO line 0\nINFO line 1\nINFO line 2\n"
    assert stream.writes == 1
    handler.close()


async def test_a_warning_writes_the_kept_lines_first_then_itself():
    logger, handler, stream = make_logger("warning", delay=10)
    logger.info("before")
    logger.warning("trouble")
    assert stream.getvalue() == "INFO before\nWARNING trouble\n"
    handler.close()


async def test_too_many_kept_lines_are_written_without_waiting():
    logger, handler, stream = make_logger("full", delay=10, max_kept=4)
    for i in range(4):
        logger.info("n%d", i)
    assert stream.getvalue().count("\n") == 4
    handler.close()


async def test_close_writes_what_is_kept():
    logger, handler, stream = make_logger("close", delay=10)
    logger.info("last words")
    handler.close()
    assert stream.getvalue() == "INFO last words\n"


async def test_other_threads_write_at_once():
    logger, handler, stream = make_logger("thread", delay=10)
    worker = threading.Thread(target=logger.info, args=("from a thread",))
    worker.start()
    worker.join()
    assert stream.getvalue() == "INFO from a thread\n"
    handler.close()


def test_outside_a_running_loop_lines_are_written_at_once():
    logger, handler, stream = make_logger("sync", delay=10)
    logger.info("no loop here")
    assert stream.getvalue() == "INFO no loop here\n"
    handler.close()
