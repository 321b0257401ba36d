"""The operator console: a page served by the publisher at ``GET /console``, as it is (no build
step, no CDN: the machines it runs on are offline), with the latest distributed events read back
from the event topic for it. Its routes are the REST API's (publisher.api.routes.console).
"""
