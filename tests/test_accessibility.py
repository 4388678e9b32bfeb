"""Accessible, measured (issue 17): axe-core, pinned in package.json and installed from the npm
registry by scripts/setup (`npm ci`), runs in Chromium on the pages people use; no serious or
critical violation may stand. The others are printed (run with -s to read them)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import sqlalchemy as sa
from playwright.sync_api import expect

from app.extensions import db
from app.models import Approval
from tests.helpers.browser import LONG, ask, composer_done, sign_in_and_open_chat

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parent.parent
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
BLOCKING = ("serious", "critical")

RUN_AXE = """async () => {
  const results = await axe.run(document, {resultTypes: ["violations", "incomplete"]});
  return {
    version: axe.version,
    rules: axe.getRules().length,
    applied: results.passes.length + results.violations.length + results.incomplete.length,
    incomplete: results.incomplete.map(v =>
      v.id + " (" + v.nodes.length + ": " + v.nodes.slice(0, 3).map(n => n.target.join(" ")).join(", ") + ")"),
    violations: results.violations.map(v => ({
      id: v.id, impact: v.impact, help: v.help,
      nodes: v.nodes.slice(0, 5).map(n => n.target.join(" ") + " :: " + n.failureSummary.replace(/\\s+/g, " ")),
    })),
  };
}"""


def axe_source() -> str:
    if not AXE.exists():
        pytest.fail(f"{AXE.relative_to(ROOT)} is missing: run ./scripts/setup (npm ci installs the pinned axe-core)")
    return AXE.read_text()


def audit(page, name: str) -> dict:
    """Inject axe (through the DevTools protocol: the page's CSP allows no inline script) and run
    it; print every violation; return the results."""
    page.evaluate(axe_source())
    results = page.evaluate(RUN_AXE)
    print(f"\naxe {results['version']} on {name}: {results['applied']} of {results['rules']} rules applied")
    if results["incomplete"]:
        print(f"  to check by hand: {', '.join(results['incomplete'])}")
    for v in results["violations"]:
        print(f"  {v['impact']}: {v['id']} — {v['help']}")
        for node in v["nodes"]:
            print(f"      {node}")
    return results


def assert_none_blocking(results: dict, name: str) -> None:
    blocking = [v for v in results["violations"] if v["impact"] in BLOCKING]
    assert not blocking, f"{name}: serious/critical axe violations:\n" + json.dumps(blocking, indent=1, ensure_ascii=False)


def test_axe_is_the_pinned_version_from_package_json():
    pinned = json.loads((ROOT / "package.json").read_text())["dependencies"]["axe-core"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", pinned), "axe-core is pinned exactly"
    locked = json.loads((ROOT / "package-lock.json").read_text())["packages"]["node_modules/axe-core"]["version"]
    assert locked == pinned and f"axe v{pinned}" in axe_source()[:200]


def test_sign_in_page_has_no_serious_violations(page, server):
    page.goto(f"{server}/login")
    assert_none_blocking(audit(page, "sign-in"), "sign-in")


def test_chat_page_with_a_card_and_a_form_has_no_serious_violations(page, server, posts):
    sign_in_and_open_chat(page, server)
    ask(page, f"/delete_post post={posts['Spring meetup']}")
    page.locator(".card").last.get_by_role("button", name="Confirm").wait_for()
    composer_done(page, 1)  # (the card can come over the events before the POST's answer clears the box)
    ask(page, '/draft_post title="Launch notes"')
    page.locator(".card--form").last.get_by_label("Body").wait_for()
    page.locator(".message__meta time[data-local]").first.wait_for()
    assert page.locator(".card--pending").count() == 2
    assert_none_blocking(audit(page, "chat (card + form)"), "chat page")
    page.locator("details.manage summary").click()  # the rename and delete forms, open
    assert_none_blocking(audit(page, "chat (rename/delete open)"), "chat page, manage open")
    page.locator(".card").first.get_by_role("button", name="Confirm").click()  # a decided card, and a reply
    page.locator(".card__outcome").first.wait_for()
    assert_none_blocking(audit(page, "chat (card decided)"), "chat page, card decided")


def test_chat_page_on_a_phone_has_no_serious_violations(browser, server, posts):
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    phone = context.new_page()
    phone.set_default_timeout(LONG)
    try:
        sign_in_and_open_chat(phone, server)
        ask(phone, f"/delete_post post={posts['Spring meetup']}")
        phone.locator(".card").last.get_by_role("button", name="Confirm").wait_for()
        assert_none_blocking(audit(phone, "chat on a phone"), "chat on a phone")
    finally:
        context.close()


def test_conversation_list_has_no_serious_violations(app, page, server):
    sign_in_and_open_chat(page, server)
    ask(page, "hello")
    page.goto(f"{server}/")
    page.get_by_role("searchbox", name="Search your conversations").wait_for()
    assert_none_blocking(audit(page, "conversation list"), "conversation list")


def test_approval_page_has_no_serious_violations(app, page, server, posts):
    sign_in_and_open_chat(page, server)
    ask(page, f"/delete_post post={posts['Launch notes']}")
    page.locator(".card").last.get_by_role("button", name="Confirm").wait_for()
    with app.app_context():
        approval = db.session.scalar(sa.select(Approval.id).order_by(Approval.created_at.desc()).limit(1))
    page.goto(f"{server}/approvals/{approval}")
    page.get_by_role("button", name="Confirm").wait_for()
    assert_none_blocking(audit(page, "approval page"), "approval page")


def signed_in_admin(browser, server):
    """A browser context of its own with admin@example.com signed in: (the context, its page)."""
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    admin = context.new_page()
    admin.set_default_timeout(LONG)
    admin.goto(f"{server}/login")
    admin.get_by_label("Email").fill("admin@example.com")
    admin.get_by_label("Password").fill("demo")
    admin.get_by_role("button", name="Sign in").click()
    admin.wait_for_url(f"{server}/")
    return context, admin


def test_admin_token_pages_have_no_serious_violations(browser, server):
    """The new token (its secret shown once), the revoke question, and the list after a revoke."""
    context, admin = signed_in_admin(browser, server)
    try:
        admin.goto(f"{server}/admin/tokens")
        admin.get_by_label("Person", exact=True).select_option(label="alice@example.com")
        admin.get_by_label("Name", exact=True).fill("laptop")
        admin.get_by_role("radio", name=re.compile("^client")).check()
        admin.get_by_role("checkbox", name="blog").check()
        admin.get_by_role("button", name="Create token").click()
        expect(admin.get_by_label("Token", exact=True)).to_have_value(re.compile("^cs_"), timeout=LONG)
        assert_none_blocking(audit(admin, "admin new token"), "admin new token")
        admin.goto(f"{server}/admin/tokens")
        admin.get_by_role("link", name=re.compile("^Revoke token .* of alice@example.com")).click()
        admin.get_by_label(re.compile("^Reason")).wait_for()
        assert_none_blocking(audit(admin, "admin revoke token"), "admin revoke token")
        admin.get_by_label(re.compile("^Reason")).fill("lost laptop")
        admin.get_by_role("button", name=re.compile("^Revoke token")).click()
        expect(admin.locator(".flash")).to_contain_text("Revoked token", timeout=LONG)
        assert_none_blocking(audit(admin, "admin tokens after a revoke"), "admin tokens after a revoke")
    finally:
        context.close()


def test_admin_console_has_no_serious_violations(app, browser, page, server, posts):
    sign_in_and_open_chat(page, server)  # alice leaves a card waiting, so the console has a row
    ask(page, f"/delete_post post={posts['Spring meetup']}")
    page.locator(".card").last.get_by_role("button", name="Confirm").wait_for()
    context, admin = signed_in_admin(browser, server)
    try:
        pages = (("/admin/", "admin approvals"), ("/admin/audit", "admin audit log"), ("/admin/tokens", "admin tokens"))
        for path, name in pages:
            admin.goto(f"{server}{path}")
            admin.locator("h1").first.wait_for()
            assert_none_blocking(audit(admin, name), name)
    finally:
        context.close()


def test_the_check_finds_what_it_is_for(page, server):
    """A field without a label and an image without a text are critical: the check above can fail."""
    page.goto(f"{server}/login")
    page.evaluate("""() => {
      const main = document.getElementById("main");
      main.insertAdjacentHTML("beforeend", '<input id="unlabelled"><img src="/static/none.png">');
    }""")
    found = {v["id"]: v["impact"] for v in audit(page, "sign-in, broken on purpose")["violations"]}
    assert found.get("label") == "critical" and found.get("image-alt") == "critical"
    with pytest.raises(AssertionError, match="serious/critical"):
        assert_none_blocking({"violations": [{"id": "label", "impact": "critical"}]}, "broken")
