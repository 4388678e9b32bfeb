import pytest


@pytest.fixture
def copilot_config():
    return {"ACTIONS_PACKAGE": "tests.guide.actions", "COUNTERSIGN_TOOLSETS": ["blog"]}
