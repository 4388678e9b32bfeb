from typing import Literal

from pydantic import BaseModel, Field

from app.copilot.actions import Action, Kind
from app.models import Post


class DraftPost(Action):
    """Write a new post (a draft unless told otherwise)."""

    kind = Kind.WRITE
    ask_for_missing = True
    examples = ["write a post", "draft a new post", "new blog post"]

    class Input(BaseModel):
        title: str = Field(max_length=200, description="The post's title")
        body: str = Field(max_length=20000, description="The text of the post")
        status: Literal["draft", "published"] = Field(description="Draft or published")

    def ask(self, ctx, given):
        return {"message": "A few details for your post."}

    def handle(self, ctx, input):
        post = Post(tenant_id=ctx.tenant.id, author_id=ctx.user.id, title=input.title, body=input.body, status=input.status)
        ctx.db.add(post)
        ctx.db.flush()
        return f"Post #{post.id} saved."
