"""Files in the workspace's own folder. A path is resolved without following any link, and the
card, the result and every error name it relative to that folder, never as a server path."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from flask import current_app
from pydantic import BaseModel, Field

from app.copilot.actions import Action, Kind, expose
from app.copilot.lookalike import name_warnings
from app.errors import NotFound, PartlyDone, PathRefused

LINK_NOTE = "a link: only the link is removed, never what it points to"


@dataclass(frozen=True)
class Entry:
    """A path inside the tenant's folder, found by lstat (links are never followed)."""

    root: Path
    parts: tuple[str, ...]
    mode: int
    size: int
    mtime: float

    @property
    def shown(self) -> str:
        return "/".join(self.parts) or "."

    @property
    def path(self) -> Path:
        return self.root.joinpath(*self.parts)

    @property
    def is_link(self) -> bool:
        return stat.S_ISLNK(self.mode)

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.mode)


@expose("files")
class ManageFiles(Action):
    """List, read or delete files in your workspace's folder."""

    kind = Kind.WRITE
    done_label = "Deleted"
    examples = [
        "/manage_files operation=delete path=reports/old.csv",
        "/manage_files operation=delete_folder path=reports",
        "list my files",
        "read a file",
        "delete a file",
    ]
    requires_approval = {
        "delete": "Delete the file at {path} on disk {disk}?",
        "delete_folder": "Delete the folder {path} and everything in it on disk {disk}?",
    }
    countersign = {"delete_folder": "admin"}  # a whole folder goes only once an admin countersigns too

    class Input(BaseModel):
        operation: Literal["list", "read", "delete", "delete_folder"]
        path: str = Field(default="", max_length=500, description="A path inside your folder")
        disk: Literal["local"] = "local"

    def approval_values(self, ctx, input):
        return {"path": self.target(ctx, input).shown}

    def approval_summary(self, ctx, input):
        entry = self.target(ctx, input)
        rows = {"Modified": _when(entry.mtime)}
        if entry.is_link:
            rows = {"Kind": LINK_NOTE, **rows}
        elif entry.is_dir:
            rows = {**_count(entry), **rows}
        else:
            rows = {"Size": f"{entry.size:,} bytes", **rows}
        warnings = name_warnings(entry.shown)
        return {**rows, "Warning": " ".join(warnings)} if warnings else rows

    def handle(self, ctx, input):
        entry = self.target(ctx, input)  # resolved again: act on exactly what the card named
        if input.operation == "list":
            names = [e.shown + (" (link, not followed)" if e.is_link else "") for e in _walk(entry) if not e.is_dir]
            return "Files:\n" + "\n".join(names) if names else "No files."
        if input.operation == "read":
            return _read(entry)
        if input.operation == "delete":
            _act(os.unlink, entry)  # on a link, unlinks the link itself
            return f"Deleted the link {entry.shown}; what it pointed to is kept." if entry.is_link else f"Deleted {entry.shown}."
        return _delete_folder(entry)

    def root(self, ctx) -> Path:
        return Path(current_app.config["FILES_ROOT"], ctx.tenant.slug).resolve()

    def target(self, ctx, input) -> Entry:
        """The entry this operation acts on, or PathRefused/NotFound saying why not (nothing done)."""
        entry = self.resolve(ctx, input.path)
        wanted = {"list": "folder", "read": "file", "delete": "file or link", "delete_folder": "folder"}[input.operation]
        if entry.is_link and input.operation != "delete":
            raise PathRefused(f"{entry.shown} is a link; links are never followed (delete removes the link itself).")
        if entry.is_dir != (wanted == "folder"):
            kind = "folder" if entry.is_dir else "file"
            raise PathRefused(f"{entry.shown} is a {kind}, and {input.operation} needs a {wanted}.")
        if input.operation == "read" and not stat.S_ISREG(entry.mode):
            raise PathRefused(f"{entry.shown} is not a regular file.")
        if input.operation == "delete_folder" and not entry.parts:
            raise PathRefused("Your whole folder cannot be deleted; name a folder inside it.")
        return entry

    def resolve(self, ctx, path: str) -> Entry:
        """The path inside the tenant's folder, read as plain segments: "." and empty ones dropped,
        ".." taken back lexically (never above the folder), and no segment but the last a link.
        NotFound otherwise, naming only what the model wrote."""
        if "\x00" in path:
            raise PathRefused("A path cannot hold the NUL character.")
        parts: list[str] = []
        for part in path.split("/"):
            if part == "..":
                if not parts:
                    raise NotFound(f"No file or folder {path!r} here: it leads out of your folder.")
                parts.pop()
            elif part not in ("", "."):
                parts.append(part)
        root = self.root(ctx)
        try:
            for depth in range(1, len(parts)):
                if not stat.S_ISDIR(os.lstat(root.joinpath(*parts[:depth])).st_mode):  # a link is not a folder here
                    raise NotFound(f"No file or folder {path!r} here (it goes through a link or a file).")
            info = os.lstat(root.joinpath(*parts))
        except (OSError, ValueError):  # missing, too long, not a folder on the way
            raise NotFound(f"No file or folder {path!r} here.") from None
        return Entry(root, tuple(parts), info.st_mode, info.st_size, info.st_mtime)


