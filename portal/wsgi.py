from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

application = get_wsgi_application()

# After the settings are loaded: a web process that was killed mid-upload left its
# temporary upload files behind; a new one clears what is stale.
from portal.submissions.uploads import remove_stale_uploads  # noqa: E402

remove_stale_uploads()
