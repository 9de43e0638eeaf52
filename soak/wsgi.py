"""The WSGI application gunicorn serves during a soak (the test project on the soak's database)."""

from __future__ import annotations

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "soak.settings")

from django.core.wsgi import get_wsgi_application

application = get_wsgi_application()
