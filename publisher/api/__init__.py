"""The publisher's REST API (FastAPI): distribute, queues, subscribers, health and metrics."""

from publisher.api.app import create_app

__all__ = ["create_app"]
