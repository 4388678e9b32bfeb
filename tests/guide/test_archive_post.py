from app.copilot.kit import actions_contract_test
from tests.guide.actions.archive_post import ArchivePost


def test_archive_post(copilot):
    copilot.as_person("alice@example.com").chat("/archive_post post=2")
    card = copilot.pending()
    assert card.reason == "Archive this post? Readers will no longer see it."
    assert card.rows == {"Post": "Launch notes", "Status": "published"}
    assert copilot.calls(ArchivePost) == 0  # nothing runs before the confirm
    assert copilot.as_person("bob@example.com") and card.confirm() == "wrong_person"
    assert copilot.as_person("alice@example.com") and card.confirm() == "done"
    assert card.confirm() == "already_decided" and copilot.calls(ArchivePost) == 1


def test_archive_post_expires(copilot):
    copilot.as_person("alice@example.com").chat("/archive_post post=2")
    card = copilot.pending()
    copilot.clock.advance(31 * 60)
    assert card.confirm() == "expired" and copilot.calls(ArchivePost) == 0


test_archive_post_contract = actions_contract_test("tests.guide.actions")
