"""What the tests of one process share gives each test what it would have made itself: the demo's
rows and files (tests/helpers/demo.py) are what `seed_demo` makes, row for row and file for file,
the URL builders the apps share (tests/helpers/routing.py) build what Werkzeug's own would, and
the engine they share (tests/helpers/engines.py) is the one their own options would make."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from werkzeug.routing import AnyConverter, IntegerConverter

import app as app_package
from app import create_app
from app.cli import seed_demo
from app.extensions import db
from app.models import Post, Tenant, User, UTCDateTime
from tests.conftest import base_config
from tests.helpers import routing
from tests.helpers.demo import empty_tables


def contents(files_root: Path) -> dict[str, object]:
    """Every table's rows (without ids, which a sequence hands out, or times), who belongs to
    which tenant and wrote which post, and every file."""
    tables: dict[str, object] = {}
    with db.engine.connect() as conn:
        for table in db.metadata.sorted_tables:
            kept = [c for c in table.columns if not (c.primary_key or c.foreign_keys or isinstance(c.type, UTCDateTime))]
            rows = conn.execute(sa.select(*kept) if kept else sa.select(sa.func.count()).select_from(table)).all()
            tables[table.name] = sorted(tuple(str(value) for value in row) for row in rows)
        tables["members"] = sorted(
            conn.execute(sa.select(User.email, Tenant.slug).join(Tenant, User.tenant_id == Tenant.id)).all()
        )
        tables["authors"] = sorted(
            conn.execute(
                sa.select(Post.title, User.email, Tenant.slug)
                .join(User, Post.author_id == User.id)
                .join(Tenant, Post.tenant_id == Tenant.id)
            ).all()
        )
    files = {str(path.relative_to(files_root)): path.read_bytes() for path in files_root.rglob("*") if path.is_file()}
    return {"tables": tables, "files": files}


def test_a_test_starts_from_what_seed_demo_makes(app, tmp_path):
    with app.app_context():
        copied = contents(Path(app.config["FILES_ROOT"]))
        empty_tables()
        app.config["FILES_ROOT"] = str(tmp_path / "seeded")
        seed_demo()
        db.session.remove()
        seeded = contents(tmp_path / "seeded")
    assert copied["files"] == seeded["files"] != {}
    assert copied["tables"] == seeded["tables"]
    assert len(seeded["tables"]["members"]) == 4 and len(seeded["tables"]["authors"]) == 2


def test_rows_added_after_the_copy_get_fresh_ids(app, add_post, posts):
    assert add_post("After the copy") > max(posts.values())


def sample(converter: object) -> object:
    """A value the converter takes: a number, one of its words, or text to quote."""
    if isinstance(converter, IntegerConverter):
        return 7
    if isinstance(converter, AnyConverter):
        return sorted(converter.items)[0]
    return "a b/c"


def test_every_url_an_app_builds_with_shared_builders_is_what_werkzeugs_own_would_build(app, database_url):
    other = create_app(base_config(database_url))
    rules = {(rule.endpoint, rule.rule): rule for rule in other.url_map.iter_rules()}
    assert len(rules) > 50
    for rule in app.url_map.iter_rules():
        assert rules[rule.endpoint, rule.rule]._build.__func__ is rule._build.__func__  # shared, not compiled again
        values = {name: sample(c) for name, c in rule._converters.items()}
        for unknown in (False, True):
            own = routing._compile(rule, unknown).__get__(rule, None)
            shared = rule._build_unknown if unknown else rule._build
            extra = {"next": "/x?y=1"} if unknown else {}
            assert shared(**values, **extra) == own(**values, **extra), rule.rule


def test_apps_with_the_same_engine_options_share_one_engine_set_up_once(database_url):
    first, second = create_app(base_config(database_url)), create_app(base_config(database_url))
    other = create_app(base_config(database_url, SQLALCHEMY_ENGINE_OPTIONS={"pool_size": 3}))
    engines = []
    for made in (first, second, other):
        with made.app_context():
            engines.append(db.engine)
    assert engines[0] is engines[1] and engines[2] is not engines[0]
    assert engines[2].pool.size() == 3 and engines[0].pool.size() != 3  # each the engine its options make
    with second.app_context():
        with db.engine.connect() as conn:
            if database_url.startswith("sqlite"):  # the WAL and foreign keys of every connection, once
                assert list(db.engine.pool.dispatch.connect).count(app_package._on_connect) == 1
                assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
                assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        db.engine.dispose()
    with other.app_context():
        db.engine.dispose()
