# The two commands a person needs: `make run` (the whole site on this machine) and
# `make test` (the whole suite). The other targets are the steps they are made of.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PORT ?= 8000

# `make run` is the embedded development setup: debug on, SQLite and a local Redis
# unless DATABASE_URL / REDIS_URL say otherwise. Its settings are also kept in .env
# (debug on, a fresh secret key; made by `make install` when missing), which honcho and
# manage.py read, so that manage.py commands work in any shell once .venv exists.
run: export PKB_DEBUG ?= 1
# Its CPU worker may judge without root or a freezer: name "cpu" so that its results rank
# (portal/submissions/services/confinement.py); every other profile still requires the sandbox.
run: export PKB_RANK_WEAKER_SANDBOX ?= cpu
run: export PORT := $(PORT)

.PHONY: run test install redis chromium candidate-access migrate lint format clean

$(BIN)/.installed: pyproject.toml
	scripts/make-venv "$(PYTHON)" "$(VENV)"
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

# .env with it: whatever made .venv/bin/python, the README's manage.py commands then work.
install: $(BIN)/.installed .env

redis:
	scripts/ensure-redis

# Never overwritten: delete it to get a new secret key.
.env:
	scripts/ensure-env "$(PYTHON)"

# var/ holds the portal's database, uploads and sockets: its owner's alone (0700), never
# readable by bundle code or other users.
migrate: install .env
	@mkdir -p var && chmod 0700 var
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py sync_problems

# Web server, the portal's Celery worker (records results; runs the sweeper on a beat),
# and one evaluator worker that judges bundles on the CPU with gloo.
run: install .env redis migrate candidate-access
	@echo "Serving on http://127.0.0.1:$(PORT)/  (Ctrl-C stops everything)"
	$(BIN)/honcho --procfile Procfile start

# Chromium (Debian's) for the browser tests; installed when missing and root.
chromium:
	@scripts/ensure-chromium >/dev/null

# As root, bundle code runs as an unprivileged user, who must reach the interpreter.
candidate-access: install
	@scripts/ensure-candidate-access $(BIN)/python

# The 30 slowest tests close the report: where the suite's time goes (issue 46).
test: install redis chromium candidate-access
	$(BIN)/pytest --durations=30

# Services, selectors and the evaluator's core are typed; mypy checks them with the
# Django stubs (settings need debug on to load without a secret).
TYPED := portal/*/services.py portal/submissions/services portal/*/selectors.py \
	portal/submissions/quotas.py portal/submissions/hardware.py \
	portal/leaderboard/selectors portal/entries/selectors \
	evaluator/contract.py evaluator/results.py evaluator/intake/archive.py \
	evaluator/intake/bundle.py evaluator/intake/sources.py \
	evaluator/judge evaluator/candidate evaluator/rank_process.py evaluator/tools/probe.py \
	evaluator/runtime.py evaluator/host/sandbox.py evaluator/host/rlimits.py \
	evaluator/host/bubblewrap.py evaluator/host/proctree.py evaluator/host/reference_box.py evaluator/host/canary.py \
	evaluator/host/run.py portal/ops/canaries.py problems/spec.py

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	PKB_DEBUG=1 $(BIN)/mypy $(TYPED)

format: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) var .pytest_cache .ruff_cache
