import sqlalchemy as sa
from pydantic import BaseModel, Field

from app.copilot.actions import Action, Kind
from app.models import Post


class ListPosts(Action):
    """List the posts in your workspace, with their ids, titles and status."""

    kind = Kind.READ
    examples = ["show my posts", "which posts are there", "list posts"]

    class Input(BaseModel):
        status: str | None = Field(default=None, description="Only posts with this status")

    def handle(self, ctx, input):
        query = sa.select(Post).where(Post.tenant_id == ctx.tenant.id).order_by(Post.id)
        if input.status:
            query = query.where(Post.status == input.status)
        posts = ctx.db.scalars(query).all()
        if not posts:
            return "There are no posts."
        return "Posts:\n" + "\n".join(f"#{p.id} {p.title} ({p.status})" for p in posts)
