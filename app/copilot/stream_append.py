"""Appending one event to a conversation's stream in one step (app.copilot.events.publish): a Lua
script on a Redis server, one EVALSHA an event; the same steps one by one on the embedded
fakeredis, which runs no Lua (one process, no race that matters: it is the demo's)."""

from __future__ import annotations

from functools import partial
from typing import Any

from flask import current_app

from app.extensions import redis_client

GONE = 0  # the script's answer when the event was to follow others and the stream is gone

# KEYS[1] is the stream. With an `unless` key (ARGV[5] is 1: KEYS[2]), nothing is appended while
# it exists (checked by Redis in the same step, so nothing is appended after it is set): false.
# With ARGV[8], the event follows others of the stream (a reply's next words): nothing is appended
# when the stream is gone (Redis came back empty, or it outlived its TTL): GONE. Else append, keep
# the stream ARGV[4] seconds more; then the keys after those: ARGV[6] of them are deleted (a
# pass's end forgets its heartbeat and its stop request), and with ARGV[7] the last one is set
# for that many seconds (a pass's start says it is alive).
SCRIPT = """
local unless = tonumber(ARGV[5])
if unless == 1 and redis.call('EXISTS', KEYS[2]) == 1 then return false end
if ARGV[8] == '1' and redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', 'type', ARGV[2], 'data', ARGV[3])
redis.call('EXPIRE', KEYS[1], ARGV[4])
local forget = tonumber(ARGV[6])
for i = 2 + unless, 1 + unless + forget do redis.call('DEL', KEYS[i]) end
if ARGV[7] ~= '' then redis.call('SET', KEYS[#KEYS], '1', 'EX', ARGV[7]) end
return id
"""


def appender() -> Any:
    """The append on this app's Redis: called with `keys` and `args` as SCRIPT reads them."""
    extensions = current_app.extensions
    if "events_append" not in extensions:
        client = redis_client.client
        extensions["events_append"] = (
            client.register_script(SCRIPT) if current_app.config.get("REDIS_URL") else partial(_steps, client)
        )
    return extensions["events_append"]


def _steps(client: Any, keys: list[str], args: list[Any]) -> Any:
    maxlen, type, data, ttl, unless, forget, alive, follows = args
    if unless and client.exists(keys[1]):
        return None
    if follows == 1 and not client.exists(keys[0]):
        return GONE
    event_id = client.xadd(keys[0], {"type": type, "data": data}, maxlen=maxlen, approximate=True)
    client.expire(keys[0], ttl)
    for name in keys[1 + unless : 1 + unless + forget]:
        client.delete(name)
    if alive != "":
        client.set(keys[-1], "1", ex=alive)
    return event_id
