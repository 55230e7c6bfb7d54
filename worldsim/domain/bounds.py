"""The documented limits of worldsim's inputs, in one place (docs/limits.md lists them).

Validation enforces every limit before a run writes anything, so an out-of-range value is one
line naming the file and field rather than a failure halfway through a run. The limits are
generous: they keep arithmetic safe (dates, ticks, logits) and runs within what a machine can
hold, not within what a typical card needs.
"""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = [
    "BYTES_PER_AGENT_TICK",
    "BYTES_PER_TIMELINE_TICK",
    "DEFAULT_MAX_TRACE_MB",
    "EARLIEST_DATE",
    "LATEST_DATE",
    "MAX_ACTIVE",
    "MAX_ACTORS",
    "MAX_COHORTS",
    "MAX_COHORT_SIZE",
    "MAX_CONNECTIONS",
    "MAX_CONSTRAINTS",
    "MAX_CONTEXT_CHARS",
    "MAX_CSV_CELL_CHARS",
    "MAX_DEPTH",
    "MAX_DOCUMENT_CHARS",
    "MAX_ENDPOINTS",
    "MAX_EVENTS",
    "MAX_EVIDENCE_DOCS",
    "MAX_HYPOTHESES",
    "MAX_INPUT_BYTES",
    "MAX_MEMBERS",
    "MAX_NAME_CHARS",
    "MAX_NESTING",
    "MAX_NEWS",
    "MAX_PRESSURE",
    "MAX_QUESTION_CHARS",
    "MAX_RELATIONS",
    "MAX_REPLICATES",
    "MAX_SEED",
    "MAX_STUDY_JOBS",
    "MAX_STUDY_SEEDS",
    "MAX_TEXT_CHARS",
    "MAX_TICKS",
    "MAX_TITLE_CHARS",
    "MAX_VARIABLES",
    "MAX_VARIABLE_INT",
]

# --- dates: every date a user gives lies in [EARLIEST_DATE, LATEST_DATE], so tick arithmetic
# and time-zone shifts never leave the range Python's datetime can hold (years 1..9999).
EARLIEST_DATE = datetime(1900, 1, 1, tzinfo=UTC)
LATEST_DATE = datetime(2200, 1, 1, tzinfo=UTC)

# --- card text, in characters. The question is repeated in reports (at most 2,000 characters).
MAX_QUESTION_CHARS = 1_000
MAX_CONTEXT_CHARS = 100_000
MAX_NAME_CHARS = 80
"""Ids, names and role names of actors, cohorts, endpoints and hypotheses: the model schemas'
limit, so a card's world is one a model could have returned."""
MAX_TITLE_CHARS = 1_000
MAX_TEXT_CHARS = 10_000
"""Descriptions, constraints and other free text of a card, per item."""
MAX_DOCUMENT_CHARS = 1_000_000
"""The text of one evidence document."""

# --- card structure, in items (the model schemas' limits where they have one).
MAX_ENDPOINTS = 100
MAX_ACTORS = 1_000_000
MAX_COHORTS = 10_000
MAX_COHORT_SIZE = 10_000_000_000
MAX_MEMBERS = 10_000_000
"""Cohort members simulated as arrays, in all of a card's cohorts (16 bytes each per state)."""
MAX_RELATIONS = 100_000
MAX_EVENTS = 1_000
MAX_HYPOTHESES = 1_000
MAX_VARIABLES = 100
MAX_VARIABLE_INT = 2**53
"""Largest magnitude of a variable kept as a whole number: every one a float holds exactly (a
model's reply and the offline world carry variables as floats). A larger one is read as a float
(rounded), one beyond a float's range is refused."""
MAX_CONSTRAINTS = 100
MAX_EVIDENCE_DOCS = 100_000
MAX_PRESSURE = 50.0
"""Largest pressure shift (a logit) an event or hypothesis may carry."""

# --- runs.
MAX_TICKS = 10_000
MAX_ACTIVE = 1_000
"""Most timelines one run may hold (a policy's ``max_active``)."""
MAX_DEPTH = 64
"""Deepest fork a policy may allow (``max_depth``)."""
MAX_SEED = 2**63 - 1
"""Seeds fit a signed 64-bit integer: other tools read them, and they name trace files."""
MAX_REPLICATES = 10_000
MAX_CONNECTIONS = 1_000
MAX_NEWS = 1_000
"""Most documents of news a continued run reads (a policy's ``max_news``): one assessor call
per particle judges them all."""

# --- studies.
MAX_STUDY_SEEDS = 10_000
"""Seeds of a study's manifest (every method runs each): as many as ``--replicates`` gives."""
MAX_STUDY_JOBS = 100_000
"""Jobs of one study: cards × methods × forecast dates × seeds."""

DEFAULT_MAX_TRACE_MB = 2_048
"""A run whose estimated trace is larger refuses to start unless the limit is raised. 2 GB
admits an offline run of 10⁵ actors over 8 ticks (estimated at 1.6 GB; such a run writes about
0.7 GB)."""
BYTES_PER_AGENT_TICK = 2_000
BYTES_PER_TIMELINE_TICK = 8_000
"""The trace-size estimate: offline runs write about 1 kB per agent and tick (retrievals,
proposals) and a few kB per timeline and tick (tick records, the review); rounded up."""

# --- input files.
MAX_INPUT_BYTES = 256 * 1024 * 1024
"""Largest card, policy, label, config, article or prediction file read."""
MAX_NESTING = 64
"""Deepest nesting of lists and mappings in a YAML or JSON input."""
MAX_CSV_CELL_CHARS = 131_072
"""Longest cell of a CSV input (a question list, a prediction table): the csv module's own
default field limit, now refused by its file, line and column."""
