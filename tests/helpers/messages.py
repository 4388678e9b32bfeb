"""What a message's refusal says, as every way in (the web, the API, the chat services) says it."""

from __future__ import annotations

# The refusal of a message one character over the limit (4000 characters by default).
LIMIT = "Messages are limited to 4000 characters; this one has 4001. Nothing was sent: shorten it and send it again."
