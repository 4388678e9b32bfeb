"""Conversations people manage (issue 17): rename, delete, search — each scoped to the person and
their tenant, on the web and through the API; a deleted one is gone from every route, and its
waiting cards end without anything running."""

from __future__ import annotations

import re
from typing import Any

import pytest
import sqlalchemy as sa

from app.auth import create_token
from app.extensions import db
from app.models import Approval, AuditEvent, Conversation, Message, Post, Run, Tenant, User
from app.status import RunStatus, Status
from tests.conftest import api_headers


@pytest.fixture
def tokens(app):
    """A client token (the person's own app) and an agent token for each person."""
    with app.app_context():
        users = list(db.session.scalars(sa.select(User)))
        return {
            **{u.email.split("@")[0]: create_token(u, scope="client") for u in users},
            **{f"{u.email.split('@')[0]}-agent": create_token(u, scope="agent") for u in users},
        }


class Api:
    def __init__(self, client, token):
        self.client, self.headers = client, api_headers(token)

    def get(self, url, **query):
        return self.client.get(url, query_string=query, headers=self.headers)

    def post(self, url, json=None):
        return self.client.post(url, json=json if json is not None else {}, headers=self.headers)

    def patch(self, url, json):
        return self.client.patch(url, json=json, headers=self.headers)

    def delete(self, url):
        return self.client.delete(url, headers=self.headers)


@pytest.fixture
def api(app, tokens):
    return lambda who: Api(app.test_client(), tokens[who])


def conversation_of(app, email, title="New conversation", words=(), tenant=None):
    """A conversation straight into the tables, with the person's words in it; its id."""
    with app.app_context():
        user = db.session.scalar(sa.select(User).where(User.email == email))
        tenant_id = user.tenant_id if tenant is None else db.session.scalar(sa.select(Tenant.id).where(Tenant.slug == tenant))
        conversation = Conversation(tenant_id=tenant_id, user_id=user.id, title=title)
        db.session.add(conversation)
        db.session.flush()
        for text in words:
            db.session.add(Message(conversation_id=conversation.id, role="user", text=text))
        db.session.commit()
        return conversation.id


def stored(app, conversation_id):
    with app.app_context():
        conversation = db.session.get(Conversation, conversation_id)
        return conversation.title, conversation.deleted_at


def titles(response):
    assert response.status_code == 200, response.get_data(as_text=True)
    return [c["title"] for c in response.get_json()["conversations"]]


def web_titles(html):
    return re.findall(r'<a id="conversation-link-\d+" href="[^"]+">([^<]*)</a>', html)


# --- rename -------------------------------------------------------------------------------------


def test_the_person_renames_their_conversation_on_the_web(app, alice):
    convo = alice.new_conversation()
    response = alice.htmx_post(f"/c/{convo}/title", title="  Launch\n plans  ")
    assert response.status_code == 200
    assert 'id="conversation-title" hx-swap-oob="true">Launch plans</h1>' in response.get_data(as_text=True)
    assert stored(app, convo)[0] == "Launch plans"
    assert "Launch plans" in alice.client.get(f"/c/{convo}").get_data(as_text=True)


def test_the_person_renames_their_conversation_through_the_api(app, api):
    convo = api("alice").post("/api/conversations").get_json()["id"]
    response = api("alice").patch(f"/api/conversations/{convo}", {"title": "Quarterly report"})
    assert response.status_code == 200 and response.get_json()["title"] == "Quarterly report"
    assert stored(app, convo)[0] == "Quarterly report"


@pytest.mark.parametrize(
    ("title", "why"),
    [("   ", "at least one character"), ("x" * 201, "limited to 200"), ("a\x00b", "NUL"), (7, "must be a string")],
)
def test_a_title_that_cannot_be_stored_is_refused_and_the_old_one_stays(app, api, title, why):
    convo = api("alice").post("/api/conversations").get_json()["id"]
    response = api("alice").patch(f"/api/conversations/{convo}", {"title": title})
    assert response.status_code == 400 and why in response.get_json()["message"]
    assert stored(app, convo)[0] == "New conversation"


