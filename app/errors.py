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
    """The run already holds as many pending approvals as it may."""

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


class FormInvalid(BadValues):
    """Submitted form values failed validation; the errors are per field."""

    message = "Some fields need another look."

    def __init__(self, fields: dict[str, list[str]]) -> None:
        super().__init__()
        self.fields = fields
