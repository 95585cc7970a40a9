# The portal: web (gunicorn), its Celery worker and beat, one image for the three
# (compose.yaml picks the command). It never runs a kernel, so it takes PyTorch's CPU
# build: the problem catalog it mirrors imports torch.
#
#     docker build -t pkb-portal .
FROM python:3.12-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu \
    PKB_STATIC_ROOT=/app/staticfiles \
    PKB_MEDIA_ROOT=/data/media \
    PKB_BIND=0.0.0.0:8000

RUN useradd --system --uid 10001 --create-home --home-dir /home/pkb pkb
WORKDIR /app
COPY pyproject.toml README.md manage.py ./
COPY portal portal
COPY evaluator evaluator
COPY problems problems
COPY templates templates
COPY static static
COPY deploy deploy
# Editable: settings find templates/ and static/ beside the code, in /app. The portal's
# data (var/, the bundles under /data; a new volume takes the image's modes) is the pkb
# user's alone, 0700, as `make run` makes var/ (issue 50).
RUN pip install -e . \
    && PKB_SECRET_KEY=collectstatic-only python manage.py collectstatic --noinput \
    && mkdir -p /app/var /data/media \
    && chown -R pkb:pkb /app/var /data \
    && chmod 0700 /app/var /data /data/media

USER pkb
VOLUME ["/data"]
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s \
    CMD python -c "import sys, urllib.request as u; sys.exit(u.urlopen('http://127.0.0.1:8000/health/', timeout=4).status != 200)"
CMD ["gunicorn", "--config", "deploy/gunicorn.conf.py"]
