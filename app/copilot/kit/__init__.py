"""The test kit for people who write actions: a pytest plugin (`pytest_plugins =
["app.copilot.kit"]`, or automatic through the `countersign` entry point) and what its tests use.
Its modules are private: this list is the kit."""

from __future__ import annotations

from app.copilot.kit._contract import check_action, check_all
from app.copilot.kit._plugin import (
    Card,
    Copilot,
    QueuedModel,
    actions_contract_test,
    copilot,
    copilot_config,
    countersign_template_db,
    migrated_template,
    running,
    text,
    tool_call,
)

__all__ = [
    "Card",
    "Copilot",
    "QueuedModel",
    "actions_contract_test",
    "check_action",
    "check_all",
    "copilot",
    "copilot_config",
    "countersign_template_db",
    "migrated_template",
    "running",
    "text",
    "tool_call",
]
