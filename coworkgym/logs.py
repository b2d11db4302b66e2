"""Structured logging: key=value lines on stderr (JSON with COWORKGYM_LOG_JSON=1)."""

from __future__ import annotations

import logging
import os
import sys

import structlog


def configure_logging(level: str | None = None) -> None:
    name = (level or os.environ.get("COWORKGYM_LOG_LEVEL", "WARNING")).upper()
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer()
        if os.environ.get("COWORKGYM_LOG_JSON")
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(name)),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
