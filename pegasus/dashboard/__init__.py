"""The web dashboard: its page and assets (``static/``, shipped in the package: no CDN, nothing fetched at
run time), the machines' diagrams (``diagram``), and the routes that serve them at ``/`` of the HTTP
gateway (``routes``). The page reads everything else from the gateway's ``/v1`` API with the
bearer token the person logs in with (docs/dashboard.md).
"""
