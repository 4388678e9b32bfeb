from pydantic import BaseModel, Field

from app.copilot.actions import Action, Kind, expose
from app.models import Post


@expose("blog")
class DeletePost(Action):
    """Delete a post."""

    kind = Kind.DESTRUCTIVE
    reason = "Delete this post? This cannot be undone."
    examples = ["/delete_post post=1"]

    class Input(BaseModel):
        post: int = Field(description="The post's id")

    def authorize(self, ctx, input):
        return ctx.find(Post, input.post).author_id == ctx.user.id

    def approval_summary(self, ctx, input):
        # The id and creation time tell apart two posts an agent made look alike (same title).
        post = ctx.find(Post, input.post)
        return {
            "Post": post.title,
            "Id": f"#{post.id}",
            "Status": post.status,
            "Created": f"{post.created_at:%Y-%m-%d %H:%M} UTC",
        }

    def handle(self, ctx, input):
        ctx.db.delete(post := ctx.find(Post, input.post))
        return f"Deleted “{post.title}”."
