"""The test kit for people who write actions: a pytest plugin (`pytest_plugins =
["app.copilot.kit.plugin"]`, or automatic through the `countersign` entry point).

    def test_delete_post(copilot):
        copilot.as_person("alice@example.com")
        copilot.chat("/delete_post post=1")
        card = copilot.pending()
        assert card.reason == "Delete this post? This cannot be undone."
        assert card.confirm() == "done" and copilot.calls(DeletePost) == 1
"""

from __future__ import annotations

import importlib
import shutil
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from app.copilot.kit._contract import check_action
from app.copilot.kit._model import QueuedModel
from app.copilot.kit._revise import ERRORS, Revisions
from app.errors import CountersignError
from app.status import Decision


class Clock:
    """The frozen clock of a copilot test; advance() moves it (token ages and TTLs follow)."""

    def __init__(self, traveller: Any) -> None:
        self._traveller = traveller

    def advance(self, seconds: float) -> None:
        self._traveller.shift(timedelta(seconds=seconds))


@dataclass
class Card(Revisions):
    """A pending card or form as the person sees it, and its answers (each returns the outcome:
    the approval's status, or why the answer was refused: wrong_person, already_decided, …);
    decline(reason=…) tells the assistant why; edit(), refresh() and countersign(): testing_revise.py."""

    copilot: Copilot
    id: str
    reason: str
    rows: dict[str, str]
    form: dict[str, Any] | None
    token: str

    def confirm(self) -> str:
        return self.copilot._answer(self, Decision.CONFIRM)

    def decline(self, reason: str | None = None) -> str:
        return self.copilot._answer(self, Decision.DECLINE, reason=reason)

    def cancel(self) -> str:
        return self.copilot._answer(self, Decision.CANCEL)

    def submit(self, **values: Any) -> str:
        return self.copilot._answer(self, Decision.SUBMIT, values)


class Copilot:
    """An app on a temporary database with the demo seeded, a queued model, a frozen clock."""

    def __init__(self, app: Any, model: QueuedModel, clock: Clock | None) -> None:
        self.app, self.model, self.clock = app, model, clock
        self.person: str | None = None
        self._conversation: int | None = None
        self._counts: dict[type, int] = {}

    def as_person(self, email: str) -> Copilot:
        """Act as this person from now on (a new conversation is started on the next chat)."""
        self.person = email
        self._conversation = None
        return self

    def _user(self) -> Any:
        from app.extensions import db
        from app.models import User

        if self.person is None:
            raise RuntimeError("Call copilot.as_person(email) first.")
        user = db.session.scalar(sa.select(User).where(User.email == self.person))
        if user is None:
            raise LookupError(f"No person {self.person!r} in the test database.")
        return user

    def _actor(self) -> Any:
        from app.copilot.approvals import Actor

        return Actor(user=self._user(), binding=f"kit:{self.person}", channel="test")

    def chat(self, message: str) -> list[str]:
        """Say something and wait for the turn; returns what came back (assistant lines, notices,
        card sentences)."""
        from app.copilot import send_message
        from app.copilot.starting import start
        from app.extensions import db
        from app.models import Conversation, Message

        with self.app.app_context():
            user = self._user()
            conversation = db.session.get(Conversation, self._conversation) if self._conversation else None
            if conversation is None:
                conversation = start(user)
                db.session.commit()
                self._conversation = conversation.id
            said, run = send_message(conversation, self._actor(), message)
            self._settle(conversation.id, run.id)
            added = db.session.scalars(
                sa.select(Message).where(Message.conversation_id == conversation.id, Message.id > said.id).order_by(Message.id)
            )
            return [m.approval.reason if m.approval else m.text for m in added]

    def _settle(self, conversation_id: int, run_id: int) -> None:
        """Wait for a turn the app's runner took (the kit's own runner is inline: it is over)."""
        from app.copilot import turns

        if not turns.wait(conversation_id, run_id, "0-0", 60):
            raise TimeoutError(f"the turn of run {run_id} did not end within 60 s")

    def pending(self) -> Card:
        """The newest pending card or form of the current person."""
        from app.copilot.approvals import pending_for, sign

        with self.app.app_context():
            waiting = pending_for(self._user())
            if not waiting:
                raise LookupError(f"{self.person} has no pending card.")
            a = waiting[0]
            return Card(self, a.id, a.reason, {r["label"]: r["value"] for r in a.rows}, a.form, sign(a, f"kit:{a.user.email}"))

    def _answer(
        self, card: Card, decision: str, values: dict[str, Any] | None = None, reason: str | None = None, second: bool = False
    ) -> str:
        from app.copilot import answer, countersign
        from app.copilot.approvals import sign_second

        with self.app.app_context():
            actor = self._actor()
            try:
                if second:  # with the person's own countersignature token, as their page would give it
                    token = sign_second(card.id, actor.user, actor.binding)
                    approval = countersign(card.id, token, actor, decision, reason)
                else:
                    approval = answer(card.id, card.token, actor, decision, values, reason)
            except CountersignError as error:
                return ERRORS.get(type(error).__name__, type(error).__name__)
            return str(approval.status)

    def calls(self, action: type) -> int:
        """How many times action.handle() ran in this test."""
        return self._counts.get(action, 0)

    def _count_handles(self, registry: Any) -> list[tuple[Any, Any]]:
        originals = []
        for action in registry.actions.values():
            original = action.handle

            def counted(inner: Any, ctx: Any, input: Any, _action: type = action, _original: Any = original) -> Any:
                self._counts[_action] = self._counts.get(_action, 0) + 1
                return _original(inner, ctx, input)

            originals.append((action, original))
            action.handle = counted
        return originals