def test_an_agent_token_may_not_rename(app, api):
    convo = conversation_of(app, "alice@example.com", "Mine")
    response = api("alice-agent").patch(f"/api/conversations/{convo}", {"title": "Approved by IT"})
    assert response.status_code == 403 and response.get_json()["error"] == "AgentCannotManage"
    assert stored(app, convo)[0] == "Mine"


def test_a_rename_with_the_session_cookie_needs_the_csrf_header(app, alice):
    convo = alice.new_conversation()
    response = alice.client.patch(f"/api/conversations/{convo}", json={"title": "forged"})
    assert response.status_code == 400
    assert stored(app, convo)[0] == "New conversation"
    sent = alice.client.patch(f"/api/conversations/{convo}", json={"title": "mine"}, headers={"X-CSRFToken": alice.csrf})
    assert sent.status_code == 200 and stored(app, convo)[0] == "mine"


# --- someone else's, and deleted: 404 on every route ---------------------------------------------

WEB_ROUTES = [
    ("get", "/c/{id}"),
    ("get", "/c/{id}/events"),
    ("post", "/c/{id}/title"),
    ("post", "/c/{id}/delete"),
    ("post", "/c/{id}/messages"),
    ("post", "/c/{id}/retry"),
    ("post", "/c/{id}/stop"),
]
API_ROUTES = [
    ("get", "/api/conversations/{id}"),
    ("get", "/api/conversations/{id}/events"),
    ("patch", "/api/conversations/{id}"),
    ("delete", "/api/conversations/{id}"),
    ("post", "/api/conversations/{id}/messages"),
    ("post", "/api/conversations/{id}/retry"),
    ("post", "/api/conversations/{id}/stop"),
]


def every_route_is_404(app, person, api_client, convo):
    for method, route in WEB_ROUTES:
        url = route.format(id=convo)
        if method == "get":
            response = person.client.get(url)
        else:
            response = person.htmx_post(url, title="mine now", text="hello")
        assert response.status_code == 404, (method, url, response.status_code)
    for method, route in API_ROUTES:
        url = route.format(id=convo)
        if method == "get":
            response = api_client.get(url)
        elif method == "patch":
            response = api_client.patch(url, {"title": "mine now"})
        elif method == "delete":
            response = api_client.delete(url)
        else:
            response = api_client.post(url, {"text": "hello"})
        assert response.status_code == 404, (method, url, response.status_code)
        assert response.get_json()["error"] == "NotFound"


def test_another_persons_conversation_is_404_on_every_route(app, alice, api):
    bobs = conversation_of(app, "bob@example.com", "Bob's plans", ["secret plans"])
    every_route_is_404(app, alice, api("alice"), bobs)
    assert stored(app, bobs) == ("Bob's plans", None)
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(Message).where(Message.conversation_id == bobs)) == 1


def test_another_tenants_conversation_is_404_on_every_route(app, alice, api):
    carols = conversation_of(app, "carol@example.com", "Globex numbers")
    every_route_is_404(app, alice, api("alice"), carols)
    assert stored(app, carols) == ("Globex numbers", None)


def test_a_conversation_filed_under_another_tenant_is_404_even_to_its_person(app, alice, api):
    """The tenant is checked, not only the person (a row that names alice but sits in globex)."""
    stray = conversation_of(app, "alice@example.com", "Filed elsewhere", tenant="globex")
    every_route_is_404(app, alice, api("alice"), stray)
    assert "Filed elsewhere" not in titles(api("alice").get("/api/conversations"))


def test_a_deleted_conversation_is_404_on_every_route_and_listed_nowhere(app, alice, api):
    convo = conversation_of(app, "alice@example.com", "Old plans", ["budget"])
    assert api("alice").delete(f"/api/conversations/{convo}").status_code == 200
    every_route_is_404(app, alice, api("alice"), convo)
    assert "Old plans" not in titles(api("alice").get("/api/conversations"))
    assert "Old plans" not in titles(api("alice").get("/api/conversations", q="budget"))
    assert "Old plans" not in alice.client.get("/").get_data(as_text=True)
    assert stored(app, convo)[0] == "Old plans"  # kept (its approvals and the audit name it), hidden


