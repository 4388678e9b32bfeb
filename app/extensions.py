"""Unbound extension instances; create_app binds them to an app."""

from __future__ import annotations

import logging

import redis
import sqlalchemy as sa
from flask import Flask, current_app
from flask_limiter import Limiter
from flask_limiter.util import get_remote_address
from flask_login import LoginManager
from flask_migrate import Migrate
from flask_sqlalchemy import SQLAlchemy
from flask_wtf.csrf import CSRFProtect
from htmx_flask import Htmx
from sqlalchemy.orm import DeclarativeBase

log = logging.getLogger(__name__)


class Base(DeclarativeBase):
    metadata = sa.MetaData(
        naming_convention={
            "ix": "ix_%(column_0_label)s",
            "uq": "uq_%(table_name)s_%(column_0_name)s",
            "ck": "ck_%(table_name)s_%(constraint_name)s",
            "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
            "pk": "pk_%(table_name)s",
        }
    )


db = SQLAlchemy(model_class=Base)
migrate = Migrate()
login = LoginManager()
csrf = CSRFProtect()
htmx = Htmx()
limiter = Limiter(key_func=get_remote_address, default_limits=[])


class RedisClient:
    """redis-py bound to REDIS_URL, or fakeredis in-process when it is unset."""

    def init_app(self, app: Flask) -> None:
        url = app.config.get("REDIS_URL")
        if url:
            client = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
        else:
            import fakeredis

            client = fakeredis.FakeRedis()
            log.warning("REDIS_URL is not set: using in-process fakeredis (one process only).")
        app.extensions["redis"] = client

    @property
    def client(self) -> redis.Redis:
        return current_app.extensions["redis"]


redis_client = RedisClient()
