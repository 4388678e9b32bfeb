"""The tables (SQLAlchemy 2, typed): tenants and people, conversations, runs, approvals, the
audit log, the connectors' identities and threads, and the demo's own records."""

from app.models._audit import AuditEvent, AuditHead, AuditMark
from app.models._base import ROW_ID_MAX, Model, UTCDateTime, new_id, utcnow
from app.models._chat import Approval, Conversation, Message, Run
from app.models._connectors import ConnectorIdentity, ConnectorThread, LinkCode
from app.models._demo import OutboxEmail, Post, ProbeRow
from app.models._people import ApiToken, Tenant, User, UserSession

__all__ = [
    "ROW_ID_MAX",
    "ApiToken",
    "Approval",
    "AuditEvent",
    "AuditHead",
    "AuditMark",
    "ConnectorIdentity",
    "ConnectorThread",
    "Conversation",
    "LinkCode",
    "Message",
    "Model",
    "OutboxEmail",
    "Post",
    "ProbeRow",
    "Run",
    "Tenant",
    "UTCDateTime",
    "User",
    "UserSession",
    "new_id",
    "utcnow",
]