def test_the_person_deletes_on_the_web_and_is_told(app, alice):
    convo = alice.new_conversation()
    response = alice.htmx_post(f"/c/{convo}/delete")
    assert response.status_code == 204 and response.headers["HX-Redirect"] == "/"
    assert stored(app, convo)[1] is not None
    assert "Conversation deleted." in alice.client.get("/").get_data(as_text=True)
    plain = alice.client.post(f"/c/{alice.new_conversation()}/delete", headers={"X-CSRFToken": alice.csrf})
    assert plain.status_code == 302 and plain.headers["Location"] == "/"


def test_deleting_without_the_csrf_token_deletes_nothing(app, alice):
    convo = alice.new_conversation()
    response = alice.client.post(f"/c/{convo}/delete")
    assert response.status_code == 400
    assert stored(app, convo)[1] is None


def test_an_agent_token_may_not_delete(app, api):
    convo = conversation_of(app, "alice@example.com", "Mine")
    response = api("alice-agent").delete(f"/api/conversations/{convo}")
    assert response.status_code == 403 and response.get_json()["error"] == "AgentCannotManage"
    assert stored(app, convo)[1] is None


# --- a deleted conversation's cards and turns ----------------------------------------------------


def test_deleting_ends_a_waiting_card_cancelled_audited_and_it_cannot_be_answered(app, alice, posts, handle_calls):
    convo = alice.new_conversation()
    approval, token = alice.card(alice.say(convo, f"/delete_post post={posts['Spring meetup']}"))
    response = alice.htmx_post(f"/c/{convo}/delete")
    assert response.status_code == 204
    with app.app_context():
        card = db.session.get(Approval, approval)
        assert card.status == Status.CANCELLED and card.decided_at is not None
        run = db.session.get(Run, card.run_id)
        assert run.status == RunStatus.STOPPED  # nothing resumes it
        rows = db.session.scalars(sa.select(AuditEvent).where(AuditEvent.approval_id == approval).order_by(AuditEvent.id))
        assert [(r.outcome, r.detail) for r in rows][-1] == ("cancelled", "delete_post conversation deleted")
        deleted = sa.select(sa.func.count()).select_from(AuditEvent).where(AuditEvent.event == "conversation.deleted")
        assert db.session.scalar(deleted) == 1
    page = alice.client.get(f"/approvals/{approval}").get_data(as_text=True)
    assert "Set aside — nothing ran" in page and "Its conversation was deleted." in page
    assert "Open the conversation" not in page and 'name="token"' not in page
    answered = alice.answer(approval, token, "confirm")
    assert answered.status_code == 409  # already decided (cancelled): nothing ran
    assert handle_calls["n"] == 0
    with app.app_context():
        assert db.session.get(Post, posts["Spring meetup"]) is not None
        assert db.session.get(Approval, approval).status == Status.CANCELLED


def test_a_deleted_conversations_cancelled_cards_are_listed_in_the_api_answer(app, api, posts):
    alice = api("alice")
    convo = alice.post("/api/conversations").get_json()["id"]
    body = alice.post(f"/api/conversations/{convo}/messages", {"text": f"/delete_post post={posts['Launch notes']}"}).get_json()
    (prompt,) = body["pending"]
    response = alice.delete(f"/api/conversations/{convo}")
    assert response.get_json() == {"id": convo, "deleted": True, "cancelled": [prompt["id"]]}
    assert alice.post(f"/api/approvals/{prompt['id']}/confirm", {"token": prompt["token"]}).status_code == 409
    assert alice.get("/api/approvals").get_json()["approvals"] == []


@pytest.mark.parametrize("status", [RunStatus.RUNNING, RunStatus.QUEUED])
def test_deleting_is_refused_while_a_turn_is_going(app, alice, api, status):
    convo = conversation_of(app, "alice@example.com", "Busy")
    with app.app_context():
        db.session.add(Run(conversation_id=convo, status=status))
        db.session.commit()
    response = api("alice").delete(f"/api/conversations/{convo}")
    assert response.status_code == 409 and "stop it" in response.get_json()["message"]
    web = alice.htmx_post(f"/c/{convo}/delete")
    assert web.status_code == 409 and "stop it" in web.get_data(as_text=True)
    assert stored(app, convo)[1] is None
    with app.app_context():
        db.session.execute(sa.update(Run).where(Run.conversation_id == convo).values(status=RunStatus.STOPPED))
        db.session.commit()
    assert api("alice").delete(f"/api/conversations/{convo}").status_code == 200


