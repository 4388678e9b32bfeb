"""A card or a form in the web's answer, and the steps on it that several tests take."""

from __future__ import annotations

import re

import sqlalchemy as sa

from app.extensions import db
from app.models import Approval


def form_of(html):
    approval = re.findall(r'id="approval-([0-9a-f]{32})"', html)[-1]
    token = re.findall(r'name="token" value="([^"]+)"', html)[-1]
    return approval, token


def submit(person, approval, token, **values):
    return person.htmx_post(f"/approvals/{approval}/submit", token=token, **values)


def pending_delete(alice, posts, title="Spring meetup"):
    html = alice.say(alice.new_conversation(), f"/delete_post post={posts[title]}")
    return alice.card(html)


def card_of(app, post_id):
    with app.app_context():
        return next(a for a in db.session.scalars(sa.select(Approval)) if a.arguments.get("post") == post_id)
