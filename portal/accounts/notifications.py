"""Mail to a user about their own account."""

from __future__ import annotations

import logging

from django.conf import settings
from django.contrib.auth.models import User
from django.core import mail
from django.template.loader import render_to_string
from django.utils import timezone

logger = logging.getLogger(__name__)

EMAIL_CHANGED_SUBJECT = "Your email on Multi-GPU Kernel Bench was changed"


def email_changed_mail(*, user: User, old_email: str) -> bool:
    """Tell the address an account had that it has another one now (or none), so that its
    owner hears of a change they did not make. The new address is not written in it: the
    old one may be read by someone the account's owner no longer trusts.

    Called once the change is committed. It never raises: a mail server that is down or
    refuses costs this notice, never the change; True when the mail went out.
    """
    context = {
        "user": user,
        "removed": not user.email,
        "when": timezone.now(),
        "site_url": settings.PKB_SITE_URL,
    }
    try:
        body = render_to_string("accounts/mail/email_changed.txt", context)
        return bool(mail.EmailMessage(EMAIL_CHANGED_SUBJECT, body, to=[old_email]).send())
    except Exception:
        logger.exception("user %s: the 'email changed' mail was not sent", user.pk)
        return False
