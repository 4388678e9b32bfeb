"""The audit log: one row per decision and per refused attempt, never a value, in a chain per
tenant keyed with AUDIT_KEY; a checkpoint to keep elsewhere, and the checks that walk the chain.
Its modules are private: this list is the package."""

from __future__ import annotations

from app.copilot.audit._chain import CHECKPOINT_PREFIX, checkpoint, record, record_now
from app.copilot.audit._check import Verdict, verify, verify_against, verify_since_mark

__all__ = [
    "CHECKPOINT_PREFIX",
    "Verdict",
    "checkpoint",
    "record",
    "record_now",
    "verify",
    "verify_against",
    "verify_since_mark",
]
