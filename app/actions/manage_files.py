from pathlib import Path
from typing import Literal

from flask import current_app
from pydantic import BaseModel, Field

from app.copilot.actions import Action, Kind, expose
from app.errors import NotFound


@expose("files")
class ManageFiles(Action):
    """List, read or delete files in your workspace's folder."""

    kind = Kind.WRITE
    done_label = "Deleted"
    examples = ["/manage_files operation=delete path=reports/old.csv", "list my files", "read a file", "delete a file"]
    requires_approval = {
        "delete": "Delete the file at {path} on disk {disk}?",
        "delete_folder": "Delete the folder {path} and everything in it on disk {disk}?",
    }

    class Input(BaseModel):
        operation: Literal["list", "read", "delete", "delete_folder"]
        path: str = Field(default="", max_length=500, description="A path inside your folder")
        disk: Literal["local"] = "local"

    def approval_summary(self, ctx, input):
        target = self.resolve(ctx, input.path)
        if target.is_dir():
            return {"Files inside": sum(1 for p in target.rglob("*") if p.is_file())}
        stat = target.stat()
        return {"Size": f"{stat.st_size} bytes", "Modified": int(stat.st_mtime)}

    def handle(self, ctx, input):
        target = self.resolve(ctx, input.path)
        root = self.root(ctx)
        if input.operation == "list":
            names = sorted(str(p.relative_to(root)) for p in target.rglob("*") if p.is_file())
            return "Files:\n" + "\n".join(names) if names else "No files."
        if input.operation == "read":
            return target.read_text(errors="replace")[:4000]
        if input.operation == "delete":
            target.unlink()
            return f"Deleted {input.path}."
        for path in sorted(target.rglob("*"), reverse=True):
            path.rmdir() if path.is_dir() else path.unlink()
        target.rmdir()
        return f"Deleted the folder {input.path}."

    def root(self, ctx) -> Path:
        return Path(current_app.config["FILES_ROOT"], ctx.tenant.slug).resolve()

    def resolve(self, ctx, path: str) -> Path:
        """A path inside the tenant's folder, or NotFound (also for ../ tricks and links out)."""
        root = self.root(ctx)
        target = (root / path.lstrip("/")).resolve()
        if target != root and root not in target.parents or not target.exists():
            raise NotFound(f"No file or folder {path!r} here.")
        return target