def test_deleting_twice_is_404(app, api):
    convo = conversation_of(app, "alice@example.com")
    assert api("alice").delete(f"/api/conversations/{convo}").status_code == 200
    assert api("alice").delete(f"/api/conversations/{convo}").status_code == 404


# --- search ---------------------------------------------------------------------------------------


def test_search_finds_titles_and_words_of_the_persons_own_conversations_only(app, alice, api):
    conversation_of(app, "alice@example.com", "Budget 2027")
    conversation_of(app, "alice@example.com", "Weekly", ["what about the BUDGET?"])
    conversation_of(app, "alice@example.com", "Unrelated", ["lunch"])
    conversation_of(app, "bob@example.com", "Bob's budget", ["budget"])
    conversation_of(app, "admin@example.com", "Admin budget", ["budget"])
    conversation_of(app, "carol@example.com", "Globex budget", ["budget"])
    conversation_of(app, "alice@example.com", "Filed elsewhere budget", tenant="globex")
    assert titles(api("alice").get("/api/conversations", q="budget")) == ["Weekly", "Budget 2027"]
    assert web_titles(alice.client.get("/", query_string={"q": "budget"}).get_data(as_text=True)) == ["Weekly", "Budget 2027"]
    assert titles(api("bob").get("/api/conversations", q="budget")) == ["Bob's budget"]
    assert titles(api("carol").get("/api/conversations", q="budget")) == ["Globex budget"]


def test_an_agent_token_may_search_its_persons_conversations(app, api):
    conversation_of(app, "alice@example.com", "Budget 2027")
    conversation_of(app, "bob@example.com", "Bob's budget")
    assert titles(api("alice-agent").get("/api/conversations", q="budget")) == ["Budget 2027"]


@pytest.mark.parametrize(
    ("query", "found"),
    [("%", ["100% sure"]), ("_", ["snake_case"]), ("0%", ["100% sure"]), ("e_c", ["snake_case"]), ("\\", ["back\\slash"])],
)
def test_search_takes_like_wildcards_literally(app, api, query, found):
    for title in ("100% sure", "100 sure", "snake_case", "snakexcase", "back\\slash", "backslash"):
        conversation_of(app, "alice@example.com", title)
    assert titles(api("alice").get("/api/conversations", q=query)) == found


def test_search_as_the_person_types_swaps_the_list(app, alice):
    conversation_of(app, "alice@example.com", "Budget 2027")
    conversation_of(app, "alice@example.com", "Lunch")
    response = alice.client.get("/", query_string={"q": "budg"}, headers={"HX-Request": "true"})
    html = response.get_data(as_text=True)
    assert response.status_code == 200 and html.lstrip().startswith('<div id="conversation-list"')
    assert web_titles(html) == ["Budget 2027"] and "HX-Request" in response.headers["Vary"]
    none = alice.client.get("/", query_string={"q": "nothing like it"}, headers={"HX-Request": "true"})
    assert "No conversation of yours holds “nothing like it”." in none.get_data(as_text=True)


def test_a_search_for_markup_is_shown_as_text(app, alice):
    html = alice.client.get("/", query_string={"q": "<img src=x onerror=alert(1)>"}).get_data(as_text=True)
    assert "<img src=x" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html


# --- a message's time, and the places that start conversations on their own ----------------------


def test_every_message_shows_its_time_in_utc_and_a_copy_button(app, alice):
    convo = alice.new_conversation()
    alice.say(convo, "hello there")
    html = alice.client.get(f"/c/{convo}").get_data(as_text=True)
    with app.app_context():
        said = db.session.scalars(sa.select(Message).where(Message.conversation_id == convo).order_by(Message.id)).all()
    assert len(said) == 2
    for message in said:
        stamp = message.created_at.strftime("%Y-%m-%dT%H:%M:%SZ")
        assert f'<time datetime="{stamp}">{message.created_at.strftime("%d %b %Y %H:%M")} UTC</time>' in html
    assert html.count('data-copy title="Copy the words to the clipboard">Copy</button>') == 2


