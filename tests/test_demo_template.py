"""Each test starts from a copy of the demo's rows and files (tests/helpers/demo.py): the copy is
what `seed_demo` itself makes, row for row and file for file."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa

from app.cli import seed_demo
from app.extensions import db
from app.models import Post, Tenant, User, UTCDateTime
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
