"""A provider with one resource (pyhello_greeting, full create/read/update/delete) and one data
source (pyhello_greeting), written against the tf SDK's documented interfaces."""

from typing import Optional, Type

from tf import schema, types
from tf.iface import (
    Config,
    CreateContext,
    DataSource,
    Provider,
    DeleteContext,
    PlanContext,
    ReadContext,
    ReadDataContext,
    Resource,
    State,
    UpdateContext,
)
from tf.types import Unknown
from tf.utils import Diagnostics

DEFAULT_GREETING = "Hello"


def greet(greeting: str, name: str) -> str:
    return f"{greeting}, {name}!"


class PyHelloProvider(Provider):
    def __init__(self):
        self.greeting = DEFAULT_GREETING

    def get_model_prefix(self) -> str:
        return "pyhello_"

    def full_name(self) -> str:
        return "example.com/acme/pyhello"

    def get_provider_schema(self, diags: Diagnostics) -> schema.Schema:
        return schema.Schema(
            attributes=[
                schema.Attribute("greeting", types.String(), optional=True, description="Greeting word (default Hello)"),
            ]
        )

    def validate_config(self, diags: Diagnostics, config: Config):
        greeting = config.get("greeting")
        if greeting is not None and greeting.strip() == "":
            diags.add_error("greeting must not be empty", path=["greeting"])

    def configure_provider(self, diags: Diagnostics, config: Config):
        if config.get("greeting"):
            self.greeting = config["greeting"]

    def get_data_sources(self) -> list[Type[DataSource]]:
        return [GreetingDataSource]

    def get_resources(self) -> list[Type[Resource]]:
        return [GreetingResource]


class GreetingResource(Resource):
    """pyhello_greeting: a greeting for name, kept in state."""

    def __init__(self, provider: PyHelloProvider):
        self.provider = provider

    @classmethod
    def get_name(cls) -> str:
        return "greeting"

    @classmethod
    def get_schema(cls) -> schema.Schema:
        return schema.Schema(
            attributes=[
                schema.Attribute("id", types.String(), computed=True, description="The greeting's ID"),
                schema.Attribute("name", types.String(), required=True, description="Who to greet"),
                schema.Attribute("message", types.String(), computed=True, description="The greeting"),
            ]
        )

    def plan(self, ctx: PlanContext, current: Optional[State], planned: State) -> Optional[State]:
        if "name" in ctx.changed_fields:
            planned["message"] = Unknown
        return planned

    def create(self, ctx: CreateContext, planned: State) -> Optional[State]:
        return {"id": planned["name"], "name": planned["name"], "message": greet(self.provider.greeting, planned["name"])}

    def read(self, ctx: ReadContext, current: State) -> Optional[State]:
        return current

    def update(self, ctx: UpdateContext, current: State, planned: State) -> Optional[State]:
        return {"id": current["id"], "name": planned["name"], "message": greet(self.provider.greeting, planned["name"])}

    def delete(self, ctx: DeleteContext, current: State):
        return None


class GreetingDataSource(DataSource):
    """data.pyhello_greeting: the greeting for name, computed on read."""

    def __init__(self, provider: PyHelloProvider):
        self.provider = provider

    @classmethod
    def get_name(cls) -> str:
        return "greeting"

    @classmethod
    def get_schema(cls) -> schema.Schema:
        return schema.Schema(
            attributes=[
                schema.Attribute("name", types.String(), required=True, description="Who to greet"),
                schema.Attribute("message", types.String(), computed=True, description="The greeting"),
            ]
        )

    def read(self, ctx: ReadDataContext, config: Config) -> Optional[State]:
        return {"name": config["name"], "message": greet(self.provider.greeting, config["name"])}
