"""The operator console: a page served by the publisher at ``GET /console``.

``static/`` holds the page, its script and its style, served as they are (no build step, no
CDN: the machines it runs on are offline). The routes live in publisher/api/routes/console.py;
``recent_events`` reads the latest distributed events back from the event topic for the page.
"""
