"""worldsim leaves logging to the program: structlog's configuration where the program made
one, the standard library's logging otherwise (never standard output)."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
from pathlib import Path

import structlog
from structlog.testing import LogCapture

from worldsim.domain.logs import get_logger

PACKAGE = Path(__file__).resolve().parents[1] / "worldsim"

_PROGRAM = """
from worldsim.domain.logs import get_logger
log = get_logger("worldsim.somewhere")
log.info("quiet_event", n=1)
log.warning("loud_event", n=2)
print("the program's own output")
"""


def test_a_program_that_configured_nothing_sees_warnings_on_stderr_and_its_stdout_alone() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _PROGRAM], capture_output=True, text=True, check=True
    )
    assert proc.stdout == "the program's own output\n"
    assert "loud_event" in proc.stderr and "n=2" in proc.stderr
    assert "quiet_event" not in proc.stderr  # info stays below logging's default level


def test_a_program_that_configured_structlog_gets_every_event_through_it() -> None:
    log = get_logger("worldsim.somewhere")
    before = structlog.get_config()
    capture = LogCapture()
    structlog.configure(
        processors=[capture], wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG)
    )
    try:
        log.info("quiet_event", n=1)
        log.warning("loud_event", n=2)
    finally:
        structlog.configure(**before)
    logs = capture.entries
    assert [(e["event"], e["log_level"], e["n"]) for e in logs] == [
        ("quiet_event", "info", 1),
        ("loud_event", "warning", 2),
    ]


def test_no_library_module_takes_a_logger_from_structlog_directly() -> None:
    """Only the CLI (which configures structlog) and the logger module itself import it."""
    allowed = {PACKAGE / "cli" / "_app.py", PACKAGE / "domain" / "logs.py"}
    naming = {
        path
        for path in PACKAGE.rglob("*.py")
        if re.search(r"^\s*(import|from) structlog", path.read_text(encoding="utf-8"), re.M)
        and path not in allowed
    }
    assert naming == set()
