"""The test kit for people who write actions: a Copilot on a fresh database with a queued model
(`copilot.chat`, `copilot.pending().confirm()`, …) and the contract every risky action is checked
for. Its fixtures are the pytest plugin's (app.copilot.kit.plugin, loaded by the `countersign`
entry point). Its other modules are private: this list is the kit."""

from __future__ import annotations

from app.copilot.kit._contract import check_action, check_all
from app.copilot.kit._model import QueuedModel, text, tool_call
from app.copilot.kit._plugin import Card, Copilot, actions_contract_test, migrated_template, running

__all__ = [
    "Card",
    "Copilot",
    "QueuedModel",
    "actions_contract_test",
    "check_action",
    "check_all",
    "migrated_template",
    "running",
    "text",
    "tool_call",
]