def _seed(app: Any) -> None:
    target = app.config.get("COUNTERSIGN_TEST_SEED", "app.cli:seed_demo")
    module, _, name = target.partition(":")
    with app.app_context():
        getattr(importlib.import_module(module), name)()


def migrated_template(path: Path, *, factory: Any, **config: Any) -> Path:
    """Migrate an empty SQLite file at path (copy it per test: much faster than migrating), with
    the app `factory` (create_app: the plugin's countersign_app_factory fixture gives it)."""
    from flask_migrate import upgrade

    from app.extensions import db

    app = factory(
        {
            "COUNTERSIGN_ENV": "testing",
            "SECRET_KEY": "kit",
            "SWEEP_ON_START": False,
            "SQLALCHEMY_DATABASE_URI": f"sqlite:///{path}",
            "REDIS_URL": None,
            **config,
        }
    )
    with app.app_context():
        upgrade()
        db.engine.dispose()
    return path


@contextmanager
def running(template: Path, workdir: Path, freeze: bool = True, *, factory: Any, **config: Any) -> Iterator[Copilot]:
    """A Copilot on a fresh copy of the template database, demo seeded, the model queued; its app
    made by `factory` (create_app)."""
    from app.copilot.turns import engine
    from app.extensions import db
    from app.models import utcnow

    path = workdir / f"copilot-{uuid.uuid4().hex[:8]}.sqlite3"
    shutil.copy(template, path)
    app = factory(
        {
            "COUNTERSIGN_ENV": "testing",
            "SECRET_KEY": "kit",
            "SWEEP_ON_START": False,
            "SQLALCHEMY_DATABASE_URI": f"sqlite:///{path}",
            "REDIS_URL": None,
            "RATELIMIT_ENABLED": False,
            "TURNS_RUNNER": "inline",
            "FILES_ROOT": str(workdir / "files"),
            **config,
        }
    )
    _seed(app)
    model = QueuedModel()
    with ExitStack() as stack:
        clock = None
        if freeze:
            import time_machine

            clock = Clock(stack.enter_context(time_machine.travel(utcnow(), tick=False)))
        kit = Copilot(app, model, clock)
        with app.app_context():
            engine().use_model(model)
            originals = kit._count_handles(engine().registry)
        try:
            yield kit
        finally:
            for action, original in originals:
                action.handle = original
            with app.app_context():
                db.session.remove()
                db.engine.dispose()


def actions_contract_test(package: str = "app.actions") -> Any:
    """A parametrized test of every risky action's contract (see app/copilot/kit/_contract.py):

    from app.copilot.kit import actions_contract_test
    test_actions_contract = actions_contract_test()
    """
    from app.copilot.actions import discover

    registry = discover(package)
    risky = [a.name for a in registry.actions.values() if a.may_need_card()]
    every_toolset = sorted({t for a in registry.actions.values() for t in a.toolsets})

    @pytest.mark.parametrize("action_name", risky)
    def test_action_contract(
        action_name: str, countersign_template_db: Path, tmp_path: Path, countersign_app_factory: Any
    ) -> None:
        with running(
            countersign_template_db,
            tmp_path,
            freeze=False,
            factory=countersign_app_factory,
            ACTIONS_PACKAGE=package,
            COUNTERSIGN_TOOLSETS=every_toolset,
        ) as kit:
            problems = check_action(kit, action_name)
        assert not problems, "\n".join(problems)

    return test_action_contract