def test_an_mcp_clients_deleted_conversation_is_not_written_into_again(app, api):
    from app.copilot import call_direct
    from app.copilot.approvals import Actor

    with app.app_context():
        user = db.session.scalar(sa.select(User).where(User.email == "alice@example.com"))
        actor = Actor(user=user, binding="pat:1", channel="mcp", agent=True)
        call_direct(actor, "list_posts", {})
        first = db.session.scalar(sa.select(Conversation.id).where(Conversation.channel_key == "mcp"))
    assert api("alice").delete(f"/api/conversations/{first}").status_code == 200
    with app.app_context():
        user = db.session.scalar(sa.select(User).where(User.email == "alice@example.com"))
        call_direct(Actor(user=user, binding="pat:1", channel="mcp", agent=True), "list_posts", {})
        ids = db.session.scalars(sa.select(Conversation.id).where(Conversation.title == "mcp client")).all()
        assert len(ids) == 2
        assert db.session.scalar(sa.select(sa.func.count()).select_from(Run).where(Run.conversation_id == first)) == 1


def mcp_call(app, email="alice@example.com"):
    """One MCP client call of list_posts as the person; the conversation its run landed in."""
    from app.copilot import call_direct
    from app.copilot.approvals import Actor

    with app.app_context():
        user = db.session.scalar(sa.select(User).where(User.email == email))
        call_direct(Actor(user=user, binding="pat:1", channel="mcp", agent=True), "list_posts", {})
        return db.session.scalar(sa.select(Run.conversation_id).order_by(Run.id.desc()).limit(1))


def test_a_conversation_the_person_renames_mcp_client_does_not_receive_mcp_calls(app, api):
    own = conversation_of(app, "alice@example.com", title="Planning")
    assert api("alice").patch(f"/api/conversations/{own}", {"title": "mcp client"}).status_code == 200
    landed = mcp_call(app)
    assert landed != own
    with app.app_context():
        assert db.session.scalar(sa.select(sa.func.count()).select_from(Run).where(Run.conversation_id == own)) == 0


def test_mcps_own_conversation_renamed_still_receives_its_calls(app, api):
    first = mcp_call(app)
    assert api("alice").patch(f"/api/conversations/{first}", {"title": "Agent work"}).status_code == 200
    assert mcp_call(app) == first
    with app.app_context():
        assert db.session.get(Conversation, first).channel_key == "mcp"


def test_each_person_has_their_own_mcp_conversation(app):
    assert mcp_call(app, "alice@example.com") != mcp_call(app, "bob@example.com")


def test_a_message_for_a_conversation_deleted_since_it_was_looked_up_is_refused_whole(app):
    """A request that found the conversation before its deletion cannot queue a turn in it after:
    queuing checks (and locks) the row again; the words are refused with a 404, not kept unseen."""
    from app import copilot
    from app.copilot import conversations
    from app.copilot.approvals import Actor
    from app.errors import NotFound

    convo = conversation_of(app, "alice@example.com", "Going away")
    with app.app_context():
        found = db.session.get(Conversation, convo)
        actor = Actor(user=found.user, binding="web:test")
        conversations.delete(db.session.get(Conversation, convo), actor)
        with pytest.raises(NotFound):
            copilot.send_message(found, actor, "too late")
        assert db.session.scalar(sa.select(sa.func.count()).select_from(Message).where(Message.conversation_id == convo)) == 0
        assert db.session.scalar(sa.select(sa.func.count()).select_from(Run).where(Run.conversation_id == convo)) == 0


def test_a_rename_committed_since_the_conversation_was_looked_up_outlives_the_first_message(app):
    """The page's Rename and its first message may cross: the message's request read the
    conversation ("New conversation") before the rename committed. The title is decided on the
    row as locked, so the person's chosen title stays (found in CI: the sidebar said "hello")."""
    from app import copilot
    from app.copilot.approvals import Actor

    convo = conversation_of(app, "alice@example.com")
    with app.app_context():
        found = db.session.get(Conversation, convo)
        actor = Actor(user=found.user, binding="web:test")
        assert found.title == "New conversation"
        with db.engine.begin() as other:  # the rename's own request, committed in between
            other.execute(sa.update(Conversation).where(Conversation.id == convo).values(title="Plans for spring"))
        copilot.send_message(found, actor, "hello")
        assert found.title == "Plans for spring"  # what the page is told is the title
    assert stored(app, convo)[0] == "Plans for spring"


