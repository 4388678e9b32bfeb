"""The demo's actions, one per module. Discovered at start by app.copilot.actions.discover."""