def _when(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _walk(folder: Entry) -> list[Entry]:
    """Everything under a folder, deepest first, without entering links; unreadable folders are
    skipped (a folder delete then reports them as not deleted)."""
    out: list[Entry] = []
    try:
        children = sorted(os.scandir(folder.path), key=lambda e: e.name)
    except OSError:
        return out
    for child in children:
        try:
            info = child.stat(follow_symlinks=False)
        except OSError:  # gone since the listing
            continue
        entry = Entry(folder.root, (*folder.parts, child.name), info.st_mode, info.st_size, info.st_mtime)
        if entry.is_dir:
            out.extend(_walk(entry))
        out.append(entry)
    return out


def _count(folder: Entry) -> dict[str, str]:
    inside = _walk(folder)
    files = [e for e in inside if not e.is_dir and not e.is_link]
    rows = {
        "Files inside": str(len(files)),
        "Folders inside": str(sum(e.is_dir for e in inside)),
        "Size": f"{sum(e.size for e in files):,} bytes",
    }
    links = sum(e.is_link for e in inside)
    return {**rows, "Links inside": f"{links} (only the links are removed)"} if links else rows


def _read(entry: Entry) -> str:
    fd = _act(os.open, entry, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)  # no link, no waiting on a pipe
    with os.fdopen(fd, "rb") as file:
        return file.read(16_000).decode(errors="replace")[:4000]


def _act(operation, entry: Entry, *args):
    """An OS call on an entry; its error names the entry relative to the folder, never the server's path."""
    try:
        return operation(entry.path, *args)
    except OSError as exc:
        raise PathRefused(f"{entry.shown}: {exc.strerror or type(exc).__name__}.") from None


def _delete_folder(folder: Entry) -> str:
    """Delete everything under the folder, then the folder. It goes on past a failure, and says
    exactly what was and wasn't deleted (PartlyDone) rather than claim nothing else was done."""
    done, failed = 0, []
    for entry in [*_walk(folder), folder]:
        try:
            os.rmdir(entry.path) if entry.is_dir else os.unlink(entry.path)
            done += 1
        except OSError as exc:
            failed.append(f"{entry.shown} ({exc.strerror or type(exc).__name__})")
    if failed:
        listed = ", ".join(failed[:10]) + (f" and {len(failed) - 10} more" if len(failed) > 10 else "")
        raise PartlyDone(f"deleted {done} of {_items(done + len(failed))} in {folder.shown}; not deleted: {listed}.")
    return f"Deleted the folder {folder.shown} and the {_items(done - 1)} in it."


def _items(count: int) -> str:
    return f"{count} item" if count == 1 else f"{count} items"