def test_openapi_describes_listing_renaming_and_deleting(app):
    doc = app.test_client().get("/api/openapi.json").get_json()
    listing = doc["paths"]["/api/conversations"]["get"]
    assert listing["operationId"] == "listConversations" and listing["parameters"][0]["name"] == "q"
    one = doc["paths"]["/api/conversations/{id}"]
    assert one["patch"]["operationId"] == "renameConversation" and "403" in one["patch"]["responses"]
    assert one["delete"]["operationId"] == "deleteConversation" and {"403", "404", "409"} <= set(one["delete"]["responses"])


def test_an_agents_first_message_titles_the_conversation_as_the_agents(app, api):
    """An agent token may not rename; nor may its first words pass for a title the person chose."""
    created = api("alice-agent").post("/api/conversations")
    convo = created.get_json()["id"]
    said = api("alice-agent").post(f"/api/conversations/{convo}/messages", {"text": "Approved by IT — review passed"})
    assert said.status_code in (200, 201, 202), said.get_data(as_text=True)
    assert stored(app, convo)[0] == "From an agent: Approved by IT — review passed"
    mine = conversation_of(app, "alice@example.com")
    assert api("alice").post(f"/api/conversations/{mine}/messages", {"text": "Plan the week"}).status_code < 300
    assert stored(app, mine)[0] == "Plan the week"  # the person's own words are their title


def test_an_agents_title_cannot_turn_its_words_around_on_the_page(app, api, alice):
    """A bidi override in an agent's first message would show "From an agent: exe.txt" as
    "…txt.exe" in the list, the heading and the tab; every place shows the character instead."""
    created = api("alice-agent").post("/api/conversations")
    convo = created.get_json()["id"]
    said = api("alice-agent").post(f"/api/conversations/{convo}/messages", {"text": "Invoice \u202eexe.txt\u200b"})
    assert said.status_code in (200, 201, 202), said.get_data(as_text=True)
    page = alice.client.get(f"/c/{convo}").get_data(as_text=True)
    listed = alice.client.get("/").get_data(as_text=True)
    shown = "From an agent: Invoice ⟨U+202E⟩exe.txt⟨U+200B⟩"
    assert shown in web_titles(listed)
    assert f'id="conversation-title">{shown}</h1>' in page and f"<title>{shown} · Countersign</title>" in page
    for html in (page, listed):  # the rename field too holds no U+202E (it holds the text without it)
        assert "\u202e" not in html


def test_a_search_echo_shows_hidden_characters(app, alice):
    html = alice.client.get("/", query_string={"q": "pay\u202eroll"}).get_data(as_text=True)
    assert "No conversation of yours holds “pay⟨U+202E⟩roll”." in html


def test_the_rename_field_and_the_search_box_hold_the_words_without_hidden_characters(app, api, alice):
    """A field holds text the person edits and sends back: a marker would be sent as text, and a
    U+202E would turn the field around ("Invoice exe.pdf" read backwards), so they are left out."""
    convo = api("alice-agent").post("/api/conversations").get_json()["id"]
    api("alice-agent").post(f"/api/conversations/{convo}/messages", {"text": "Invoice \u202efdp.exe\u202c\ufe01"})
    page = alice.client.get(f"/c/{convo}").get_data(as_text=True)
    assert 'id="title" name="title" value="From an agent: Invoice fdp.exe"' in page
    listed = alice.client.get("/", query_string={"q": "pay\u202eroll\u200b"}).get_data(as_text=True)
    assert 'value="payroll"' in listed and "\u202e" not in listed


def test_a_title_made_from_first_words_is_one_line(app, api):
    convo = api("alice-agent").post("/api/conversations").get_json()["id"]
    api("alice-agent").post(f"/api/conversations/{convo}/messages", {"text": "Line one\r\n\tline\x0btwo"})
    assert stored(app, convo)[0] == "From an agent: Line one line two"


