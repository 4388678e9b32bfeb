"""The domain errors a person, an API client or the model can meet."""

from __future__ import annotations


class CountersignError(Exception):
    """Base of every domain error; carries the HTTP status and a plain message."""

    status = 400
    message = "Something went wrong."

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or self.message)
        self.message = message or self.message


class NotFound(CountersignError):
    """The record does not exist in the person's tenant (or at all)."""

    status = 404
    message = "Not found."


class BadToken(CountersignError):
    """The approval token is malformed, forged or names another approval."""

    status = 400
    message = "This confirmation link is not valid. Open the card again."


class WrongPerson(CountersignError):
    """The approval belongs to another person or another session."""

    status = 403
    message = "This card was shown to someone else, or in another session."


class AlreadyDecided(CountersignError):
    """The approval was already answered or claimed; nothing ran again."""

    status = 409
    message = "This card was already answered. Nothing ran again."


class Expired(CountersignError):
    """The approval or its token is past its time limit; nothing ran."""

    status = 410
    message = "This card has expired. Nothing was done."


class TooManyPending(CountersignError):
    """The run, or the person across their runs, already holds as many pending approvals as allowed."""

    status = 429
    message = "Too many requests are waiting for an answer."


class CrossSite(CountersignError):
    """A state-changing request came from another site; nothing read it."""

    status = 403
    message = "This request came from another site and was refused."


class BadValues(CountersignError):
    """Submitted values do not fit the action's schema."""

    status = 400
    message = "Some values are not valid."


class ActionDeclarationError(Exception):
    """An action in app/actions is declared wrongly; raised at start with the fix."""


class ServiceUnavailable(CountersignError):
    """A backing service (database, Redis) did not answer; nothing was changed."""

    status = 503
    message = "The service is briefly unavailable. Nothing was changed; please try again."


class WouldWait(CountersignError):
    """A request that may not wait for a lock (on the ASGI process's loop) found one held; nothing was kept."""

    status = 503
    message = "The conversation is busy. Nothing was kept; please try again."


class FormInvalid(BadValues):
    """Submitted form values failed validation; the errors are per field."""

    message = "Some fields need another look."

    def __init__(self, fields: dict[str, list[str]]) -> None:
        super().__init__()
        self.fields = fields


class AgentCannotAnswer(CountersignError):
    """An agent-scoped credential tried to answer a card or a form; only the person can."""

    status = 403
    message = "This credential acts for an agent; only the person can answer a card — open it in Countersign."


class OutsideToolsets(CountersignError):
    """The credential's toolsets do not reach this card's action."""

    status = 403
    message = "This credential's toolsets do not reach this card's action; nothing was done."


class UnstorableText(BadValues):
    """Text holds a character no database here can store (NUL, a lone surrogate); nothing was saved."""

    message = "This text holds a character that cannot be stored."


class MessageTooLong(CountersignError):
    """A message is over MESSAGE_MAX_CHARS; refused whole rather than cut."""

    status = 413

    def __init__(self, limit: int, length: int) -> None:
        super().__init__(
            f"Messages are limited to {limit} characters; this one has {length}. Nothing was sent: shorten it and send it again."
        )
        self.limit = limit


class BadJson(BadValues):
    """A request body is not JSON we accept (malformed, too deep, NaN or Infinity, not UTF-8)."""

    message = "The body is not valid JSON."


class TooManyAttempts(CountersignError):
    """Too many requests or failed sign-ins; try again after the delay it names."""

    status = 429

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class PathRefused(NotFound):
    """A file path the action will not act on as asked (a link, a folder for a file); nothing was done."""

    message = "That path cannot be used for this."


class PartlyDone(CountersignError):
    """handle() stopped partway; its message says exactly what was and was not done."""

    status = 500
    prefix = "Partly done: "

    def __init__(self, message: str) -> None:
        super().__init__(self.prefix + message)


class FormNeedsCard(FormInvalid):
    """Form values would turn the call into one that needs a card, which a form never gives."""

    message = (
        "These values need the person's confirmation on a card, which a form cannot give. "
        "Nothing ran: choose other values, or ask for it in the chat."
    )

    def __init__(self) -> None:
        super().__init__({})


class ConversationBusy(CountersignError):
    """A turn of the conversation is queued or running (or a card's action is running); it was not deleted."""

    status = 409
    message = "A turn is still running in this conversation: stop it (or let it finish), then delete the conversation."


class AgentCannotManage(CountersignError):
    """An agent-scoped credential tried to rename or delete a conversation; only the person can."""

    status = 403
    message = "This credential acts for an agent; only the person can rename or delete a conversation."


class AgentNotItsTurn(CountersignError):
    """An agent-scoped credential tried to retry or stop a turn it did not start (the person's, or
    another credential's); it may retry or stop only its own."""

    status = 403
    message = "This credential acts for an agent; it may retry or stop only the turns it started itself, never the person's."


class OwnCountersign(WrongPerson):
    """The person who asked (and confirmed) tried to give the second signature too."""

    message = "You asked for this: a second, different person must countersign it."


class NeedsSecondSignature(CountersignError):
    """A card that needs two signatures was answered where neither can be given (a chat reply)."""

    status = 403
    message = "This needs two signatures, and each is given in Countersign, signed in. Nothing was done."
