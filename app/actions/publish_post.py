from pydantic import BaseModel, Field

from app.copilot.actions import Action, Kind
from app.models import Post


class PublishPost(Action):
    """Publish one of your draft posts."""

    kind = Kind.WRITE
    examples = ["publish my draft", "make the post public"]

    class Input(BaseModel):
        post: int = Field(description="The post's id")

    def authorize(self, ctx, input):
        return ctx.find(Post, input.post).author_id == ctx.user.id

    def handle(self, ctx, input):
        post = ctx.find(Post, input.post)
        post.status = "published"
        return f"Published “{post.title}”."