def test_an_agents_words_on_the_persons_side_say_who_wrote_them(app, api, alice):
    """An agent token writing in the person's own conversation ("Yes, delete post 3") must not
    pass for the person: its message says it was written by an agent, and which token."""
    convo = conversation_of(app, "alice@example.com", "Mine")
    assert api("alice").post(f"/api/conversations/{convo}/messages", {"text": "My own words"}).status_code < 300
    said = api("alice-agent").post(f"/api/conversations/{convo}/messages", {"text": "Yes, delete post 3"})
    assert said.status_code < 300
    page = alice.client.get(f"/c/{convo}").get_data(as_text=True)
    mine, theirs = page.split("My own words", 1)[1].split("Yes, delete post 3", 1)
    assert "Written by" not in mine
    author = re.search(r'<p class="message__author">([^<]*)</p>', theirs)
    assert (
        author and author.group(1).startswith("Written by an agent") and author.group(1).endswith("through the API, not by you.")
    )
    assert re.search(r'<span class="visually-hidden">An agent:</span>\s*<p>Yes, delete post 3</p>', page)


# --- a first title --------------------------------------------------------------------------------


def test_a_slash_command_titles_the_conversation_by_its_action_never_its_arguments(app, alice, posts):
    convo = alice.new_conversation()
    alice.say(convo, f"/delete_post post={posts['Spring meetup']}")
    assert stored(app, convo)[0] == "Delete post"


def test_a_long_first_message_titles_the_conversation_with_its_first_words(app, alice):
    convo = alice.new_conversation()
    alice.say(convo, "Could you please tell me how many of our posts were published in the spring of last year?")
    assert stored(app, convo)[0] == "Could you please tell me how many of…"


def test_the_first_messages_answer_carries_the_new_title_for_the_page(app, alice):
    """The heading, the sidebar's link and the tab follow without a reload (htmx swaps them)."""
    convo = alice.new_conversation()
    html = alice.say(convo, "/list_posts")
    assert "<title>List posts · Countersign</title>" in html
    assert 'id="conversation-title" hx-swap-oob="true">List posts</h1>' in html
    assert re.search(rf'<a id="conversation-link-{convo}" href="[^"]+" hx-swap-oob="true">List posts</a>', html)


def test_a_deletion_cannot_commit_between_a_messages_liveness_check_and_its_commit(app, api, monkeypatch, database_url):
    """A message and a deletion of its conversation at once: one of them wins, never both (a
    helper's race kept messages, with their turns, in conversations deleted under them: on
    SQLite the liveness check was a plain SELECT, which locks nothing). Right after the message's
    check, another connection tries the deletion's own conditional UPDATE without waiting: the
    database is locked until the message commits. (PostgreSQL's row lock: its own pass.)"""
    import sqlite3

    from app.copilot.turns import _runs

    with app.app_context():
        if db.engine.dialect.name != "sqlite":
            pytest.skip("SQLite's write lock: the SQLite pass")
    convo = conversation_of(app, "alice@example.com", "Titled already")  # (no title UPDATE before the check)
    real_hold_live, tried = _runs.hold_live, []

    def hold_live_then_delete_elsewhere(conversation_id: int) -> Any:
        held = real_hold_live(conversation_id)
        other = sqlite3.connect(database_url.removeprefix("sqlite:///"), timeout=0, isolation_level=None)
        try:
            other.execute("UPDATE conversations SET deleted_at = CURRENT_TIMESTAMP WHERE id = ?", (conversation_id,))
            tried.append("deleted")
        except sqlite3.OperationalError as error:
            tried.append(str(error))
        finally:
            other.close()
        return held

    monkeypatch.setattr(_runs, "hold_live", hold_live_then_delete_elsewhere)
    answer = api("alice").post(f"/api/conversations/{convo}/messages", {"text": "hello"})
    assert tried == ["database is locked"]
    assert answer.status_code in (200, 202), answer.get_json()
    assert stored(app, convo)[1] is None  # not deleted: the message won, and a deletion now sees its turn


def test_the_chat_pages_list_tells_two_conversations_of_the_same_title_apart_by_when(app, alice):
    # A helper saw two "hello" conversations side by side in the chat page's list, nothing else
    # to tell them apart (the conversations page showed when each began; this list did not).
    import re

    first, second = alice.new_conversation(), alice.new_conversation()
    for convo in (first, second):
        alice.say(convo, "hello")
    page = alice.client.get(f"/c/{second}").get_data(as_text=True)
    listed = re.findall(r'id="conversation-link-(\d+)"[^>]*>hello</a>\s*<time datetime="([^"]+)">', page)
    assert sorted(int(convo) for convo, _ in listed) == [first, second], listed
