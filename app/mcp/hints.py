"""MCP's tool hints (annotations), by the action's kind: what an MCP client may show before a call."""

from __future__ import annotations

import mcp_types as types

from app.copilot.actions import Kind

ANNOTATIONS = {
    Kind.READ: types.ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False),
    Kind.WRITE: types.ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False),
    Kind.DESTRUCTIVE: types.ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False),
    Kind.EXTERNAL: types.ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=True),
}
