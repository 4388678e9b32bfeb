"""The demo's actions, tested with the kit that action authors use (app/copilot/kit/)."""

from __future__ import annotations

import re

import sqlalchemy as sa

from app.actions.delete_post import DeletePost
from app.actions.draft_post import DraftPost
from app.actions.list_posts import ListPosts
from app.extensions import db
from app.models import Post


def rename(copilot, title, new):
    with copilot.app.app_context():
        db.session.scalar(sa.select(Post).where(Post.title == title)).title = new
        db.session.commit()


def test_delete_post(copilot):
    copilot.as_person("alice@example.com").chat("/delete_post post=1")
    card = copilot.pending()
    assert card.reason == "Delete this post? This cannot be undone."
    assert {k: v for k, v in card.rows.items() if k != "Created"} == {"Post": "Spring meetup", "Id": "#1", "Status": "draft"}
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", card.rows["Created"])
    assert copilot.calls(DeletePost) == 0
    assert copilot.as_person("bob@example.com") and card.confirm() == "wrong_person"
    rename(copilot, "Spring meetup", "Spring meetup!")
    assert copilot.as_person("alice@example.com") and card.confirm() == "changed"
    copilot.chat("/delete_post post=2")
    assert copilot.pending().decline() == "declined" and copilot.calls(DeletePost) == 0


def test_delete_post_runs_once_when_confirmed(copilot):
    copilot.as_person("alice@example.com").chat("/delete_post post=1")
    card = copilot.pending()
    assert card.confirm() == "done" and card.confirm() == "already_decided"
    assert copilot.calls(DeletePost) == 1


def test_a_card_expires(copilot):
    copilot.as_person("alice@example.com").chat("/delete_post post=1")
    card = copilot.pending()
    copilot.clock.advance(copilot.app.config["APPROVALS_TTL"] + 1)
    assert card.confirm() == "expired" and copilot.calls(DeletePost) == 0


def test_list_posts_runs_at_once(copilot):
    said = copilot.as_person("alice@example.com").chat("/list_posts")
    assert "Spring meetup (draft)" in said[-1] and copilot.calls(ListPosts) == 1


def test_draft_post_asks_and_the_model_hears_field_names(copilot):
    copilot.as_person("alice@example.com").chat('/draft_post title="Launch plan"')
    form = copilot.pending()
    assert form.form["requestedSchema"]["properties"]["title"]["default"] == "Launch plan"
    assert form.submit(body="WORDS-ONLY-THE-PERSON-TYPED", status="published") == "done"
    assert copilot.calls(DraftPost) == 1
    assert "The person filled in: body, status." in copilot.model.seen()
    assert "WORDS-ONLY-THE-PERSON-TYPED" not in copilot.model.seen()


def test_queued_model_drives_the_turn(copilot):
    from app.copilot.kit import text, tool_call

    copilot.model.enqueue(tool_call("delete_post", post=2), text("Asking you first."))
    copilot.as_person("alice@example.com").chat("remove launch notes")
    assert copilot.pending().rows["Post"] == "Launch notes"
