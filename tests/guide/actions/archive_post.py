from pydantic import BaseModel, Field

from app.copilot.actions import Action, Kind, expose
from app.models import Post


@expose("blog")
class ArchivePost(Action):
    """Archive one of your posts: it leaves the blog but is kept."""

    kind = Kind.DESTRUCTIVE
    done_label = "Archived"
    examples = ["/archive_post post=2"]

    class Input(BaseModel):
        post: int = Field(description="The post's id")

    def authorize(self, ctx, input):
        return ctx.find(Post, input.post).author_id == ctx.user.id

    def approval_reason(self, ctx, input):
        return "Archive this post? Readers will no longer see it."

    def approval_summary(self, ctx, input):
        post = ctx.find(Post, input.post)
        return {"Post": post.title, "Status": post.status}

    def handle(self, ctx, input):
        post = ctx.find(Post, input.post)
        post.status = "archived"
        return f"Archived “{post.title}”."
