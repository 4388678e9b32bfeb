"""The engine: actions, approvals and the agent loop. No Flask request, no templates."""
